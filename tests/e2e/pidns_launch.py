#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""pidns_launch.py PIDFILE PROPAGATION -- PROGRAM [ARGS]: PROGRAM as pid 1
of a new pid and mount namespace on the host's root, its mounts made
PROPAGATION (slave, private, shared) recursively and a /proc of its own,
as `unshare --pid --fork --mount --propagation P --mount-proc` makes it;
PROGRAM's pid outside is written to PIDFILE (as `ckpt run --pidfile`).
Waits for it and exits as it did."""
import ctypes
import os
import sys

CLONE_NEWNS, CLONE_NEWPID = 0x20000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC = 2, 4, 8, 16384
PROPAGATION = {"private": 1 << 18, "slave": 1 << 19, "shared": 1 << 20}


def main():
    pidfile, prop, sep, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if sep != "--" or not argv or prop not in PROPAGATION:
        sys.exit("usage: pidns_launch.py PIDFILE slave|private|shared -- PROGRAM [ARGS]")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWPID | CLONE_NEWNS) < 0:
        sys.exit("unshare: %s" % os.strerror(ctypes.get_errno()))
    pid = os.fork()
    if pid == 0:
        if libc.mount(None, b"/", None, MS_REC | PROPAGATION[prop], None) < 0 or \
                libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           None) < 0:
            os.write(2, b"pidns_launch.py: mount: %s\n" %
                     os.strerror(ctypes.get_errno()).encode())
            os._exit(127)
        os.execvp(argv[0], argv)
    with open(pidfile + ".tmp", "w") as f:
        f.write("%d\n" % pid)
    os.rename(pidfile + ".tmp", pidfile)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status) & 0xff)


if __name__ == "__main__":
    main()
