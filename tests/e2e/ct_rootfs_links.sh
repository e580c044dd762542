# Run by busybox sh as pid 1 of `ckpt run --root` (runner.py, flow_rootfs,
# ct_rootfs_links): hard links on a tmpfs of the container's own. A file
# with three names (two in a subdirectory), a FIFO with two, a symlink
# with two; after the restart each is one inode with those names, its
# st_nlink the same, and a write through one name is read through another.
got=0
trap 'got=1' USR1
fail() { echo "FAIL: $*"; exit 1; }
cd /scratch || fail "cd"
mkdir d && echo one > f || fail "files"
ln f d/g && ln f d/h && mkfifo p && ln p p2 && ln -s f s && ln s s2 || fail "ln"
echo other > single
echo $$ > /t/ready
while [ $got = 0 ]; do sleep 0.05; done
ino() { stat -c %i "$1"; }
links() { stat -c %h "$1"; }
[ "$(ino f)" = "$(ino d/g)" ] && [ "$(ino f)" = "$(ino d/h)" ] ||
	fail "f, d/g, d/h are inodes $(ino f) $(ino d/g) $(ino d/h)"
[ "$(links f)" = 3 ] || fail "f has $(links f) links, not 3"
[ "$(ino p)" = "$(ino p2)" ] && [ "$(links p)" = 2 ] || fail "the FIFO's names"
[ "$(ino s)" = "$(ino s2)" ] && [ "$(links s2)" = 2 ] || fail "the symlink's names"
[ "$(links single)" = 1 ] || fail "single has $(links single) links"
[ "$(cat d/h)" = one ] || fail "d/h: $(cat d/h)"
echo two >> d/g
[ "$(tail -n 1 f)" = two ] || fail "a write to d/g is not seen in f"
echo PASS
