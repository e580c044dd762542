# Run by the host's /usr/bin/python3 in a root file system of its own
# (runner.py, flow_rootfs_python, ct_rootfs_unix) as pid 1 of `ckpt run
# --root`: unix sockets bound under the container's mounts -- a listener on
# /scratch/srv.sock (a tmpfs of its own) with a client connected, and one
# on /t/srv.sock (the bound test directory) -- checked after the restart:
# the names are the same, the files are there (as sockets) at those paths
# inside, the connection carries data both ways, and a new client
# connects to each listener by its path. With the argument "userns"
# (ct_rootfs_unix_unpriv: a user namespace of its own, where a name on its
# tmpfs is bound once its mounts exist, after the connections are made)
# the client is connected to /t/srv.sock instead.
import os
import signal
import socket
import stat
import sys

got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))


def listener(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(4)
    return s


names = ["/scratch/srv.sock", "/t/srv.sock"]
if sys.argv[1:] == ["userns"]:
    names.reverse()
socks = [listener(n) for n in names]
cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cl.connect(names[0])
acc, _ = socks[0].accept()
cl.sendall(b"queued")  # in flight across the checkpoint

with open("/t/ready", "w") as f:
    f.write("%d\n" % os.getpid())
while not got:
    signal.pause()


def fail(why):
    print("FAIL: " + why, flush=True)
    sys.exit(1)


for s, path in zip(socks, names):
    if s.getsockname() != path:
        fail("%s is bound to %r" % (path, s.getsockname()))
    if not stat.S_ISSOCK(os.lstat(path).st_mode):
        fail("%s is not a socket file" % path)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(10)
    c.connect(path)
    a, _ = s.accept()
    c.sendall(b"ping")
    if a.recv(10) != b"ping":
        fail("a new connection to %s does not carry data" % path)
    c.close()
    a.close()
acc.settimeout(10)
if acc.recv(10) != b"queued":
    fail("the data in flight on the held connection is lost")
acc.sendall(b"back")
if cl.recv(10) != b"back":
    fail("the held connection does not carry data back")
if cl.getpeername() != names[0]:
    fail("the client's peer is %r" % cl.getpeername())
print("PASS", flush=True)
