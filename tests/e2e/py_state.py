# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real interpreter as a test program (run by runner.py as real_python).

Builds a dict of 1,000,000 entries with string keys (their hashes depend on
the interpreter's per-process hash secret, which lives in its memory) and a
generator advanced 12345 steps, writes "ready" like lib.c does, waits for
SIGUSR1 with sigwait (no race: the signal is blocked first), then checks
that the dict has the same checksum, that lookups by key still find the
values (the hash secret and the table agree), and that the generator goes
on from where it was. Prints PASS or FAIL: reason.
"""
import os
import signal
import sys
import time

N = 1_000_000
STEPS = 12345


def squares():
    i = 0
    while True:
        yield i * i
        i += 1


def checksum(d):
    s = 0
    for k, v in d.items():
        s = (s * 1000003 + hash(k) ^ v) & 0xFFFFFFFFFFFFFFFF
    return s


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    d = {"key-%d" % i: i * 7 for i in range(N)}
    g = squares()
    for _ in range(STEPS):
        next(g)
    before = checksum(d)
    t0 = time.monotonic()
    pid = os.getpid()
    with open(os.path.join(os.environ.get("CKPT_TEST_DIR", "."), "ready"), "w") as f:
        f.write("%d\n" % pid)

    signal.sigwait({signal.SIGUSR1})

    fails = []
    if os.getpid() != pid:
        fails.append("pid changed")
    if len(d) != N:
        fails.append("dict has %d entries" % len(d))
    if checksum(d) != before:
        fails.append("dict checksum differs")
    for i in range(0, N, 997):
        if d.get("key-%d" % i) != i * 7:
            fails.append("lookup of key-%d failed" % i)
            break
    nxt = next(g)
    if nxt != STEPS * STEPS:
        fails.append("generator gave %d, want %d" % (nxt, STEPS * STEPS))
    if time.monotonic() < t0:
        fails.append("monotonic clock went backwards")
    for f in fails:
        print("FAIL: " + f, flush=True)
    if fails:
        return 1
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
