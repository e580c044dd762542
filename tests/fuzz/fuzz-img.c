/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The image reader fed damaged images.
 *
 * A valid image of a few records (odd-sized, empty, page-aligned) is built
 * in memory, then damaged over and over by a seeded PRNG: bit flips, byte
 * overwrites, truncation, inserted and deleted bytes, forged lengths, pads,
 * types, trailer and header fields (some with their checksums fixed up so
 * that the deeper checks are reached), duplicated and dropped records. Each
 * result goes through img_reader_open + img_reader_validate and a walk of
 * img_reader_next, from a memfd or (one in eight) from a pipe.
 *
 * Every byte of an image is covered by a checksum or must be zero, and no
 * forgery here can keep the trailer's counts right, so the oracle is exact:
 * an image equal to the original is accepted, any other is rejected with
 * a reason. The walk must agree with validate, and every record it returns
 * must lie inside the buffer.
 *
 *   fuzz-img [--iterations N] [--seed S] [--write-seed FILE]
 *
 * Built with -DCKPT_LIBFUZZER, it is a libFuzzer target instead
 * (LLVMFuzzerTestOneInput); --write-seed gives it a valid image to start from.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "img/img.h"
#include "util/cleanup.h"

#define FRAME_SZ   sizeof(struct img_frame)
#define HDR_SZ	   sizeof(struct img_header)
#define MAX_FRAMES 16
#define SLACK	   (256u << 10) /* room for growth by insertion */

struct image {
	uint8_t *p;
	size_t len, cap;
};

/* the original and where its frames are */
struct corpus {
	struct image orig;
	size_t frames[MAX_FRAMES]; /* offsets, the trailer's last */
	size_t nframes;
};

struct probe {
	int ret;      /* of open or validate */
	int walk_ret; /* the last img_reader_next() */
	size_t walk_records;
	uint32_t touched; /* crc of all data returned: every byte is read */
	struct img_error err;
	const char *bad; /* a broken promise of the reader, or NULL */
};

/* --- a deterministic PRNG (splitmix64) ------------------------------ */

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform enough in [0, n), n > 0 */
static size_t below(uint64_t *s, size_t n)
{
	return n ? (size_t)(rnd(s) % n) : 0;
}

