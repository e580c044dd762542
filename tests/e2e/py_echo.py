# SPDX-License-Identifier: LGPL-2.1-or-later
"""An asyncio echo server and its many clients, for runner.py (real_echo100).

    py_echo.py server          the tree that is checkpointed
    py_echo.py client PORT N   a process of the runner's, outside the tree

The server (cwd = the test directory) listens on 127.0.0.1 (or
$PY_ECHO_HOST, which the client then connects to), a port the
kernel picks, writes it to "port" (renamed into place) and echoes every
line on every connection, one asyncio event loop for all. On SIGTERM it
prints "served N lines on M connections" and exits 0.

With $PY_ECHO_MEM=MIB (a pre-copy test) the server also holds MIB MiB of
pages that it keeps rewriting, 1% of them (chosen at random) every 100 ms,
each with a new stamp (its 4 bytes repeated over the page), the stamps also
kept in an array; on SIGTERM it checks that every page holds its stamp and
writes "memcheck": "ok PAGES WRITES" or "bad: page P ...".

With $PY_ECHO_REMAP as well, it also maps 32 pages of its own (ctypes,
mmap), writes a known pattern into the upper 16 once, and keeps unmapping
and mapping again the lower 16 (MAP_FIXED_NOREPLACE, written each time)
every 2 ms: a pre-copy round that lists both halves as one extent finds the
lower gone when it reads them; the check also wants the upper 16 as they
were written ("bad: upper page P ...").

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

    mem = None
    if os.environ.get("PY_ECHO_MEM"):
        import array
        import random
        npages = int(os.environ["PY_ECHO_MEM"]) << 8
        mem = bytearray(npages << 12)
        stamps = array.array("I", [0] * npages)
        state = {"n": 0}
        for p in range(npages):  # every page touched, stamp 0 but not zero pages
            mem[p << 12:(p + 1) << 12] = b"\0\0\0\0" * 1023 + b"\1\0\0\0"

        def page(stamp):
            return stamp.to_bytes(4, "little") * 1023 + b"\1\0\0\0"

        def dirty():
            for _ in range(max(1, npages // 100)):
                p = random.randrange(npages)
                state["n"] += 1
                stamps[p] = state["n"]
                mem[p << 12:(p + 1) << 12] = page(state["n"])
            asyncio.get_running_loop().call_later(0.1, dirty)

        def check():
            for p in range(npages):
                if mem[p << 12:(p + 1) << 12] != page(stamps[p]):
                    got = int.from_bytes(mem[p << 12:(p << 12) + 4], "little")
                    return "bad: page %d holds stamp %d, want %d" % (p, got, stamps[p])
            if remap is not None:
                bad = remap.check()
                if bad:
                    return bad
            return "ok %d %d" % (npages, state["n"])
        remap = Remap() if os.environ.get("PY_ECHO_REMAP") else None
        dirty()
    srv = await asyncio.start_server(handle, os.environ.get("PY_ECHO_HOST", "127.0.0.1"), 0,
                                     backlog=128)
    done = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set_result, None)
    put("port", "%d\n" % srv.sockets[0].getsockname()[1])
    await done
    if mem is not None:
        put("memcheck", check() + "\n")
    srv.close()
    print("served %d lines on %d connections" % (stats["lines"], stats["conns"]), flush=True)


class Remap:
    """$PY_ECHO_REMAP: 32 pages at an address the kernel picks; the upper
    16 written once, the lower 16 unmapped and mapped again every 2 ms."""
    N = 16

    def __init__(self):
        import ctypes
        self.ct = ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.mmap, self.munmap = libc.mmap, libc.munmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        size = 2 * self.N << 12
        self.base = self.mmap(None, size, 3, 0x22, -1, 0)  # rw, MAP_PRIVATE|MAP_ANONYMOUS
        if self.base in (None, 2 ** 64 - 1):
            raise SystemExit("PY_ECHO_REMAP: mmap failed")
        self.upper = self.base + (self.N << 12)
        for p in range(self.N):
            ctypes.memmove(self.upper + (p << 12), self.pattern(p), 4096)
        self.mapped = True
        asyncio.get_running_loop().call_later(0.002, self.flip)

    @staticmethod
    def pattern(p):
        return bytes((p * 31 + i) % 251 + 1 for i in range(256)) * 16

    def flip(self):
        if self.mapped:
            self.munmap(self.base, self.N << 12)
            self.mapped = False
        else:
            # MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED_NOREPLACE: the hole it left
            got = self.mmap(self.base, self.N << 12, 3, 0x100022, -1, 0)
            if got == self.base:
                self.ct.memset(self.base, 0x5a, self.N << 12)
                self.mapped = True
        asyncio.get_running_loop().call_later(0.002, self.flip)

    def check(self):
        for p in range(self.N):
            got = self.ct.string_at(self.upper + (p << 12), 4096)
            if got != self.pattern(p):
                return "bad: upper page %d of the remapped pair holds %r..." % (p, got[:8])
        return None


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
