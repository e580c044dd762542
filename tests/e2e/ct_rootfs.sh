# Run by busybox sh as pid 1 of `ckpt run --root` (runner.py, flow_rootfs):
# /t is the test's directory bound from the host, /etc/motd a file of it
# bound read-only, /scratch a tmpfs of the container's own; the root is
# the busybox tree, or an overlay with it as lower layer (ct_rootfs_overlay,
# ct_rootfs_overlay_unpriv: the loop also rewrites /last, both go to the upper
# layer, which it sees as /t/upper). A loop reads
# /t/msg (the runner changes it from "before" to "after" while the
# container is down) and appends it to /scratch/log; once signalled, it
# checks that no line of the log is lost, that the last reads "after" (the
# bind is the host's directory again) and that the other files of the
# tmpfs are as they were made.
got=0
trap 'got=1' USR1
fail() { echo "FAIL: $*"; exit 1; }
mkdir -m 700 /scratch/dir || fail "mkdir"
echo secret > /scratch/dir/f
ln -s dir/f /scratch/link
dd if=/dev/urandom of=/scratch/big bs=65536 count=16 2>/dev/null
md5sum /scratch/big > /scratch/big.md5
# a file of the root (with --overlay: its upper layer), held open
exec 3>> /rootlog
# an overlay root (ct_rootfs_overlay*): its upper layer is /t/upper
overlay=0
grep -q '^[^ ]* / overlay ' /proc/mounts && overlay=1
i=0
while :; do
	i=$((i+1))
	echo "$i $(cat /t/msg)" >> /scratch/log
	echo $i >&3
	# a file opened anew each turn: after the restart, through the new overlay
	[ $overlay = 1 ] && echo $i > /last
	[ $i = 3 ] && echo $$ > /t/ready
	# one whole turn of the loop after the signal, which comes after the restart
	if [ $got = 2 ]; then break; fi
	[ $got = 1 ] && got=2
	sleep 0.05
done
n=0
while read k rest; do
	n=$((n+1))
	[ "$k" = $n ] || fail "line $n of /scratch/log is '$k $rest'"
done < /scratch/log
[ $n = $i ] || fail "/scratch/log has $n lines, the loop wrote $i"
[ "$(wc -l < /rootlog)" = $i ] || fail "/rootlog has $(wc -l < /rootlog) lines, not $i"
head -n 1 /scratch/log | grep -q ' before$' || fail "first line: $(head -n 1 /scratch/log)"
tail -n 1 /scratch/log | grep -q ' after$' ||
	fail "the bind is not the host's directory again: $(tail -n 1 /scratch/log)"
md5sum -c /scratch/big.md5 > /dev/null || fail "/scratch/big changed"
[ "$(cat /scratch/link)" = secret ] || fail "/scratch/link: $(cat /scratch/link)"
[ "$(stat -c %a /scratch/dir)" = 700 ] || fail "/scratch/dir has mode $(stat -c %a /scratch/dir)"
[ "$(cat /etc/motd)" = motd ] || fail "/etc/motd: $(cat /etc/motd)"
(echo x > /etc/motd) 2> /dev/null && fail "/etc/motd is writable, not read-only"
echo x > /dev/null || fail "/dev/null"
grep -q ' /scratch tmpfs ' /proc/mounts || fail "no tmpfs on /scratch"
if [ $overlay = 1 ]; then
	[ -d /t/upper ] || fail "no /t/upper for the overlay root"
	cmp -s /rootlog /t/upper/rootlog || fail "/rootlog is not the upper layer's"
	[ "$(cat /last)" = $i ] || fail "/last: $(cat /last), not $i"
	[ "$(cat /t/upper/last)" = $i ] || fail "the upper layer's last: $(cat /t/upper/last)"
	[ -e /t/rootfs/rootlog ] && fail "/rootlog went to the lower layer"
fi
echo "PASS ($i turns)"
