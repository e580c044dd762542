/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The image container: one stream of framed, checksummed records.
 *
 *   header   struct img_header, fixed size, little-endian, own crc
 *   records  { struct img_frame; pad; data } ...
 *   index    (optional) a record of type IMG_REC_INDEX: where the records of
 *            one type are and how they end (img_writer_index)
 *   trailer  a record of type IMG_REC_TRAILER carrying struct img_trailer
 *
 * Invariants:
 * - Every frame carries the crc32c of its 16 leading bytes (hdr_crc) and of
 *   its data (data_crc), so a flipped bit anywhere is found and named.
 * - A record written with img_write_aligned() has its data start at an
 *   offset that is a multiple of the page size from the start of the
 *   stream; the pad length is frame.flags & IMG_FLAG_PAD_MASK, the pad is
 *   part of frame.length but not of data_crc.
 * - The trailer is the last record; a stream without one is truncated.
 * - This library knows nothing of what the payloads mean: record types
 *   1..IMG_REC_TRAILER-1 belong to the caller.
 * - Nothing here logs; errors are -errno plus, for the reader, an
 *   img_error that says which record failed and why.
 */
#ifndef CKPT_IMG_H
#define CKPT_IMG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define IMG_MAGIC "CKPTIMG\0"
#define IMG_VERSION 2 /* 2: the records of ns/1, mm/4, memfd/5, sysv/7, inet, netlink,
                        * timens, netns, mnt (December 2026); 1 is refused */
#define IMG_PAGE_SIZE 4096u
#define IMG_REC_TRAILER 0xffffu
#define IMG_REC_INDEX	  0xfffeu /* the index, last before the trailer */
#define IMG_FLAG_PAD_MASK 0xfffu
#define IMG_MAX_RECORD (1ull << 32) /* no record payload is larger */
#define IMG_HDR_ZSTD 0x1u /* page store records may be zstd-compressed (pages.h) */
#ifdef CKPT_HAVE_ZSTD
#define IMG_HDR_FLAGS_KNOWN IMG_HDR_ZSTD /* header flags this reader understands */
#else
#define IMG_HDR_FLAGS_KNOWN 0u
#endif

struct img_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;   /* sizeof(struct img_header) */
	uint32_t arch;          /* ELF e_machine: 62 for x86_64 */
	uint32_t page_size;
	uint64_t xfeatures;     /* XCR0 of the checkpointing CPU */
	uint32_t xsave_size;    /* size of the xstate regset */
	uint32_t flags;         /* IMG_HDR_* bits; any other bit is refused */
	uint64_t created_ns;    /* CLOCK_REALTIME at checkpoint */
	char kernel_release[65];
	uint8_t image_id[16];   /* random, this image's own: a child image
				 * (incremental) names its parent by it; zero in
				 * images made before it existed */
	char reserved[7];
	uint32_t crc;           /* crc32c of everything before it */
} __attribute__((packed));

struct img_frame {
	uint32_t type;
	uint32_t flags;
	uint64_t length;        /* bytes that follow the frame: pad + data */
	uint32_t hdr_crc;       /* crc32c of type, flags, length */
	uint32_t data_crc;      /* crc32c of data (not the pad) */
} __attribute__((packed));

struct img_trailer {
	uint64_t records;       /* records before the trailer */
	uint64_t data_bytes;    /* sum of their data lengths */
	uint32_t magic;         /* IMG_TRAILER_MAGIC */
	uint32_t reserved;
} __attribute__((packed));
#define IMG_TRAILER_MAGIC 0x444e4521u /* "!END" */

/*
 * The index (IMG_REC_INDEX): for every record of one type, in stream
 * order, its frame and its last bytes, so that a sparse reader finds
 * those records without reading their frames (one pread each, hundreds
 * for a large image). Its data: entries[n], then struct img_index_foot.
 * It is what the writer saw: a reader that skips the frames it names
 * checks them later, against the file (img_reader_verify), before it
 * uses the record's bytes.
 */
#define IMG_INDEX_END 64
struct img_index_entry {
	uint64_t offset;	    /* of the record's frame in the stream */
	uint64_t length;	    /* the frame's: pad + data */
	uint32_t flags;		    /* the frame's (the pad) */
	uint32_t data_crc;	    /* the frame's */
	uint32_t end_len;	    /* min(IMG_INDEX_END, data length) */
	uint32_t reserved;	    /* 0 */
	uint8_t end[IMG_INDEX_END]; /* the data's last end_len bytes, then zeros */
} __attribute__((packed));
struct img_index_foot {
	uint32_t type;	/* of the records indexed */
	uint32_t magic; /* IMG_INDEX_MAGIC */
	uint64_t n;	/* entries */
} __attribute__((packed));
#define IMG_INDEX_MAGIC 0x31584449u /* "IDX1" */
#define IMG_INDEX_MAX	(1u << 24)  /* entries a reader takes */

/*
 * crc32c (Castagnoli); hardware-accelerated when the CPU has SSE4.2.
 * Chained calls compose: img_crc32c(img_crc32c(0, a), b) == img_crc32c(0, a || b).
 */
