# SPDX-License-Identifier: LGPL-2.1-or-later
"""python3 with 8 threads (run by runner.py as real_py_threads).

Eight threads count under one lock and a condition variable, a queue feeds
a consumer thread, and a threading.Event holds a waiter. The main thread
writes "ready", waits for SIGUSR1 (sigwait), then checks that every counter
still moves, the consumer still drains the queue in order, and the waiter
wakes when the event is set; then it stops and joins all threads.
"""
import os
import queue
import signal
import sys
import threading
import time

counts = [0] * 8
lock = threading.Lock()
stop = threading.Event()
q = queue.Queue()
got = []
woke = threading.Event()
gate = threading.Event()


def counter(i):
    while not stop.is_set():
        with lock:
            counts[i] += 1
        time.sleep(0.001)


def consumer():
    while True:
        v = q.get()
        if v is None:
            return
        got.append(v)


def waiter():
    gate.wait()
    woke.set()


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    ts = [threading.Thread(target=counter, args=(i,)) for i in range(8)]
    ts.append(threading.Thread(target=consumer))
    ts.append(threading.Thread(target=waiter))
    for t in ts:
        t.start()
    for v in range(100):
        q.put(v)
    time.sleep(0.2)
    with open(os.path.join(os.environ.get("CKPT_TEST_DIR", "."), "ready"), "w") as f:
        f.write("%d\n" % os.getpid())

    signal.sigwait({signal.SIGUSR1})

    fails = []
    with lock:
        before = list(counts)
    time.sleep(0.5)
    with lock:
        after = list(counts)
    for i in range(8):
        if after[i] <= before[i]:
            fails.append("counter thread %d stopped at %d" % (i, before[i]))
    for v in range(100, 200):
        q.put(v)
    if woke.is_set():
        fails.append("the waiter woke before its event")
    gate.set()
    if not woke.wait(5):
        fails.append("the waiter did not wake")
    stop.set()
    q.put(None)
    for t in ts:
        t.join(10)
        if t.is_alive():
            fails.append("a thread did not end")
    if got != list(range(200)):
        fails.append("the consumer got %d items, out of order or lost" % len(got))
    if threading.active_count() != 1:
        fails.append("%d threads left" % threading.active_count())
    for f in fails:
        print("FAIL: " + f, flush=True)
    if fails:
        return 1
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
