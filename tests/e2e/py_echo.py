# SPDX-License-Identifier: LGPL-2.1-or-later
"""An asyncio echo server and its many clients, for runner.py (real_echo100).

    py_echo.py server          the tree that is checkpointed
    py_echo.py client PORT N   a process of the runner's, outside the tree

The server (cwd = the test directory) listens on 127.0.0.1 (or
$PY_ECHO_HOST, which the client then connects to), a port the
kernel picks, writes it to "port" (renamed into place) and echoes every
line on every connection, one asyncio event loop for all. On SIGTERM it
prints "served N lines on M connections" and exits 0.

The client opens N connections first (each echoes once before the next
is opened, so that none waits in the listener's accept queue), then keeps
one line in flight on each: "c<conn> <seq> <payload>", the payload depends
on both; every echo must be the line it sent. It writes the number of
full rounds (every connection echoed once more) to "rounds" (renamed into
place) as it goes, stops once the file "stop" exists, closes every
connection and prints "PASS N echoes". A reset, an end of file, an echo
that differs or one that takes more than 60 s: "FAIL: why", exit 1.
"""
import asyncio
import os
import selectors
import signal
import socket
import sys
import time


def put(name, text):
    with open(name + ".tmp", "w") as f:
        f.write(text)
    os.rename(name + ".tmp", name)


async def serve():
    stats = {"lines": 0, "conns": 0}

    async def handle(reader, writer):
        stats["conns"] += 1
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                stats["lines"] += 1
                writer.write(line)
                await writer.drain()
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, os.environ.get("PY_ECHO_HOST", "127.0.0.1"), 0,
                                     backlog=128)
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set_result, None)
    put("port", "%d\n" % srv.sockets[0].getsockname()[1])
    await done
    srv.close()
    print("served %d lines on %d connections" % (stats["lines"], stats["conns"]), flush=True)


def line(c, seq):
    return ("c%d %d %s\n" % (c, seq, "x" * ((c * 7 + seq) % 50))).encode()


def client(port, n):
    socks = []
    for c in range(n):
        s = socket.create_connection((os.environ.get("PY_ECHO_HOST", "127.0.0.1"), port),
                                     timeout=60)
        s.sendall(line(c, 0))
        want = line(c, 0)
        got = b""
        while len(got) < len(want):
            d = s.recv(len(want) - len(got))
            if not d:
                raise SystemExit("FAIL: conn %d: end of file at its first echo" % c)
            got += d
        if got != want:
            raise SystemExit("FAIL: conn %d: first echo %r, want %r" % (c, got, want))
        s.setblocking(False)
        socks.append(s)
    sel = selectors.DefaultSelector()
    seq, buf, sent_at = [1] * n, [b""] * n, [time.monotonic()] * n
    for c, s in enumerate(socks):
        s.sendall(line(c, 1))
        sel.register(s, selectors.EVENT_READ, c)
    echoes, rounds, stop, written = n, 0, False, time.monotonic()
    while True:
        for key, _ in sel.select(timeout=0.2):
            c = key.data
            try:
                d = socks[c].recv(4096)
            except ConnectionError as e:
                raise SystemExit("FAIL: conn %d: %s after %d echoes" % (c, e, seq[c]))
            if not d:
                raise SystemExit("FAIL: conn %d: end of file after %d echoes" % (c, seq[c]))
            buf[c] += d
            want = line(c, seq[c])
            if len(buf[c]) < len(want):
                continue
            if buf[c] != want:
                raise SystemExit("FAIL: conn %d: echo %r, want %r" % (c, buf[c], want))
            buf[c], seq[c] = b"", seq[c] + 1
            echoes += 1
            if stop:
                sel.unregister(socks[c])
                continue
            socks[c].sendall(line(c, seq[c]))
            sent_at[c] = time.monotonic()
        now = time.monotonic()
        late = [c for c in range(n) if socks[c] in sel.get_map() and now - sent_at[c] > 60]
        if late:
            raise SystemExit("FAIL: conn %d: no echo for 60 s" % late[0])
        if min(seq) - 1 > rounds or now - written > 0.2:
            rounds, written = min(seq) - 1, now
            put("rounds", "%d\n" % rounds)
        if not stop and os.path.exists("stop"):
            stop = True
        if stop and not sel.get_map():
            break
        time.sleep(0.002)
    for s in socks:
        s.close()
    print("PASS %d echoes" % echoes, flush=True)


def main():
    if sys.argv[1:2] == ["server"]:
        asyncio.run(serve())
    elif sys.argv[1:2] == ["client"] and len(sys.argv) == 4:
        client(int(sys.argv[2]), int(sys.argv[3]))
    else:
        raise SystemExit("usage: py_echo.py server | client PORT N")


if __name__ == "__main__":
    main()