uint32_t img_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same, always by table: the fallback, exported so tests can compare. */
uint32_t img_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* --- writing -------------------------------------------------------- */

struct img_seal; /* seal.h */

struct img_writer {
	int fd;
	struct img_seal *seal;  /* NULL, or what encrypts the stream to fd */
	uint64_t offset;        /* bytes written to fd so far */
	uint64_t records;
	uint64_t data_bytes;
	bool finished;
	/* NULL, or called with offset after each write of a record (the
	 * caller throttles what it does with it: a progress line) */
	void (*wrote)(void *arg, uint64_t offset);
	void *wrote_arg;
	/* to a regular file, small unaligned records gathered (offset counts
	 * them already), written when full, before an aligned record, and by
	 * finish: one write for many (1,000 threads made 7,000 records, a
	 * write each); to a pipe or socket, each goes out as it comes */
	bool gather;
	uint8_t *buf;
	size_t buf_len;
	/* img_writer_direct: the page bytes of aligned records go to dfd (the
	 * same file opened O_DIRECT) at dbase + offset, by pwrite from the
	 * caller's buffer, no copy into the page cache; everything else is
	 * written to fd as before (never in a page the direct writes touch) */
	bool direct;
	int dfd;
	uint64_t dbase;         /* fd's position at stream offset 0 */
	uint64_t direct_bytes;  /* written through dfd so far */
	/* img_writer_index: the aligned records of index_type written so
	 * far, written as the index record before the trailer */
	uint32_t index_type;
	struct img_index_entry *index;
	size_t nindex;
};

/* Writes the header. hdr->magic, version, header_size and crc are filled in. */
int img_writer_init(struct img_writer *w, int fd, struct img_header *hdr)
	__attribute__((warn_unused_result));
/* The same, every byte sent through seal (seal.h), which writes to fd. offset
 * counts the plaintext stream, so aligned data is aligned once decrypted. */
int img_writer_init_sealed(struct img_writer *w, int fd, struct img_seal *seal,
			   struct img_header *hdr) __attribute__((warn_unused_result));
int img_write(struct img_writer *w, uint32_t type, uint32_t flags, const void *data,
	      size_t len) __attribute__((warn_unused_result));
/* Like img_write, the data given as an iovec, placed page-aligned in the stream. */
int img_write_aligned(struct img_writer *w, uint32_t type, const struct iovec *iov,
		      int iovcnt) __attribute__((warn_unused_result));
/* The same, with the crc32c of the iovec's bytes computed by the caller
 * (img_crc32c chained over them): a writer thread is then left only the
 * write (pages.c). A wrong crc makes a record the reader refuses. */
int img_write_aligned_crc(struct img_writer *w, uint32_t type, const struct iovec *iov,
			  int iovcnt, uint32_t crc) __attribute__((warn_unused_result));
/*
 * To a regular file on a file system that does direct I/O (statx reports
 * STATX_DIOALIGN with an alignment that divides the page size; tmpfs does
 * not), from now on the page-aligned part of each aligned record's first
 * iovec, when its memory is page-aligned too and it is 256 KiB or more
 * (a smaller one waits for the disk longer than the page cache's
 * write-back of it costs at the fsync), is written with O_DIRECT
 * (the file reopened through /proc/self/fd): no copy into the page cache,
 * no dirty pages to throttle the writer or to flush at the fsync. The
 * stream is the same byte for byte. 0 if enabled; -EOPNOTSUPP, -EINVAL
 * (sealed, a pipe, an unaligned position, O_APPEND) or the reopen's error
 * if not: the writer then goes on as it was. A direct write that the file
 * system refuses later (EINVAL) turns direct writing off and is written
 * the ordinary way. img_writer_finish's fsync covers both ways.
 */
int img_writer_direct(struct img_writer *w) __attribute__((warn_unused_result));
/* From now on, the aligned records of type are indexed: img_writer_finish
 * writes the index (IMG_REC_INDEX) before the trailer. */
int img_writer_index(struct img_writer *w, uint32_t type) __attribute__((warn_unused_result));
/* Writes the index (img_writer_index), the trailer (sealed: and the final
 * chunk) and, if fd is a regular file, fsyncs it. */
int img_writer_finish(struct img_writer *w) __attribute__((warn_unused_result));
/* Frees what the writer holds (its records not written yet are dropped):
 * for a writer given up before img_writer_finish, which frees it too. */
void img_writer_drop(struct img_writer *w);

/* --- reading -------------------------------------------------------- */

struct img_record {
	uint32_t type;
	uint32_t flags;
	uint32_t index;         /* 0-based position in the stream */
	uint64_t offset;        /* of the frame in the stream */
	const uint8_t *data;    /* points into the reader's buffer */
	uint64_t len;           /* data length (pad excluded) */
	uint32_t data_crc;      /* the frame's: crc32c of data */
	/* a sparse reader's record found by the index: its frame (the
	 * fields above), pad and last bytes are the index's, not checked
	 * against the file yet: img_reader_verify() before the data is used */
	bool late;
};

