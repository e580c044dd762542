# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fake ends of a pre-copy migration (protocol "ckpt-migrate 2",
src/cli/cmd-migrate.c), for runner.py's mig2_precopy_fail: each breaks
the transport in the middle of round 1.

    py_migfake.py target ADDR DIR   listens on ADDR, port 0 (written to
                                    DIR/fake-port); takes round 0 whole
                                    (kept as DIR/round0) and answers
                                    "got 0"; of round 1 it reads 64 KiB,
                                    then closes both connections
    py_migfake.py source ADDR PORT DIR
                                    sends DIR/round0 as round 0 to the
                                    ckpt receive at ADDR:PORT, waits for
                                    "got 0", sends half of it as round 1
                                    and closes both connections
Prints what it saw; exit 0 if the other end behaved as described.
"""
import os
import socket
import sys


def put(name, text):
    with open(name + ".tmp", "w") as f:
        f.write(text)
    os.rename(name + ".tmp", name)


def line(s):
    b = b""
    while not b.endswith(b"\n"):
        d = s.recv(1)
        if not d:
            raise SystemExit("end of file after %r" % b)
        b += d
    return b[:-1].decode()


def target(addr, d):
    ls = socket.socket()
    ls.bind((addr, 0))
    ls.listen(4)
    put(os.path.join(d, "fake-port"), "%d\n" % ls.getsockname()[1])
    ctl, _ = ls.accept()
    hello = line(ctl)
    if hello != "ckpt-migrate 2":
        raise SystemExit("hello %r" % hello)
    token = "0123456789abcdef0123456789abcdef"
    ctl.sendall(("ok %s\n" % token).encode())
    data, _ = ls.accept()
    if line(data) != token:
        raise SystemExit("bad token")
    if line(ctl) != "round 0":
        raise SystemExit("no round 0")
    n = 0
    with open(os.path.join(d, "round0"), "wb") as f:
        while True:
            b = data.recv(1 << 20)
            if not b:
                break
            f.write(b)
            n += len(b)
    data.close()
    ctl.sendall(b"got 0\n")
    if line(ctl) != "round 1":
        raise SystemExit("no round 1")
    data, _ = ls.accept()
    line(data)
    got = 0
    while got < 65536:
        b = data.recv(65536 - got)
        if not b:
            break
        got += len(b)
    data.close()
    ctl.close()
    print("round 0: %d bytes; round 1 broken after %d bytes" % (n, got), flush=True)


def source(addr, port, d):
    with open(os.path.join(d, "round0"), "rb") as f:
        img = f.read()
    ctl = socket.create_connection((addr, port))
    ctl.sendall(b"ckpt-migrate 2\n")
    ok = line(ctl)
    if not ok.startswith("ok "):
        raise SystemExit("answer %r" % ok)
    data = socket.create_connection((addr, port))
    data.sendall(ok[3:].encode() + b"\n")
    ctl.sendall(b"round 0\n")
    data.sendall(img)
    data.shutdown(socket.SHUT_WR)
    got = line(ctl)
    if got != "got 0":
        raise SystemExit("round 0 answered %r" % got)
    data.close()
    ctl.sendall(b"round 1\n")
    data = socket.create_connection((addr, port))
    data.sendall(ok[3:].encode() + b"\n")
    data.sendall(img[:len(img) // 2])
    data.close()
    ctl.close()
    print("round 0 taken; round 1 broken after %d bytes" % (len(img) // 2), flush=True)


def main():
    if sys.argv[1:2] == ["target"] and len(sys.argv) == 4:
        target(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["source"] and len(sys.argv) == 5:
        source(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
