#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Forged ckpt images, as someone who can write the file would make them:
records changed and the image re-framed with correct checksums and trailer.

    forge.py NAME IN.img OUT.img     one of FORGERIES below

Used by the e2e runner (flow 'forged') and to make the regression images of
tests/fuzz/regressions/ (replayed by fuzz-sem --replay in the unit suite).
"""
import struct
import sys

HDR = 140
HDR_CRC = 136
FRAME = struct.Struct("<IIQII")
PAD_MASK = 0xfff
TRAILER = 0xffff
INDEX = 0xfffe
INDEX_ENTRY = 96
INDEX_MAGIC = 0x31584449
FILE_REG = 0x0201
PIPE = 0x0c01
MQUEUE = 0x1b01
MQUEUE_FILE = 0x1b02
SYSV_SHM = 0x1602

_T = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
    _T.append(c)


def crc32c(data, crc=0):
    crc ^= 0xffffffff
    for b in data:
        crc = _T[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc ^ 0xffffffff


def parse(data):
    """(header bytes, [[type, flags, data, aligned, (data as read, its crc)]])"""
    pos, recs = HDR, []
    while pos < len(data):
        typ, flags, length, _, dcrc = FRAME.unpack_from(data, pos)
        pad = flags & PAD_MASK
        start = pos + FRAME.size + pad
        if typ == TRAILER:
            break
        body = data[start:pos + FRAME.size + length]
        # the frame's data checksum, kept for as long as the record holds
        # this very object (a forgery that changes it puts in another)
        recs.append([typ, flags & ~PAD_MASK, body, pad > 0, (body, dcrc)])
        pos += FRAME.size + length
    return bytearray(data[:HDR]), recs


def build(hdr, recs):
    hdr = bytearray(hdr)
    struct.pack_into("<I", hdr, HDR_CRC, crc32c(bytes(hdr[:HDR_CRC])))
    out = bytearray(hdr)
    total = 0
    entries = []  # (frame offset, frame bytes, data) of every record, for the index
    for rec in recs:
        typ, flags, data, aligned = rec[:4]
        if typ == INDEX:  # made again: the records may have moved
            data = reindex(data, entries)
        pad = (-(len(out) + FRAME.size)) & PAD_MASK if aligned else 0
        f = struct.pack("<IIQ", typ, flags | pad, pad + len(data))
        # a record's pages untouched: its checksum as read (crc32c in
        # python takes seconds for a few MiB)
        dcrc = rec[4][1] if len(rec) > 4 and rec[4][0] is data else crc32c(data)
        entries.append((len(out), f + struct.pack("<II", crc32c(f), dcrc), data))
        out += f + struct.pack("<II", crc32c(f), dcrc) + bytes(pad) + data
        total += len(data)
    t = struct.pack("<QQII", len(recs), total, 0x444e4521, 0)
    f = struct.pack("<IIQ", TRAILER, 0, len(t))
    out += f + struct.pack("<II", crc32c(f), crc32c(t)) + t
    return bytes(out)


def reindex(old, entries):
    """The index (img.h, IMG_REC_INDEX) of the records before it, of the
    type its foot names: each one's frame offset, length, flags, data crc
    and last 64 bytes."""
    typ = struct.unpack_from("<I", old, len(old) - 16)[0]
    out = bytearray()
    for at, f, data in entries:
        t, flags, length, _, dcrc = FRAME.unpack(f)
        if t != typ:
            continue
        k = min(64, len(data))
        out += struct.pack("<QQIIII", at, length, flags, dcrc, k, 0)
        out += data[len(data) - k:] + bytes(64 - k)
    n = len(out) // INDEX_ENTRY
    return bytes(out + struct.pack("<IIQ", typ, INDEX_MAGIC, n))


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def read_varint(data, pos):
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def set_field(msg, field, value):
    """The message with its first varint (int) or length-delimited (bytes)
    field number 'field' set to value."""
    pos, out = 0, bytearray()
    done = False
    while pos < len(msg):
        key, p = read_varint(msg, pos)
        wire = key & 7
        if wire == 0:
            _, end = read_varint(msg, p)
        elif wire == 2:
            n, q = read_varint(msg, p)
            end = q + n
        elif wire == 1:
            end = p + 8
        elif wire == 5:
            end = p + 4
        else:
            raise ValueError("wire type %d" % wire)
        if key >> 3 == field and not done:
            done = True
            if isinstance(value, int):
                out += varint(key) + varint(value)
            else:
                out += varint(key) + varint(len(value)) + value
        else:
            out += msg[pos:end]
        pos = end
    if not done:
        raise ValueError("no field %d" % field)
    return bytes(out)


def first(recs, typ):
    for i, r in enumerate(recs):
        if r[0] == typ:
            return i
    raise ValueError("no record of type %#x" % typ)


def f_id_huge(hdr, recs):
    """the first file object's id near 2^32 (and its users'): restart spun ~10 min"""
    i = first(recs, FILE_REG)
    recs[i][2] = set_field(recs[i][2], 1, 0xfffffffe)


def f_file_twice(hdr, recs):
    """a file object defined twice: a use-after-free in file_reg_load"""
    i = first(recs, FILE_REG)
    recs.insert(i + 1, list(recs[i]))


def f_pipe_bad(hdr, recs):
    """a pipe with more data than its size: leaked the decoded record"""
    i = first(recs, PIPE)
    recs[i][2] = set_field(recs[i][2], 2, 1 << 31)   # size above 1 GiB


def get_varint(msg, field):
    """The value of the first varint field 'field' of msg, None if none."""
    pos = 0
    while pos < len(msg):
        key, p = read_varint(msg, pos)
        if key & 7 == 0:
            v, end = read_varint(msg, p)
            if key >> 3 == field:
                return v
        elif key & 7 == 2:
            n, q = read_varint(msg, p)
            end = q + n
        else:
            end = p + (8 if key & 7 == 1 else 4)
        pos = end
    return None


def f_mqueue_id_huge(hdr, recs):
    """a message queue's id near 2^32 (and its open files'): restart's name check walked every id below it (20 s)"""
    q = [r for r in recs if r[0] == MQUEUE and not get_varint(r[2], 3)][0]  # not deleted
    qid = get_varint(q[2], 1)
    q[2] = set_field(q[2], 1, 0xfffffffe)
    for r in recs:
        if r[0] == MQUEUE_FILE and get_varint(r[2], 2) == qid:
            r[2] = set_field(r[2], 2, 0xfffffffe)


