# SPDX-License-Identifier: LGPL-2.1-or-later
"""A python3 program that drops root as daemons do (run by runner.py as
real_py_setuid, and under `runuser -u nobody` as real_runuser).

Started as root it starts a thread, then calls os.setgroups([65534]),
os.setgid(65534) and os.setuid(65534): no capabilities are left. Started
already as nobody (argument "started", under runuser), it only checks
that it is. It writes "ready" like lib.c does and waits for SIGUSR1 with
sigwait. After the restart every thread of it (/proc/self/task/*/status)
is still uid and gid 65534 everywhere, in the one group 65534, with empty
permitted, effective, inheritable and ambient sets; a file it made before
is still its own and it can still write it, and it cannot act as root
(writing a root-only file is refused). Prints PASS or FAIL: reason.
"""
import os
import signal
import sys
import threading

NOBODY = 65534
ZERO = "0000000000000000"


def statuses():
    """{tid: {field: value}} for every thread."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/status" % tid) as f:
                out[tid] = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
        except OSError:
            pass
    return out


def check(when, fails):
    ids = os.getresuid() + os.getresgid()
    if ids != (NOBODY,) * 6:
        fails.append("%s: getresuid/getresgid %r" % (when, ids))
    if os.getgroups() != [NOBODY]:
        fails.append("%s: groups %r" % (when, os.getgroups()))
    st = statuses()
    if len(st) < 2:
        fails.append("%s: %d threads, want 2" % (when, len(st)))
    for tid, s in st.items():
        for k, want in (("Uid", "%d\t%d\t%d\t%d" % ((NOBODY,) * 4)),
                        ("Gid", "%d\t%d\t%d\t%d" % ((NOBODY,) * 4)),
                        ("Groups", str(NOBODY)), ("CapInh", ZERO), ("CapPrm", ZERO),
                        ("CapEff", ZERO), ("CapAmb", ZERO)):
            got = s.get(k, "").strip()
            if got != want:
                fails.append("%s: thread %s %s: %r, want %r" % (when, tid, k, got, want))


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    d = os.environ.get("CKPT_TEST_DIR", ".")
    started = sys.argv[1:] == ["started"]
    if not started:
        if os.getuid() != 0:
            print("SKIP: needs root", flush=True)
            return 0
        os.chmod(d, 0o777)  # "ready" and mine are written as nobody
    stop = threading.Event()
    th = threading.Thread(target=stop.wait)
    th.start()
    if not started:
        os.setgroups([NOBODY])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    fails = []
    check("before", fails)
    if fails:
        for f in fails:
            print("FAIL: " + f, flush=True)
        stop.set()
        return 1
    mine = os.path.join(d, "mine")
    with open(mine, "w") as f:
        f.write("before\n")
    with open(os.path.join(d, "ready"), "w") as f:
        f.write("%d\n" % os.getpid())

    signal.sigwait({signal.SIGUSR1})

    check("after", fails)
    stop.set()
    th.join()
    st = os.stat(mine)
    if (st.st_uid, st.st_gid) != (NOBODY, NOBODY):
        fails.append("%s belongs to %d:%d" % (mine, st.st_uid, st.st_gid))
    try:
        with open(mine, "a") as f:
            f.write("after\n")
    except OSError as e:
        fails.append("cannot write my own file: %s" % e)
    try:
        with open("/etc/shadow", "a"):
            pass
        fails.append("/etc/shadow can be opened for writing: root powers are back")
    except PermissionError:
        pass
    for f in fails:
        print("FAIL: " + f, flush=True)
    if fails:
        return 1
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
