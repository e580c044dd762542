#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bash with background jobs (run by runner.py as real_bash_jobs): three
# background children (two sleeps and a subshell that counts), `wait` for
# them, and a variable set before the checkpoint. Writes "ready" itself,
# then waits; the runner checkpoints it while the jobs run. After restart
# the jobs finish, `wait` returns their statuses, and the script prints
# PASS only if all of them and the variable are right.
set -u
secret=$((RANDOM * 32768 + RANDOM))
echo "$secret" > secret
sleep 3 &
a=$!
(sleep 3; exit 7) &
b=$!
( n=0; while [ $n -lt 30 ]; do n=$((n + 1)); sleep 0.1; done; echo $n > counted ) &
c=$!
echo $$ > "${CKPT_TEST_DIR:-.}/ready"
wait $a; sa=$?
wait $b; sb=$?
wait $c; sc=$?
fails=0
[ "$sa" = 0 ] || { echo "FAIL: sleep exited $sa"; fails=1; }
[ "$sb" = 7 ] || { echo "FAIL: subshell exited $sb, want 7"; fails=1; }
[ "$sc" = 0 ] || { echo "FAIL: counter exited $sc"; fails=1; }
[ "$(cat counted 2>/dev/null)" = 30 ] || { echo "FAIL: counter did not count to 30"; fails=1; }
[ "$secret" = "$(cat secret)" ] || { echo "FAIL: the variable changed"; fails=1; }
[ $fails = 0 ] && echo PASS
exit $fails
