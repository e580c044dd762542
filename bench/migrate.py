#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""ckpt's migration benchmark (issue 12): the downtime of `ckpt migrate`
between the two test hosts of tests/e2e/twohost.py (network namespaces A
and B, clients in C; root only).

    bench/migrate.py [--ckpt build/ckpt] [--mib 1024] [--conns 100] [--repeat 1] [--keep]
                     [--rounds N] [--lazy | --eager] [--timing]

The server, pid 1 of `ckpt run --net` on host A, holds MIB MiB of touched
memory and keeps writing 1% of it per second (in steps of 0.1% every 100
ms), and echoes lines on CONNS connections that a client in C opened. It
is migrated to B (ckpt receive in B, sealed with a key made for the run);
C's route to the container then moves to B and every connection must echo
a line again. Printed for each run: the downtime ckpt migrate reports
(frozen on A until running on B), the total time of ckpt migrate, the
image bytes it sent, their ratio to the memory, and what the server
dirtied during the migration while it still ran (1%/s times the total
time less the downtime). --keep keeps the run's directory with both
sides' logs. --timing runs both sides with -v and prints the final
round's timeline from their logs: each step of the frozen checkpoint and
of the target's restart with the kinds that took time in it, and the
migration's marks (image sent, target's ready, commit, running).

