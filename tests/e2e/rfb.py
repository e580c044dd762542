# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small VNC (RFB 3.8, RFC 6143) client for the e2e runner's Xvnc tests:
security type None, 32-bit true colour, Raw encoding only. It keeps a copy
of the server's framebuffer and asks for updates of it. Python 3 standard
library only."""

import socket
import struct


class RfbError(Exception):
    pass


class Rfb:
    """One connection to a VNC server. fb holds width * height pixels of 4
    bytes (blue, green, red, unused), row by row."""

    def __init__(self, sock):
        self.s = sock
        self.width = self.height = 0
        self.name = b""
        self.fb = bytearray()
        self.updates = 0        # FramebufferUpdate messages read
        self.rects = []         # (x, y, w, h) of the last one

    @classmethod
    def unix(cls, path, timeout=20.0):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
        return cls(s).handshake()

    @classmethod
    def tcp(cls, host, port, timeout=20.0):
        s = socket.create_connection((host, port), timeout=timeout)
        return cls(s).handshake()

    def close(self):
        self.s.close()

    def recv(self, n):
        out = bytearray()
        while len(out) < n:
            b = self.s.recv(n - len(out))
            if not b:
                raise RfbError("the server closed the connection")
            out += b
        return bytes(out)

    def handshake(self):
        ver = self.recv(12)
        if not ver.startswith(b"RFB 003."):
            raise RfbError("not an RFB server: %r" % ver)
        self.s.sendall(b"RFB 003.008\n")
        n = self.recv(1)[0]
        if n == 0:
            why = self.recv(struct.unpack(">I", self.recv(4))[0])
            raise RfbError("the server refused: %r" % why)
        types = self.recv(n)
        if 1 not in types:
            raise RfbError("security type None not offered: %r" % list(types))
        self.s.sendall(b"\x01")
        if struct.unpack(">I", self.recv(4))[0] != 0:
            raise RfbError("security handshake failed")
        self.s.sendall(b"\x01")                # ClientInit: shared
        self.width, self.height = struct.unpack(">HH", self.recv(4))
        self.recv(16)                          # the server's pixel format
        self.name = self.recv(struct.unpack(">I", self.recv(4))[0])
        self.fb = bytearray(self.width * self.height * 4)
        # SetPixelFormat: 32 bpp, depth 24, little endian, true colour
        self.s.sendall(struct.pack(">B3xBBBBHHHBBB3x", 0, 32, 24, 0, 1, 255, 255, 255,
                                   16, 8, 0))
        self.set_encodings()
        return self

    def set_encodings(self):
        """SetEncodings: Raw only (a message the server does not answer)."""
        self.s.sendall(struct.pack(">BxHi", 2, 1, 0))

    def request(self, incremental=False):
        """FramebufferUpdateRequest for the whole screen."""
        self.s.sendall(struct.pack(">BBHHHH", 3, 1 if incremental else 0, 0, 0,
                                   self.width, self.height))

    def read_message(self):
        """Reads one server message; returns its type."""
        t = self.recv(1)[0]
        if t == 0:                             # FramebufferUpdate
            n = struct.unpack(">xH", self.recv(3))[0]
            self.rects = []
            for _ in range(n):
                x, y, w, h, enc = struct.unpack(">HHHHi", self.recv(12))
                if enc != 0:
                    raise RfbError("rectangle in encoding %d, asked for Raw only" % enc)
                data = self.recv(w * h * 4)
                self.rects.append((x, y, w, h))
                for row in range(h):
                    o = ((y + row) * self.width + x) * 4
                    self.fb[o:o + w * 4] = data[row * w * 4:(row + 1) * w * 4]
            self.updates += 1
        elif t == 1:                           # SetColourMapEntries
            n = struct.unpack(">xHH", self.recv(5))[1]
            self.recv(6 * n)
        elif t == 2:                           # Bell
            pass
        elif t == 3:                           # ServerCutText
            self.recv(struct.unpack(">3xI", self.recv(7))[0])
        else:
            raise RfbError("unknown server message type %d" % t)
        return t

    def update(self, incremental=False, ask=True):
        """Asks for an update (unless ask is false: one was asked for) and
        reads messages until it came."""
        if ask:
            self.request(incremental)
        while self.read_message() != 0:
            pass

    def region(self, x, y, w, h):
        """The pixels of a rectangle, row by row (clipped to the screen)."""
        x2, y2 = min(x + w, self.width), min(y + h, self.height)
        x, y = max(x, 0), max(y, 0)
        return b"".join(bytes(self.fb[(r * self.width + x) * 4:(r * self.width + x2) * 4])
                        for r in range(y, y2))
