/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The page store (pages.h). */
#include "img/pages.h"

#include <errno.h>
#include <pthread.h>
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

struct pages_z {
#ifdef CKPT_HAVE_ZSTD
	ZSTD_CCtx *cctx;
	ZSTD_CCtx *probe; /* one thread, for the samples (z_worth) */
#endif
	uint8_t *out;           /* a frame being made */
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
#ifdef CKPT_HAVE_ZSTD
	ZSTD_freeCCtx(z->cctx);
	ZSTD_freeCCtx(z->probe);
#endif
	free(z->out);
	free(z);
}

void pages_z_stats(const struct pages_z *z, struct pages_z_stats *ret)
{
	*ret = z ? z->st : (struct pages_z_stats){ 0 };
}

#ifdef CKPT_HAVE_ZSTD
int pages_z_new(struct pages_z **ret, int level, unsigned threads, size_t bufsize)
{
	struct pages_z *z = calloc(1, sizeof(*z));

	*ret = NULL;
	if (!z)
		return -ENOMEM;
	z->cap = bufsize;
	z->cctx = ZSTD_createCCtx();
	z->probe = ZSTD_createCCtx();
	/* a frame worth keeping is smaller than its input (see z_compress) */
	/* page-aligned: a frame's whole pages can go to the image by direct
	 * I/O (img_writer_direct) as plain bytes do */
	z->out = aligned_alloc(IMG_PAGE_SIZE, (bufsize + IMG_PAGE_SIZE - 1) / IMG_PAGE_SIZE *
						      IMG_PAGE_SIZE);
	if (!z->cctx || !z->probe || !z->out) {
		pages_z_free(z);
		return -ENOMEM;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->probe, ZSTD_c_compressionLevel, level))) {
		pages_z_free(z);
		return -EINVAL;
	}
	/* a content checksum in every frame: damage inside a block zstd
	 * stored raw would otherwise decompress, to other bytes */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1))) {
		pages_z_free(z);
		return -EINVAL;
	}
	/* a libzstd built without threads refuses: one thread then */
	if (threads > 1)
		ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_nbWorkers, (int)threads);
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
static bool z_worth(struct pages_z *z, const uint8_t *src, size_t len)
{
	if (len < 8 * ZSAMPLE)
		return true;
	for (size_t i = 0; i < 4; i++) {
		size_t r = ZSTD_compress2(z->probe, z->out, ZSAMPLE - ZSAMPLE / 8,
					  src + (len - ZSAMPLE) / 3 * i, ZSAMPLE);
		if (!ZSTD_isError(r))
			return true;
	}
	return false;
}

/* 1 and the frame's size in *zlen if it saves an eighth of len, 0 if not
 * (z_worth's samples, or zstd giving up when the frame outgrows that). */