By default ckpt migrate pre-copies: the memory is sent while the server
runs, then what it wrote meanwhile, in rounds (--rounds N, at most; 0:
none, the whole memory is sent while the server is frozen and the downtime
grows with MIB). The target's restart is lazy by default (ckpt receive
fills the memory from the received images after the copy runs); --eager
makes it write all memory first (receive --eager), --lazy asks for lazy
explicitly (a ckpt older than that default was eager without flags).
The bytes sent are every round's image and the final one.
Targets (issue 12): downtime under 300 ms, stretch 100 ms; bytes within
1.2x of memory plus what was dirtied meanwhile.
"""
import argparse
import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import twohost  # noqa: E402

SUB, CT, HOSTIF, PORT = "10.215.0.0/30", "10.215.0.2", "ckmig0", 7000


def put(name, text):
    with open(name + ".tmp", "w") as f:
        f.write(text)
    os.rename(name + ".tmp", name)


# --- the server (in the container) and the client (in C) --------------------

async def serve(mib):
    mem = bytearray(mib << 20)
    step = 1 << 20
    pattern = os.urandom(step)
    for off in range(0, len(mem), step):
        mem[off:off + step] = pattern
    chunk = max(4096, len(mem) // 1000)  # 0.1% every 100 ms: 1%/s
    state = {"off": 0, "n": 0}

    def dirty():
        off = state["off"]
        state["n"] += 1
        mem[off:off + chunk] = bytes([state["n"] & 0xff]) * min(chunk, len(mem) - off)
        state["off"] = (off + chunk) % len(mem)
        asyncio.get_running_loop().call_later(0.1, dirty)

    async def handle(reader, writer):
        while True:
            line = await reader.readline()
            if not line:
                break
            writer.write(line)
            await writer.drain()
        writer.close()
    await asyncio.start_server(handle, "0.0.0.0", PORT, backlog=256)
    dirty()
    put("ready", "ready\n")
    await asyncio.Event().wait()


def client(n):
    socks = [socket.create_connection((CT, PORT), timeout=120) for _ in range(n)]

    def echo(tag):
        for i, s in enumerate(socks):
            want = b"%s %d\n" % (tag, i)
            s.sendall(want)
            got = b""
            while not got.endswith(b"\n"):
                d = s.recv(100)
                if not d:
                    raise SystemExit("connection %d: end of file" % i)
                got += d
            if got != want:
                raise SystemExit("connection %d: echo %r, want %r" % (i, got, want))
    echo(b"before")
    put("connected", "%d\n" % n)
    while not os.path.exists("check"):
        time.sleep(0.05)
    echo(b"after")
    print("intact %d" % n, flush=True)


# --- the driver -------------------------------------------------------------

def wait_for(what, pred, procs, timeout=600):
    end = time.time() + timeout
    while not pred():
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError("%s: a process ended (%s)" % (what, p.returncode))
        if time.time() > end:
            raise RuntimeError("%s: not within %d s" % (what, timeout))
        time.sleep(0.05)


LINE = re.compile(r"^\(\s*(\d+\.\d+)\) (\w+): \w+: (.*)$")


def timeline(d):
    """The final round, both sides' -v logs merged by time (one clock: one
    machine): each step's time and its costly kinds, the migration's marks."""
    ev = []
    for side, name, start in (("A", "migrate.log", "final round"),
                              ("B", "receive.log", "final round comes")):
        on = False
        for line in open(os.path.join(d, name), errors="replace"):
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            t, who, text = float(m.group(1)), m.group(2), m.group(3)
            if who == "migrate" and text.startswith(start + " "):
                on = True
            if on and (who == "migrate" or " step " in text or "locked in" in text or
                       "removed after" in text):
                ev.append((t, side, who, text))
    if not ev:
        return
    ev.sort()
    t0 = [e[0] for e in ev if e[2] == "migrate" and e[3].startswith("final round ")][0]
    print("timeline of the final round (ms from the freeze; A source, B target):")
    for t, side, who, text in ev:
        print("  %+8.1f %s %s" % ((t - t0) * 1000, side, text))


def nice_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def one(args, run):
    topo = twohost.TwoHost("bm%d" % os.getpid()).make()
    d = tempfile.mkdtemp(prefix="ckpt-bench-mig-")
    procs = []

    def popen(host, argv, name):
        p = subprocess.Popen(topo.argv(host, argv), cwd=d, stdin=subprocess.DEVNULL,
                             stdout=open(os.path.join(d, name + ".out"), "wb"),
                             stderr=open(os.path.join(d, name + ".err"), "wb"))
        procs.append(p)
        return p
    try:
        topo.hold(SUB)
        topo.route(SUB, "a")
        me = [sys.executable, os.path.abspath(__file__)]
        pidfile = os.path.join(d, "run.pid")
        srv = popen("a", [args.ckpt, "run", "--net", "--net-addr", SUB, "--net-host-if", HOSTIF,
                          "--pidfile", pidfile, "--"] + me + ["serve", str(args.mib)], "run")
        wait_for("the server's memory", lambda: os.path.exists(os.path.join(d, "ready")), [srv])
        pid = int(open(pidfile).read())
        nice = nice_of(pid)
        cl = popen("c", me + ["client", str(args.conns)], "client")
        wait_for("the connections", lambda: os.path.exists(os.path.join(d, "connected")),
                 [cl, srv])
        key = os.path.join(d, "key")
        subprocess.run([args.ckpt, "keygen", key], check=True, capture_output=True)
        rcv = popen("b", [args.ckpt, "receive", "--listen", topo.addr("b") + ":0", "--key", key,
                          "--log", os.path.join(d, "receive.log")] +
                    (["--lazy"] if args.lazy else []) + (["--eager"] if args.eager else []) +
                    (["-v"] if args.timing else []),
                    "receive")
        port = []

        def listening():
            m = re.search(r"on [\d.]+:(\d+)", open(os.path.join(d, "receive.err")).read())
            return bool(m and port.append(int(m.group(1))) is None)
        wait_for("ckpt receive", listening, [rcv])
        t0 = time.monotonic()
        mig = popen("a", [args.ckpt, "migrate", str(pid), "--to", "%s:%d" % (topo.addr("b"),
                                                                                port[0]),
                          "--key", key, "--log", os.path.join(d, "migrate.log"),
                          "--rounds", str(args.rounds)] + (["-v"] if args.timing else []),
                    "migrate")
        mig.wait()
        total = time.monotonic() - t0
        rcv.wait(60)
        err = open(os.path.join(d, "migrate.err")).read()
        m = re.search(r"([\d.]+) MiB image, down (\d+) ms", err)
        if mig.returncode != 0 or rcv.returncode != 0 or not m:
            raise RuntimeError("migration failed: %s %s" % (err.strip(), open(
                os.path.join(d, "receive.err")).read().strip()))
        topo.route(SUB, "b")
        # the target's ckpt runs at nice -10 meanwhile: the copy must not
        restored = int(open(os.path.join(d, "receive.out")).read())
        if nice_of(restored) != nice:
            raise RuntimeError("the copy runs at nice %d, the original at %d"
                               % (nice_of(restored), nice))
        put(os.path.join(d, "check"), "")
        cl.wait(120)
        out = open(os.path.join(d, "client.out")).read() + open(
            os.path.join(d, "client.err")).read()
        if cl.returncode != 0 or not out.startswith("intact"):
            raise RuntimeError("the client: %s" % out.strip())
        image, down = float(m.group(1)), int(m.group(2))
        pre = re.search(r"pre-copy: (\d+) rounds?, .* sent in all ([\d.]+) MiB", err)
        rounds = int(pre.group(1)) if pre else 0
        if pre:
            image = float(pre.group(2))
        # what the server wrote while it still ran during the migration
        # (without pre-copy it is frozen from the start: nothing)
        dirtied = args.mib * 0.01 * max(0.0, total - down / 1000)
        print("run %d: %d MiB, %d connections, %d pre-copy rounds: down %d ms, total %.2f s, "
              "sent %.1f MiB (%.3fx memory; %.1f MiB dirtied meanwhile, %.3fx "
              "memory+dirtied), connections intact"
              % (run, args.mib, args.conns, rounds, down, total, image, image / args.mib,
                 dirtied, image / (args.mib + dirtied)), flush=True)
        if args.timing:
            timeline(d)
        return down, total, image
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        restored = os.path.join(d, "receive.out")
        try:
            os.kill(int(open(restored).read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        topo.destroy()
        if args.keep:
            print("kept %s" % d)
        else:
            subprocess.run(["rm", "-rf", d])


def main():
    if sys.argv[1:2] == ["serve"]:
        return asyncio.run(serve(int(sys.argv[2])))
    if sys.argv[1:2] == ["client"]:
        return client(int(sys.argv[2]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", default=os.path.join(HERE, "..", "build", "ckpt"))
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--conns", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8, help="pre-copy rounds at most (0: none)")
    ap.add_argument("--lazy", action="store_true", help="ckpt receive --lazy")
    ap.add_argument("--eager", action="store_true", help="ckpt receive --eager")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory (logs)")
    ap.add_argument("--timing", action="store_true",
                    help="both sides log with -v; print the final round's timeline")
    args = ap.parse_args()
    args.ckpt = os.path.abspath(args.ckpt)
    if os.geteuid() != 0:
        sys.exit("bench/migrate.py: the two test hosts need root")
    res = [one(args, i + 1) for i in range(args.repeat)]
    if len(res) > 1:
        res.sort()
        print("median: down %d ms, total %.2f s, sent %.1f MiB" % res[len(res) // 2])
    print("load %s" % open("/proc/loadavg").read().split()[0])


if __name__ == "__main__":
    main()