/* --- feeding the reader --------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t k = write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -errno;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* fd to read the image from: a fresh memfd, or a pipe already filled and closed */
static int feed(const uint8_t *p, size_t len, bool pipe_it)
{
	int fd, r;

	if (pipe_it) {
		int fds[2];

		if (pipe2(fds, O_CLOEXEC) < 0)
			return -errno;
		if (fcntl(fds[1], F_SETPIPE_SZ, 1 << 20) < (int)len) {
			close(fds[0]);
			close(fds[1]);
			return -EFBIG;
		}
		r = write_all(fds[1], p, len);
		close(fds[1]);
		if (r < 0) {
			close(fds[0]);
			return r;
		}
		return fds[0];
	}
	fd = memfd_create("fuzz-img", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = write_all(fd, p, len);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* Opens, validates and walks the image in fd; checks what the reader promises. */
static void probe_fd(int fd, size_t len, struct probe *res)
{
	struct img_reader r;
	struct img_record rec;
	struct img_error err2;
	size_t bound = len / FRAME_SZ + 2;

	memset(res, 0, sizeof(*res));
	res->ret = img_reader_open(&r, fd, &res->err);
	if (res->ret < 0) {
		if (r.base)
			res->bad = "failed open left a buffer behind";
		return;
	}
	if (r.size != len)
		res->bad = "reader size differs from the input";
	res->ret = img_reader_validate(&r, &res->err);
	if (r.pos != HDR_SZ || r.next_index != 0)
		res->bad = "validate did not rewind";
	if ((res->ret == 0) != r.validated)
		res->bad = "validated flag disagrees with the result";

	/* the walk, on its own, must come to the same verdict */
	memset(&err2, 0, sizeof(err2));
	for (;;) {
		res->walk_ret = img_reader_next(&r, &rec, &err2);
		if (res->walk_ret < 0)
			break;
		if (rec.data < r.base || rec.len > r.size ||
		    (size_t)(rec.data - r.base) > r.size - rec.len)
			res->bad = "record data outside the buffer";
		if (rec.offset + FRAME_SZ > (uint64_t)(rec.data - r.base))
			res->bad = "record data overlaps its frame";
		if (rec.index != res->walk_records)
			res->bad = "record index out of sequence";
		if (rec.type == 0 || rec.type >= IMG_REC_TRAILER)
			res->bad = "record of a reserved type returned";
		res->touched = img_crc32c(res->touched, rec.data, rec.len);
		if (++res->walk_records > bound) {
			res->bad = "walk does not end";
			break;
		}
	}
	if ((res->walk_ret == -ENODATA) != (res->ret == 0))
		res->bad = "walk and validate disagree";
	if (res->walk_ret != -ENODATA && !err2.reason[0])
		res->bad = "walk failed without a reason";
	img_reader_close(&r);
	if (r.base || r.size)
		res->bad = "close left state behind";
}

static int probe(const uint8_t *p, size_t len, bool pipe_it, struct probe *res)
{
	int fd = feed(p, len, pipe_it);

	if (fd < 0)
		return fd;
	probe_fd(fd, len, res);
	close(fd);
	return 0;
}

/* --- the original --------------------------------------------------- */

static int build(struct corpus *c)
{
	struct img_header h = {
		.arch = 62,
		.page_size = IMG_PAGE_SIZE,
		.xfeatures = 7,
		.xsave_size = 832,
		.created_ns = 1,
	};
	struct img_writer w;
	struct img_reader r;
	struct img_record rec;
	struct img_error err;
	uint8_t data[3 * 4096 + 100];
	struct iovec iov[2];
	int fd, ret = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 37 + (i >> 8));
	strcpy(h.kernel_release, "6.1.0-fuzz");
	fd = memfd_create("fuzz-orig", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = img_writer_init(&w, fd, &h);
	ret = ret ?: img_write(&w, 1, 0, data, 13);
	iov[0] = (struct iovec){ data, 4096 };
	iov[1] = (struct iovec){ data + 4096, 4096 + 100 };
	ret = ret ?: img_write_aligned(&w, 2, iov, 2);
	ret = ret ?: img_write(&w, 3, 0, NULL, 0);
	ret = ret ?: img_write(&w, 4, 0x7000, data + 5, 333);
	ret = ret ?: img_write_aligned(&w, 5, iov, 1);
	ret = ret ?: img_write(&w, 6, 0, data + 77, 24);
	ret = ret ?: img_write(&w, 0xfffe, 0xfffff000u, data + 1, 1);
	ret = ret ?: img_writer_finish(&w);
	if (ret < 0)
		goto out;

	c->orig.len = (size_t)w.offset;
	c->orig.p = malloc(c->orig.len);
	if (!c->orig.p) {
		ret = -ENOMEM;
		goto out;
	}
	if (pread(fd, c->orig.p, c->orig.len, 0) != (ssize_t)c->orig.len) {
		ret = -EIO;
		goto out;
	}

	ret = img_reader_open(&r, fd, &err);
	if (ret < 0)
		goto out;
	c->nframes = 0;
	while ((ret = img_reader_next(&r, &rec, &err)) == 0)
		c->frames[c->nframes++] = (size_t)rec.offset;
	c->frames[c->nframes++] = r.pos; /* the trailer */
	img_reader_close(&r);
	ret = ret == -ENODATA ? 0 : ret;
out:
	close(fd);
	return ret;
}

/* --- damage --------------------------------------------------------- */

enum mutation {
	MUT_BITFLIP,
	MUT_OVERWRITE,
	MUT_TRUNCATE,
	MUT_INSERT,
	MUT_DELETE,
	MUT_LENGTH,
	MUT_PAD,
	MUT_TYPE,
	MUT_TRAILER,
	MUT_HEADER,
	MUT_APPEND,
	MUT_DUP_RECORD,
	MUT_DROP_RECORD,
	MUT_STACKED,
	MUT_MAX,
};

static const char *const mutation_names[MUT_MAX] __attribute__((unused)) = {
	[MUT_BITFLIP] = "bitflip",
	[MUT_OVERWRITE] = "overwrite",
	[MUT_TRUNCATE] = "truncate",
	[MUT_INSERT] = "insert",
	[MUT_DELETE] = "delete",
	[MUT_LENGTH] = "length",
	[MUT_PAD] = "pad",
	[MUT_TYPE] = "type",
	[MUT_TRAILER] = "trailer",
	[MUT_HEADER] = "header",
	[MUT_APPEND] = "append",
	[MUT_DUP_RECORD] = "dup-record",
	[MUT_DROP_RECORD] = "drop-record",
	[MUT_STACKED] = "stacked",
};

static void insert_at(struct image *m, size_t at, const uint8_t *src, size_t n)
{
	if (at > m->len || n > m->cap - m->len)
		return;
	memmove(m->p + at + n, m->p + at, m->len - at);
	if (src)
		memcpy(m->p + at, src, n);
	else
		memset(m->p + at, 0, n);
	m->len += n;
}

static void delete_at(struct image *m, size_t at, size_t n)
{
	if (at >= m->len)
		return;
	n = MIN(n, m->len - at);
	memmove(m->p + at, m->p + at + n, m->len - at - n);
	m->len -= n;
}

/* A frame of the original, by index; it may have moved if m was changed. */
static bool get_frame(const struct image *m, size_t off, struct img_frame *f)
{
	if (off > m->len || m->len - off < FRAME_SZ)
		return false;
	memcpy(f, m->p + off, sizeof(*f));
	return true;
}

static void put_frame(struct image *m, size_t off, struct img_frame *f, bool fix_crc)
{
	if (fix_crc)
		f->hdr_crc = img_crc32c(0, f, offsetof(struct img_frame, hdr_crc));
	memcpy(m->p + off, f, sizeof(*f));
}

static uint64_t odd_length(uint64_t *s, uint64_t old, size_t len)
{
	static const uint64_t fixed[] = {
	    0,
	    1,
	    23,
	    24,
	    4095,
	    4096,
	    4097,
	    (1ull << 32) - 1,
	    1ull << 32,
	    (1ull << 32) + 1,
	    (1ull << 32) + 4095,
	    (1ull << 32) + 4096,
	    1ull << 63,
	    UINT64_MAX,
	    UINT64_MAX - 23,
	    UINT64_MAX - 4095,
	    UINT64_MAX - 4096,
	};
	uint64_t v;

	switch (below(s, 4)) {
	case 0:
		v = fixed[below(s, ARRAY_SIZE(fixed))];
		break;
	case 1:
		v = old + 1 + below(s, 64);
		break;
	case 2:
		v = old - 1 - below(s, 64);
		break;
	default:
		v = below(s, 2) ? (uint64_t)len + below(s, 64) - 32 : rnd(s);
		break;
	}
	return v == old ? old ^ 1 : v;
}

static void mutate_raw(struct image *m, uint64_t *s, enum mutation kind)
{
	size_t n, at;

	if (m->len == 0)
		kind = MUT_INSERT;
	switch (kind) {
	case MUT_BITFLIP:
		n = 1 + below(s, 3);
		while (n--) {
			at = below(s, m->len);
			m->p[at] ^= (uint8_t)(1u << below(s, 8));
		}
		break;
	case MUT_OVERWRITE:
		n = 1 + below(s, 8);
		at = below(s, m->len);
		for (size_t i = 0; i < n && at + i < m->len; i++)
			m->p[at + i] = below(s, 4) ? (uint8_t)rnd(s) : 0;
		break;
	case MUT_TRUNCATE:
		m->len = below(s, m->len);
		break;
	case MUT_INSERT: {
		uint8_t junk[64];

		n = 1 + below(s, sizeof(junk));
		for (size_t i = 0; i < n; i++)
			junk[i] = (uint8_t)rnd(s);
		insert_at(m, below(s, m->len + 1), below(s, 2) ? junk : NULL, n);
		break;
	}
	case MUT_DELETE:
		n = below(s, 8) ? 1 + below(s, 64) : 1 + below(s, 8192);
		delete_at(m, below(s, m->len), n);
		break;
	default:
		break;
	}
}

static void mutate(const struct corpus *c, struct image *m, uint64_t *s, enum mutation kind)
{
	size_t fi = below(s, c->nframes);
	size_t off = c->frames[fi];
	size_t trailer = c->frames[c->nframes - 1];
	struct img_frame f;
	uint32_t v32;

	switch (kind) {
	case MUT_BITFLIP:
	case MUT_OVERWRITE:
	case MUT_INSERT:
	case MUT_DELETE:
		mutate_raw(m, s, kind);
		break;
	case MUT_TRUNCATE:
		/* at or near a frame boundary half of the time */
		if (below(s, 2)) {
			size_t at = off + below(s, 2 * FRAME_SZ + 1);

			m->len = MIN(m->len - 1, at >= FRAME_SZ ? at - FRAME_SZ : 0);
		} else {
			mutate_raw(m, s, kind);
		}
		break;
	case MUT_LENGTH:
		if (!get_frame(m, off, &f))
			break;
		f.length = odd_length(s, f.length, m->len - off);
		put_frame(m, off, &f, below(s, 4) != 0);
		break;
	case MUT_PAD:
		/* the pad bits change; the caller's flag bits above may as well */
		if (!get_frame(m, off, &f))
			break;
		v32 = (f.flags & IMG_FLAG_PAD_MASK) ^ (1 + (uint32_t)below(s, IMG_FLAG_PAD_MASK));
		f.flags =
		    (below(s, 4) ? f.flags & ~IMG_FLAG_PAD_MASK : (uint32_t)rnd(s) << 12) | v32;
		put_frame(m, off, &f, below(s, 8) != 0);
		break;
	case MUT_TYPE: {
		static const uint32_t bad[] = { 0, IMG_REC_TRAILER, IMG_REC_TRAILER + 1, UINT32_MAX };

		if (!get_frame(m, off, &f))
			break;
		if (f.type == IMG_REC_TRAILER)
			f.type = below(s, 2) ? 1 + (uint32_t)below(s, IMG_REC_TRAILER - 1)
					     : (uint32_t)rnd(s) | 0x10000u;
		else
			f.type = below(s, 2) ? bad[below(s, ARRAY_SIZE(bad))]
					     : (uint32_t)rnd(s) | 0x10000u;
		put_frame(m, off, &f, below(s, 8) != 0);
		break;
	}
	case MUT_TRAILER: {
		struct img_trailer t;
		size_t d = trailer + FRAME_SZ;

		memcpy(&t, m->p + d, sizeof(t));
		switch (below(s, 5)) {
		case 0:
			t.records += below(s, 2) ? 1 + below(s, 3) : -(uint64_t)(1 + below(s, 3));
			break;
		case 1:
			t.data_bytes +=
			    below(s, 2) ? 1 + below(s, 8192) : -(uint64_t)(1 + below(s, 8192));
			break;
		case 2:
			t.magic ^= 1u << below(s, 32);
			break;
		case 3:
			t.reserved = 1 + (uint32_t)below(s, UINT32_MAX);
			break;
		default:
			t.records = rnd(s) | (1ull << 40);
			t.data_bytes = rnd(s);
			break;
		}
		memcpy(m->p + d, &t, sizeof(t));
		if (below(s, 8) && get_frame(m, trailer, &f)) {
			f.data_crc = img_crc32c(0, &t, sizeof(t));
			put_frame(m, trailer, &f, false);
		}
		break;
	}
	case MUT_HEADER: {
		struct img_header h;

		memcpy(&h, m->p, sizeof(h));
		switch (below(s, 5)) {
		case 0:
			h.version = below(s, 2) ? 0 : 2 + (uint32_t)below(s, 100000);
			break;
		case 1:
			h.header_size ^= 1 + (uint32_t)below(s, 4096);
			break;
		case 2:
			h.page_size = below(s, 2) ? 65536 : (uint32_t)rnd(s) | 1;
			break;
		case 3:
			memset(h.kernel_release, 'A' + (int)below(s, 26), sizeof(h.kernel_release));
			break;
		default:
			h.magic[below(s, sizeof(h.magic))] ^= (char)(1 + below(s, 255));
			break;
		}
		if (below(s, 8))
			h.crc = img_crc32c(0, &h, offsetof(struct img_header, crc));
		memcpy(m->p, &h, sizeof(h));
		break;
	}
	case MUT_APPEND:
		if (below(s, 2)) {
			uint8_t junk[64];

			for (size_t i = 0; i < sizeof(junk); i++)
				junk[i] = (uint8_t)rnd(s);
			insert_at(m, m->len, junk, 1 + below(s, sizeof(junk)));
		} else {
			/* a second trailer: the image after the first must be nothing */
			insert_at(m, m->len, c->orig.p + trailer, c->orig.len - trailer);
		}
		break;
	case MUT_DUP_RECORD: {
		size_t end = fi + 1 < c->nframes ? c->frames[fi + 1] : c->orig.len;
		size_t to = c->frames[below(s, c->nframes)];

		if (below(s, 4) == 0)
			to = c->orig.len;
		insert_at(m, to, c->orig.p + off, end - off);
		break;
	}
	case MUT_DROP_RECORD: {
		size_t end = fi + 1 < c->nframes ? c->frames[fi + 1] : c->orig.len;

		delete_at(m, off, end - off);
		break;
	}
	case MUT_STACKED:
		for (size_t n = 2 + below(s, 3); n; n--)
			mutate_raw(m, s, (enum mutation)below(s, MUT_DELETE + 1));
		break;
	case MUT_MAX:
		break;
	}
}

/* --- the oracle ----------------------------------------------------- */

/* NULL if the reader did right by this image, else what it did wrong */
static const char *judge(const struct corpus *c, const struct image *m, const struct probe *res)
{
	bool same = m->len == c->orig.len && !memcmp(m->p, c->orig.p, m->len);

	if (res->bad)
		return res->bad;
	if (same && res->ret < 0)
		return "the original image was rejected";
	if (!same && res->ret >= 0)
		return "a damaged image was accepted";
	if (!same && !res->err.reason[0])
		return "rejected without a reason";
	if (same && res->walk_records != c->nframes - 1)
		return "the original image has lost records";
	return NULL;
}

#ifdef CKPT_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The input twice: as an image, where the reader must keep its promises
 * (there is no oracle for arbitrary bytes), and, from its first 8 bytes, as
 * the seed of one damage to the original, which the oracle judges.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct corpus c = { 0 };
	struct probe res;
	struct image m;
	uint64_t s = 0;

	if (probe(data, size, false, &res) == 0 && (res.bad || (res.ret < 0 && !res.err.reason[0])))
		__builtin_trap();
	if (size < sizeof(s) || build(&c) < 0)
		goto out;
	memcpy(&s, data, sizeof(s));
	m.cap = c.orig.len + SLACK;
	m.p = malloc(m.cap);
	if (!m.p)
		goto out;
	m.len = c.orig.len;
	memcpy(m.p, c.orig.p, m.len);
	mutate(&c, &m, &s, (enum mutation)below(&s, MUT_MAX));
	if (probe(m.p, m.len, size > 8 && (data[8] & 1), &res) == 0 && judge(&c, &m, &res))
		__builtin_trap();
	free(m.p);
out:
	free(c.orig.p);
	return 0;
}
#else

static int write_seed(const struct corpus *c, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int r;

	if (fd < 0)
		return -errno;
	r = write_all(fd, c->orig.p, c->orig.len);
	close(fd);
	return r;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--iterations N] [--seed S] [--write-seed FILE]\n", argv0);
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t iterations = 10000, seed = 0x636b7074696d67ull, s;
	unsigned long long passed = 0, failed = 0, rejected = 0;
	unsigned long long per_kind[MUT_MAX] = { 0 };
	const char *seed_path = NULL;
	struct corpus c = { 0 };
	struct image m;
	struct probe res;
	int r;

	for (int i = 1; i < argc; i++) {
		char *end;

		if (i + 1 < argc && !strcmp(argv[i], "--iterations")) {
			iterations = strtoull(argv[++i], &end, 0);
			if (*end)
				return usage(argv[0]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--seed")) {
			seed = strtoull(argv[++i], &end, 0);
			if (*end)
				return usage(argv[0]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--write-seed")) {
			seed_path = argv[++i];
		} else {
			return usage(argv[0]);
		}
	}

	r = build(&c);
	if (r < 0) {
		fprintf(stderr, "cannot build the original image: %s\n", strerror(-r));
		return 1;
	}
	if (seed_path) {
		r = write_seed(&c, seed_path);
		if (r < 0) {
			fprintf(stderr, "cannot write '%s': %s\n", seed_path, strerror(-r));
			return 1;
		}
	}
	m.cap = c.orig.len + SLACK;
	m.p = malloc(m.cap);
	if (!m.p)
		return 1;

	/* the original, first, by both paths: an oracle that rejects it proves nothing */
	for (int pipe_it = 0; pipe_it < 2; pipe_it++) {
		m.len = c.orig.len;
		memcpy(m.p, c.orig.p, m.len);
		if (probe(m.p, m.len, pipe_it, &res) < 0 || judge(&c, &m, &res)) {
			fprintf(stderr, "the original image does not pass: %s\n", res.err.reason);
			return 1;
		}
	}

	s = seed;
	for (uint64_t it = 0; it < iterations; it++) {
		enum mutation kind = (enum mutation)below(&s, MUT_MAX);
		bool pipe_it = below(&s, 8) == 0;
		const char *why;

		m.len = c.orig.len;
		memcpy(m.p, c.orig.p, m.len);
		mutate(&c, &m, &s, kind);
		per_kind[kind]++;

		r = probe(m.p, m.len, pipe_it, &res);
		if (r < 0) {
			fprintf(stderr, "iteration %" PRIu64 ": cannot feed the image: %s\n", it,
				strerror(-r));
			failed++;
			continue;
		}
		why = judge(&c, &m, &res);
		if (why) {
			if (failed < 10)
				fprintf(stderr,
					"FAIL iteration %" PRIu64 " (%s, %zu bytes, %s): %s; "
					"reader said %d '%s'\n",
					it, mutation_names[kind], m.len, pipe_it ? "pipe" : "memfd",
					why, res.ret, res.err.reason);
			failed++;
		} else {
			passed++;
			rejected += res.ret < 0;
		}
	}

	for (int k = 0; k < MUT_MAX; k++)
		fprintf(stderr, "%-12s %llu\n", mutation_names[k], per_kind[k]);
	fprintf(stderr, "%llu of the passed were rejected, %llu unchanged and accepted\n", rejected,
		passed - rejected);
	/* the suite counts the whole run as one test */
	printf("fuzz-img: %llu inputs judged right, %llu wrong\n", passed, failed);
	printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
	free(m.p);
	free(c.orig.p);
	return failed ? 1 : 0;
}
#endif
