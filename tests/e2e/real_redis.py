# SPDX-License-Identifier: LGPL-2.1-or-later
"""redis-server with a client holding its connection (run by runner.py as
real_redis).

This python3 process starts redis-server as its child, listening only on
the unix socket redis.sock in the test directory (no TCP, no persistence),
connects to it (the socket module, speaking RESP itself) and fills it:
2000 keys, a list, a hash and a 1 MiB value; then asks for that value
without reading the reply (partly queued on the socket, the rest in the
server's output buffer) and leaves a request half-written. It writes
"ready" and waits for SIGUSR1 (sigwait). The runner meanwhile talks to
the server from outside, over new connections, before the checkpoint and
after the restart. Then, on the same connection: the whole 1 MiB reply
arrives, the rest of the half-written request completes it, the server
still sees the same client (CLIENT ID), the data and the runner's keys
are there; SHUTDOWN NOSAVE ends the server. Prints PASS or FAIL: reason.
"""
import array
import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import termios
import time

NKEYS = 2000
BIG = 1 << 20
PR_SET_PDEATHSIG = 1


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """One RESP connection over a unix stream socket."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""

    def more(self):
        data = self.s.recv(65536)
        if not data:
            raise EOFError("the server closed the connection")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def reply(self):
        ln = self.line()
        t, rest = ln[:1], ln[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.more()
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError("bad reply %r" % ln[:60])

    def cmd(self, *args):
        self.s.sendall(encode(*args))
        return self.reply()

    def pipeline(self, cmds):
        self.s.sendall(b"".join(encode(*c) for c in cmds))
        return [self.reply() for _ in cmds]


def value(i):
    return b"value-%d-" % i + b"x" * (i % 50)


def big():
    return bytes((i * 7 + 3) & 0xFF for i in range(BIG))


def queued(s):
    b = array.array("i", [0])
    fcntl.ioctl(s.fileno(), termios.FIONREAD, b)
    return b[0]


def pdeathsig():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def start_server(d):
    path = os.path.join(d, "redis.sock")
    log = open(os.path.join(d, "redis.log"), "wb")
    srv = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", path,
                            "--save", "", "--appendonly", "no", "--dir", d],
                           stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                           preexec_fn=pdeathsig)
    log.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            return srv, Conn(path)
        except OSError:
            if srv.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def fill(c):
    for i in range(0, NKEYS, 500):
        c.pipeline([("SET", "key:%d" % j, value(j)) for j in range(i, i + 500)])
    c.cmd("RPUSH", "list", *["item-%d" % i for i in range(100)])
    c.cmd("HSET", "hash", *[x for i in range(50) for x in ("f%d" % i, "v%d" % i)])
    c.cmd("SET", "big", big())
    c.cmd("SET", "counter", 41)


def check(c, cid, fails):
    got = c.reply()
    if got != big():
        fails.append("the reply queued to GET big differs (%s bytes)" % len(got or ""))
    # the rest of the request sent before the checkpoint
    c.s.sendall(b"\r\n")
    got = c.reply()
    if got != 42:
        fails.append("the half-written INCR gave %r, want 42" % got)
    got = c.cmd("CLIENT", "ID")
    if got != cid:
        fails.append("the server sees client %r, was %r" % (got, cid))
    for i in range(0, NKEYS, 500):
        got = c.pipeline([("GET", "key:%d" % j) for j in range(i, i + 500)])
        if got != [value(j) for j in range(i, i + 500)]:
            fails.append("keys key:%d.. differ" % i)
    if c.cmd("LRANGE", "list", 0, -1) != [b"item-%d" % i for i in range(100)]:
        fails.append("the list differs")
    if c.cmd("HGET", "hash", "f37") != b"v37" or c.cmd("HLEN", "hash") != 50:
        fails.append("the hash differs")
    if c.cmd("GET", "big") != big():
        fails.append("the big value differs")
    for k in ("outside:before", "outside:after"):
        if c.cmd("GET", k) != b"from the runner":
            fails.append("%s is not there" % k)
    if c.cmd("DBSIZE") != NKEYS + 6:
        fails.append("DBSIZE is not %d" % (NKEYS + 6))


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    d = os.environ.get("CKPT_TEST_DIR", ".")
    srv, c = start_server(d)
    fill(c)
    cid = c.cmd("CLIENT", "ID")
    # a reply left unread: part of it queued on this socket, the rest in
    # the server's output buffer, waiting for the socket to take more
    c.s.sendall(encode("GET", "big"))
    deadline = time.monotonic() + 10
    while queued(c.s) < 64 << 10:
        if time.monotonic() > deadline:
            raise SystemExit("FAIL: the reply to GET big is not queued")
        time.sleep(0.01)
    req = encode("INCR", "counter")
    c.s.sendall(req[:-2])  # all but the final CRLF: the server waits for it
    with open(os.path.join(d, "ready"), "w") as f:
        f.write("%d\n" % os.getpid())

    signal.sigwait({signal.SIGUSR1})

    fails = []
    try:
        check(c, cid, fails)
        c.s.sendall(encode("SHUTDOWN", "NOSAVE"))
        try:
            c.reply()
        except (EOFError, OSError):
            pass
        rc = srv.wait(timeout=20)
        if rc != 0:
            fails.append("redis-server exited %s" % rc)
    except Exception as e:
        fails.append("%s: %s" % (type(e).__name__, str(e)[:200]))
    finally:
        if srv.poll() is None:
            srv.kill()
    for f in fails:
        print("FAIL: " + f, flush=True)
    if fails:
        return 1
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