struct img_error {
	int64_t index;          /* record index, -1 for the header */
	uint64_t offset;
	uint32_t type;
	char reason[160];       /* "checksum mismatch", "truncated", ... */
};

/*
 * The reader holds the whole image in memory: a regular file is mmap'd,
 * anything else (a pipe, a socket) is read to the end into an anonymous
 * mapping. Records then point into it, so page data is never copied.
 */
#define IMG_END_KEEP 64
struct img_end {
	uint32_t index;         /* the record's */
	uint32_t len;           /* bytes kept: its last ones */
	uint8_t b[IMG_END_KEEP];
};

struct img_reader {
	uint8_t *base;
	size_t size;
	bool mapped;            /* base is an mmap of the file, else anonymous */
	struct img_header hdr;
	size_t pos;             /* offset of the next frame */
	uint32_t next_index;
	bool validated;
	/* validate leaves the data checksums of records of this type (0:
	 * none) to the caller, which checks them before it uses their bytes
	 * (a lazy restart's pages: mm-lazy.c) */
	uint32_t crc_later;
	/* sparse (img_reader_open_lazy of a file): frames, pads and the
	 * trailer are read with pread() from fd (the reader's own), never
	 * through the mapping, whose pages are then touched only where a
	 * record's data is read */
	bool sparse;
	int fd;                 /* only if sparse */
	uint64_t data_sum;      /* sparse: data bytes of the records read since rewind */
	/* sparse: the frames read so far, by index, so that a pass after
	 * validation reads none again */
	struct img_frame *frames;
	size_t nframes;
	/* sparse: the last bytes of each record of type crc_later, read with
	 * the next frame in the same pread (img_reader_end()) */
	struct img_end *ends;
	size_t nends;
	/* sparse, validating with crc_later: the image's index of the records
	 * of type crc_later (checked: its checksums, the entries in order and
	 * inside the records before it), or NULL (no index, or one that
	 * does not check: every frame is read) */
	struct img_index_entry *idx;
	size_t nidx;
	size_t idx_next; /* the entry the walk meets next */
};

/* Loads the stream and checks the header. A sealed image (seal.h) is
 * refused with -ENOKEY: it needs img_reader_open_sealed(). */
int img_reader_open(struct img_reader *r, int fd, struct img_error *err)
	__attribute__((warn_unused_result));
/* The same, but a file is mapped without reading it in first (MAP_POPULATE):
 * pages come from the page cache or the disk as they are first read; the
 * reader is sparse (frames read with pread: a first touch of a mapped page
 * costs far more than a pread on a virtual machine), so that a restart
 * touches no page of the records whose data it leaves to later. */
int img_reader_open_lazy(struct img_reader *r, int fd, struct img_error *err)
	__attribute__((warn_unused_result));
/* A sparse reader's copy of the last bytes (up to IMG_END_KEEP) of record
 * rec, of type crc_later, read with the frame that follows it (*ret valid
 * until the next img_reader_next(): 0), or the index's (*ret valid until
 * img_reader_close(): 1); *len bytes. -ENOENT if there is none (the
 * caller reads them itself). */
int img_reader_end(const struct img_reader *r, const struct img_record *rec, const uint8_t **ret,
		   size_t *len) __attribute__((warn_unused_result));
/* A late record (img_record.late, found by the index; its index and
 * offset): its frame and pad as in the file (read through the mapping),
 * checked against what the index said, and its last bytes against the
 * index's. 0; -EPROTO if they differ (the image is damaged or forged). */
int img_reader_verify(const struct img_reader *r, uint32_t index, uint64_t offset)
    __attribute__((warn_unused_result));
/* Copies len bytes at at (inside r's buffer) to buf: with pread() for a
 * sparse reader (the mapping is not touched), else memcpy. -EINVAL outside
 * the image, -EIO if the file is shorter now. */
int img_reader_pread(const struct img_reader *r, const uint8_t *at, void *buf, size_t len)
	__attribute__((warn_unused_result));
/* Takes over an anonymous mapping of size bytes holding a whole stream (it is
 * unmapped on failure too) and checks the header, as img_reader_open does. */
int img_reader_adopt(struct img_reader *r, uint8_t *base, size_t size, struct img_error *err)
	__attribute__((warn_unused_result));
/* Checks every frame, every checksum and the trailer; rewinds afterwards.
 * Later passes of img_reader_next() check frames but not data checksums
 * again (anyone who can change the image file could as well forge it). */
int img_reader_validate(struct img_reader *r, struct img_error *err)
	__attribute__((warn_unused_result));
/*
 * The next record; -ENODATA once the trailer is reached (the trailer itself
 * is not returned). Checks the frame it returns.
 */
int img_reader_next(struct img_reader *r, struct img_record *ret, struct img_error *err)
	__attribute__((warn_unused_result));
void img_reader_rewind(struct img_reader *r);
void img_reader_close(struct img_reader *r);

#endif
