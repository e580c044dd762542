#!/bin/bash
# The whole test suite: unit tests (meson), then the end-to-end suite.
# Prints one closing line "N passed, N failed" over both.
set -u
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1

unit_log=$(mktemp)
meson test -C "$build" --suite unit --print-errorlogs >"$unit_log" 2>&1
unit_rc=$?
cat "$unit_log"
# each unit binary prints "N passed, N failed"; meson keeps them in its log.
# A fuzz-* binary runs for a fixed time and counts the forged images it
# tried: those are summed apart, so the unit count is the same every run.
read -r up uf zp zf < <(awk '/^test: / {fuzz = ($2 ~ /^fuzz-/)}
	/^[0-9]+ passed, [0-9]+ failed/ {if (fuzz) {zp += $1; zf += $3} else {p += $1; f += $3}}
	END {print p+0, f+0, zp+0, zf+0}' "$build/meson-logs/testlog.txt")
uf=$((uf + zf))
[ "$unit_rc" -ne 0 ] && [ "$uf" -eq 0 ] && uf=1
rm -f "$unit_log"

e2e_log=$(mktemp)
python3 tests/e2e/runner.py --ckpt "$build/ckpt" --bindir "$build/tests/e2e" 2>&1 | tee "$e2e_log"
e2e_rc=${PIPESTATUS[0]}
read -r ep ef < <(grep -E '^[0-9]+ passed, [0-9]+ failed' "$e2e_log" | tail -1 | awk '{print $1+0, $3+0}')
ep=${ep:-0}
ef=${ef:-0}
[ "$e2e_rc" -ne 0 ] && [ "$ef" -eq 0 ] && ef=1
rm -f "$e2e_log"

echo
echo "unit: $up passed, $uf failed (and $zp forged images refused or loaded safely by the fuzz tests in their time); e2e: $ep passed, $ef failed"
echo "$((up + ep)) passed, $((uf + ef)) failed"
[ "$((uf + ef))" -eq 0 ]
