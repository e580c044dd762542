# Run by busybox sh as pid 1 of `ckpt run --root` (runner.py, flow_rootfs,
# ct_rootfs_peers): mount propagation inside the container. /scratch/a is
# a tmpfs of its own made shared, /scratch/b a bind of it (its peer),
# /scratch/c a bind made a slave of them, /scratch/d a bind of a
# directory of a (a peer with a narrower root); /t2 a bind of the host's
# /t made shared and /t3 its peer. After the restart a mount made under
# one peer must appear under the others (and under the slave), one made
# under the slave must not appear under its master, and the binds show
# the same files. /scratch/e, a tmpfs with nosuid, nodev, noexec and
# noatime made unbindable, must come back so (a bind of it is refused).
got=0
trap 'got=1' USR1
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p /scratch/a /scratch/b /scratch/c /scratch/d /t2 /t3 || fail "mkdir"
mount -t tmpfs pa /scratch/a || fail "mount a"
mkdir /scratch/a/sub /scratch/a/dir
echo hello > /scratch/a/dir/f
mount --make-shared /scratch/a || fail "make-shared a"
mount --bind /scratch/a /scratch/b || fail "bind b"
mount --bind /scratch/a /scratch/c || fail "bind c"
mount --make-slave /scratch/c || fail "make-slave c"
mount --bind /scratch/a/dir /scratch/d || fail "bind d"
mount --bind /t /t2 && mount --make-shared /t2 && mount --bind /t2 /t3 || fail "bind t2 t3"
mkdir -p /scratch/e /scratch/x
mount -t tmpfs -o nosuid,nodev,noexec,noatime,size=1m,mode=0710 pe /scratch/e || fail "mount e"
mount --make-unbindable /scratch/e || fail "make-unbindable e"
mount --bind /scratch/e /scratch/x 2> /dev/null && fail "a bind of the unbindable e before"
grep -E ' /scratch/[abcde] | /t[23] ' /proc/self/mountinfo > /scratch/before
echo $$ > /t/ready
while [ $got = 0 ]; do sleep 0.05; done
# what the kernel shows: the same peer group for a, b, d; c a slave of it
grp() { grep " $1 " /proc/self/mountinfo | grep -o 'shared:[0-9]*' | head -n 1; }
mst() { grep " $1 " /proc/self/mountinfo | grep -o 'master:[0-9]*' | head -n 1; }
[ -n "$(grp /scratch/a)" ] || fail "/scratch/a is not shared"
[ "$(grp /scratch/a)" = "$(grp /scratch/b)" ] || fail "a and b are not peers: $(grp /scratch/a) $(grp /scratch/b)"
[ "$(grp /scratch/a)" = "$(grp /scratch/d)" ] || fail "a and d are not peers"
[ "$(mst /scratch/c)" = "master:$(grp /scratch/a | cut -d: -f2)" ] ||
	fail "c is not a slave of a's group: $(mst /scratch/c)"
[ -z "$(grp /scratch/c)" ] || fail "c is shared"
[ -n "$(grp /t2)" ] && [ "$(grp /t2)" = "$(grp /t3)" ] || fail "/t2 and /t3 are not peers"
# propagation at work
mount -t tmpfs late /scratch/a/sub || fail "mount under a"
grep -q ' /scratch/b/sub ' /proc/self/mountinfo || fail "a mount under a is not under b"
grep -q ' /scratch/c/sub ' /proc/self/mountinfo || fail "a mount under a is not under the slave c"
echo late > /scratch/a/sub/x
[ "$(cat /scratch/b/sub/x)" = late ] || fail "b/sub is not the new mount"
mkdir /scratch/c/dir/s2 && mount -t tmpfs slave /scratch/c/dir/s2 || fail "mount under c"
grep -q ' /scratch/a/dir/s2 ' /proc/self/mountinfo && fail "a mount under the slave went to its master"
mkdir -p /t3/sub3 && mount -t tmpfs t3 /t3/sub3 || fail "mount under /t3"
grep -q ' /t2/sub3 ' /proc/self/mountinfo || fail "a mount under /t3 is not under /t2"
umount /t3/sub3
[ "$(cat /scratch/d/f)" = hello ] || fail "d: $(cat /scratch/d/f)"
e=$(grep ' /scratch/e ' /proc/self/mountinfo)
echo "$e" | grep -q ' unbindable ' || fail "e is not unbindable: $e"
echo "$e" | grep -q ' rw,nosuid,nodev,noexec,noatime ' || fail "e lost its flags: $e"
echo "$e" | grep -q 'size=1024k,mode=710' || fail "e lost its options: $e"
mount --bind /scratch/e /scratch/x 2> /dev/null && fail "a bind of the unbindable e"
echo PASS
