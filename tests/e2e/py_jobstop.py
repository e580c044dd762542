# SPDX-License-Identifier: LGPL-2.1-or-later
"""A tree with a process in a job-control stop, for runner.py (mig2_jobstop).

pid 1 of a container (cwd = the test directory) forks a child in a process
group of its own (so that SIGTSTP is not dropped as for an orphaned group)
that counts into "child.n" every 20 ms, stops it with SIGTSTP once it has
counted, writes "stopped" and then counts into "parent.n" itself. Counters
are renamed into place whole. SIGTERM: the child is killed and pid 1 exits 0.
"""
import os
import signal
import sys
import time


def put(name, text):
    with open(name + ".tmp", "w") as f:
        f.write(text)
    os.rename(name + ".tmp", name)


def count(name):
    i = 0
    while True:
        i += 1
        put(name, "%d\n" % i)
        time.sleep(0.02)


def main():
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        count("child.n")
    os.setpgid(child, child)
    while not os.path.exists("child.n"):
        time.sleep(0.01)
    os.kill(child, signal.SIGTSTP)
    _, status = os.waitpid(child, os.WUNTRACED)
    if not os.WIFSTOPPED(status) or os.WSTOPSIG(status) != signal.SIGTSTP:
        print("FAIL: the child did not stop by SIGTSTP: %#x" % status, flush=True)
        sys.exit(1)

    def term(*_):
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        sys.exit(0)
    signal.signal(signal.SIGTERM, term)
    put("stopped", "%d\n" % child)
    count("parent.n")


main()
