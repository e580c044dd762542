# SPDX-License-Identifier: LGPL-2.1-or-later
"""python3 multiprocessing mid-computation (run by runner.py as real_mp).

    real_mp.py serial OUT     the results, computed in this process
    real_mp.py pool OUT [fork|forkserver|spawn]
                              the same through processes:

a Pool of 2 worker processes (task and result queues: pipes and locks)
computes work(i) for i < N; the parent hands each result, as it comes,
to a multiprocessing.Queue (a feeder thread, a pipe, a semaphore) read
by a collector Process, which writes it to OUT and at the end sends
(count, digest) back over a multiprocessing.Pipe. The parent prints PASS
if that matches what it handed over. The runner checkpoints the tree
while the workers compute and compares OUT with the serial run's.
"""
import hashlib
import multiprocessing as mp
import sys
import time

N = 400


def work(i, pause=0.02):
    time.sleep(pause)
    h = hashlib.sha256(b"%d" % i).digest()
    for _ in range(2000):
        h = hashlib.sha256(h).digest()
    return i, h.hex()[:20]


def line(res):
    return "%d %s\n" % res


def collector(q, conn, path):
    n, d = 0, hashlib.sha256()
    with open(path, "w") as f:
        while True:
            item = q.get()
            if item is None:
                break
            f.write(line(item))
            f.flush()
            n += 1
            d.update(line(item).encode())
    conn.send((n, d.hexdigest()))
    conn.close()


def pool(path, method):
    ctx = mp.get_context(method)
    q = ctx.Queue(maxsize=8)
    rx, tx = ctx.Pipe(duplex=False)
    col = ctx.Process(target=collector, args=(q, tx, path))
    col.start()
    tx.close()
    n, d = 0, hashlib.sha256()
    with ctx.Pool(2) as p:
        for res in p.imap(work, range(N)):
            q.put(res)
            n += 1
            d.update(line(res).encode())
    q.put(None)
    got = rx.recv()
    col.join()
    fails = []
    if got != (n, d.hexdigest()):
        fails.append("the collector got %r, the parent sent %r" % (got, (n, d.hexdigest())))
    if n != N:
        fails.append("%d results, want %d" % (n, N))
    if col.exitcode != 0:
        fails.append("the collector exited %s" % col.exitcode)
    for f in fails:
        print("FAIL: " + f, flush=True)
    if fails:
        return 1
    print("PASS", flush=True)
    return 0


def main():
    if sys.argv[1] == "serial":
        with open(sys.argv[2], "w") as f:
            for i in range(N):
                f.write(line(work(i, 0)))
        return 0
    return pool(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "fork")


if __name__ == "__main__":
    sys.exit(main())
