# SPDX-License-Identifier: LGPL-2.1-or-later
"""fio with the libaio engine across checkpoint and restart (run by
runner.py as real_fio_aio).

fio (Debian package fio) does random reads and writes of 4 KiB with
ioengine=libaio, iodepth 8, O_DIRECT, on a 4 MiB file in the test's
directory, rate-limited so that it runs about 10 s: its job process has
an AIO context (io_setup) whose ring is "/[aio] (deleted)" in its maps.
This script writes "ready" once that ring exists, waits for SIGUSR1 (sent
after the restart), checks fio is still running (so the checkpoint caught
it doing I/O), waits for it to end and checks its exit status, its JSON
report (no error, every I/O done) and that verify found nothing.
"""
import json
import os
import signal
import subprocess
import sys
import time

NUM_IOS = 1000


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def has_aio(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return "[aio]" in f.read()
    except OSError:
        return False


def main():
    d = os.environ.get("CKPT_TEST_DIR", ".")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    report = os.path.join(d, "fio.json")
    argv = ["fio", "--name=aio", "--ioengine=libaio", "--iodepth=8", "--rw=randrw",
            "--bs=4k", "--size=4m", "--direct=1", "--filename=" + os.path.join(d, "fio.data"),
            "--number_ios=%d" % NUM_IOS, "--rate_iops=100", "--thread=0",
            "--output-format=json", "--output=" + report]
    fio = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=open(os.path.join(d, "fio.err"), "w"))
    deadline = time.monotonic() + 20
    while not any(has_aio(p) for p in descendants(os.getpid())):
        if fio.poll() is not None or time.monotonic() > deadline:
            with open(os.path.join(d, "fio.err")) as f:
                err = f.read().strip()
            if "O_DIRECT" in err or "direct" in err.lower():
                print("SKIP: fio cannot do O_DIRECT here: %s" % err, flush=True)
                return 0
            print("FAIL: fio has no AIO ring (status %s): %s" % (fio.poll(), err), flush=True)
            return 1
        time.sleep(0.05)
    with open(os.path.join(d, "ready"), "w") as f:
        f.write("%d\n" % os.getpid())

    signal.sigwait({signal.SIGUSR1})

    fails = []
    if fio.poll() is not None:
        fails.append("fio ended before the restart (status %s)" % fio.returncode)
    try:
        rc = fio.wait(120)
    except subprocess.TimeoutExpired:
        fio.kill()
        rc = fio.wait()
        fails.append("fio did not end within 120 s")
    if rc != 0:
        with open(os.path.join(d, "fio.err")) as f:
            fails.append("fio exited with status %s: %s" % (rc, f.read().strip()))
    else:
        with open(report) as f:
            text = f.read()
        rep = json.loads(text[text.index("{"):])
        job = rep["jobs"][0]
        done = job["read"]["total_ios"] + job["write"]["total_ios"]
        if job["error"] != 0:
            fails.append("fio's job reports error %d" % job["error"])
        if done < NUM_IOS:
            fails.append("fio did %d I/Os, not %d" % (done, NUM_IOS))
    for f in fails:
        print("FAIL: " + f, flush=True)
    if fails:
        return 1
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
