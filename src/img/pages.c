/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The page store (pages.h). */
#include "img/pages.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "util/cleanup.h"
#ifdef CKPT_HAVE_ZSTD
#include <zstd.h>
#include <zstd_errors.h>
#endif

#define ALIGN8(x) (((x) + 7) / 8 * 8)
#define ZMIN 4096u      /* fewer bytes are written plain */

/* the table: extents then head */
static uint64_t table_size(uint64_t n)
{
	return n * sizeof(struct pages_extent) + sizeof(struct pages_head);
}

/* a compressed record's: extents, zlen, head */
static uint64_t ztable_size(uint64_t n)
{
	return table_size(n) + sizeof(uint64_t);
}

/* --- the compressor ---------------------------------------------------- */

/*
 * A lane compresses one record at a time: its contexts and the output
 * buffer its frame is made in, which stays the record's until written.
 * Lane 0 is the caller's thread's, or the first writer thread's once the
 * writer has started them (pages_writer_async); lane i the (i+1)th's.
 */
struct z_lane {
#ifdef CKPT_HAVE_ZSTD
	ZSTD_CCtx *cctx;
	ZSTD_CCtx *probe;       /* for the samples (z_worth) */
#endif
	uint8_t *out;           /* a frame being made */
};

struct pages_z {
	struct z_lane lane[PAGES_Z_LANES];
	unsigned nlanes;
	size_t cap;             /* the largest input: the writers' bufsize */
	struct pages_z_stats st;
};

bool pages_have_zstd(void)
{
#ifdef CKPT_HAVE_ZSTD
	return true;
#else
	return false;
#endif
}

void pages_z_free(struct pages_z *z)
{
	if (!z)
		return;
	for (unsigned i = 0; i < z->nlanes; i++) {
#ifdef CKPT_HAVE_ZSTD
		ZSTD_freeCCtx(z->lane[i].cctx);
		ZSTD_freeCCtx(z->lane[i].probe);
#endif
		free(z->lane[i].out);
	}
	free(z);
}

void pages_z_stats(const struct pages_z *z, struct pages_z_stats *ret)
{
	*ret = z ? z->st : (struct pages_z_stats){ 0 };
}

#ifdef CKPT_HAVE_ZSTD
static int lane_init(struct z_lane *l, int level, size_t bufsize)
{
	l->cctx = ZSTD_createCCtx();
	l->probe = ZSTD_createCCtx();
	/* a frame worth keeping is smaller than its input (see z_compress) */
	/* page-aligned: a frame's whole pages can go to the image by direct
	 * I/O (img_writer_direct) as plain bytes do */
	l->out = aligned_alloc(IMG_PAGE_SIZE, (bufsize + IMG_PAGE_SIZE - 1) / IMG_PAGE_SIZE *
						      IMG_PAGE_SIZE);
	if (!l->cctx || !l->probe || !l->out)
		return -ENOMEM;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(l->cctx, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(l->probe, ZSTD_c_compressionLevel, level)))
		return -EINVAL;
	/* a content checksum in every frame: damage inside a block zstd
	 * stored raw would otherwise decompress, to other bytes */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(l->cctx, ZSTD_c_checksumFlag, 1)))
		return -EINVAL;
	return 0;
}

int pages_z_new(struct pages_z **ret, int level, unsigned threads, size_t bufsize)
{
	struct pages_z *z = calloc(1, sizeof(*z));

	*ret = NULL;
	if (!z)
		return -ENOMEM;
	z->cap = bufsize;
	z->nlanes = threads < 1 ? 1 : threads > PAGES_Z_LANES ? PAGES_Z_LANES : threads;
	for (unsigned i = 0; i < z->nlanes; i++) {
		int r = lane_init(&z->lane[i], level, bufsize);
		if (r < 0) {
			pages_z_free(z);
			return r;
		}
	}
	*ret = z;
	return 0;
}

/*
 * Is src worth compressing? A record of random bytes (encrypted or
 * compressed data, a random heap) would go through zstd almost whole
 * before it gives up (it stops only when the frame outgrows the bound):
 * 4 samples of ZSAMPLE bytes spread over it are compressed first, and if
 * none saves an eighth the record is written plain. A record with one
 * compressible part in four is still tried whole.
 */
#define ZSAMPLE (16u << 10)
static bool z_worth(struct z_lane *l, const uint8_t *src, size_t len)
{
	if (len < 8 * ZSAMPLE)
		return true;
	for (size_t i = 0; i < 4; i++) {
		size_t r = ZSTD_compress2(l->probe, l->out, ZSAMPLE - ZSAMPLE / 8,
					  src + (len - ZSAMPLE) / 3 * i, ZSAMPLE);
		if (!ZSTD_isError(r))
			return true;
	}
	return false;
}

