#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""End-to-end runner for ckpt, shaped like CRIU's zdtm.

    python3 tests/e2e/runner.py --ckpt build/ckpt --bindir build/tests/e2e \
        [--no-ckpt] [--only NAME[,NAME]] [--mode basic|twice|reuse] [-v] [--keep] [--list]

Each test program (tests/e2e/NAME.c, see lib.h) is started with cwd = a
fresh /tmp/ckpt-e2e-* directory, stdin = /dev/null and stdout + stderr =
that directory's out.log. Once it has created "ready" the runner
checkpoints it with --kill, restarts it, checks the pid, sends SIGUSR1 and
expects exit status 0 and "PASS" (and no "FAIL") in out.log.

Modes:
  basic   checkpoint --kill, restart, verify
  twice   checkpoint --kill, restart; checkpoint the restored process
          --kill (the first restart exits 137), restart that image, verify
  reuse   basic, then restart the first image again and verify again
Other kinds of test: refusals (checkpoint must fail, the original must be
unharmed), CLI errors, damaged images, real programs (sleep, python3).

--no-ckpt runs every program natively (no checkpoint, kill or restart: the
original is just signalled), to prove the tests themselves pass.
Prints one summary line "N passed, N failed[, N skipped]"; exits 1 if any
failed. Python 3 standard library only; run as root.

Adding a test: write NAME.c (see lib.h), add NAME to e2e_tests in
meson.build and an entry() line to TESTS below.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

READY_TIMEOUT = 20.0
CHECKPOINT_TIMEOUT = 60.0
PIDFILE_TIMEOUT = 20.0
EXIT_TIMEOUT = 60.0
RESEND_EVERY = 5.0
POLL = 0.005

B, T, R = "basic", "twice", "reuse"
ALL_MODES = (B, T, R)

MiB = 1 << 20


def entry(name, modes=(B,), kind="program", **kw):
    """One test. kind picks the flow (Run.flow_<kind>); modes lists the modes
    it runs in; argv replaces the program for commands ("@python" = the
    interpreter); ready is "file" or a delay in s; signal: send SIGUSR1;
    expect: "pass" (out.log) or "exit0"; regex: the refusal message;
    program: the binary when it is not the test's name."""
    d = dict(name=name, modes=modes, kind=kind, argv=None, ready="file",
             signal=True, expect="pass", max_image_bytes=None, regex=None,
             program=name, min_runtime=None)
    d.update(kw)
    return d


