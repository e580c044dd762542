/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The page store: contents of memory (a task's pages, a memfd's data, a
 * SysV segment's pages) as records of the image, and back. Every kind that
 * saves memory goes through it, so that what is done to pages on their way
 * (zero-page dropping today; zero-copy, parallel streams, compression,
 * incremental parents and lazy restart later) is written once, here.
 *
 * An owner is whatever the pages belong to (an address space, a file); an
 * offset is a position in the owner's space (an address, a file offset).
 * An extent is { off, len } in bytes.
 *
 * Checkpoint ("extents in, records out"):
 *
 *	struct pages_writer pw;
 *	pages_writer_init(&pw, &w, TYPE, tag, buf, bufsize, my_read, arg);
 *	pages_add(&pw, off, len) ...    extents, in ascending order
 *	pages_flush(&pw)                 at the end (or where the way the
 *	                                 caller reads changes)
 *	pages_writer_release(&pw)
 *
 *   Extents are queued in buf; adjacent ones are merged; a record is
 *   written when buf is full, when PAGES_MAX_QUEUED extents wait, or on
 *   pages_flush(). To write, the store asks read(arg, x, n, dst) to put the
 *   bytes of the n queued extents in dst, back to back (a source that has
 *   fewer bytes than asked fills the rest with zeros), drops every block of
 *   PAGES_BLOCK bytes (at offsets that are multiples of it, cut by the
 *   extent's ends) that is all zero, and writes what is left.
 *
 * Record (type chosen by the caller; written with img_write_aligned(), so
 * its data starts page-aligned in the stream), little-endian:
 *
 *	the bytes of x[0], x[1], ... back to back
 *	zeros up to the next multiple of 8
 *	struct pages_extent x[n];        ascending, not overlapping, len > 0
 *	struct pages_head head;          magic, n, the caller's tag: the last
 *	                                 16 bytes of the record
 *
 *   The bytes come first, so a run of whole pages in the owner's space
 *   starts page-aligned in the image (mmap, O_DIRECT, zero-copy) with no
 *   padding but the frame's; the table is found from the record's end.
 *
 * Compressed record (a writer given a compressor, pages_writer_compress(),
 * with a build that has zstd): the same, but the bytes are one zstd frame
 * that holds them, and the head's magic is PAGES_MAGIC_ZSTD:
 *
 *	one zstd frame of zlen bytes     its content size: the sum of x[].len
 *	zeros up to the next multiple of 8
 *	struct pages_extent x[n];
 *	uint64_t zlen;
 *	struct pages_head head;          magic PAGES_MAGIC_ZSTD
 *
 *   The writer compresses each record's bytes (after the zero blocks are
 *   dropped) at a fast level and keeps the frame only if it saves at least
 *   an eighth; otherwise the record is written plain. Random or already
 *   compressed memory thus costs one fast failed attempt and no space;
 *   zstd itself stores the incompressible blocks of a frame raw. The
 *   reader bounds every size before use: the frame must be exactly zlen
 *   bytes, declare its content size, and that size must be the extents'
 *   sum, at most PAGES_MAX_RAW. Chunks stay compressed in the set;
 *   pages_set_apply() decompresses each one in the worker that takes it,
 *   in pieces of 256 KiB handed to put() one by one (a piece is a chunk of
 *   its own: at most 64 extents, the first and last cut), so the workers
 *   decompress in parallel, put() reads from the cache, and no chunk is
 *   ever held decompressed whole. A build without zstd refuses such a
 *   record with -EPROTONOSUPPORT.
 *
 * Restart ("a reader that hands pages to a callback"):
 *
 *	pages_parse(&rec, &chunk)        checks the record on its own; the
 *	                                 chunk points into the record
 *	pages_set_add(&set, &chunk, lo, hi)  the chunk becomes part of an
 *	                                 owner's set: every extent inside
 *	                                 [lo, hi), after every extent of the
 *	                                 chunks added before
 *	pages_set_apply(&set, workers, put, arg, &fail)  hands every chunk to
 *	                                 put(), from up to `workers` threads
 *	pages_chunk_each(&chunk, fn, arg)    one call of fn per extent
 *	pages_set_release(&set)
 *
 *   Since the extents of a set never overlap, chunks can be written in any
 *   order and by several threads at once. A damaged or forged record is
 *   refused with -EINVAL by pages_parse() or pages_set_add(); nothing is
 *   ever read outside the record, and no extent outside [lo, hi) reaches
 *   put().
 *
 * Nothing here logs; errors are -errno. The writer's read errors come back
 * as they were returned by read() (pw.read_failed tells them from write
 * errors, so that the caller logs each once).
 */
#ifndef CKPT_PAGES_H
#define CKPT_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "img/img.h"

#define PAGES_MAGIC 0x31534750u /* "PGS1" */
#define PAGES_MAGIC_ZSTD 0x315a4750u /* "PGZ1": the bytes are a zstd frame */
#define PAGES_MAX_RAW (64ull << 20) /* bytes a compressed record may hold */
#define PAGES_BLOCK 4096u       /* the unit of zero dropping */
#define PAGES_MAX_QUEUED 4096u  /* extents queued before a record is written */
#define PAGES_MAX_EXTENTS (1u << 20) /* in one record; more is refused */

struct pages_head {
	uint32_t magic;
	uint32_t n;             /* extents that follow */
	uint64_t tag;           /* the caller's: which owner (a memfd's objref...) */
} __attribute__((packed));

struct pages_extent {
	uint64_t off;
	uint64_t len;
};

/* --- checkpoint -------------------------------------------------------- */

/*
 * A compressor shared by the writers of one checkpoint, used by one writer
 * at a time; NULL: none. It holds up to PAGES_Z_LANES lanes (zstd
 * contexts and an output buffer each), so that a writer's threads
 * compress that many records side by side (pages_writer_async): each
 * record is a frame of its own, so the frames are the same whichever
 * thread made them. pages_z_new() returns -EPROTONOSUPPORT in a build
 * without zstd. The counts say what went through it.
 */
#define PAGES_Z_LANES 2
struct pages_z;
struct pages_async;
struct pages_z_stats {
	uint64_t raw;           /* page bytes given to writers that had it */
	uint64_t stored;        /* what they took in the image (frames or plain) */
	uint64_t records, compressed; /* records written, of which compressed */
};
/* level: zstd's (1 is fast); threads: records compressed at once (lanes,
 * at least 1, at most PAGES_Z_LANES); bufsize: the largest record. */
int pages_z_new(struct pages_z **ret, int level, unsigned threads, size_t bufsize)
	__attribute__((warn_unused_result));
void pages_z_free(struct pages_z *z);
void pages_z_stats(const struct pages_z *z, struct pages_z_stats *ret);
/* Does this build read and write compressed records? */
bool pages_have_zstd(void);

/* Puts the bytes of x[0..n) in dst, back to back; 0 or -errno. */
typedef int (*pages_read_fn)(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst);

struct pages_writer {
	struct img_writer *w;
	uint32_t type;
	uint64_t tag;
	uint8_t *buf;           /* the caller's, bufsize bytes */
	size_t bufsize;
	pages_read_fn read;
	void *arg;
	struct pages_extent *q; /* queued extents, PAGES_MAX_QUEUED */
	size_t nq;
	uint64_t queued;        /* their bytes */
	struct pages_extent *out; /* the extents of the record being written */
	size_t out_cap;
	uint64_t end;           /* the end of the last extent added */
	struct pages_z *z;      /* NULL, or the compressor (not owned) */
	struct pages_async *async; /* NULL, or the writer thread (pages_writer_async) */
	/* results */
	uint64_t bytes;         /* page bytes written so far (zero blocks dropped) */
	uint64_t records;
	bool read_failed;       /* the last error came from read() */
};

/* buf must hold at least one PAGES_BLOCK; tag goes into every record. */
int pages_writer_init(struct pages_writer *pw, struct img_writer *w, uint32_t type, uint64_t tag,
		      void *buf, size_t bufsize, pages_read_fn read, void *arg)
	__attribute__((warn_unused_result));
/* From now on, records are compressed by z where it pays (NULL: none);
 * -EINVAL if z's buffer is smaller than the writer's, or after
 * pages_writer_async. */
int pages_writer_compress(struct pages_writer *pw, struct pages_z *z)
	__attribute__((warn_unused_result));
/*
 * From now on, records may be written by threads of the writer's own
 * while the caller's thread reads the next one into buf2 (bufsize bytes,
 * the caller's; the two buffers take turns): reading and writing
 * overlap, the copy in and the copy out on two cores. With a compressor
 * (pages_writer_compress first), a thread for each of its lanes, up to
 * two: each compresses a record whole on its own lane, and the records
 * are written in the order they were read. The threads are started at
 * the first record written because the buffer was full (a writer that
 * only ever writes one small record never starts them). The crc of a
 * plain record is computed by the caller's thread as it reads
 * (img_write_aligned_crc), that of a frame by the thread that made it.
 * While a record is in flight the threads own the image writer and the
 * compressor: the caller must call pages_sync() before it writes
 * anything else to the image. A write error comes back from the next
 * pages_add/pages_flush/pages_sync (read_failed false).
 */
int pages_writer_async(struct pages_writer *pw, void *buf2) __attribute__((warn_unused_result));
/* Waits until every record handed to the thread is written; its error, or 0. */
int pages_sync(struct pages_writer *pw) __attribute__((warn_unused_result));
/* Queues [off, off + len); -EINVAL if it starts before the end of the last
 * one, or wraps. May write records. */
int pages_add(struct pages_writer *pw, uint64_t off, uint64_t len)
	__attribute__((warn_unused_result));
/* Writes what is queued (nothing if it is all zero). */
int pages_flush(struct pages_writer *pw) __attribute__((warn_unused_result));
/* A new owner: the tag of the records from now on (flushes first). */
int pages_retag(struct pages_writer *pw, uint64_t tag) __attribute__((warn_unused_result));
/* Frees what init allocated (not buf); does not flush; waits for the
 * record in flight and stops the thread. NULL-safe. */
void pages_writer_release(struct pages_writer *pw);

/* --- restart ----------------------------------------------------------- */

/*
 * A record whose data checksum the reader left to its user (an eager
 * restart's page records: img_reader.crc_later): pages_set_apply() checks
 * it in the worker that takes the first of its chunks, just before their
 * bytes are used, so that the image is read once. Shared by the pieces of
 * a record; state is atomic.
 */
struct pages_check {
	const uint8_t *data;    /* the record's data, len bytes, crc its crc32c */
	uint64_t len;
	uint32_t crc;
	uint32_t index;         /* the record's, for the caller's message */
	uint64_t offset;
	int state;              /* 0 not checked, 1 good, -EBADMSG damaged */
};

/* Checks k once (later calls return the first answer): 0 or -EBADMSG. */
int pages_check_run(struct pages_check *k) __attribute__((warn_unused_result));

/* One record's pages; x and data point into the record. */
struct pages_chunk {
	uint64_t tag;
	uint32_t n;
	const struct pages_extent *x;
	const uint8_t *data;    /* bytes of x[0], x[1], ...; NULL while compressed */
	uint64_t bytes;
	const uint8_t *z;       /* compressed: the zstd frame, zlen bytes; else NULL */
	uint64_t zlen;
	struct pages_check *check; /* checked before use, or NULL (already checked) */
};

/* Checks a page store record on its own (magic, sizes, order of its
 * extents) and describes it in *ret; -EINVAL if damaged, -EPROTONOSUPPORT
 * if compressed and this build has no zstd. */
int pages_parse(const struct img_record *rec, struct pages_chunk *ret)
	__attribute__((warn_unused_result));

/* The same, the table read from tail: a copy of the record's last tail_len
 * bytes (8-aligned), which the chunk's extents then point into. A reader
 * that does not touch the record's bytes (a sparse image reader: lazy
 * restart) reads the 16 bytes of its head, asks pages_table_len() how many
 * bytes the table takes, and reads those. A compressed record's frame is
 * still checked in place (rec->data). */
int pages_table_len(const struct img_record *rec, const void *last16, uint64_t *ret)
	__attribute__((warn_unused_result));
int pages_parse_tail(const struct img_record *rec, const uint8_t *tail, uint64_t tail_len,
		     struct pages_chunk *ret) __attribute__((warn_unused_result));

/* The chunks of one owner, in the order of their offsets. */
struct pages_set {
	struct pages_chunk *c;
	size_t n, cap;
	uint64_t bytes;         /* of all chunks */
	uint64_t end;           /* end of the last extent */
};

/* Adds c to s: -EINVAL unless each extent lies inside [lo, hi) and after
 * the extents already in s. */
int pages_set_add(struct pages_set *s, const struct pages_chunk *c, uint64_t lo, uint64_t hi)
	__attribute__((warn_unused_result));
void pages_set_release(struct pages_set *s);
/* Has s a byte in [lo, hi)? */
bool pages_set_has(const struct pages_set *s, uint64_t lo, uint64_t hi);
/* Has s every byte of [lo, hi)? */
bool pages_set_covers(const struct pages_set *s, uint64_t lo, uint64_t hi);

/* What an error of pages_parse() or pages_set_apply() means, for a caller's message. */
const char *pages_strerror(int err);
/* Decompresses c (if compressed) into *buf (grown as needed, *cap bytes;
 * the caller frees it) and makes *ret its plain copy; a plain chunk is
 * copied as is. -EINVAL if the frame does not decompress to exactly
 * c->bytes, -ENOMEM, -EPROTONOSUPPORT without zstd. */
int pages_chunk_plain(const struct pages_chunk *c, uint8_t **buf, size_t *cap,
		      struct pages_chunk *ret) __attribute__((warn_unused_result));

/* Writes one chunk (plain: data is set); on failure sets *ret_off to where, returns -errno. */
typedef int (*pages_put_fn)(void *arg, const struct pages_chunk *c, uint64_t *ret_off);
/* Hands every chunk of s to put, from up to `workers` threads (the caller's
 * included; 0 or 1: the caller alone); a compressed one as it is
 * decompressed, piece by piece (-EBADMSG if its frame is damaged: put may
 * have had its first pieces). Stops at the first
 * failure, which it returns, with its offset in *ret_off. */
int pages_set_apply(const struct pages_set *s, unsigned workers, pages_put_fn put, void *arg,
		    uint64_t *ret_off) __attribute__((warn_unused_result));

/* Calls fn for each extent of c with its bytes; stops at the first error;
 * -EINVAL on a chunk still compressed. */
typedef int (*pages_extent_fn)(void *arg, uint64_t off, const uint8_t *src, uint64_t len);
int pages_chunk_each(const struct pages_chunk *c, pages_extent_fn fn, void *arg)
	__attribute__((warn_unused_result));

#endif
