# Run by runner.py (ct_rootfs_refuse_shared): graft a clone of the host's
# mount SRC (a peer of SRC's group when SRC is shared) onto TARGET in the
# mount namespace of pid PID, as open_tree(OPEN_TREE_CLONE) and move_mount
# do: the container then holds a mount of a namespace it does not own.
# Usage: graft_mount.py SRC PID TARGET. x86_64 syscall numbers.
import ctypes
import os
import sys

SYS_open_tree, SYS_move_mount = 428, 429
OPEN_TREE_CLONE, MOVE_MOUNT_F_EMPTY_PATH, AT_FDCWD = 1, 4, -100
CLONE_NEWNS = 0x20000

libc = ctypes.CDLL(None, use_errno=True)


def check(r, what):
    if r < 0:
        sys.exit("%s: %s" % (what, os.strerror(ctypes.get_errno())))
    return r


src, pid, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = check(libc.syscall(SYS_open_tree, AT_FDCWD, src.encode(),
                        OPEN_TREE_CLONE | os.O_CLOEXEC), "open_tree " + src)
ns = os.open("/proc/%d/ns/mnt" % pid, os.O_RDONLY)
check(libc.setns(ns, CLONE_NEWNS), "setns")
check(libc.syscall(SYS_move_mount, fd, b"", AT_FDCWD, target.encode(),
                   MOVE_MOUNT_F_EMPTY_PATH), "move_mount " + target)