def get_field(msg, field):
    """The bytes of the first length-delimited field 'field' of msg."""
    pos = 0
    while pos < len(msg):
        key, p = read_varint(msg, pos)
        if key & 7 == 0:
            _, end = read_varint(msg, p)
        elif key & 7 == 2:
            n, q = read_varint(msg, p)
            if key >> 3 == field:
                return msg[q:q + n]
            end = q + n
        else:
            end = p + (8 if key & 7 == 1 else 4)
        pos = end
    raise ValueError("no field %d" % field)


def f_shm_huge_1g(hdr, recs):
    """a hugetlb SysV segment of 1 GiB pages: refused at load where the machine has none"""
    i = [i for i, r in enumerate(recs) if r[0] == SYSV_SHM and get_varint(r[2], 310)][0]
    recs[i][2] = set_field(recs[i][2], 310, 1 << 30)


def f_tree_bad_pid(hdr, recs):
    """the tree's first task with pid 0: free_ctx() closed fd 0 of ckpt"""
    i = first(recs, 0x0001)
    task = set_field(get_field(recs[i][2], 1), 1, 0)
    recs[i][2] = set_field(recs[i][2], 1, task)


NS = 0x2101


def f_ns_subtree(hdr, recs):
    """namespaces for a root that is no pid namespace's init: a subtree restored as a container"""
    i = first(recs, 0x0002)
    ns = b"\x08" + varint(0x20000000)   # NamespacesEntry.flags = CLONE_NEWPID
    recs.insert(i + 1, [NS, 0, ns, False])


def f_ns_twice(hdr, recs):
    """a second namespaces record of the root"""
    i = first(recs, NS)
    recs.insert(i + 1, list(recs[i]))


def f_rec_flags(hdr, recs):
    """a record with flags ckpt never writes: were ignored"""
    recs[0][1] = 0x1000


def f_hdr_flags(hdr, recs):
    struct.pack_into("<I", hdr, 36, 0x80)


def f_hdr_reserved(hdr, recs):
    hdr[HDR_CRC - 5] = 1


def f_hdr_xfeatures(hdr, recs):
    x = struct.unpack_from("<Q", hdr, 24)[0]
    struct.pack_into("<Q", hdr, 24, x | (1 << 62))


def f_hdr_xsave(hdr, recs):
    x = struct.unpack_from("<I", hdr, 32)[0]
    struct.pack_into("<I", hdr, 32, x + 64)


def f_hdr_release(hdr, recs):
    """an escape sequence in the kernel release: only a warning, escaped"""
    rel = b"6.0\x1b[2J\x1b]0;owned\x07"
    hdr[48:48 + 65] = rel + bytes(65 - len(rel))


def f_path_escape(hdr, recs):
    """an escape sequence in a file path: the error names it escaped"""
    i = first(recs, FILE_REG)
    recs[i][2] = set_field(recs[i][2], 2, b"/nonexistent/\x1b[2J\x1b]0;owned\x07")


TASK = 0x0101


def f_mbind_node(hdr, recs):
    """a vma's memory policy bound to NUMA node 63: refused at load where the machine has no such node"""
    i = [i for i, r in enumerate(recs) if r[0] == TASK and has_field(r[2], 25)][0]
    pol = set_field(get_field(recs[i][2], 25), 4, bytes(7) + b"\x80" + bytes(120))
    recs[i][2] = set_field(recs[i][2], 25, pol)


def has_field(msg, field):
    try:
        get_field(msg, field)
        return True
    except ValueError:
        return False


FORGERIES = {
    "mbind_node": f_mbind_node,
    "ns_subtree": f_ns_subtree, "ns_twice": f_ns_twice,
    "id_huge": f_id_huge, "file_twice": f_file_twice, "pipe_bad": f_pipe_bad,
    "hdr_flags": f_hdr_flags, "hdr_reserved": f_hdr_reserved,
    "hdr_xfeatures": f_hdr_xfeatures, "hdr_xsave": f_hdr_xsave,
    "hdr_release": f_hdr_release, "path_escape": f_path_escape,
    "tree_bad_pid": f_tree_bad_pid, "rec_flags": f_rec_flags,
    "mqueue_id_huge": f_mqueue_id_huge, "shm_huge_1g": f_shm_huge_1g,
}


def forge(name, data):
    hdr, recs = parse(data)
    FORGERIES[name](hdr, recs)
    return build(hdr, recs)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in FORGERIES:
        sys.exit("usage: forge.py {%s} IN OUT" % ",".join(FORGERIES))
    with open(sys.argv[2], "rb") as f:
        data = f.read()
    with open(sys.argv[3], "wb") as f:
        f.write(forge(sys.argv[1], data))
