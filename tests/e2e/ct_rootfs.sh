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
# a file with holes, larger than the tmpfs (8 MiB) would hold written out
dd if=/dev/urandom of=/scratch/sparse bs=4096 count=1 seek=4096 2>/dev/null
md5sum /scratch/sparse > /scratch/sparse.md5
# times (a file's, then its directory's), an owner where ids other than 0 map
touch -d '2001-02-03 04:05:06' /scratch/dir/f /scratch/dir
stat -c '%Y %X' /scratch/dir/f > /scratch/f.times
stat -c %Y /scratch/dir > /scratch/dir.mtime
owners=0
if grep -q '^ *0 *0 *4294967295' /proc/self/uid_map; then
	chown 1234:5678 /scratch/dir/f || fail "chown"
	owners=1
fi
# the mount table as the kernel shows it: root, point, flags, type, source, options
mounts() {
	awk '{ for (i = 7; $i != "-"; i++); print $4, $5, $6, $(i+1), $(i+2), $(i+3) }' \
		/proc/self/mountinfo | sort
}
mounts > /scratch/mounts
# a file of the root (with --overlay: its upper layer), held open
exec 3>> /rootlog
# deleted files of the tmpfs held open: one read after the restart, one the
# loop appends to
echo deleted > /scratch/gone && exec 4< /scratch/gone && rm /scratch/gone || fail "gone"
exec 5>> /scratch/gone2 && rm /scratch/gone2 || fail "gone2"
# an overlay root (ct_rootfs_overlay*): its upper layer is /t/upper
overlay=0
grep -q '^[^ ]* / overlay ' /proc/mounts && overlay=1
i=0
while :; do
	i=$((i+1))
	echo "$i $(cat /t/msg)" >> /scratch/log
	echo $i >&3
	echo $i >&5
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
md5sum -c /scratch/sparse.md5 > /dev/null || fail "/scratch/sparse changed"
[ "$(stat -c %s /scratch/sparse)" = 16781312 ] || fail "/scratch/sparse: size $(stat -c %s /scratch/sparse)"
[ "$(stat -c %b /scratch/sparse)" -le 16 ] ||
	fail "/scratch/sparse lost its holes: $(stat -c %b /scratch/sparse) blocks"
[ "$(stat -c '%Y %X' /scratch/dir/f)" = "$(cat /scratch/f.times)" ] ||
	fail "/scratch/dir/f times: $(stat -c '%Y %X' /scratch/dir/f), not $(cat /scratch/f.times)"
[ "$(stat -c %Y /scratch/dir)" = "$(cat /scratch/dir.mtime)" ] || fail "/scratch/dir mtime"
[ $owners = 0 ] || [ "$(stat -c %u:%g /scratch/dir/f)" = 1234:5678 ] ||
	fail "/scratch/dir/f owner $(stat -c %u:%g /scratch/dir/f)"
mounts > /scratch/mounts.after
diff /scratch/mounts /scratch/mounts.after > /scratch/mounts.diff || fail "mounts differ: $(cat /scratch/mounts.diff)"
# the minimal /dev, its devpts, shm and mqueue, /proc, /sys (read-only, not in a user namespace)
for d in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
	n=${d%%:*}
	[ -c /dev/$n ] && [ "$(stat -c %t:%T /dev/$n)" = "$(printf '%x:%x' $(echo ${d#*:} | tr : ' '))" ] ||
		fail "/dev/$n: $(ls -l /dev/$n 2>&1)"
done
[ "$(readlink /dev/ptmx)" = pts/ptmx ] || fail "/dev/ptmx: $(ls -l /dev/ptmx 2>&1)"
[ "$(head -c 4 /dev/zero | od -An -tx1 | tr -d ' ')" = 00000000 ] || fail "/dev/zero"
(echo x > /dev/full) 2> /dev/null && fail "/dev/full took a write"
grep -q '^devpts /dev/pts devpts ' /proc/mounts || fail "no devpts on /dev/pts"
grep -q ' /dev/shm tmpfs ' /proc/mounts || fail "no tmpfs on /dev/shm"
grep -q ' /dev/mqueue mqueue ' /proc/mounts || fail "no mqueue on /dev/mqueue"
[ "$(readlink /proc/self)" = $$ ] || [ -n "$(readlink /proc/self)" ] || fail "/proc"
[ -r /proc/1/status ] || fail "no /proc of its pid namespace"
if [ $owners = 1 ]; then
	grep -q ' /sys sysfs ro,' /proc/mounts || fail "/sys is not sysfs read-only"
fi
[ "$(cat /scratch/link)" = secret ] || fail "/scratch/link: $(cat /scratch/link)"
[ "$(stat -c %a /scratch/dir)" = 700 ] || fail "/scratch/dir has mode $(stat -c %a /scratch/dir)"
[ "$(cat /etc/motd)" = motd ] || fail "/etc/motd: $(cat /etc/motd)"
(echo x > /etc/motd) 2> /dev/null && fail "/etc/motd is writable, not read-only"
echo x > /dev/null || fail "/dev/null"
grep -q ' /scratch tmpfs ' /proc/mounts || fail "no tmpfs on /scratch"
[ "$(cat <&4)" = deleted ] || fail "the deleted /scratch/gone lost its contents"
[ "$(readlink /proc/self/fd/4)" = "/scratch/gone (deleted)" ] || fail "fd 4: $(readlink /proc/self/fd/4)"
[ "$(wc -l < /proc/self/fd/5)" = $i ] || fail "the deleted /scratch/gone2 has $(wc -l < /proc/self/fd/5) lines"
[ -e /scratch/gone ] || [ -e /scratch/gone2 ] && fail "a deleted file has its name again"
ls -a /scratch | grep -q '^\.ckpt-' && fail "a temporary file left in /scratch: $(ls -a /scratch)"
if [ $overlay = 1 ]; then
	[ -d /t/upper ] || fail "no /t/upper for the overlay root"
	cmp -s /rootlog /t/upper/rootlog || fail "/rootlog is not the upper layer's"
	[ "$(cat /last)" = $i ] || fail "/last: $(cat /last), not $i"
	[ "$(cat /t/upper/last)" = $i ] || fail "the upper layer's last: $(cat /t/upper/last)"
	[ -e /t/rootfs/rootlog ] && fail "/rootlog went to the lower layer"
fi
echo "PASS ($i turns)"
