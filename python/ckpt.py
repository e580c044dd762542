# SPDX-License-Identifier: LGPL-2.1-or-later
"""ckpt from Python: checkpoint and restart Linux process trees.

A thin ctypes layer over libckpt (ckpt.h); nothing but the standard library.

    import ckpt
    res = ckpt.checkpoint(pid, "app.ckpt", kill=True)   # a Result
    res = ckpt.restart("app.ckpt", detach=True)         # res.root: the pid
    print(ckpt.inspect("app.ckpt"))                     # what it holds

A failure raises ckpt.Error, an OSError whose errno is the library's and
whose message is its one-line reason ("pid 4242 fd 7 (socket): ...").
libckpt is found by the CKPT_LIBRARY environment variable (a path), else
as the system's libckpt.so.0.
"""

import ctypes
import ctypes.util
import os
import threading

__all__ = ["Error", "Result", "checkpoint", "restart", "inspect", "inspect_diff",
           "CKPT_SUBTREE", "CKPT_KILL", "CKPT_LEAVE_FROZEN", "CKPT_SHELL_JOB",
           "CKPT_EXT_UNIX", "CKPT_VERIFY", "CKPT_DROP_EVENTS", "CKPT_DETACH_CLIENTS",
           "CKPT_COMPRESS",
           "RESTART_FROZEN", "RESTART_GHOST", "RESTART_CONN_RESET", "RESTART_DETACH",
           "RESTART_PIDNS", "RESTART_SHELL_JOB", "LOG_ERROR", "LOG_WARN", "LOG_INFO",
           "LOG_DEBUG"]

# the flags of ckpt.h
CKPT_SUBTREE, CKPT_KILL, CKPT_LEAVE_FROZEN, CKPT_SHELL_JOB = 0x1, 0x2, 0x4, 0x8
CKPT_EXT_UNIX, CKPT_VERIFY, CKPT_DROP_EVENTS, CKPT_DETACH_CLIENTS = 0x10, 0x20, 0x40, 0x100
CKPT_COMPRESS = 0x200  # zstd page records (a libckpt built with zstd)
RESTART_FROZEN, RESTART_GHOST, RESTART_CONN_RESET = 0x2, 0x4, 0x10
RESTART_DETACH, RESTART_PIDNS, RESTART_SHELL_JOB = 0x20, 0x40, 0x80
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3
KEY_BYTES = 32


class Result(ctypes.Structure):
    """struct ckpt_result: what was saved or restored."""
    _fields_ = [("processes", ctypes.c_ulong), ("threads", ctypes.c_ulong),
                ("memory_bytes", ctypes.c_ulonglong), ("image_bytes", ctypes.c_ulonglong),
                ("warnings", ctypes.c_ulong), ("elapsed_us", ctypes.c_ulonglong),
                ("root", ctypes.c_int)]

    def __repr__(self):
        return ("Result(processes=%d, threads=%d, memory_bytes=%d, image_bytes=%d, "
                "warnings=%d, elapsed_us=%d, root=%d)" % tuple(
                    getattr(self, f) for f, _ in self._fields_))


_IMAGE_DONE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class _Opts(ctypes.Structure):
    """struct ckpt_opts, as this module knows it (size tells the library)."""
    _fields_ = [("size", ctypes.c_size_t), ("flags", ctypes.c_ulong), ("logfd", ctypes.c_int),
                ("log_level", ctypes.c_int), ("errbuf", ctypes.c_char_p),
                ("errbuf_len", ctypes.c_size_t), ("pidfile", ctypes.c_char_p),
                ("wait_status", ctypes.c_int), ("key", ctypes.c_void_p),
                ("key_len", ctypes.c_size_t), ("image_done", _IMAGE_DONE),
                ("image_done_arg", ctypes.c_void_p), ("result", Result)]


class Error(OSError):
    """A checkpoint, restart or inspect that failed: errno and the reason."""


def _library():
    path = os.environ.get("CKPT_LIBRARY") or ctypes.util.find_library("ckpt") or "libckpt.so.0"
    lib = ctypes.CDLL(path, use_errno=True)
    opts = ctypes.POINTER(_Opts)
    for name, args in (("ckpt_checkpoint_opts", [ctypes.c_int, ctypes.c_int, opts]),
                       ("ckpt_restart_opts", [ctypes.c_int, ctypes.c_int, opts])):
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_int
    lib.ckpt_inspect_key.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                     ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ckpt_inspect_summary.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                         ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ckpt_inspect_diff.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return lib


_lib = None


def _get():
    global _lib
    if _lib is None:
        _lib = _library()
    return _lib


def _fail(r, err, what):
    msg = err.value.decode(errors="replace") if err.value else os.strerror(-r)
    raise Error(-r, "%s: %s" % (what, msg))