/* 1 and the frame's size in *zlen (in l->out) if it saves an eighth of
 * len, 0 if not (z_worth's samples, or zstd giving up when the frame
 * outgrows that). */
static int z_compress(struct z_lane *l, const uint8_t *src, size_t len, size_t *zlen)
{
	if (!z_worth(l, src, len))
		return 0;
	size_t r = ZSTD_compress2(l->cctx, l->out, len - len / 8, src, len);
	if (ZSTD_isError(r)) {
		/* the context is left mid-frame; the next frame starts afresh */
		ZSTD_CCtx_reset(l->cctx, ZSTD_reset_session_only);
		return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? -ENOMEM : 0;
	}
	*zlen = r;
	return 1;
}

/* Is z exactly one frame of zlen bytes whose content is raw bytes? */
static bool z_frame_ok(const uint8_t *z, uint64_t zlen, uint64_t raw)
{
	size_t fl = ZSTD_findFrameCompressedSize(z, zlen);
	return !ZSTD_isError(fl) && fl == zlen && ZSTD_getFrameContentSize(z, zlen) == raw;
}

static int z_decompress(uint8_t *dst, uint64_t raw, const uint8_t *z, uint64_t zlen)
{
	size_t r = ZSTD_decompress(dst, raw, z, zlen);
	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
	return r == raw ? 0 : -EBADMSG;
}

/* A worker's decompression context; created at its first compressed chunk. */
struct zwork {
	ZSTD_DCtx *d;
};

static void zwork_free(struct zwork *w)
{
	ZSTD_freeDCtx(w->d);
}

/* Decompresses the next len bytes of the frame being read into dst. */
static int z_stream(struct zwork *w, ZSTD_inBuffer *in, uint8_t *dst, size_t len, size_t *left)
{
	ZSTD_outBuffer out = { dst, len, 0 };
	while (out.pos < out.size) {
		size_t r = ZSTD_decompressStream(w->d, &out, in);
		if (ZSTD_isError(r))
			return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
		*left = r;
		/* the frame or its input ended before len bytes came out */
		if (out.pos < out.size && (!r || in->pos == in->size))
			return -EBADMSG;
	}
	return 0;
}

static int zwork_begin(struct zwork *w, const struct pages_chunk *c, ZSTD_inBuffer *in)
{
	if (!w->d) {
		w->d = ZSTD_createDCtx();
		if (!w->d)
			return -ENOMEM;
		/* a frame cannot ask for a window larger than a record holds */
		ZSTD_DCtx_setParameter(w->d, ZSTD_d_windowLogMax, 26);
	}
	ZSTD_DCtx_reset(w->d, ZSTD_reset_session_only);
	*in = (ZSTD_inBuffer){ c->z, c->zlen, 0 };
	return 0;
}

/* After the last piece: the frame must be over, all its input used. */
static int zwork_end(struct zwork *w, ZSTD_inBuffer *in, size_t left)
{
	uint8_t extra;
	if (left) {
		ZSTD_outBuffer out = { &extra, 1, 0 };
		left = ZSTD_decompressStream(w->d, &out, in);
		if (ZSTD_isError(left) || out.pos)
			return -EBADMSG;
	}
	return left || in->pos != in->size ? -EBADMSG : 0;
}
#else
struct zwork {
	int unused;
};

static void zwork_free(struct zwork *w)
{
	(void)w;
}

int pages_z_new(struct pages_z **ret, int level, unsigned threads, size_t bufsize)
{
	(void)level, (void)threads, (void)bufsize;
	*ret = NULL;
	return -EPROTONOSUPPORT;
}

static int z_compress(struct z_lane *l, const uint8_t *src, size_t len, size_t *zlen)
{
	(void)l, (void)src, (void)len, (void)zlen;
	return 0;
}

static bool z_frame_ok(const uint8_t *z, uint64_t zlen, uint64_t raw)
{
	(void)z, (void)zlen, (void)raw;
	return false;
}

static int z_decompress(uint8_t *dst, uint64_t raw, const uint8_t *z, uint64_t zlen)
{
	(void)dst, (void)raw, (void)z, (void)zlen;
	return -EPROTONOSUPPORT;
}
#endif

/* --- checkpoint -------------------------------------------------------- */

struct pages_async;
static void async_free(struct pages_writer *pw);

