#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# pid 1 of `ckpt run` without --root (runner.py, ct_mounts): a container
# that shares the host's root and makes mounts of its own in its test
# directory: a tmpfs (strictatime) with files (one held open, one with
# two names), a bind of a host directory (src) made read-only, and a bind
# of the tmpfs's subdirectory. After the restart the mounts are there again with their
# files, the open file is the tmpfs's, the bind shows the host's
# directory (changed by the runner meanwhile), and the host never saw
# any of it (the mounts live in the container's namespace).
got=0
trap 'got=1' USR1
fail() { echo "FAIL: $*"; exit 1; }
d=$(pwd)
mkdir -p m b sub || fail "mkdir"
mount -t tmpfs -o size=4m,mode=0750,strictatime scratch "$d/m" || fail "mount tmpfs"
mkdir "$d/m/dir" && echo data > "$d/m/dir/f" && ln "$d/m/dir/f" "$d/m/g" || fail "files"
mount --bind "$d/src" "$d/b" && mount -o remount,bind,ro "$d/b" || fail "bind src"
mount --bind "$d/m/dir" "$d/sub" || fail "bind sub"
exec 3>> "$d/m/log"
echo one >&3
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1] + "/m/srv.sock")
s.listen(4)
open(sys.argv[1] + "/m/pyready", "w").close()
while True:
    c, _ = s.accept()
    c.sendall(b"hi")
    c.close()
' "$d" &
while [ ! -e "$d/m/pyready" ]; do sleep 0.05; done
echo $$ > "$d/ready"
while [ $got = 0 ]; do sleep 0.05; done
echo two >&3
grep -q " $d/m tmpfs " /proc/mounts || fail "no tmpfs on m"
# strictatime: mountinfo names no atime option
opts=$(awk -v p="$d/m" '$5 == p { print $6 }' /proc/self/mountinfo)
case ",$opts," in *atime,*) fail "m lost strictatime: $opts" ;; esac
[ "$(cat "$d/m/log")" = "$(printf 'one\ntwo')" ] || fail "m/log: $(cat "$d/m/log")"
[ "$(stat -c %i "$d/m/dir/f")" = "$(stat -c %i "$d/m/g")" ] || fail "m/g is not m/dir/f"
[ "$(stat -c %a "$d/m")" = 750 ] || fail "m has mode $(stat -c %a "$d/m")"
[ "$(cat "$d/sub/f")" = data ] || fail "sub/f: $(cat "$d/sub/f" 2>&1)"
echo more > "$d/sub/f2" && [ -e "$d/m/dir/f2" ] || fail "sub is not a bind of m/dir"
[ "$(cat "$d/b/msg")" = after ] || fail "b/msg: $(cat "$d/b/msg" 2>&1)"
(echo x > "$d/b/msg") 2> /dev/null && fail "b is writable, not read-only"
got=$(python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1] + "/m/srv.sock")
print(s.recv(10).decode())
' "$d" 2>&1)
[ "$got" = hi ] || fail "the listener on m/srv.sock: $got"
echo PASS
