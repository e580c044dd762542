# SPDX-License-Identifier: LGPL-2.1-or-later
"""A plain echo server for runner.py's migrate_plain tests: a process of
host A's network namespace itself (no `ckpt run --net`), migrated to B with
the address its clients use.

    py_plain.py server [PEERPORT]   the tree: listens on every address (::,
                                    IPv4 too, as v4-mapped), a
                                    port the kernel picks (written to
                                    "port"), echoes every line on every
                                    connection (one selector loop); with
                                    PEERPORT it also holds a connection to
                                    127.0.0.1:PEERPORT (a process outside
                                    the tree), which cannot move
    py_plain.py peer                that process: listens on 127.0.0.1
                                    (port written to "peerport"), holds
                                    what connects

cwd is the test directory. The clients are py_echo.py's. SIGTERM ends
either, the server printing "served N lines".
"""
import os
import selectors
import signal
import socket
import sys


def put(name, text):
    with open(name + ".tmp", "w") as f:
        f.write(text)
    os.rename(name + ".tmp", name)


def listener(host, name):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if ":" in host:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((host, 0))
    s.listen(128)
    put(name, "%d\n" % s.getsockname()[1])
    return s


def serve(peerport):
    sel = selectors.DefaultSelector()
    lines = [0]
    held = []
    if peerport:
        held.append(socket.create_connection(("127.0.0.1", peerport), timeout=30))
    ls = listener("::", "port")
    sel.register(ls, selectors.EVENT_READ, None)
    bufs = {}
    while True:
        for key, _ in sel.select():
            if key.data is None:
                c, _ = ls.accept()
                bufs[c] = b""
                sel.register(c, selectors.EVENT_READ, "c")
                continue
            c = key.fileobj
            data = c.recv(65536)
            if not data:
                sel.unregister(c)
                del bufs[c]
                c.close()
                continue
            bufs[c] += data
            *done, bufs[c] = bufs[c].split(b"\n")
            for ln in done:
                c.sendall(ln + b"\n")
                lines[0] += 1


def peer():
    ls = listener("127.0.0.1", "peerport")
    held = []
    while True:
        c, _ = ls.accept()
        held.append(c)


def main():
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    if sys.argv[1:2] == ["server"] and len(sys.argv) <= 3:
        serve(int(sys.argv[2]) if len(sys.argv) == 3 else 0)
    elif sys.argv[1:] == ["peer"]:
        peer()
    else:
        sys.exit("usage: py_plain.py server [PEERPORT] | peer")


if __name__ == "__main__":
    main()