int pages_writer_init(struct pages_writer *pw, struct img_writer *w, uint32_t type, uint64_t tag,
		      void *buf, size_t bufsize, pages_read_fn read, void *arg)
{
	*pw = (struct pages_writer){ 0 };
	if (!w || !buf || bufsize < PAGES_BLOCK || !read)
		return -EINVAL;
	*pw = (struct pages_writer){
		.w = w, .type = type, .tag = tag, .buf = buf, .bufsize = bufsize,
		.read = read, .arg = arg,
	};
	/* each queued extent gives at most its whole blocks plus two cut ones */
	pw->out_cap = bufsize / PAGES_BLOCK + 2 * (size_t)PAGES_MAX_QUEUED;
	pw->q = calloc(PAGES_MAX_QUEUED, sizeof(*pw->q));
	/* the record's table is built in place, the head after it */
	pw->out = malloc(ztable_size(pw->out_cap));
	if (!pw->q || !pw->out) {
		pages_writer_release(pw);
		return -ENOMEM;
	}
	return 0;
}

int pages_writer_compress(struct pages_writer *pw, struct pages_z *z)
{
	/* the threads take the compressor they were made with */
	if ((z && z->cap < pw->bufsize) || pw->async)
		return -EINVAL;
	pw->z = z;
	return 0;
}

void pages_writer_release(struct pages_writer *pw)
{
	if (!pw)
		return;
	async_free(pw);
	free(pw->q);
	free(pw->out);
	pw->q = pw->out = NULL;
	pw->nq = 0;
	pw->queued = 0;
}