# The table: one line per test.
TESTS = [
    # memory
    entry("mem_anon", (B, T, R)),
    entry("mem_heap", (B, R)),
    entry("mem_stack"),
    entry("mem_file_private", (B, T, R)),
    entry("mem_file_shared", (B, R)),
    entry("mem_shared_anon"),
    entry("mem_prot"),
    entry("mem_reserve", max_image_bytes=8 * MiB),
    entry("mem_vdso", (B, T)),
    entry("mem_mmfields"),
    entry("mem_big"),
    entry("mem_droppable", (B, T)),
    # cpu
    entry("cpu_regs", (B, T)),
    entry("cpu_tls"),
    # system calls interrupted by the checkpoint
    entry("sys_nanosleep", (B, T, R)),
    entry("sys_poll"),
    entry("sys_futex"),
    entry("sys_sigsuspend"),
    # signals
    entry("sig_disp", (B, T, R)),
    entry("sig_mask"),
    entry("sig_pending", (B, T, R)),
    entry("sig_altstack"),
    entry("sig_itimers", (B, T)),
    # files and fs
    entry("file_fds", (B, T, R)),
    entry("file_dup", (B, R)),
    entry("fs_cwd"),
    entry("fs_umask"),
    # identity
    entry("id_pid", (B, T)),
    entry("id_session"),
    entry("id_pgrp"),
    entry("id_creds", (B, T)),
    entry("id_nnp"),
    entry("id_rlimits"),
    entry("id_personality"),
    entry("id_comm"),
    entry("id_rseq"),
    entry("id_seccomp", (B, T)),
    # process trees
    entry("tree_deep", (B, T, R)),
    entry("tree_zombie", (B, T)),
    entry("tree_ghost", (B, T)),
    entry("tree_share", (B, T)),
    entry("tree_shm", (B, T)),
    # threads
    entry("thread_pthreads", (B, T, R)),
    entry("thread_timer", (B, T)),
    entry("tree_churn", kind="churn"),
    # pipes
    entry("pipe_read", (B, T, R)),
    entry("pipe_closed", (B, T)),
    entry("eventfd_count", (B, T, R)),
    entry("signalfd_mask", (B, T, R)),
    entry("timerfd_armed", (B, T, R)),
    entry("ptimer_basic", (B, T, R)),
    entry("ptimer_pending", (B, T)),
    entry("ptimer_overrun", (B, T)),
    entry("refuse_ptimer", kind="refuse", regex=r"\bpid {pid}\b.*\btimer 0\b.*CPU-time clock of process 1\b"),
    entry("memfd_fd", (B, T, R), max_image_bytes=8 * MiB),
    entry("memfd_map", (B, T, R)),
    entry("file_deleted", (B, T, R)),
    entry("fifo_data", (B, T, R)),
    entry("epoll_watch", (B, T, R)),
    entry("epoll_nested", (B, T)),
    entry("inotify_watch", (B, T, R)),
    # unix sockets
    entry("unix_pair", (B, T, R)),
    entry("unix_listen", (B, T, R)),
    entry("unix_dgram_bound", (B, T, R)),
    entry("unix_names", (B, T)),
    # SysV IPC: a container's own ipc namespace, a tree's segments in the host's
    entry("sysv_shm", (B, T, R), kind="container"),
    entry("sysv_msg", (B, T, R), kind="container"),
    entry("sysv_sem", (B, T, R), kind="container"),
    entry("sysv_shm_host", (B, T, R)),
    # restart options and inspect
    entry("opt_detach", kind="detach", program="mem_anon"),
    entry("opt_frozen", kind="frozen", program="mem_anon"),
    entry("opt_inspect", kind="inspect", program="mem_anon"),
    entry("opt_stream", kind="stream", program="mem_anon"),
    entry("api_lib", kind="standalone"),
    entry("rst_fail", kind="rst_fail", program="id_seccomp"),
    entry("rst_busy", kind="rst_busy", program="tree_deep"),
    # real programs
    entry("real_sleep", kind="command", argv=["sleep", "4"], ready=1.0, signal=False,
          expect="exit0", min_runtime=3.9),
    entry("real_python", kind="command", argv=["@python", os.path.join(HERE, "py_state.py")]),
    entry("real_py_threads", kind="command", argv=["@python", os.path.join(HERE, "py_threads.py")]),
    entry("real_bash_jobs", kind="command", argv=["bash", os.path.join(HERE, "sh_jobs.sh")],
          signal=False),
    # refusals: checkpoint must fail naming pid, fd and kind; the original lives on
    entry("refuse_inet", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*(socket|inet|tcp)"),
    entry("refuse_unix", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*unix.*peer outside"),
    entry("refuse_unix_rights", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*fds in flight"),
    entry("refuse_perf", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*perf"),
    entry("refuse_traced", kind="traced", regex=r"trac|ptrace"),
    entry("refuse_tree", kind="refuse", regex=r"\bpid \d+\b.*\bfd 5\b.*(socket|inet|tcp)"),
    entry("refuse_pipe", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*pipe"),
    entry("refuse_deleted", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*big \(deleted\).*1 GiB"),
    entry("refuse_inotify", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*inotify.*queued"),
    entry("refuse_epoll", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*epoll.*fd 6"),
    entry("refuse_sysv", kind="refuse", regex=r"\bpid {pid}\b.*SysV message queue id \d+"),
    # CLI errors
    entry("cli_nopid", kind="cli_nopid"),
    entry("cli_usage", kind="cli_usage"),
    entry("cli_badout", kind="cli_badout", program="img_target"),
    entry("cli_unpriv", kind="cli_unpriv", program="img_target",
          regex=r"permi|not permitted|eperm|eacces"),
    # damaged images
    entry("img_damage", kind="damage", program="img_target"),
]


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def tail(path, n=15):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])


def pid_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def pid_exists(pid):
    return os.path.exists("/proc/%d" % pid)


class Run:
    """One (test, mode): its directory, its processes, its logs."""

    def __init__(self, opts, test, mode):
        self.opts, self.t, self.mode = opts, test, mode
        self.name = test["name"] if mode == B else "%s[%s]" % (test["name"], mode)
        self.dir = tempfile.mkdtemp(prefix="ckpt-e2e-%s-" % test["name"], dir="/tmp")
        self.procs = []         # every Popen we started, for cleanup
        self.pid = None         # the test process' pid
        self.prog = None        # Popen of the original
        self.logs = []          # files worth showing on failure
        self.notes = []

    # --- helpers ---------------------------------------------------------

    def p(self, *a):
        return os.path.join(self.dir, *a)

    def vlog(self, msg):
        if self.opts.verbose:
            print("  [%s] %s" % (self.name, msg), flush=True)

    def popen(self, argv, out=None, err=None, **kw):
        self.vlog("$ " + " ".join(argv))
        o = open(out, "wb") if out else subprocess.DEVNULL
        e = open(err, "wb") if err else subprocess.DEVNULL
        try:
            pr = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                                  cwd=self.dir, **kw)
        finally:
            for f in (o, e):
                if f is not subprocess.DEVNULL:
                    f.close()
        self.procs.append(pr)
        return pr

    def ckpt_argv(self, *args, verbose=True):
        argv = [self.opts.ckpt] + list(args)
        if self.opts.verbose and verbose:
            argv.append("-v")
        return argv

    def program_argv(self):
        t = self.t
        if t["argv"]:
            argv = list(t["argv"])
            if argv[0] == "@python":
                argv[0] = self.opts.python
            return argv
        path = os.path.join(self.opts.bindir, t["program"])
        if not os.access(path, os.X_OK):
            raise Fail("test program %s not built" % path)
        return [path]

    def start(self, prefix=()):
        env = dict(os.environ, CKPT_TEST_DIR=self.dir)
        fd = os.open(self.p("out.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        argv = list(prefix) + self.program_argv()
        self.vlog("$ " + " ".join(argv))
        try:
            pr = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                  cwd=self.dir, env=env)
        finally:
            os.close(fd)
        self.procs.append(pr)
        self.prog = pr
        self.t0 = time.monotonic()
        self.logs.append(self.p("out.log"))
        return pr

    def out(self):
        try:
            with open(self.p("out.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self):
        """Waits for "ready" (or a delay); sets self.pid."""
        pr = self.prog
        if self.t["ready"] != "file":
            time.sleep(self.t["ready"])
            if pr.poll() is not None:
                raise Fail("exited before the checkpoint: status %s" % pr.returncode)
            self.pid = pr.pid
            return
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with open(self.p("ready")) as f:
                    data = f.read()
                if data.endswith("\n"):
                    self.pid = int(data)
                    break
            except (OSError, ValueError):
                pass
            if pr.poll() is not None:
                out = self.out()
                if pr.returncode == 0 and out.startswith("SKIP"):
                    raise Skip(out.strip()[5:].strip())
                raise Fail("exited before ready: status %s" % pr.returncode)
            if time.monotonic() > deadline:
                raise Fail("not ready after %.0f s" % READY_TIMEOUT)
            time.sleep(POLL)
        if self.t["kind"] != "traced" and self.pid != pr.pid:
            raise Fail("ready says pid %d, started %d" % (self.pid, pr.pid))
        self.vlog("ready: pid %d" % self.pid)

    def wait_all(self, procs, timeout, what, reap=()):
        """Polls procs until all exited, reaping reap meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            for r in reap:
                r.poll()
            if all(pr.poll() is not None for pr in procs):
                for r in reap:
                    r.poll()
                return
            if time.monotonic() > deadline:
                raise Fail("%s did not finish within %.0f s" % (what, timeout))
            time.sleep(POLL)

    def checkpoint(self, img, tag, reap, expect_ok=True, extra=(), prefix=(), kill=True):
        """ckpt checkpoint PID -o img [--kill], reaping reap meanwhile."""
        log, err = self.p(tag + ".log"), self.p(tag + ".err")
        self.logs += [err, log]
        argv = list(prefix) + self.ckpt_argv("checkpoint", str(self.pid), "-o", img,
                                             *(["--kill"] if kill else []), "--log", log,
                                             *extra)
        cp = self.popen(argv, err=err, out=self.p(tag + ".out"))
        self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt checkpoint", reap=reap)
        rc = cp.returncode
        errtext = tail(err, 50) or ""
        self.vlog("checkpoint exit %d" % rc)
        if not expect_ok:
            return rc, errtext
        if rc != 0:
            raise Fail("ckpt checkpoint exit %d: %s" % (rc, errtext.strip()[-300:]))
        if not kill:
            return rc, errtext
        if pid_exists(self.pid):
            # ckpt returns once the process is gone
            raise Fail("pid %d still exists after checkpoint --kill returned" % self.pid)
        if not os.path.isfile(img):
            raise Fail("no image %s" % img)
        mx = self.t["max_image_bytes"]
        if mx is not None and os.path.getsize(img) > mx:
            raise Fail("image is %d bytes, more than %d" % (os.path.getsize(img), mx))
        return rc, errtext

    def restart(self, img, tag):
        """Starts ckpt restart; waits for the pidfile; returns the Popen."""
        pidfile = self.p(tag + ".pid")
        log, err = self.p(tag + ".log"), self.p(tag + ".err")
        self.logs += [err, log]
        rp = self.popen(self.ckpt_argv("restart", img, "--pidfile", pidfile, "--log", log),
                        err=err, out=self.p(tag + ".out"))
        deadline = time.monotonic() + PIDFILE_TIMEOUT
        while True:
            try:
                with open(pidfile) as f:
                    data = f.read()
                if data.endswith("\n"):
                    got = int(data)
                    break
            except (OSError, ValueError):
                pass
            if rp.poll() is not None:
                raise Fail("ckpt restart exited %d before writing the pidfile: %s"
                           % (rp.returncode, (tail(err, 5) or "").strip()))
            if time.monotonic() > deadline:
                raise Fail("no pidfile after %.0f s" % PIDFILE_TIMEOUT)
            time.sleep(POLL)
        if got != self.pid:
            raise Fail("restored pid %d, original %d" % (got, self.pid))
        self.vlog("restored as pid %d" % got)
        return rp

    def wake_and_wait(self, proc, what):
        """SIGUSR1 to the test pid (re-sent every few s), waits for proc."""
        self.vlog("SIGUSR1 -> %d" % self.pid)
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + EXIT_TIMEOUT
        resend = time.monotonic() + RESEND_EVERY
        while proc.poll() is None:
            now = time.monotonic()
            if now > deadline:
                raise Fail("%s did not exit within %.0f s of SIGUSR1" % (what, EXIT_TIMEOUT))
            if now > resend and self.t["signal"]:
                if "SIGUSR1 re-sent" not in self.notes:
                    self.notes.append("SIGUSR1 re-sent")
                try:
                    os.kill(self.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
                resend = now + RESEND_EVERY
            time.sleep(POLL)
        return proc.returncode

    def wait_exit(self, proc, what):
        if self.t["signal"]:
            return self.wake_and_wait(proc, what)
        self.wait_all([proc], EXIT_TIMEOUT, what)
        return proc.returncode

    def check_result(self, rc, what):
        if rc != 0:
            raise Fail("%s exited with status %s" % (what, rc))
        if self.t["expect"] == "pass":
            out = self.out()
            if "FAIL" in out:
                lines = [l for l in out.splitlines() if "FAIL" in l]
                raise Fail("; ".join(lines)[:500])
            if "PASS" not in out:
                raise Fail("no PASS in out.log")
        mr = self.t["min_runtime"]
        if mr is not None and time.monotonic() - self.t0 < mr:
            raise Fail("finished after %.2f s, expected at least %.1f s"
                       % (time.monotonic() - self.t0, mr))

    def native(self, prefix=()):
        """--no-ckpt: start, ready, signal, verify."""
        pr = self.start(prefix)
        self.wait_ready()
        rc = self.wait_exit(pr, "test program")
        self.check_result(rc, "test program")

    def expect_gone(self, why, grace=5.0):
        deadline = time.monotonic() + grace
        while pid_exists(self.pid):
            if time.monotonic() > deadline:
                raise Fail("pid %d %s after %s" % (
                    self.pid, "alive" if pid_alive(self.pid) else "a zombie", why))
            time.sleep(0.02)

    def reset_out(self):
        """Overwrites PASS in out.log in place (the restored fd writes at its
        saved offset, so a second run writes PASS at the same place)."""
        with open(self.p("out.log"), "r+b") as f:
            data = f.read()
            f.seek(0)
            f.write(data.replace(b"PASS", b"----"))

    # --- flows -----------------------------------------------------------

    def hold_pid(self, pid):
        """A child with this pid (via ns_last_pid, retried), or None."""
        for _ in range(50):
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
            child = os.fork()
            if child == 0:
                try:
                    time.sleep(120)
                finally:
                    os._exit(0)
            if child == pid:
                return child
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        return None

    def flow_rst_busy(self):
        """A tree restart that fails at its last process (its pid is taken)
        removes every process it made; freed, the image restores fine."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        with open(self.p("pids"), "rb") as f:
            data = f.read()
        pids = list(struct.unpack("<%di" % (len(data) // 4), data))
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        pr.poll()
        busy = self.hold_pid(pids[-1])
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(max(pids) + 100))  # new processes (ckpt) away from the image's pids
        if busy is None:
            raise Skip("could not take pid %d for the test" % pids[-1])
        try:
            r = self.run_ckpt(["restart", img, "--log", self.p("busy.log"), "-v"], timeout=60)
            self.logs.append(self.p("busy.log"))
            self.expect_error(r, "restart with a pid taken", must=[str(pids[-1])])
            alive = [p for p in pids[:-1] if pid_exists(p)]
            if alive:
                raise Fail("pids %s still exist after the failed restart" % alive)
        finally:
            os.kill(busy, signal.SIGKILL)
            os.waitpid(busy, 0)
        rp = self.restart(img, "restart")
        rc = self.wake_and_wait(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_churn(self):
        """A tree that forks and exits all the time: checkpointed 5 times
        while it runs (each must succeed, or fail saying the tree changed,
        leaving it running), then killed and restarted as usual."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        ok = 0
        for i in range(5):
            rc, err = self.checkpoint(self.p("churn%d" % i), "churn%d" % i, reap=[pr],
                                      expect_ok=False, kill=False)
            if rc == 0:
                ok += 1
            elif rc >= 128 or not re.search(r"changed|meanwhile|keeps", err):
                raise Fail("checkpoint %d of the running tree failed: %s" % (i, err.strip()))
            if not pid_alive(self.pid) or pr.poll() is not None:
                raise Fail("the tree died after checkpoint %d" % i)
        if ok == 0:
            raise Fail("no checkpoint of the running tree succeeded")
        self.notes.append("%d/5 live checkpoints" % ok)
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def start_container(self):
        """`ckpt run --detach -- PROGRAM`, its output to out.log through sh
        (what ckpt run prints stays apart); returns the pid outside."""
        env = dict(os.environ, CKPT_TEST_DIR=self.dir)
        open(self.p("out.log"), "wb").close()
        self.logs.append(self.p("out.log"))
        argv = [self.opts.ckpt, "run", "--detach", "--", "/bin/sh", "-c",
                'exec "$0" "$@" >out.log 2>&1'] + self.program_argv()
        self.vlog("$ " + " ".join(argv))
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd=self.dir,
                           env=env, timeout=30)
        if r.returncode != 0 or not r.stdout.strip().isdigit():
            raise Fail("ckpt run --detach exit %d: %s %s" % (
                r.returncode, r.stdout.decode(errors="replace").strip(),
                r.stderr.decode(errors="replace").strip()))
        self.t0 = time.monotonic()
        return int(r.stdout)

    def wait_container_ready(self, pid):
        """"ready" holds the pid inside (1); self.pid becomes the one outside."""
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with open(self.p("ready")) as f:
                    data = f.read()
                if data.endswith("\n"):
                    break
            except OSError:
                pass
            if not pid_alive(pid):
                out = self.out()
                if out.startswith("SKIP"):
                    raise Skip(out.strip()[5:].strip())
                raise Fail("the container's pid %d exited before ready: %s" % (pid, out.strip()))
            if time.monotonic() > deadline:
                raise Fail("not ready after %.0f s" % READY_TIMEOUT)
            time.sleep(POLL)
        if data.strip() != "1":
            raise Fail("ready says pid %s inside the container, want 1" % data.strip())
        self.pid = pid
        self.vlog("ready: pid 1 inside, %d outside" % pid)

    def restart_container(self, img, tag):
        """ckpt restart of a container image; self.pid becomes the restored
        root's pid outside (from the pidfile)."""
        pidfile = self.p(tag + ".pid")
        log, err = self.p(tag + ".log"), self.p(tag + ".err")
        self.logs += [err, log]
        rp = self.popen(self.ckpt_argv("restart", img, "--pidfile", pidfile, "--log", log),
                        err=err, out=self.p(tag + ".out"))
        deadline = time.monotonic() + PIDFILE_TIMEOUT
        while True:
            try:
                with open(pidfile) as f:
                    data = f.read()
                if data.endswith("\n"):
                    self.pid = int(data)
                    break
            except (OSError, ValueError):
                pass
            if rp.poll() is not None:
                raise Fail("ckpt restart exited %d before writing the pidfile: %s"
                           % (rp.returncode, (tail(err, 5) or "").strip()))
            if time.monotonic() > deadline:
                raise Fail("no pidfile after %.0f s" % PIDFILE_TIMEOUT)
            time.sleep(POLL)
        self.vlog("restored as pid %d outside" % self.pid)
        return rp

    def flow_container(self):
        """The program as pid 1 of a container (ckpt run --detach), checkpointed
        by its pid outside with --kill and restarted into fresh namespaces;
        the modes as for programs. --no-ckpt runs it natively."""
        if self.opts.no_ckpt:
            return self.native()
        self.wait_container_ready(self.start_container())
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[])
        rp = self.restart_container(img, "restart")
        if self.mode == T:
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp])
            self.wait_all([rp], 10, "the first ckpt restart, after its container was killed")
            if rp.returncode != 128 + signal.SIGKILL:
                raise Fail("first ckpt restart exited %s, want 137" % rp.returncode)
            rp = self.restart_container(self.p("img2"), "restart2")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")
        if self.mode == R:
            self.expect_gone("the first restored run")
            self.reset_out()
            rp = self.restart_container(img, "restart2")
            rc = self.wait_exit(rp, "second ckpt restart")
            self.check_result(rc, "second ckpt restart")

    def flow_program(self):
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        pr.poll()
        if pr.returncode != -signal.SIGKILL:
            raise Fail("test process ended with %s, not SIGKILL" % pr.returncode)
        rp = self.restart(img, "restart")
        if self.mode == T:
            img2 = self.p("img2")
            self.checkpoint(img2, "ckpt2", reap=[rp])
            # the restored process is gone, its parent may take a moment to exit
            self.wait_all([rp], 10, "the first ckpt restart, after its process was killed")
            if rp.returncode != 128 + signal.SIGKILL:
                raise Fail("first ckpt restart exited %s, want 137" % rp.returncode)
            rp = self.restart(img2, "restart2")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")
        if self.mode == R:
            self.expect_gone("the first restored run")
            self.reset_out()
            rp = self.restart(img, "restart2")
            rc = self.wait_exit(rp, "second ckpt restart")
            self.check_result(rc, "second ckpt restart")

    flow_command = flow_program

    def flow_refuse(self, prefix=()):
        if self.opts.no_ckpt:
            return self.native(prefix)
        pr = self.start(prefix)
        self.wait_ready()
        rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
        if rc == 0:
            raise Fail("ckpt checkpoint succeeded, expected a refusal")
        if rc >= 128 or rc < 0:
            raise Fail("ckpt checkpoint crashed: status %d" % rc)
        rx = self.t["regex"].format(pid=self.pid)
        if not re.search(rx, err, re.I):
            raise Fail("refusal message %r does not match /%s/" % (err.strip(), rx))
        if not pid_alive(self.pid):
            raise Fail("the original is gone after the refused checkpoint")
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def flow_traced(self):
        strace = shutil.which("strace")
        if not strace:
            raise Skip("strace not installed")
        self.flow_refuse(prefix=[strace, "-f", "-o", "/dev/null"])

    def flow_cli_nopid(self):
        pid = 1 << 22  # above any pid_max
        if pid_exists(pid):
            raise Fail("pid %d exists?" % pid)
        if self.opts.no_ckpt:
            return
        r = self.run_ckpt(["checkpoint", str(pid), "-o", self.p("img")])
        self.expect_error(r, "checkpoint of a nonexistent pid", must=[str(pid)])

    def run_ckpt(self, args, timeout=30, verbose=True):
        argv = self.ckpt_argv(*args, verbose=verbose)
        self.vlog("$ " + " ".join(argv))
        try:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  cwd=self.dir, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail("%s hung" % " ".join(args))

    def expect_error(self, r, what, must=()):
        err = r.stderr.decode("utf-8", "replace")
        if r.returncode == 0:
            raise Fail("%s: exit 0, expected an error" % what)
        if r.returncode < 0 or r.returncode >= 128:
            raise Fail("%s: crashed with status %d" % (what, r.returncode))
        if not err.strip():
            raise Fail("%s: exit %d with no message on stderr" % (what, r.returncode))
        for m in must:
            if m not in err:
                raise Fail("%s: message %r does not mention %r" % (what, err.strip(), m))
        if re.search(r"Sanitizer|core dumped|Segmentation", err):
            raise Fail("%s: %s" % (what, err.strip()))
        self.vlog("%s: exit %d: %s" % (what, r.returncode, err.strip()))

    def flow_cli_usage(self):
        if self.opts.no_ckpt:
            return
        # a harmless live target, so that only the usage is wrong
        target = self.popen(["sleep", "60"])
        pid = str(target.pid)
        cases = [
            ([], "no arguments"),
            (["no-such-verb"], "unknown subcommand"),
            (["checkpoint"], "checkpoint without a pid"),
            (["checkpoint", "notapid", "-o", self.p("img")], "checkpoint of 'notapid'"),
            (["checkpoint", pid], "checkpoint without -o"),
            (["checkpoint", pid, "-o", self.p("img"), "--no-such-option"],
             "an unknown option"),
            (["restart"], "restart without an image"),
            (["restart", self.p("missing-image")], "restart of a missing file"),
            (["inspect", self.p("missing-image")], "inspect of a missing file"),
        ]
        for args, what in cases:
            r = self.run_ckpt(args, verbose=False)  # exactly these arguments
            must = ["missing-image"] if "missing" in what else []
            self.expect_error(r, what, must=must)
            if target.poll() is not None:
                raise Fail("%s: the target was killed" % what)

    def flow_cli_badout(self):
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        bad = "/nonexistent/dir/img"
        rc, err = self.checkpoint(bad, "ckpt", reap=[pr], expect_ok=False)
        if rc == 0 or rc >= 128 or rc < 0 or not err.strip():
            raise Fail("checkpoint -o %s: exit %d, stderr %r" % (bad, rc, err.strip()))
        if os.path.exists(bad):
            raise Fail("%s exists" % bad)
        if not pid_alive(self.pid):
            raise Fail("the target was killed although the image could not be written")
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def flow_cli_unpriv(self):
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise Skip("setpriv (util-linux) not installed")
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        # a directory "nobody" may write to, inside our 0700 one
        os.chmod(self.dir, 0o711)
        udir = self.p("nobody")
        os.mkdir(udir)
        os.chmod(udir, 0o777)
        drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        ckpt = self.opts.ckpt
        if subprocess.run(drop + ["test", "-x", ckpt]).returncode != 0:
            ckpt = os.path.join(udir, "ckpt")
            shutil.copy(self.opts.ckpt, ckpt)
            os.chmod(ckpt, 0o755)
        saved = self.opts.ckpt
        self.opts.ckpt = ckpt
        try:
            rc, err = self.checkpoint(os.path.join(udir, "img"), "nobody/ckpt", reap=[pr],
                                      expect_ok=False, prefix=drop)
        finally:
            self.opts.ckpt = saved
        if rc == 0:
            raise Fail("an unprivileged checkpoint of a root process succeeded")
        if rc < 0 or rc >= 128:
            raise Fail("ckpt checkpoint crashed: status %d" % rc)
        if not re.search(self.t["regex"], err, re.I):
            raise Fail("message %r does not mention permission" % err.strip())
        if not pid_alive(self.pid):
            raise Fail("the target is gone")
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def flow_damage(self):
        if self.opts.no_ckpt:
            damage_selftest(self.p("synthetic"))
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        with open(img, "rb") as f:
            good = f.read()
        recs = walk_image(good)
        self.vlog("image: %d bytes, %d records" % (len(good), len(recs)))
        sub = self.opts.results
        for kind, fn in DAMAGES:
            data, where = fn(good, recs)
            path = self.p("dmg-" + kind)
            with open(path, "wb") as f:
                f.write(data)
            name = "img_damage/" + kind
            try:
                self.restart_damaged(path, kind, where)
                sub.ok(name)
            except Fail as e:
                sub.bad(name, str(e), self)
            os.unlink(path)
        # the undamaged image is good: a dry run, then the real thing
        try:
            r = self.run_ckpt(["restart", img, "--dry-run", "--log", self.p("dry.log")],
                              timeout=60)
            if r.returncode != 0:
                raise Fail("restart --dry-run exit %d: %s"
                           % (r.returncode, r.stderr.decode(errors="replace").strip()))
            self.expect_gone("restart --dry-run")
            sub.ok("img_damage/dry-run")
        except Fail as e:
            sub.bad("img_damage/dry-run", str(e), self)
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the undamaged image")

    def restart_damaged(self, path, kind, where):
        tag = "dmg-" + kind
        pidfile = self.p(tag + ".pid")
        err = self.p(tag + ".err")
        rp = self.popen(self.ckpt_argv("restart", path, "--pidfile", pidfile, "--log",
                                       self.p(tag + ".log")), err=err, out=self.p(tag + ".out"))
        deadline = time.monotonic() + 30
        try:
            while rp.poll() is None:
                if os.path.exists(pidfile):
                    raise Fail("%s (%s): the damaged image was restored and runs" % (kind, where))
                if time.monotonic() > deadline:
                    raise Fail("%s (%s): ckpt restart hung" % (kind, where))
                time.sleep(POLL)
        except Fail:
            # do not leave it to disturb the next damage or the good restart
            if self.ours(self.pid):
                os.kill(self.pid, signal.SIGKILL)
            rp.kill()
            rp.wait()
            self.expect_gone("killing the wrongly restored process")
            raise
        rc = rp.returncode
        msg = (tail(err, 20) or "").strip()
        if rc == 0:
            raise Fail("%s (%s): ckpt restart exit 0" % (kind, where))
        if rc < 0 or rc >= 128:
            raise Fail("%s (%s): ckpt restart crashed, status %d: %s" % (kind, where, rc, msg))
        if not msg:
            raise Fail("%s (%s): exit %d without a message" % (kind, where, rc))
        if re.search(r"Sanitizer|core dumped|Segmentation", msg):
            raise Fail("%s (%s): %s" % (kind, where, msg))
        if kind in CHECKSUM_DAMAGES and not re.search(r"record|checksum|crc", msg, re.I):
            raise Fail("%s (%s): message %r names no record/checksum" % (kind, where, msg))
        self.expect_gone("the refused restart of " + kind)
        self.vlog("%s (%s): exit %d: %s" % (kind, where, rc, msg.splitlines()[-1]))

    def checkpointed(self):
        """Starts the program and checkpoints it (--kill); returns the image."""
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        pr.poll()
        return img

    def flow_detach(self):
        """restart --detach prints the pid alone on a line and returns."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        r = self.run_ckpt(["restart", img, "--detach", "--log", self.p("restart.log")])
        out = r.stdout.decode(errors="replace")
        if r.returncode != 0:
            raise Fail("restart --detach exit %d: %s" % (r.returncode, r.stderr.decode().strip()))
        if out != "%d\n" % self.pid:
            raise Fail("restart --detach printed %r, want the pid alone on a line" % out)
        if not pid_alive(self.pid):
            raise Fail("the detached process is not running")
        os.kill(self.pid, signal.SIGUSR1)
        self.expect_gone("SIGUSR1 to the detached process", grace=EXIT_TIMEOUT)
        self.check_result(0, "the detached process")

    def flow_frozen(self):
        """restart --frozen: stopped until SIGCONT, then it carries on."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        pidfile, err = self.p("restart.pid"), self.p("restart.err")
        self.logs.append(err)
        rp = self.popen(self.ckpt_argv("restart", img, "--frozen", "--pidfile", pidfile),
                        err=err)
        deadline = time.monotonic() + PIDFILE_TIMEOUT
        while not os.path.exists(pidfile):
            if rp.poll() is not None or time.monotonic() > deadline:
                raise Fail("restart --frozen: no pidfile (%s)" % (tail(err, 3) or "").strip())
            time.sleep(POLL)
        os.kill(self.pid, signal.SIGUSR1)  # stays pending while stopped
        time.sleep(0.5)
        with open("/proc/%d/stat" % self.pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state != "T":
            raise Fail("restart --frozen: state %s, want T (stopped)" % state)
        if "PASS" in self.out():
            raise Fail("the frozen process ran")
        os.kill(self.pid, signal.SIGCONT)
        self.wait_all([rp], EXIT_TIMEOUT, "ckpt restart --frozen after SIGCONT")
        self.check_result(rp.returncode, "ckpt restart --frozen")

    def flow_stream(self):
        """checkpoint -o - | restart -: the image is a stream."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        cerr, rerr, pidfile = self.p("ckpt.err"), self.p("restart.err"), self.p("restart.pid")
        self.logs += [cerr, rerr]
        with open(cerr, "wb") as ce, open(rerr, "wb") as re_:
            cp = subprocess.Popen(self.ckpt_argv("checkpoint", str(self.pid), "-o", "-", "--kill"),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=ce,
                                  cwd=self.dir)
            rp = subprocess.Popen(self.ckpt_argv("restart", "-", "--pidfile", pidfile),
                                  stdin=cp.stdout, stdout=subprocess.DEVNULL, stderr=re_,
                                  cwd=self.dir)
        cp.stdout.close()
        self.procs += [cp, rp]
        deadline = time.monotonic() + CHECKPOINT_TIMEOUT + PIDFILE_TIMEOUT
        while not os.path.exists(pidfile):
            pr.poll()
            if rp.poll() is not None or time.monotonic() > deadline:
                raise Fail("checkpoint -o - | restart -: no pidfile (ckpt %s, restart %s)"
                           % (cp.poll(), rp.poll()))
            time.sleep(POLL)
        self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt checkpoint -o -", reap=[pr])
        if cp.returncode != 0:
            raise Fail("checkpoint -o - exit %d" % cp.returncode)
        rc = self.wait_exit(rp, "ckpt restart -")
        self.check_result(rc, "ckpt restart -")

    def flow_standalone(self):
        """A program that drives libckpt itself and prints PASS."""
        path = os.path.join(self.opts.bindir, self.t["program"])
        if self.opts.no_ckpt:
            return
        r = subprocess.run([path], stdin=subprocess.DEVNULL, capture_output=True,
                           cwd=self.dir, timeout=120)
        out = r.stdout.decode(errors="replace")
        if r.returncode != 0 or "PASS" not in out:
            raise Fail("%s exit %d: %s %s" % (self.t["program"], r.returncode, out.strip()[-400:],
                                              r.stderr.decode(errors="replace").strip()[-200:]))

    def flow_rst_fail(self):
        """A restart that fails after creating the process leaves nothing."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        with open(img, "rb") as f:
            good = f.read()
        bad = self.p("forged")
        with open(bad, "wb") as f:
            f.write(forge_seccomp(good, walk_image(good)))
        log = self.p("forged.log")
        self.logs.append(log)
        r = self.run_ckpt(["restart", bad, "--log", log, "-v"], timeout=60)
        self.expect_error(r, "restart of an image whose seccomp filter is invalid",
                          must=["seccomp"])
        with open(log) as f:
            if not re.search(r"pid \d+: created", f.read()):
                raise Fail("the forged image failed before a process was created")
        self.expect_gone("the failed restart")
        # the genuine image still restores
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the genuine image")

    def flow_inspect(self):
        """inspect prints every record; --json is JSON with the same records."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        r = self.run_ckpt(["inspect", img], verbose=False)
        text = r.stdout.decode(errors="replace")
        if r.returncode != 0:
            raise Fail("inspect exit %d: %s" % (r.returncode, r.stderr.decode().strip()))
        for want in ("header:", "tree", "mm/1", "mm/3", "regs/1", "creds/1", "fdtable/1"):
            if want not in text:
                raise Fail("inspect output lacks %r" % want)
        r = self.run_ckpt(["inspect", img, "--json"], verbose=False)
        try:
            j = json.loads(r.stdout.decode())
        except ValueError as e:
            raise Fail("inspect --json is not JSON: %s" % e)
        types = [rec["type"] for rec in j["records"]]
        if types.count("regs/1") != 1 or "mm/1" not in types:
            raise Fail("inspect --json records: %s" % types[:20])
        regs = [rec for rec in j["records"] if rec["type"] == "regs/1"][0]["data"]
        if not isinstance(regs.get("rip"), int) or not regs["rip"]:
            raise Fail("inspect --json: regs without rip")
        with open(img, "rb") as f:
            nrec = len(walk_image(f.read())) - 1  # the trailer is not listed
        if len(types) != nrec:
            raise Fail("inspect --json lists %d records, the image has %d" % (len(types), nrec))
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    # --- cleanup ---------------------------------------------------------

    def ours(self, pid):
        try:
            cwd = os.readlink("/proc/%d/cwd" % pid)
        except OSError:
            return False
        return cwd == self.dir or cwd.startswith(self.dir + "/")

    def cleanup(self):
        if self.pid and self.ours(self.pid):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        for pr in reversed(self.procs):
            if pr.poll() is None:
                try:
                    pr.kill()
                except OSError:
                    pass
        for pr in self.procs:
            try:
                pr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def run(self):
        getattr(self, "flow_" + self.t["kind"])()


# --- the image, as described by src/img/img.h ---------------------------

HDR_SIZE_OFF = 12          # struct img_header.header_size
FRAME = struct.Struct("<IIQII")  # type, flags, length, hdr_crc, data_crc
PAD_MASK = 0xfff
TRAILER = 0xffff


def walk_image(data):
    """[(index, frame_off, type, flags, data_off, data_len)], or Fail."""
    if len(data) < 16:
        raise Fail("image of %d bytes" % len(data))
    hs = struct.unpack_from("<I", data, HDR_SIZE_OFF)[0]
    pos, recs = hs, []
    while pos + FRAME.size <= len(data):
        typ, flags, length, _, _ = FRAME.unpack_from(data, pos)
        pad = flags & PAD_MASK
        if pad > length:
            break
        recs.append((len(recs), pos, typ, flags, pos + FRAME.size + pad, length - pad))
        pos += FRAME.size + length
        if typ == TRAILER:
            break
    if not recs or recs[-1][2] != TRAILER or pos != len(data):
        raise Fail("cannot follow the framing of the image (img.h changed?): "
                   "header_size %d, %d records, stopped at %d of %d" % (hs, len(recs), pos,
                                                                        len(data)))
    return recs


def flip(data, off):
    b = bytearray(data)
    b[off] ^= 0xff
    return bytes(b)


def d_header(data, recs):
    # in header.reserved, just before the trailing crc: only the crc can catch it
    hs = struct.unpack_from("<I", data, HDR_SIZE_OFF)[0]
    off = hs - 4 - 10
    return flip(data, off), "byte %d of the header (reserved)" % off


def d_frame(data, recs):
    off = recs[0][1]
    return flip(data, off), "byte %d: first frame's type" % off


def d_payload(data, recs):
    meta = [r for r in recs[:-1] if 0 < r[5] and (r[5] % 4096 or r[5] < 4096)
            and r[3] & PAD_MASK == 0]
    if not meta:
        raise Fail("no metadata record found in the image")
    r = meta[len(meta) // 2]
    off = r[4] + r[5] // 2
    return flip(data, off), "byte %d: middle of record %d (type %d, %d bytes)" % (
        off, r[0], r[2], r[5])


def d_pages(data, recs):
    r = max(recs[:-1], key=lambda r: r[5])
    off = r[4] + int(r[5] * 0.6)
    return flip(data, off), "byte %d: 60%% into record %d (type %d, %d bytes)" % (
        off, r[0], r[2], r[5])


def d_trunc_half(data, recs):
    return data[:len(data) // 2], "truncated to %d bytes" % (len(data) // 2)


def d_trunc_1(data, recs):
    return data[:-1], "truncated by 1 byte"


def d_append(data, recs):
    return data + random.Random(1).randbytes(4096), "4096 bytes of garbage appended"


def d_random(data, recs):
    return random.Random(2).randbytes(1 << 20), "1 MiB of random bytes"


def d_empty(data, recs):
    return b"", "empty file"


def crc32c(data, crc=0):
    """crc32c (Castagnoli), as src/img/crc32c.c; for forging small records."""
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 & -(crc & 1))
    return crc ^ 0xffffffff


def varint(data, pos):
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def forge_seccomp(data, recs):
    """A well-formed image whose first seccomp instruction is invalid: it
    passes every check of the image and fails only when the restored
    process installs the filter, after the process exists."""
    out = bytearray(data)
    rec = [r for r in recs if r[2] == 0x0901]
    if not rec:
        raise Fail("the image has no seccomp record")
    _, frame, _, _, off, length = rec[0]
    p = off
    if out[p] != 0x08:            # field 1 (mode), varint
        raise Fail("unexpected seccomp record layout")
    _, p = varint(out, p + 1)
    if out[p] != 0x12:            # field 2 (a filter), length-delimited
        raise Fail("unexpected seccomp record layout")
    _, p = varint(out, p + 1)
    if out[p] != 0x0a:            # its field 1 (insns), bytes
        raise Fail("unexpected seccomp filter layout")
    _, p = varint(out, p + 1)
    struct.pack_into("<H", out, p, 0xffff)   # sock_filter.code: no such BPF op
    struct.pack_into("<I", out, frame + 20, crc32c(bytes(out[off:off + length])))
    return bytes(out)


DAMAGES = [("header", d_header), ("frame", d_frame), ("payload", d_payload),
           ("pages", d_pages), ("trunc-half", d_trunc_half), ("trunc-1", d_trunc_1),
           ("append", d_append), ("random", d_random), ("empty", d_empty)]
CHECKSUM_DAMAGES = {"header", "frame", "payload", "pages"}


def damage_selftest(path):
    """--no-ckpt: the damage code on a synthetic image laid out as img.h says."""
    hs = 140
    hdr = bytearray(hs)
    hdr[0:8] = b"CKPTIMG\0"
    struct.pack_into("<II", hdr, 8, 1, hs)
    out = bytearray(hdr)

    def rec(typ, payload, aligned=False):
        pad = 0
        if aligned:
            pad = (-(len(out) + FRAME.size)) % 4096
        out.extend(FRAME.pack(typ, pad, pad + len(payload), 0, 0))
        out.extend(b"\0" * pad)
        out.extend(payload)

    rec(1, b"\x08\x01" * 10)
    rec(2, b"\x0a\x03abc" * 7)
    rec(3, b"P" * (8 * 4096), aligned=True)
    rec(4, b"\x10\x02" * 5)
    rec(TRAILER, struct.pack("<QQII", 4, 0, 0x444e4521, 0))
    data = bytes(out)
    recs = walk_image(data)
    if len(recs) != 5 or recs[2][4] % 4096 or recs[2][5] != 8 * 4096:
        raise Fail("damage self-test: walk_image misread the synthetic image: %r" % recs)
    for kind, fn in DAMAGES:
        d, where = fn(data, recs)
        if d == data:
            raise Fail("damage self-test: %s left the image unchanged" % kind)
    if d_pages(data, recs)[0][recs[2][4]:recs[2][4] + recs[2][5]] == data[
            recs[2][4]:recs[2][4] + recs[2][5]]:
        raise Fail("damage self-test: page damage missed the page record")
    with open(path, "wb") as f:
        f.write(data)


# --- driver ----------------------------------------------------------------

class Results:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.failures = []

    def ok(self, name, notes=()):
        self.passed += 1
        print("PASS %s%s" % (name, " (%s)" % ", ".join(notes) if notes else ""), flush=True)

    def skip(self, name, why):
        self.skipped += 1
        print("SKIP %s: %s" % (name, why), flush=True)

    def bad(self, name, why, run):
        self.failed += 1
        self.failures.append(name)
        print("FAIL %s: %s" % (name, why), flush=True)
        seen = set()
        for path in run.logs:
            if path in seen:
                continue
            seen.add(path)
            t = tail(path)
            if t:
                print("  --- %s:" % os.path.relpath(path, run.dir))
                print("\n".join("  | " + l for l in t.splitlines()))
        run.keep = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", default="build/ckpt")
    ap.add_argument("--bindir", default="build/tests/e2e")
    ap.add_argument("--no-ckpt", action="store_true",
                    help="run the programs natively, without checkpoint/restart")
    ap.add_argument("--only", help="comma-separated test names")
    ap.add_argument("--mode", choices=ALL_MODES,
                    help="run only this mode (default: every mode of every test; "
                         "with --no-ckpt: basic)")
    ap.add_argument("--keep", action="store_true", help="keep the directories of passed tests")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    opts = ap.parse_args()
    opts.ckpt = os.path.abspath(opts.ckpt)
    opts.bindir = os.path.abspath(opts.bindir)
    opts.python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

    if opts.list:
        for t in TESTS:
            print("%-18s %-10s %s" % (t["name"], t["kind"], ",".join(t["modes"])))
        return 0
    if os.geteuid() != 0:
        print("warning: not root; several tests need root", file=sys.stderr)
    if not opts.no_ckpt and not os.access(opts.ckpt, os.X_OK):
        print("error: %s is not executable" % opts.ckpt, file=sys.stderr)
        return 2

    only = set(opts.only.split(",")) if opts.only else None
    if only:
        unknown = only - {t["name"] for t in TESTS}
        if unknown:
            print("error: unknown test(s): %s" % ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
    modes = [opts.mode] if opts.mode else ([B] if opts.no_ckpt else list(ALL_MODES))

    res = Results()
    opts.results = res
    for t in TESTS:
        if only and t["name"] not in only:
            continue
        for mode in modes:
            if mode not in t["modes"]:
                continue
            run = Run(opts, t, mode)
            run.keep = False
            try:
                run.run()
                res.ok(run.name, run.notes)
            except Skip as e:
                res.skip(run.name, str(e))
            except Fail as e:
                res.bad(run.name, str(e), run)
            except Exception as e:  # a runner bug must not hide the others
                res.bad(run.name, "runner error: %r" % e, run)
            finally:
                run.cleanup()
                if run.keep or opts.keep:
                    print("  kept %s" % run.dir, flush=True)
                else:
                    shutil.rmtree(run.dir, ignore_errors=True)

    line = "%d passed, %d failed" % (res.passed, res.failed)
    if res.skipped:
        line += ", %d skipped" % res.skipped
    print(line)
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