def _key(key):
    if key is None:
        return None, 0
    if isinstance(key, str):
        with open(key, "rb") as f:
            key = f.read()
    if len(key) != KEY_BYTES:
        raise ValueError("a key is %d bytes" % KEY_BYTES)
    return key, len(key)


def _opts(flags, log, log_level, key):
    err = ctypes.create_string_buffer(1024)
    o = _Opts(size=ctypes.sizeof(_Opts), flags=flags, logfd=-1, log_level=log_level,
              errbuf=ctypes.cast(err, ctypes.c_char_p), errbuf_len=len(err))
    k, klen = _key(key)
    if k is not None:
        kbuf = ctypes.create_string_buffer(k, klen)
        o.key, o.key_len = ctypes.cast(kbuf, ctypes.c_void_p), klen
        o._keep_key = kbuf
    if log is not None:
        o.logfd = log if isinstance(log, int) else log.fileno()
    return o, err


def checkpoint(pid, image, kill=False, leave_frozen=False, flags=0, log=None,
               log_level=LOG_INFO, key=None):
    """Save the tree of pid to image (a path, made once the image is
    complete and fsync'd, or an fd open for writing). kill: kill the tree
    once the image is safe. flags: more CKPT_* flags (CKPT_SUBTREE is
    added: any process may be the root). Returns a Result."""
    flags |= CKPT_SUBTREE | (CKPT_KILL if kill else 0) | (CKPT_LEAVE_FROZEN if leave_frozen else 0)
    o, err = _opts(flags, log, log_level, key)
    if isinstance(image, int):
        r = _get().ckpt_checkpoint_opts(pid, image, ctypes.byref(o))
        if r < 0:
            _fail(r, err, "checkpoint of pid %d" % pid)
        return o.result
    tmp = "%s.tmp-%d" % (image, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)

    def done(arg, why, why_len):
        try:
            os.fsync(fd)
            os.rename(tmp, image)
            dfd = os.open(os.path.dirname(os.path.abspath(image)), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
            return 0
        except OSError as e:
            text = ("cannot name the image %s: %s" % (image, e.strerror)).encode()
            text = text[:max(why_len, 1) - 1] + b"\0"
            ctypes.memmove(why, text, len(text))
            return -(e.errno or 5)

    cb = _IMAGE_DONE(done)
    o.image_done = cb
    try:
        r = _get().ckpt_checkpoint_opts(pid, fd, ctypes.byref(o))
    finally:
        os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
    if r < 0:
        _fail(r, err, "checkpoint of pid %d" % pid)
    return o.result


def restart(image, detach=True, frozen=False, pidns=False, pidfile=None, flags=0, log=None,
            log_level=LOG_INFO, key=None):
    """Bring the tree of image (a path or an fd) back as a child of this
    process. detach: return once it runs (Result.root is its pid: wait for
    it with os.waitpid); else wait for it and return its wait status in
    Result.root's place (the tuple (result, status))."""
    flags |= (RESTART_DETACH if detach else 0) | (RESTART_FROZEN if frozen else 0) | \
        (RESTART_PIDNS if pidns else 0)
    o, err = _opts(flags, log, log_level, key)
    if pidfile is not None:
        o.pidfile = os.fsencode(pidfile)
    fd = image if isinstance(image, int) else os.open(image, os.O_RDONLY | os.O_CLOEXEC)
    try:
        r = _get().ckpt_restart_opts(0, fd, ctypes.byref(o))
    finally:
        if not isinstance(image, int):
            os.close(fd)
    if r < 0:
        _fail(r, err, "restart of %s" % image)
    return o.result if detach else (o.result, o.wait_status)


def _inspect(call, paths, *args):
    err = ctypes.create_string_buffer(512)
    fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in paths]
    rd, wr = os.pipe()
    out = []
    try:
        t = threading.Thread(target=lambda: out.append(_drain(rd)))
        t.start()
        try:
            r = call(*fds, wr, *args, err, len(err))
        finally:
            os.close(wr)
            t.join()
    finally:
        for fd in fds:
            os.close(fd)
        os.close(rd)
    if r < 0:
        _fail(r, err, "inspect of %s" % " and ".join(paths))
    return r, out[0].decode(errors="replace")


def _drain(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def inspect(image, records=False, json=False, key=None):
    """What image holds, as ckpt inspect prints it: the summary, or every
    record (records=True), or JSON (json=True: the text, to json.loads)."""
    k, klen = _key(key)
    if records or json:
        return _inspect(_get().ckpt_inspect_key, [image], int(json), k, klen)[1]
    return _inspect(_get().ckpt_inspect_summary, [image], k, klen)[1]


def inspect_diff(a, b, key=None):
    """Compare two images: (differ, text)."""
    k, klen = _key(key)
    r, text = _inspect(_get().ckpt_inspect_diff, [a, b], k, klen)
    return r == 1, text
