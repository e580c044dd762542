# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python binding (python/ckpt.py) used as a program would: fork a
child holding 16 MiB of known bytes, ckpt.checkpoint() it with kill=True
and a progress callback, ckpt.inspect() the image, ckpt.restart() it
detached with a progress callback (it comes back as our child), signal it,
reap it: it exits 42 only if its memory is intact. Both results give
as_dict() with the summary line ckpt prints.
Then ckpt.restart(detach=False, forward_signals=True) in a process of
its own ("wait" mode): a SIGUSR1 sent to that process reaches the
restored child, which exits 42, and restart() returns its status (without
forwarding, SIGUSR1 would end that process and the child would run on).
Then the refusals: a pid that does not exist raises ckpt.Error with ESRCH
and the library's reason. Prints PASS or FAIL lines."""
import errno
import os
import signal
import subprocess
import sys
import time

import ckpt

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def child(ready):
    data = bytearray(os.urandom(16)) * (1 << 20)
    want = hash(bytes(data))
    woken = []
    signal.signal(signal.SIGUSR1, lambda s, f: woken.append(s))
    null = os.open("/dev/null", os.O_RDWR)
    for fd in range(3):
        os.dup2(null, fd)
    os.write(ready, b"r")
    os.closerange(3, 65536)  # hold nothing ckpt cannot save
    while not woken:
        signal.pause()
    os._exit(42 if hash(bytes(data)) == want else 1)


def main():
    img = os.path.abspath("py.ckpt")
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        child(wr)
    os.close(wr)
    check(os.read(rd, 1) == b"r", "the child did not start")
    os.read(rd, 1)  # EOF: the child closed its fds
    os.close(rd)
    while not _sleeping(pid):  # then it sleeps in pause()
        os.sched_yield()
    calls = []
    res = ckpt.checkpoint(pid, img, kill=True, progress=calls.append, progress_interval_ms=1)
    check(res.processes == 1 and res.threads == 1, "checkpoint result %r" % res)
    check(res.memory_bytes >= 16 << 20, "memory saved %d" % res.memory_bytes)
    check(os.path.getsize(img) == res.image_bytes, "image size vs result")
    check_progress(calls, ckpt.PHASE_CHECKPOINT, "checkpoint")
    d = res.as_dict()
    check(d["command"] == "checkpoint" and d["image"] == img and d["pid"] == pid and
          d["memory_bytes"] == res.memory_bytes and d["seconds"] > 0, "as_dict: %r" % d)
    want = "checkpointed 1 process (1 thread), %.1f MiB of memory, image %s " % (
        res.memory_bytes / 1048576.0, img)
    check(d["summary"].startswith(want), "summary %r, want %r..." % (d["summary"], want))
    wpid, status = os.waitpid(pid, 0)
    check(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
          "the original ended with status %#x, not SIGKILL" % status)
    summary = ckpt.inspect(img)
    check(summary.startswith("image: 1 process, 1 thread,"), "inspect: %r" % summary[:60])
    check(" %d " % pid in summary, "inspect names pid %d" % pid)
    differ, text = ckpt.inspect_diff(img, img)
    check(not differ, "inspect_diff of an image with itself: %r" % text)
    check(ckpt.unlock(img) == (None, False), "unlock of an image without a lock: %r"
          % (ckpt.unlock(img),))
    calls = []
    res = ckpt.restart(img, detach=True, progress=calls.append, progress_interval_ms=1)
    check(res.root == pid, "restored as pid %d, want %d" % (res.root, pid))
    check_progress(calls, ckpt.PHASE_RESTART, "restart")
    d = res.as_dict()
    check(d["command"] == "restart" and d["pid"] == pid and
          d["summary"].startswith("restarted 1 process (1 thread), ") and
          (" as pid %d, in " % pid) in d["summary"], "restart as_dict: %r" % d)
    os.kill(pid, signal.SIGUSR1)
    wpid, status = os.waitpid(pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 42,
          "the restored child ended with status %#x, not exit 42" % status)
    check_forwarded(img, pid)
    try:
        ckpt.checkpoint(4194303, os.path.abspath("none.ckpt"))
        check(False, "checkpoint of a pid that does not exist succeeded")
    except ckpt.Error as e:
        check(e.errno == errno.ESRCH, "no such pid: errno %s" % e.errno)
        check("4194303" in str(e), "the error names the pid: %s" % e)
    check(not os.path.exists("none.ckpt") and not [f for f in os.listdir(".") if ".tmp-" in f],
          "a failed checkpoint left a file behind: %s" % os.listdir("."))
    print("PASS" if not failures else "FAIL: %d check(s)" % len(failures), flush=True)
    return 1 if failures else 0


def check_forwarded(img, pid):
    """restart(detach=False, forward_signals=True) in a process of its own:
    a SIGUSR1 sent to it ends the restored child with 42 (its memory intact)."""
    pidfile = img + ".pid"
    if os.path.exists(pidfile):
        os.unlink(pidfile)
    waiter = subprocess.Popen([sys.executable, os.path.abspath(__file__), "wait", img])
    deadline = time.monotonic() + 60

    # the pidfile is written once the restart is complete (its signals held
    # for forwarding): the child in pause() with the waiter as its parent is
    # not enough, the bare puppet made for it (a child of the waiter, in
    # pause() until ckpt seizes it) is so too, and a SIGUSR1 then ended the
    # waiter on a loaded machine
    def restored():
        try:
            with open(pidfile) as f:
                text = f.read()
        except OSError:
            return False
        return text.endswith("\n") and int(text) == pid
    while not (restored() and _parent(pid) == waiter.pid and _sleeping(pid)):
        if waiter.poll() is not None or time.monotonic() > deadline:
            check(False, "forward_signals: the child was not restored under the waiter "
                  "(exit %s)" % waiter.poll())
            if waiter.poll() is None:
                waiter.kill()
            waiter.wait()
            return
        time.sleep(0.01)
    os.kill(waiter.pid, signal.SIGUSR1)
    try:
        rc = waiter.wait(timeout=60)
    except subprocess.TimeoutExpired:
        waiter.kill()
        rc = waiter.wait()
    check(rc == 0, "forward_signals: the waiter ended with %d (0: the child got SIGUSR1 and "
          "exited 42; -%d: the signal ended the waiter itself)" % (rc, signal.SIGUSR1))


def wait_mode(img):
    """The waiter of check_forwarded: exit 0 if the child it restarts exits 42."""
    res, status = ckpt.restart(img, detach=False, forward_signals=True, pidfile=img + ".pid")
    return 0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 42 else 3


def _parent(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def check_progress(calls, phase, what):
    """Some calls of phase with done growing, then one PHASE_END."""
    check(len(calls) >= 2, "%s: %d progress calls" % (what, len(calls)))
    if len(calls) < 2:
        return
    check(all(c.phase == phase for c in calls[:-1]) and calls[-1].phase == ckpt.PHASE_END,
          "%s: progress phases %r" % (what, [c.phase for c in calls]))
    done = [c.done for c in calls]
    check(done == sorted(done) and done[-1] >= 16 << 20,
          "%s: progress done %r" % (what, done))
    check(all(c.total >= 16 << 20 for c in calls), "%s: totals %r" % (
        what, [c.total for c in calls]))


def _sleeping(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "S"
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(wait_mode(sys.argv[2]) if sys.argv[1:2] == ["wait"] else main())