static int z_compress(struct pages_z *z, const uint8_t *src, size_t len, size_t *zlen)
{
	if (!z_worth(z, src, len))
		return 0;
	size_t r = ZSTD_compress2(z->cctx, z->out, len - len / 8, src, len);
	if (ZSTD_isError(r)) {
		/* the context is left mid-frame; the next frame starts afresh */
		ZSTD_CCtx_reset(z->cctx, ZSTD_reset_session_only);
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

static int z_compress(struct pages_z *z, const uint8_t *src, size_t len, size_t *zlen)
{
	(void)z, (void)src, (void)len, (void)zlen;
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
static void async_free(struct pages_async *a);

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
	if (z && z->cap < pw->bufsize)
		return -EINVAL;
	pw->z = z;
	return 0;
}

void pages_writer_release(struct pages_writer *pw)
{
	if (!pw)
		return;
	async_free(pw->async);
	pw->async = NULL;
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
 * The writer thread (pages_writer_async): one record in flight at a time.
 * The caller's thread reads the next record into the other buffer while
 * this one writes; busy is the handover, under mu. The thread owns the
 * image writer while busy; the caller waits (async_wait) before it posts
 * the next record, and before anything else writes to the image
 * (pages_sync).
 */
struct pages_async {
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool busy, quit;
	int err;                /* the first failed write; the thread writes no more */
	struct img_writer *w;
	uint32_t type;
	struct iovec iov[3];
	uint32_t crc;
	uint8_t *spare;         /* the buffer not being filled: in flight or idle */
	struct pages_extent *spare_out;
};

static void *async_main(void *p)
{
	struct pages_async *a = p;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->busy && !a->quit)
			pthread_cond_wait(&a->cv, &a->mu);
		if (!a->busy)
			break;
		int err = a->err;
		pthread_mutex_unlock(&a->mu);
		int r = err ? 0 : img_write_aligned_crc(a->w, a->type, a->iov, 3, a->crc);
		pthread_mutex_lock(&a->mu);
		if (r < 0 && !a->err)
			a->err = r;
		a->busy = false;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* Waits until no record is in flight; the first write error, or 0. */
static int async_wait(struct pages_async *a)
{
	if (!a || !a->started)
		return a ? a->err : 0;
	pthread_mutex_lock(&a->mu);
	while (a->busy)
		pthread_cond_wait(&a->cv, &a->mu);
	int r = a->err;
	pthread_mutex_unlock(&a->mu);
	return r;
}

static void async_free(struct pages_async *a)
{
	if (!a)
		return;
	if (a->started) {
		pthread_mutex_lock(&a->mu);
		a->quit = true;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->thread, NULL);
	}
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a->spare_out);
	free(a);
}

int pages_writer_async(struct pages_writer *pw, void *buf2)
{
	if (!buf2 || pw->async || pw->z)
		return -EINVAL;
	struct pages_async *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->w = pw->w;
	a->type = pw->type;
	a->spare = buf2;
	a->spare_out = malloc(ztable_size(pw->out_cap));
	if (!a->spare_out) {
		async_free(a);
		return -ENOMEM;
	}
	pw->async = a;
	return 0;
}

int pages_sync(struct pages_writer *pw)
{
	return async_wait(pw->async);
}

/*
 * Hands the record in iov (in pw->buf and pw->out) to the writer thread,
 * started now if it is not yet, and takes the spare buffers to fill next.
 * 1 if handed over, 0 if the record must be written here (no thread could
 * be started), or -errno of an earlier write.
 */
static int async_post(struct pages_writer *pw, const struct iovec *iov, uint32_t crc)
{
	struct pages_async *a = pw->async;
	int r = async_wait(a);
	if (r < 0)
		return r;
	if (!a->started) {
		if (pthread_create(&a->thread, NULL, async_main, a) != 0)
			return 0;
		a->started = true;
	}
	pthread_mutex_lock(&a->mu);
	memcpy(a->iov, iov, sizeof(a->iov));
	a->crc = crc;
	a->busy = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	uint8_t *b = pw->buf;
	pw->buf = a->spare;
	a->spare = b;
	struct pages_extent *o = pw->out;
	pw->out = a->spare_out;
	a->spare_out = o;
	return 1;
}

/* full: the buffer is full, more is likely to follow (a thread pays off) */
static int flush(struct pages_writer *pw, bool full)
{
	uint64_t bytes;
	int r;

	if (!pw->nq)
		return 0;
	pw->read_failed = false;
	static const uint8_t zero[8];
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
	size_t zlen = 0;
	r = pw->z && bytes >= ZMIN && bytes <= PAGES_MAX_RAW ?
		    z_compress(pw->z, pw->buf, bytes, &zlen) : 0;
	if (r < 0)
		return r;
	bool zipped = r > 0;
	uint64_t len = zipped ? zlen : bytes;
	struct pages_head head = { .magic = zipped ? PAGES_MAGIC_ZSTD : PAGES_MAGIC,
				   .n = (uint32_t)n, .tag = pw->tag };
	uint8_t *end = (uint8_t *)&x[n];
	if (zipped) {
		uint64_t zl = zlen;
		memcpy(end, &zl, sizeof(zl));
		end += sizeof(zl);
	}
	memcpy(end, &head, sizeof(head));
	struct iovec iov[3] = {
		{ .iov_base = zipped ? pw->z->out : pw->buf, .iov_len = len },
		{ .iov_base = (void *)zero, .iov_len = ALIGN8(len) - len },
		{ .iov_base = x, .iov_len = zipped ? ztable_size(n) : table_size(n) },
	};
	if (zipped) {
		crc = img_crc32c(0, iov[0].iov_base, iov[0].iov_len);
	}
	/* the pad and the table after the bytes summed as they were read */
	crc = img_crc32c(crc, iov[1].iov_base, iov[1].iov_len);
	crc = img_crc32c(crc, iov[2].iov_base, iov[2].iov_len);
	r = 0;
	if (pw->async && (pw->async->started || full))
		r = async_post(pw, iov, crc);
	if (r == 0) {
		r = async_wait(pw->async);
		if (r >= 0)
			r = img_write_aligned_crc(pw->w, pw->type, iov, 3, crc);
	}
	if (r < 0)
		return r;
	pw->bytes += bytes;
	pw->records++;
	if (pw->z) {
		pw->z->st.raw += bytes;
		pw->z->st.stored += len;
		pw->z->st.records++;
		pw->z->st.compressed += zipped;
	}
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
