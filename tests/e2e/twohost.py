# SPDX-License-Identifier: LGPL-2.1-or-later
"""Two test "hosts" and a client, made of network namespaces, for the
migration tests of runner.py (mig2_*) and bench/migrate.py.

    A (source host)   eth0 10.214.0.1/24 \
    B (target host)   eth0 10.214.0.2/24  }- one bridge br0 in C, one L2 segment
    C (client)        br0  10.214.0.3/24 /

A and B forward IPv4. A container of `ckpt run --net --net-addr SUB` on
host A has its host end in A; C routes SUB through A. After a migration
the restart makes the host end in B (the namespace ckpt receive runs in)
and route() has C route SUB through B: C's connections to the container
go on through B (their packets only retransmitted meanwhile). hold()
gives A and B a blackhole route for SUB behind the host end's, so that
neither answers "unreachable" while the container is on neither.

Only the addresses above and the container's subnet exist, each inside
a namespace of the test; nothing of the machine's own network changes.
The namespaces are named ck<tag>a/b/c (ip netns, /run/netns) and removed
by destroy().
"""
import ctypes
import os
import shutil
import socket
import subprocess

SEGMENT = "10.214.0.%d"
ADDR = {"a": SEGMENT % 1, "b": SEGMENT % 2, "c": SEGMENT % 3}


class TopoError(Exception):
    pass


class TwoHost:
    def __init__(self, tag):
        self.ip = shutil.which("ip") or "/usr/sbin/ip"
        self.nsenter = shutil.which("nsenter") or "/usr/bin/nsenter"
        self.tag = tag
        self.ns = {h: "ck%s%s" % (tag, h) for h in "abc"}
        self.made = []
        self.routes = []

    def sh(self, *argv):
        r = subprocess.run([self.ip] + list(argv), capture_output=True, timeout=30)
        if r.returncode != 0:
            raise TopoError("ip %s: %s" % (" ".join(argv), r.stderr.decode().strip()))
        return r.stdout.decode()

    def addr(self, host):
        return ADDR[host]

    def argv(self, host, argv):
        """argv run in host's network namespace (nsenter: the mount
        namespace stays the caller's, unlike ip netns exec)."""
        return [self.nsenter, "--net=/run/netns/" + self.ns[host], "--"] + list(argv)

    def sysctl(self, host, name, value):
        r = subprocess.run(self.argv(host, ["sh", "-c", "echo %s > /proc/sys/%s"
                                            % (value, name.replace(".", "/"))]),
                           capture_output=True, timeout=30)
        if r.returncode != 0:
            raise TopoError("%s: %s=%s: %s" % (host, name, value, r.stderr.decode().strip()))

    def make(self):
        for h in "abc":
            self.sh("netns", "add", self.ns[h])
            self.made.append(h)
            self.sh("-n", self.ns[h], "link", "set", "lo", "up")
        c = self.ns["c"]
        self.sh("-n", c, "link", "add", "br0", "type", "bridge")
        self.sh("-n", c, "addr", "add", ADDR["c"] + "/24", "dev", "br0")
        self.sh("-n", c, "link", "set", "br0", "up")
        for h in "ab":
            port = "p" + h
            self.sh("-n", self.ns[h], "link", "add", "eth0", "type", "veth", "peer", "name",
                    port, "netns", c)
            self.sh("-n", c, "link", "set", port, "master", "br0", "up")
            self.sh("-n", self.ns[h], "addr", "add", ADDR[h] + "/24", "dev", "eth0")
            self.sh("-n", self.ns[h], "link", "set", "eth0", "up")
            self.sysctl(h, "net.ipv4.ip_forward", 1)
        return self

    def hold(self, subnet):
        """A and B drop what they would forward to subnet and have no route
        for (a blackhole route behind any other): while the container moves,
        neither answers C with "unreachable", which fails a connect()
        under way (established connections only retransmit)."""
        for h in "ab":
            self.sh("-n", self.ns[h], "route", "add", "blackhole", subnet, "metric", "4000")

    def route(self, subnet, via_host):
        """C routes subnet through via_host ("a" or "b")."""
        self.sh("-n", self.ns["c"], "route", "replace", subnet, "via", ADDR[via_host])

    def connect(self, host, addr, port, timeout=60.0):
        """A TCP socket of host's network namespace connected to addr:port,
        for a client kept by the caller (a socket stays in the namespace it
        was made in): the calling thread enters the namespace (setns) for
        the socket() call only."""
        libc = ctypes.CDLL(None, use_errno=True)
        clone_newnet = 0x40000000
        with open("/proc/thread-self/ns/net") as old, open("/run/netns/" + self.ns[host]) as new:
            if libc.setns(new.fileno(), clone_newnet) != 0:
                raise TopoError("setns into %s: %s" % (self.ns[host],
                                                       os.strerror(ctypes.get_errno())))
            try:
                s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET,
                                  socket.SOCK_STREAM)
            finally:
                if libc.setns(old.fileno(), clone_newnet) != 0:
                    raise TopoError("setns back: %s" % os.strerror(ctypes.get_errno()))
        try:
            s.settimeout(timeout)
            s.connect((addr, port))
        except OSError:
            s.close()
            raise
        return s

    def link_exists(self, host, name):
        r = subprocess.run([self.ip, "-n", self.ns[host], "link", "show", name],
                           capture_output=True, timeout=30)
        return r.returncode == 0

    def nft_tables(self, host):
        nft = shutil.which("nft") or "/usr/sbin/nft"
        if not os.access(nft, os.X_OK):
            return None
        r = subprocess.run(self.argv(host, [nft, "list", "tables"]), capture_output=True,
                           timeout=30)
        return [l.split()[-1] for l in r.stdout.decode().splitlines() if l.strip()]

    def destroy(self):
        for h in reversed(self.made):
            subprocess.run([self.ip, "netns", "del", self.ns[h]], capture_output=True,
                           timeout=30)
        self.made = []