static bool block_is_zero(const uint8_t *p, uint64_t len)
{
	if (len == PAGES_BLOCK && !((uintptr_t)p % 8)) {
		const uint64_t *w = (const uint64_t *)(const void *)p;
		for (size_t i = 0; i < PAGES_BLOCK / 8; i += 4)
			if (w[i] | w[i + 1] | w[i + 2] | w[i + 3])
				return false;
		return true;
	}
	for (uint64_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Reads the queued extents into buf and keeps the blocks that are not all
 * zero, moved down to follow what is kept; lists their extents in x.
 * Returns the number of extents (or -errno of read()); *ret_bytes what is
 * kept, *ret_crc its crc32c. The extents are read in pieces of READ_PIECE
 * bytes at most, and each piece is checked for zero blocks and summed right
 * after its read, while it is still in the cache: on the whole buffer at
 * once, the first load of every block missed (a fifth of a checkpoint's
 * time went there).
 */
#define READ_PIECE (256u << 10)
#define READ_PIECE_X 64u
static ssize_t read_drop(struct pages_writer *pw, struct pages_extent *x, uint64_t *ret_bytes,
			 uint32_t *ret_crc)
{
	uint64_t in = 0, out = 0;
	uint32_t crc = 0;
	size_t n = 0, qi = 0;
	uint64_t qat = pw->q[0].off;

	while (qi < pw->nq) {
		struct pages_extent px[READ_PIECE_X];
		size_t k = 0;
		uint64_t plen = 0;
		while (qi < pw->nq && k < READ_PIECE_X && plen < READ_PIECE) {
			uint64_t end = pw->q[qi].off + pw->q[qi].len;
			uint64_t l = MIN(end - qat, READ_PIECE - plen);
			px[k++] = (struct pages_extent){ qat, l };
			plen += l;
			qat += l;
			if (qat == end && ++qi < pw->nq)
				qat = pw->q[qi].off;
		}
		int r = pw->read(pw->arg, px, k, pw->buf + in);
		if (r < 0)
			return r;
		uint64_t kept = out;
		for (size_t i = 0; i < k; i++) {
			uint64_t at = px[i].off, end = at + px[i].len;
			while (at < end) {
				uint64_t l = (at / PAGES_BLOCK + 1) * PAGES_BLOCK;
				l = (l < end ? l : end) - at;
				const uint8_t *p = pw->buf + in;
				if (!block_is_zero(p, l)) {
					if (out != in)
						memmove(pw->buf + out, p, l);
					if (n && x[n - 1].off + x[n - 1].len == at)
						x[n - 1].len += l;
					else
						x[n++] = (struct pages_extent){ at, l };
					out += l;
				}
				in += l;
				at += l;
			}
		}
		/* what this piece kept is contiguous: summed in one go */
		crc = img_crc32c(crc, pw->buf + kept, out - kept);
	}
	*ret_bytes = out;
	*ret_crc = crc;
	return (ssize_t)n;
}

/*
 * A record read and not yet written: its kept bytes in buf, their
 * extents in x[0..n), with room after them for the table (ztable_size).
 */
struct rec {
	uint8_t *buf;
	struct pages_extent *x;
	size_t n;
	uint64_t bytes;
	uint32_t crc;           /* of the bytes, summed as they were read */
	uint64_t tag;
};

/*
 * Compresses c on lane l of z where it pays (z NULL: never): 1 and the
 * frame's length in *zlen, 0 to write it plain, or -errno. The frame
 * stays in the lane's buffer until written, so a lane makes one record at
 * a time.
 */
static int rec_compress(struct pages_z *z, unsigned l, struct rec *c, size_t *zlen)
{
	return z && c->bytes >= ZMIN && c->bytes <= PAGES_MAX_RAW ?
		       z_compress(&z->lane[l], c->buf, c->bytes, zlen) : 0;
}

/* Puts c's table after its extents and writes it: the frame lane l made
 * if zipped (zlen bytes), else its bytes as read. */
static int rec_write(struct img_writer *w, uint32_t type, struct pages_z *z, unsigned l,
		     struct rec *c, int zipped, size_t zlen)
{
	static const uint8_t zero[8];
	uint64_t len = zipped ? zlen : c->bytes;
	struct pages_head head = { .magic = zipped ? PAGES_MAGIC_ZSTD : PAGES_MAGIC,
				   .n = (uint32_t)c->n, .tag = c->tag };
	uint8_t *end = (uint8_t *)&c->x[c->n];
	if (zipped) {
		uint64_t zl = zlen;
		memcpy(end, &zl, sizeof(zl));
		end += sizeof(zl);
	}
	memcpy(end, &head, sizeof(head));
	struct iovec iov[3] = {
		{ .iov_base = zipped ? z->lane[l].out : c->buf, .iov_len = len },
		{ .iov_base = (void *)zero, .iov_len = ALIGN8(len) - len },
		{ .iov_base = c->x, .iov_len = zipped ? ztable_size(c->n) : table_size(c->n) },
	};
	uint32_t crc = zipped ? img_crc32c(0, iov[0].iov_base, iov[0].iov_len) : c->crc;
	/* the pad and the table after the bytes */
	crc = img_crc32c(crc, iov[1].iov_base, iov[1].iov_len);
	crc = img_crc32c(crc, iov[2].iov_base, iov[2].iov_len);
	int r = img_write_aligned_crc(w, type, iov, 3, crc);
	if (r >= 0 && z) {
		z->st.raw += c->bytes;
		z->st.stored += len;
		z->st.records++;
		z->st.compressed += zipped;
	}
	return r;
}

/*
 * The writer threads (pages_writer_async). The writer has NSLOT buffers
 * (the caller's buf and buf2): the caller's thread reads a record into
 * one while the others are in flight. A record handed over (posted) is
 * taken by the first idle thread, in the order posted, compressed on that
 * thread's lane if the writer compresses, and written when every record
 * posted before it is: the threads take turns at the image writer by the
 * records' numbers (written). Without a compressor one thread is enough
 * (the write is all it does); with one, a thread a lane: two records
 * compress side by side while the next is read. Everything below is
 * under mu, but a thread's compression and its write.
 */
#define NSLOT 2
enum slot_state { SLOT_FREE, SLOT_FILL, SLOT_READY, SLOT_BUSY };

struct slot {
	struct rec c;           /* its buf and x are the slot's for good */
	enum slot_state state;
	uint64_t seq;           /* the record's number, when posted */
};

struct worker {
	struct pages_async *a;
	unsigned lane;
	pthread_t thread;
};

struct pages_async {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct worker wk[PAGES_Z_LANES];
	unsigned nworkers, started;
	bool quit;
	int err;                /* the first failed write; no more are written */
	struct img_writer *w;
	uint32_t type;
	struct pages_z *z;
	struct slot slot[NSLOT];
	unsigned cur;           /* the slot the caller fills */
	uint64_t posted, taken, written;
	/* slot 0 has the caller's buf and out, given back at the end; slot 1
	 * buf2 and an out allocated here */
};

/* The slot holding record number seq, ready to be taken; NULL if none. */
static struct slot *slot_ready(struct pages_async *a, uint64_t seq)
{
	for (unsigned i = 0; i < NSLOT; i++)
		if (a->slot[i].state == SLOT_READY && a->slot[i].seq == seq)
			return &a->slot[i];
	return NULL;
}

static void *async_main(void *p)
{
	struct worker *wk = p;
	struct pages_async *a = wk->a;

	/* a compressor's threads keep both CPUs busy for as long as there
	 * is memory: at the normal priority, not at the real-time one they
	 * inherit from ckpt's thread (rtprio.h), which would hold every
	 * other task of the machine off them */
	if (a->z) {
		struct sched_param none = { 0 };
		(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &none);
	}
	pthread_mutex_lock(&a->mu);
	for (;;) {
		struct slot *s;
		while (!(s = slot_ready(a, a->taken)) && !a->quit)
			pthread_cond_wait(&a->cv, &a->mu);
		if (!s)
			break;
		s->state = SLOT_BUSY;
		a->taken++;
		bool skip = a->err;
		pthread_mutex_unlock(&a->mu);
		size_t zlen = 0;
		int r = skip ? 0 : rec_compress(a->z, wk->lane, &s->c, &zlen);
		pthread_mutex_lock(&a->mu);
		while (a->written != s->seq)
			pthread_cond_wait(&a->cv, &a->mu);
		skip = a->err;
		pthread_mutex_unlock(&a->mu);
		if (r >= 0 && !skip)
			r = rec_write(a->w, a->type, a->z, wk->lane, &s->c, r, zlen);
		pthread_mutex_lock(&a->mu);
		if (r < 0 && !a->err)
			a->err = r;
		a->written++;
		s->state = SLOT_FREE;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* Waits until every record posted is written; the first write error, or 0. */
static int async_wait(struct pages_async *a)
{
	if (!a || !a->started)
		return a ? a->err : 0;
	pthread_mutex_lock(&a->mu);
	while (a->written != a->posted)
		pthread_cond_wait(&a->cv, &a->mu);
	int r = a->err;
	pthread_mutex_unlock(&a->mu);
	return r;
}

/* Stops the threads once what was posted is written; gives the caller's
 * buffers back to pw. */
static void async_free(struct pages_writer *pw)
{
	struct pages_async *a = pw->async;
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->quit = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	for (unsigned i = 0; i < a->started; i++)
		pthread_join(a->wk[i].thread, NULL);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	pw->buf = a->slot[0].c.buf;
	pw->out = a->slot[0].c.x;
	free(a->slot[1].c.x);
	free(a);
	pw->async = NULL;
}

int pages_writer_async(struct pages_writer *pw, void *buf2)
{
	if (!buf2 || pw->async)
		return -EINVAL;
	struct pages_async *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->w = pw->w;
	a->type = pw->type;
	a->z = pw->z;
	a->nworkers = pw->z ? MIN(pw->z->nlanes, NSLOT) : 1;
	a->slot[0] = (struct slot){ .c = { .buf = pw->buf, .x = pw->out }, .state = SLOT_FILL };
	a->slot[1] = (struct slot){ .c = { .buf = buf2, .x = malloc(ztable_size(pw->out_cap)) } };
	pw->async = a;
	if (!a->slot[1].c.x) {
		async_free(pw);
		return -ENOMEM;
	}
	return 0;
}

int pages_sync(struct pages_writer *pw)
{
	return async_wait(pw->async);
}

/*
 * Hands the record c (in the slot being filled) to the writer threads,
 * started now if they are not yet, and takes a free slot to fill next,
 * waiting for one. 1 if handed over, 0 if the record must be written here
 * (no thread could be started), or -errno of an earlier write.
 */
static int async_post(struct pages_writer *pw, const struct rec *c)
{
	struct pages_async *a = pw->async;
	while (a->started < a->nworkers) {
		struct worker *wk = &a->wk[a->started];
		*wk = (struct worker){ .a = a, .lane = a->started };
		if (pthread_create(&wk->thread, NULL, async_main, wk) != 0)
			break;
		a->started++;
	}
	if (!a->started)
		return 0;
	pthread_mutex_lock(&a->mu);
	int r = a->err;
	if (!r) {
		struct slot *s = &a->slot[a->cur];
		s->c.n = c->n;
		s->c.bytes = c->bytes;
		s->c.crc = c->crc;
		s->c.tag = c->tag;
		s->seq = a->posted++;
		s->state = SLOT_READY;
		pthread_cond_broadcast(&a->cv);
		for (;;) {
			unsigned i = 0;
			while (i < NSLOT && a->slot[i].state != SLOT_FREE)
				i++;
			if (i < NSLOT) {
				a->cur = i;
				break;
			}
			pthread_cond_wait(&a->cv, &a->mu);
		}
		a->slot[a->cur].state = SLOT_FILL;
		pw->buf = a->slot[a->cur].c.buf;
		pw->out = a->slot[a->cur].c.x;
	}
	pthread_mutex_unlock(&a->mu);
	return r < 0 ? r : 1;
}

/* full: the buffer is full, more is likely to follow (threads pay off) */
static int flush(struct pages_writer *pw, bool full)
{
	uint64_t bytes;
	int r;

	if (!pw->nq)
		return 0;
	pw->read_failed = false;
	struct pages_extent *x = pw->out;
	uint32_t crc;
	ssize_t got = read_drop(pw, x, &bytes, &crc);
	if (got < 0) {
		pw->read_failed = true;
		return (int)got;
	}
	size_t n = (size_t)got;
	pw->nq = 0;
	pw->queued = 0;
	if (!n)
		return 0;
	struct rec c = { .buf = pw->buf, .x = x, .n = n, .bytes = bytes, .crc = crc,
			 .tag = pw->tag };
	r = 0;
	if (pw->async && (pw->async->started || full))
		r = async_post(pw, &c);
	if (r == 0) {
		/* here, on lane 0: no thread compresses while none is in flight */
		size_t zlen = 0;
		r = async_wait(pw->async);
		if (r >= 0)
			r = rec_compress(pw->z, 0, &c, &zlen);
		if (r >= 0)
			r = rec_write(pw->w, pw->type, pw->z, 0, &c, r, zlen);
	}
	if (r < 0)
		return r;
	pw->bytes += bytes;
	pw->records++;
	return 0;
}

int pages_flush(struct pages_writer *pw)
{
	return flush(pw, false);
}

int pages_add(struct pages_writer *pw, uint64_t off, uint64_t len)
{
	if (off + len < off || off < pw->end)
		return -EINVAL;
	while (len) {
		uint64_t room = pw->bufsize - pw->queued;
		uint64_t l = len < room ? len : room;
		struct pages_extent *last = pw->nq ? &pw->q[pw->nq - 1] : NULL;
		if (last && last->off + last->len == off)
			last->len += l;
		else
			pw->q[pw->nq++] = (struct pages_extent){ off, l };
		pw->queued += l;
		off += l;
		len -= l;
		pw->end = off;
		if (pw->queued == pw->bufsize || pw->nq == PAGES_MAX_QUEUED) {
			int r = flush(pw, pw->queued == pw->bufsize);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

int pages_retag(struct pages_writer *pw, uint64_t tag)
{
	int r = pages_flush(pw);
	if (r < 0)
		return r;
	pw->tag = tag;
	pw->end = 0;
	return 0;
}

/* --- restart ----------------------------------------------------------- */

/* The extents of x[0..n): in order, not wrapping, at most max bytes in all. */
static int check_extents(const struct pages_extent *x, uint32_t n, uint64_t max, uint64_t *ret_sum)
{
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!x[i].len || x[i].off + x[i].len < x[i].off || x[i].len > max - sum ||
		    (i && x[i].off < x[i - 1].off + x[i - 1].len))
			return -EINVAL;
		sum += x[i].len;
	}
	*ret_sum = sum;
	return 0;
}

/*
 * The record's table is read from tail, a copy of (or pointer to) its last
 * tail_len bytes, which must hold the whole table (extents, zlen, head);
 * the chunk's extents then point into tail.
 */
/* A compressed record: a frame, padded to 8, then the table with zlen. */
static int parse_z(const struct img_record *rec, const struct pages_head *head,
		   const uint8_t *tail, uint64_t tail_len, struct pages_chunk *ret)
{
	uint64_t zlen, sum;
	const uint8_t *end = tail + tail_len;

	if (ztable_size(head->n) > rec->len || ztable_size(head->n) > tail_len)
		return -EINVAL;
	uint64_t tab = rec->len - ztable_size(head->n);
	memcpy(&zlen, end - sizeof(*head) - sizeof(zlen), sizeof(zlen));
	if (tab % 8 || !zlen || zlen > tab || ALIGN8(zlen) != tab)
		return -EINVAL;
	const struct pages_extent *x =
		(const struct pages_extent *)(const void *)(end - ztable_size(head->n));
	if (check_extents(x, head->n, PAGES_MAX_RAW, &sum) < 0)
		return -EINVAL;
	if (!pages_have_zstd())
		return -EPROTONOSUPPORT;
	if (!z_frame_ok(rec->data, zlen, sum))
		return -EINVAL;
	*ret = (struct pages_chunk){
		.tag = head->tag, .n = head->n, .x = x, .bytes = sum, .z = rec->data, .zlen = zlen,
	};
	return 0;
}

int pages_table_len(const struct img_record *rec, const void *last16, uint64_t *ret)
{
	struct pages_head head;
	if (!rec || rec->len < sizeof(head))
		return -EINVAL;
	memcpy(&head, last16, sizeof(head));
	if ((head.magic != PAGES_MAGIC && head.magic != PAGES_MAGIC_ZSTD) || !head.n ||
	    head.n > PAGES_MAX_EXTENTS)
		return -EINVAL;
	uint64_t len = head.magic == PAGES_MAGIC_ZSTD ? ztable_size(head.n) : table_size(head.n);
	if (len > rec->len)
		return -EINVAL;
	*ret = len;
	return 0;
}

int pages_parse_tail(const struct img_record *rec, const uint8_t *tail, uint64_t tail_len,
		     struct pages_chunk *ret)
{
	struct pages_head head;
	uint64_t sum;

	/* an aligned record's data is page-aligned in the reader's mapping */
	if (!rec || !rec->data || (uintptr_t)rec->data % IMG_PAGE_SIZE ||
	    rec->len < sizeof(head) || !tail || tail_len < sizeof(head) || tail_len > rec->len ||
	    (uintptr_t)tail % 8)
		return -EINVAL;
	const uint8_t *end = tail + tail_len;
	memcpy(&head, end - sizeof(head), sizeof(head));
	if ((head.magic != PAGES_MAGIC && head.magic != PAGES_MAGIC_ZSTD) || !head.n ||
	    head.n > PAGES_MAX_EXTENTS)
		return -EINVAL;
	if (head.magic == PAGES_MAGIC_ZSTD)
		return parse_z(rec, &head, tail, tail_len, ret);
	if (table_size(head.n) > rec->len || table_size(head.n) > tail_len)
		return -EINVAL;
	/* the bytes, padded to 8, then the table: 8-aligned in the record */
	uint64_t tab = rec->len - table_size(head.n);
	if (tab % 8)
		return -EINVAL;
	const struct pages_extent *x =
		(const struct pages_extent *)(const void *)(end - table_size(head.n));
	if (check_extents(x, head.n, tab, &sum) < 0 || ALIGN8(sum) != tab)
		return -EINVAL;
	*ret = (struct pages_chunk){
		.tag = head.tag,
		.n = head.n,
		.x = x,
		.data = rec->data,
		.bytes = sum,
	};
	return 0;
}

int pages_parse(const struct img_record *rec, struct pages_chunk *ret)
{
	if (!rec || !rec->data)
		return -EINVAL;
	/* the record itself is its tail; its end is 8-aligned if the table is */
	if ((uintptr_t)(rec->data + rec->len) % 8)
		return -EINVAL;
	return pages_parse_tail(rec, rec->data, rec->len, ret);
}

const char *pages_strerror(int err)
{
	switch (err) {
	case -EINVAL:
		return "damaged, out of order or out of bounds";
	case -EPROTONOSUPPORT:
		return "its pages are compressed with zstd, and this ckpt was built without zstd";
	case -EBADMSG:
		return "its compressed pages do not decompress (damaged or forged)";
	default:
		return strerror(-err);
	}
}

int pages_chunk_plain(const struct pages_chunk *c, uint8_t **buf, size_t *cap,
		      struct pages_chunk *ret)
{
	if (!c->z) {
		*ret = *c;
		return 0;
	}
	/* pages_parse bounded c->bytes by PAGES_MAX_RAW */
	if (c->bytes > PAGES_MAX_RAW)
		return -EINVAL;
	if (*cap < c->bytes) {
		uint8_t *nb = realloc(*buf, c->bytes);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = c->bytes;
	}
	int r = z_decompress(*buf, c->bytes, c->z, c->zlen);
	if (r < 0)
		return r;
	*ret = *c;
	ret->data = *buf;
	ret->z = NULL;
	ret->zlen = 0;
	return 0;
}

int pages_set_add(struct pages_set *s, const struct pages_chunk *c, uint64_t lo, uint64_t hi)
{
	if (!c->n || c->x[0].off < lo || (s->n && c->x[0].off < s->end))
		return -EINVAL;
	/* pages_parse checked the order inside the chunk and the wraps */
	const struct pages_extent *last = &c->x[c->n - 1];
	if (last->off + last->len > hi)
		return -EINVAL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct pages_chunk *nc = realloc(s->c, cap * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		s->c = nc;
		s->cap = cap;
	}
	s->c[s->n++] = *c;
	s->bytes += c->bytes;
	s->end = last->off + last->len;
	return 0;
}

bool pages_set_has(const struct pages_set *s, uint64_t lo, uint64_t hi)
{
	/* its extents are in address order (pages_set_add) */
	for (size_t c = 0; c < s->n; c++)
		for (uint32_t i = 0; i < s->c[c].n; i++) {
			const struct pages_extent *x = &s->c[c].x[i];
			if (x->off >= hi)
				return false;
			if (x->off + x->len > lo)
				return true;
		}
	return false;
}

bool pages_set_covers(const struct pages_set *s, uint64_t lo, uint64_t hi)
{
	uint64_t pos = lo; /* covered up to here; extents in address order */
	for (size_t c = 0; c < s->n && pos < hi; c++)
		for (uint32_t i = 0; i < s->c[c].n && pos < hi; i++) {
			const struct pages_extent *x = &s->c[c].x[i];
			if (x->off + x->len <= pos)
				continue;
			if (x->off > pos)
				return false;
			pos = x->off + x->len;
		}
	return pos >= hi;
}

void pages_set_release(struct pages_set *s)
{
	if (!s)
		return;
	free(s->c);
	*s = (struct pages_set){ 0 };
}

int pages_chunk_each(const struct pages_chunk *c, pages_extent_fn fn, void *arg)
{
	const uint8_t *src = c->data;
	if (!src)
		return -EINVAL;
	for (uint32_t i = 0; i < c->n; i++) {
		int r = fn(arg, c->x[i].off, src, c->x[i].len);
		if (r < 0)
			return r;
		src += c->x[i].len;
	}
	return 0;
}

#ifdef CKPT_HAVE_ZSTD
#define PIECE (256u << 10)     /* bytes decompressed at a time: stay in the cache */
#define PIECE_EXTENTS 64u

/*
 * Hands a compressed chunk to put in pieces of at most PIECE bytes and
 * PIECE_EXTENTS extents (the first and last cut), each decompressed into
 * the worker's buffer just before: the bytes are written from the cache.
 */
static int apply_z(const struct pages_chunk *c, struct zwork *w, uint8_t *buf, pages_put_fn put,
		   void *arg, uint64_t *ret_off)
{
	struct pages_extent px[PIECE_EXTENTS];
	ZSTD_inBuffer in;
	uint32_t i = 0;         /* the extent being cut */
	uint64_t at = 0;        /* bytes of it already handed out */
	size_t left = 1;
	int r = zwork_begin(w, c, &in);

	while (r >= 0 && i < c->n) {
		struct pages_chunk piece = { .tag = c->tag, .x = px, .data = buf };
		*ret_off = c->x[i].off + at;
		while (i < c->n && piece.n < PIECE_EXTENTS && piece.bytes < PIECE) {
			uint64_t l = MIN(c->x[i].len - at, PIECE - piece.bytes);
			px[piece.n++] = (struct pages_extent){ c->x[i].off + at, l };
			piece.bytes += l;
			at += l;
			if (at == c->x[i].len)
				i++, at = 0;
		}
		r = z_stream(w, &in, buf, piece.bytes, &left);
		if (r >= 0)
			r = put(arg, &piece, ret_off);
	}
	return r < 0 ? r : zwork_end(w, &in, left);
}
#else
#define PIECE 1u

static int apply_z(const struct pages_chunk *c, struct zwork *w, uint8_t *buf, pages_put_fn put,
		   void *arg, uint64_t *ret_off)
{
	(void)c, (void)w, (void)buf, (void)put, (void)arg, (void)ret_off;
	return -EPROTONOSUPPORT;
}
#endif

int pages_check_run(struct pages_check *k)
{
	int s = __atomic_load_n(&k->state, __ATOMIC_ACQUIRE);
	if (!s) {
		/* two workers with pieces of one record may both compute it:
		 * the same answer, and rarer than a lock is dear */
		s = img_crc32c(0, k->data, k->len) == k->crc ? 1 : -EBADMSG;
		__atomic_store_n(&k->state, s, __ATOMIC_RELEASE);
	}
	return s < 0 ? s : 0;
}

struct apply_job {
	const struct pages_set *s;
	pages_put_fn put;
	void *arg;
	size_t next;            /* atomic: the next chunk to take */
	int err;                /* atomic: the first failure */
	uint64_t err_off;
};

static void *apply_worker(void *p)
{
	struct apply_job *j = p;
	_cleanup_free_ uint8_t *buf = NULL; /* this worker's decompressed piece */
	struct zwork zw = { 0 };
	for (;;) {
		size_t c = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (c >= j->s->n || __atomic_load_n(&j->err, __ATOMIC_RELAXED))
			break;
		const struct pages_chunk *ch = &j->s->c[c];
		uint64_t off = ch->x[0].off;
		int r = ch->check ? pages_check_run(ch->check) : 0;
		if (r >= 0 && ch->z && !buf && !(buf = malloc(PIECE)))
			r = -ENOMEM;
		if (r >= 0)
			r = ch->z ? apply_z(ch, &zw, buf, j->put, j->arg, &off)
				  : j->put(j->arg, ch, &off);
		if (r < 0) {
			int zero = 0;
			if (__atomic_compare_exchange_n(&j->err, &zero, r, false, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				j->err_off = off;
			break;
		}
	}
	zwork_free(&zw);
	return NULL;
}

#define APPLY_THREAD_BYTES (4ull << 20)

int pages_set_apply(const struct pages_set *s, unsigned workers, pages_put_fn put, void *arg,
		    uint64_t *ret_off)
{
	struct apply_job j = { .s = s, .put = put, .arg = arg };
	pthread_t th[7];
	unsigned started = 0;

	if (workers > 8)
		workers = 8;
	/* a thread is worth it with a few chunks and some MiB to share: its
	 * creation and join cost about what copying 1 MiB does, and a tree
	 * of small processes paid them once per process */
	while (started + 1 < workers && s->n >= 4 * (started + 1) &&
	       s->bytes >= (uint64_t)(started + 1) * APPLY_THREAD_BYTES &&
	       pthread_create(&th[started], NULL, apply_worker, &j) == 0)
		started++;
	apply_worker(&j);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (j.err < 0 && ret_off)
		*ret_off = j.err_off;
	return j.err;
}
