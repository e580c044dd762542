#!/bin/bash
# ckpt's demo: start a program, checkpoint it, kill it, bring it back.
set -eu
ckpt=${1:-build/ckpt}
counter=$(dirname "$ckpt")/ckpt-demo-counter
dir=$(mktemp -d /tmp/ckpt-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# run a command holding only stdin, stdout and stderr (whatever fds the
# caller's environment leaked stay out of the program)
clean_exec() {
	local fd
	for fd in $(ls /proc/$BASHPID/fd); do
		[ "$fd" -gt 2 ] && eval "exec $fd>&-"
	done 2>/dev/null
	exec "$@"
}

echo "== starting a counter that prints a line every 200 ms"
(clean_exec "$counter" 25 </dev/null >"$dir/out" 2>&1) 2>/dev/null &
pid=$!
disown "$pid"  # reaped all the same, without a "Killed" notice
sleep 1.2
echo "   pid $pid, output so far:"
tail -n 2 "$dir/out" | sed 's/^/   | /'

echo "== ckpt checkpoint $pid -o image --kill"
"$ckpt" checkpoint "$pid" -o "$dir/image" --kill
wait "$pid" 2>/dev/null || true
[ -e "/proc/$pid" ] && { echo "demo FAILED: pid $pid still exists" >&2; exit 1; }
echo "   image: $(stat -c %s "$dir/image") bytes; pid $pid is gone"
last=$(tail -n 1 "$dir/out")
echo "   its last line: $last"

echo "== ckpt restart image (waits for the program and exits with its status)"
"$ckpt" restart "$dir/image"
echo "   exit status $?; the same pid carried on counting:"
grep -A2 -F "$last" "$dir/out" | sed 's/^/   | /'
tail -n 1 "$dir/out" | sed 's/^/   | /'
n=$(grep -c '^count' "$dir/out")
if [ "$n" -eq 25 ] && [ "$(tail -n 1 "$dir/out" | cut -d' ' -f2)" = 25 ]; then
	echo "== demo ok: 25 lines, none lost, none repeated"
else
	echo "== demo FAILED: $n lines" >&2
	exit 1
fi
