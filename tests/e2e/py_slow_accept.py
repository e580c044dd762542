# SPDX-License-Identifier: LGPL-2.1-or-later
"""A server that accepts slowly, so that its accept queue is never empty
while its clients keep connecting (the e2e test accept_busy).

    py_slow_accept.py server DIR   listens on 127.0.0.1 (a free port, written
                                   to DIR/port), accepts one connection every
                                   40 ms, reads a line from it, answers
                                   "COUNT PID\\n" (COUNT: connections served
                                   so far) and closes it
    py_slow_accept.py client PORT N DIR
                                   N threads, each connecting again and again
                                   and checking that the count it is told
                                   grows; DIR/served holds the last count, the
                                   client exits 0 once DIR/stop exists, 1 at
                                   the first error (said on stderr)
"""
import os
import socket
import sys
import threading
import time


def server(d):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    tmp = os.path.join(d, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(tmp, os.path.join(d, "port"))
    count = 0
    while True:
        time.sleep(0.04)
        c, _ = s.accept()
        with c:
            c.settimeout(60)
            line = c.makefile("rb").readline()
            if not line.startswith(b"hello "):
                continue
            count += 1
            c.sendall(b"%d %d\n" % (count, os.getpid()))


def client(port, n, d):
    errors = []
    stop = os.path.join(d, "stop")
    lock = threading.Lock()
    last = [0]

    def one(k):
        seen = 0
        while not os.path.exists(stop) and not errors:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
                    c.sendall(b"hello %d\n" % k)
                    ans = c.makefile("rb").readline().split()
                count = int(ans[0])
                if count <= seen:
                    raise ValueError("count %d after %d" % (count, seen))
                seen = count
                with lock:
                    if count > last[0]:
                        last[0] = count
                        with open(os.path.join(d, "served.tmp"), "w") as f:
                            f.write("%d %s\n" % (count, ans[1].decode()))
                        os.rename(os.path.join(d, "served.tmp"), os.path.join(d, "served"))
            except Exception as e:  # every error fails the test
                errors.append("client %d: %r" % (k, e))
    ts = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2])
    else:
        sys.exit(client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
