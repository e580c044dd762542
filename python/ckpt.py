# SPDX-License-Identifier: LGPL-2.1-or-later
"""ckpt from Python: checkpoint and restart Linux process trees.

A thin ctypes layer over libckpt (ckpt.h); nothing but the standard library.

    import ckpt
    res = ckpt.checkpoint(pid, "app.ckpt", kill=True)   # a Result
    print(res.summary())                                # "checkpointed 1 process ..."
    res = ckpt.restart("app.ckpt", detach=True)         # res.root: the pid
    res.as_dict()                                       # the fields, summary included
    ckpt.checkpoint(pid, "app.ckpt", progress=lambda p: print(p.done, p.total))
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

__all__ = ["Error", "Result", "checkpoint", "restart", "inspect", "inspect_diff", "unlock",
           "CKPT_SUBTREE", "CKPT_KILL", "CKPT_LEAVE_FROZEN", "CKPT_SHELL_JOB",
           "CKPT_EXT_UNIX", "CKPT_VERIFY", "CKPT_DROP_EVENTS", "CKPT_DETACH_CLIENTS",
           "CKPT_COMPRESS", "CKPT_TRACK", "CKPT_SKIP_IN_FLIGHT", "RESTART_LAZY",
           "RESTART_FROZEN", "RESTART_GHOST", "RESTART_CONN_RESET", "RESTART_DETACH",
           "RESTART_PIDNS", "RESTART_SHELL_JOB", "RESTART_FORWARD_SIGNALS", "LOG_ERROR", "LOG_WARN", "LOG_INFO",
           "LOG_DEBUG", "Progress", "PHASE_CHECKPOINT", "PHASE_RESTART", "PHASE_END"]

# the flags of ckpt.h
CKPT_SUBTREE, CKPT_KILL, CKPT_LEAVE_FROZEN, CKPT_SHELL_JOB = 0x1, 0x2, 0x4, 0x8
CKPT_EXT_UNIX, CKPT_VERIFY, CKPT_DROP_EVENTS, CKPT_DETACH_CLIENTS = 0x10, 0x20, 0x40, 0x100
CKPT_COMPRESS = 0x200  # zstd page records (a libckpt built with zstd)
CKPT_TRACK = 0x400  # dirty tracking left in the tree, for a later checkpoint's parent
CKPT_SKIP_IN_FLIGHT = 0x800  # connections not accepted yet left out
RESTART_FROZEN, RESTART_GHOST, RESTART_CONN_RESET = 0x2, 0x4, 0x10
RESTART_DETACH, RESTART_PIDNS, RESTART_SHELL_JOB = 0x20, 0x40, 0x80
RESTART_LAZY = 0x200  # memory filled on first touch by a server (root)
RESTART_FORWARD_SIGNALS = 0x4000  # without RESTART_DETACH: signals passed on to the root
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3
PHASE_CHECKPOINT, PHASE_RESTART, PHASE_END = 1, 2, 3
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

    def summary(self):
        """The line ckpt prints on success, without "ckpt: "."""
        verb = getattr(self, "command", "checkpoint")
        image = getattr(self, "image", "-")
        n, t = self.processes, self.threads
        what = "%d process%s (%d thread%s), %s of memory" % (
            n, "" if n == 1 else "es", t, "" if t == 1 else "s", _human(self.memory_bytes))
        warn = ""
        if self.warnings:
            warn = " (%d warning%s, see the log)" % (self.warnings,
                                                     "s" if self.warnings > 1 else "")
        secs = self.elapsed_us / 1e6
        if verb == "checkpoint":
            return "checkpointed %s, image %s %s, in %.2f s%s" % (
                what, image, _human(self.image_bytes), secs, warn)
        return "restarted %s, from %s %s, as pid %d, in %.2f s%s" % (
            what, image, _human(self.image_bytes), self.root, secs, warn)

    def as_dict(self):
        """The fields as a dict, with "command", "image", "seconds" and the
        "summary" line (the keys of ckpt --json where they are the same)."""
        d = {f: getattr(self, f) for f, _ in self._fields_}
        d["pid"] = d["root"]
        d["command"] = getattr(self, "command", None)
        d["image"] = getattr(self, "image", None)
        d["seconds"] = self.elapsed_us / 1e6
        d["summary"] = self.summary()
        return d


def _human(n):
    """util/units.h's human_size: bytes, KiB, MiB, GiB with one decimal."""
    if n < 1024:
        return "%d bytes" % n
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if n < 1024 or unit == "TiB":
            return "%.1f %s" % (n, unit)


class Progress(ctypes.Structure):
    """struct ckpt_progress: what a progress callback is given. phase is
    PHASE_CHECKPOINT, PHASE_RESTART or PHASE_END (once, last); done and
    total count bytes (total 0: unknown)."""
    _fields_ = [("phase", ctypes.c_int), ("done", ctypes.c_ulonglong),
                ("total", ctypes.c_ulonglong), ("elapsed_us", ctypes.c_ulonglong)]


class _InheritFd(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int), ("local", ctypes.c_int)]


_IMAGE_DONE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Progress))


