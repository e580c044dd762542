# Run by the host's /usr/bin/python3, bound read-only with /usr into a root
# file system of its own (runner.py, flow_rootfs_python), as pid 1 of
# `ckpt run --root`: it holds files open under three mounts -- a module of
# /usr (the read-only bind), a file of /t (the test's directory, bound) and
# one of /scratch (a tmpfs of the container's own) -- and checks, once
# signalled after the restart, that each is the same file at the same
# offset with the same contents. Deleted files of the tmpfs: one held by
# an fd and mapped shared, one mapped only (its fd closed).
import mmap
import os
import signal
import sys

got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))

mod = open(os.__file__, "rb")  # under /usr
head = mod.read(100)
log = open("/t/py.log", "a+")  # the bound test directory
log.write("one\n")
log.flush()
scratch = open("/scratch/data", "w+b")  # the tmpfs
scratch.write(b"x" * 5000)
scratch.flush()
scratch.seek(1234)
gone = open("/scratch/deleted", "w+b")
gone.write(b"d" * 8192)
gone.flush()
gmap = mmap.mmap(gone.fileno(), 8192)
os.unlink("/scratch/deleted")
gone.seek(100)
with open("/scratch/mapped", "w+b") as f:
    f.write(b"m" * 4096)
    f.flush()
    monly = mmap.mmap(f.fileno(), 4096)
os.unlink("/scratch/mapped")

with open("/t/ready", "w") as f:
    f.write("%d\n" % os.getpid())
while not got:
    signal.pause()


def fail(why):
    print("FAIL: " + why, flush=True)
    sys.exit(1)


if mod.tell() != 100 or os.fstat(mod.fileno()).st_ino != os.stat(os.__file__).st_ino:
    fail("the module of /usr is not the same open file at 100: %d" % mod.tell())
if not os.__file__.startswith("/usr/"):
    fail("os is %s, not under /usr" % os.__file__)
try:
    open("/usr/ckpt-test", "w")
    fail("/usr is writable, not a read-only bind")
except OSError:
    pass
log.write("two\n")
log.flush()
with open("/t/py.log") as f:
    if f.read() != "one\ntwo\n":
        fail("/t/py.log is not the bound file")
if scratch.tell() != 1234 or os.path.getsize("/scratch/data") != 5000:
    fail("/scratch/data: offset %d, size %d" % (scratch.tell(),
                                                os.path.getsize("/scratch/data")))
scratch.seek(0)
if scratch.read() != b"x" * 5000:
    fail("/scratch/data lost its contents")
if gone.tell() != 100 or os.readlink("/proc/self/fd/%d" % gone.fileno()) != "/scratch/deleted (deleted)":
    fail("the deleted file: offset %d, %s" % (gone.tell(),
                                             os.readlink("/proc/self/fd/%d" % gone.fileno())))
if gmap[:8192] != b"d" * 8192 or monly[:4096] != b"m" * 4096:
    fail("a mapping of a deleted file lost its contents")
gmap[0:1] = b"X"
gone.seek(0)
if gone.read(1) != b"X":
    fail("the mapping and the fd of the deleted file are not one file")
if os.path.exists("/scratch/deleted") or os.path.exists("/scratch/mapped"):
    fail("a deleted file has its name again")
print("PASS", flush=True)