class _Opts(ctypes.Structure):
    """struct ckpt_opts, as this module knows it (size tells the library)."""
    _fields_ = [("size", ctypes.c_size_t), ("flags", ctypes.c_ulong), ("logfd", ctypes.c_int),
                ("log_level", ctypes.c_int), ("errbuf", ctypes.c_char_p),
                ("errbuf_len", ctypes.c_size_t), ("pidfile", ctypes.c_char_p),
                ("wait_status", ctypes.c_int), ("key", ctypes.c_void_p),
                ("key_len", ctypes.c_size_t), ("image_done", _IMAGE_DONE),
                ("image_done_arg", ctypes.c_void_p), ("result", Result),
                ("progress", _PROGRESS), ("progress_arg", ctypes.c_void_p),
                ("progress_interval_ms", ctypes.c_uint), ("committed", ctypes.c_void_p),
                ("external_fds", ctypes.POINTER(ctypes.c_int)),
                ("n_external_fds", ctypes.c_size_t),
                ("inherit_fds", ctypes.POINTER(_InheritFd)), ("n_inherit_fds", ctypes.c_size_t)]


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
    lib.ckpt_unlock.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
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


def _opts(flags, log, log_level, key, progress=None, progress_interval_ms=0):
    err = ctypes.create_string_buffer(1024)
    o = _Opts(size=ctypes.sizeof(_Opts), flags=flags, logfd=-1, log_level=log_level,
              errbuf=ctypes.cast(err, ctypes.c_char_p), errbuf_len=len(err))
    if progress is not None:
        # called from a thread of the library; an exception there is printed
        # by ctypes and ignored: the checkpoint or restart goes on
        def call(arg, p):
            c = p.contents
            progress(Progress(c.phase, c.done, c.total, c.elapsed_us))
        o._keep_progress = _PROGRESS(call)
        o.progress = o._keep_progress
        o.progress_interval_ms = progress_interval_ms
    k, klen = _key(key)
    if k is not None:
        kbuf = ctypes.create_string_buffer(k, klen)
        o.key, o.key_len = ctypes.cast(kbuf, ctypes.c_void_p), klen
        o._keep_key = kbuf
    if log is not None:
        o.logfd = log if isinstance(log, int) else log.fileno()
    return o, err


def _result(o, command, image):
    res = o.result
    res.command, res.image = command, image if isinstance(image, str) else "fd %d" % image
    return res


def checkpoint(pid, image, kill=False, leave_frozen=False, flags=0, log=None,
               log_level=LOG_INFO, key=None, progress=None, progress_interval_ms=0,
               external_fds=()):
    """Save the tree of pid to image (a path, made once the image is
    complete and fsync'd, or an fd open for writing). kill: kill the tree
    once the image is safe. flags: more CKPT_* flags (CKPT_SUBTREE is
    added: any process may be the root). progress: called with a Progress
    at most every progress_interval_ms (0: 100) while the image is written,
    from a thread of the library; it must not call ckpt. external_fds: the
    root's fds held outside the tree, saved as external (restart needs
    inherit_fds for them). Returns a Result (as_dict(), summary())."""
    flags |= CKPT_SUBTREE | (CKPT_KILL if kill else 0) | (CKPT_LEAVE_FROZEN if leave_frozen else 0)
    o, err = _opts(flags, log, log_level, key, progress, progress_interval_ms)
    if external_fds:
        o._keep_ext = (ctypes.c_int * len(external_fds))(*external_fds)
        o.external_fds = o._keep_ext
        o.n_external_fds = len(external_fds)
    if isinstance(image, int):
        r = _get().ckpt_checkpoint_opts(pid, image, ctypes.byref(o))
        if r < 0:
            _fail(r, err, "checkpoint of pid %d" % pid)
        return _result(o, "checkpoint", image)
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
    return _result(o, "checkpoint", image)


def restart(image, detach=True, frozen=False, pidns=False, pidfile=None, flags=0, log=None,
            log_level=LOG_INFO, key=None, progress=None, progress_interval_ms=0,
            inherit_fds=None, forward_signals=False):
    """Bring the tree of image (a path or an fd) back as a child of this
    process. detach: return once it runs (Result.root is its pid: wait for
    it with os.waitpid); else wait for it and return its wait status in
    Result.root's place (the tuple (result, status)). progress: as for
    checkpoint, while memory is filled. inherit_fds: {N: fd}, this
    process's fd for each external fd N of the image. forward_signals
    (without detach): while it waits, SIGHUP, SIGINT, SIGQUIT, SIGTERM,
    SIGUSR1 and SIGUSR2 sent to this process go to the restored root, as
    `ckpt restart` does (they are blocked in the calling thread meanwhile;
    another thread of this process that does not block them takes them
    itself)."""
    if forward_signals and detach:
        raise ValueError("forward_signals: only while restart() waits (detach=False)")
    flags |= (RESTART_DETACH if detach else 0) | (RESTART_FROZEN if frozen else 0) | \
        (RESTART_PIDNS if pidns else 0) | (RESTART_FORWARD_SIGNALS if forward_signals else 0)
    o, err = _opts(flags, log, log_level, key, progress, progress_interval_ms)
    if inherit_fds:
        pairs = sorted(inherit_fds.items())
        o._keep_inh = (_InheritFd * len(pairs))(*[_InheritFd(n, fd) for n, fd in pairs])
        o.inherit_fds = o._keep_inh
        o.n_inherit_fds = len(pairs)
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
    res = _result(o, "restart", image)
    return res if detach else (res, o.wait_status)


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


def unlock(image, key=None):
    """Remove the network lock that checkpoint --kill of image left on this
    host (for an image restarted on another one): (name, removed), name
    None when the image names no lock, removed False when it was gone."""
    k, klen = _key(key)
    name = ctypes.create_string_buffer(64)
    err = ctypes.create_string_buffer(512)
    fd = os.open(image, os.O_RDONLY | os.O_CLOEXEC)
    try:
        r = _get().ckpt_unlock(fd, k, klen, name, len(name), err, len(err))
    finally:
        os.close(fd)
    if r < 0:
        _fail(r, err, "unlock of %s" % image)
    return (name.value.decode() or None), r == 1
