/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The page store: contents written as records through an image and read
 * back to the same bytes (zero blocks dropped, a buffer smaller than the
 * extents, several owners, two workers), and the refusal of every forged
 * record and extent: damaged input is refused, never read past.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "img/img.h"
#include "img/pages.h"
#include "unit.h"

#define SPACE (160u * 4096) /* more than a read piece (256 KiB) */
#define TYPE 0x301u

struct space {
	uint8_t b[SPACE];
};

/* read callback: bytes of the extents from src, zeros past its end */
static int read_space(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	const struct space *s = arg;
	for (size_t i = 0; i < n; i++) {
		for (uint64_t k = 0; k < x[i].len; k++)
			dst[k] = x[i].off + k < SPACE ? s->b[x[i].off + k] : 0;
		dst += x[i].len;
	}
	return 0;
}

static int read_fail(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	(void)arg, (void)x, (void)n, (void)dst;
	return -EIO;
}

static void fill_space(struct space *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < SPACE; i++) {
		size_t blk = i / 4096;
		/* blocks 2, 3, 7 and 20 stay zero; block 9 has one byte set */
		if (blk == 2 || blk == 3 || blk == 7 || blk == 20 || blk == 9)
			continue;
		s->b[i] = (uint8_t)(i * 7 + blk + 1) | 1;
	}
	s->b[9 * 4096 + 100] = 0x5a;
}

static int put_extent(void *arg, uint64_t off, const uint8_t *src, uint64_t len)
{
	struct space *d = arg;
	if (off + len > SPACE)
		return -ERANGE;
	memcpy(d->b + off, src, len);
	return 0;
}

static int put_chunk(void *arg, const struct pages_chunk *c, uint64_t *ret_off)
{
	int r = pages_chunk_each(c, put_extent, arg);
	if (r < 0)
		*ret_off = c->x[0].off;
	return r;
}

static int put_fail(void *arg, const struct pages_chunk *c, uint64_t *ret_off)
{
	(void)arg;
	*ret_off = c->x[0].off;
	return -EFAULT;
}

/* Writes the given extents of s into an image (memfd); returns its fd.
 * async: records written by the writer's thread (pages_writer_async). */
static int write_image(struct space *s, const struct pages_extent *x, size_t n, size_t bufsize,
		       uint64_t tag, bool async, uint64_t *ret_records, uint64_t *ret_bytes)
{
	int fd = memfd_create("test-pages", MFD_CLOEXEC);
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE };
	struct img_writer w;
	struct pages_writer pw;
	void *buf = aligned_alloc(4096, bufsize), *buf2 = aligned_alloc(4096, bufsize);
	CHECK(fd >= 0 && buf && buf2);
	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(pages_writer_init(&pw, &w, TYPE, tag, buf, bufsize, read_space, s), 0);
	if (async)
		CHECK_EQ(pages_writer_async(&pw, buf2), 0);
	for (size_t i = 0; i < n; i++)
		CHECK_EQ(pages_add(&pw, x[i].off, x[i].len), 0);
	CHECK_EQ(pages_flush(&pw), 0);
	CHECK_EQ(pages_sync(&pw), 0);
	*ret_records = pw.records;
	*ret_bytes = pw.bytes;
	pages_writer_release(&pw);
	CHECK_EQ(img_writer_finish(&w), 0);
	free(buf);
	free(buf2);
	return fd;
}

/* Reads every record of the image at fd into a set, checked in [lo, hi). */
static int read_set(int fd, struct img_reader *r, struct pages_set *set, uint64_t lo, uint64_t hi)
{
	struct img_error err;
	struct img_record rec;
	int e;
	lseek(fd, 0, SEEK_SET);
	CHECK_EQ(img_reader_open(r, fd, &err), 0);
	CHECK_EQ(img_reader_validate(r, &err), 0);
	while ((e = img_reader_next(r, &rec, &err)) == 0) {
		struct pages_chunk c;
		CHECK_EQ(rec.type, TYPE);
		if ((e = pages_parse(&rec, &c)) < 0 || (e = pages_set_add(set, &c, lo, hi)) < 0)
			return e;
		CHECK_EQ(c.tag, 42);
		CHECK_EQ((uintptr_t)c.data % IMG_PAGE_SIZE, 0);
	}
	return e == -ENODATA ? 0 : e;
}

/*
 * bufsize: three blocks cut the extents into many records; 512 KiB holds
 * them in two, read in pieces of 256 KiB cut inside a block (the long
 * extent starts 100 bytes into one). async: the writer's thread writes.
 */
static void round_trip_with(size_t bufsize, bool async)
{
	static struct space s, d;
	/* ragged extents: cut blocks, a zero block, adjacent ones merged,
	 * one past the end of the source (zeros) */
	const struct pages_extent x[] = {
		{ 100, 5000 }, { 5100, 3000 }, { 8192, 8192 }, { 6 * 4096, 4 * 4096 + 17 },
		{ 12 * 4096, 9 * 4096 }, { 22 * 4096 + 100, SPACE - 24 * 4096 - 150 },
		{ SPACE - 4096, 4096 }, { SPACE, 8192 },
	};
	uint64_t records, bytes;
	struct img_reader r;
	struct pages_set set = { 0 };

	fill_space(&s);
	int fd = write_image(&s, x, sizeof(x) / sizeof(x[0]), bufsize, 42, async, &records,
			     &bytes);
	CHECK(records >= (bufsize < 65536 ? 4 : 2));
	CHECK_EQ(read_set(fd, &r, &set, 0, SPACE), 0);
	CHECK_EQ(set.n, records);
	CHECK_EQ(set.bytes, bytes);
	/* what should come back: the extents' bytes, zero blocks or not */
	static struct space want;
	memset(&want, 0, sizeof(want));
	for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
		for (uint64_t k = x[i].off; k < x[i].off + x[i].len && k < SPACE; k++)
			want.b[k] = s.b[k];
	uint64_t fail = 0;
	memset(&d, 0, sizeof(d));
	CHECK_EQ(pages_set_apply(&set, 2, put_chunk, &d, &fail), 0);
	CHECK(!memcmp(want.b, d.b, SPACE));
	/* zero blocks are not in the image: blocks 2, 3, 7 and 20 */
	for (size_t i = 0; i < set.n; i++)
		for (uint32_t k = 0; k < set.c[i].n; k++) {
			const struct pages_extent *e = &set.c[i].x[k];
			for (uint64_t b = 2; b < 22; b++)
				if (b == 2 || b == 3 || b == 7 || b == 20)
					CHECK(e->off + e->len <= b * 4096 || e->off >= (b + 1) * 4096);
		}
	/* a failure stops the set and says where */
	CHECK_EQ(pages_set_apply(&set, 2, put_fail, NULL, &fail), -EFAULT);
	CHECK_EQ(pages_set_apply(&set, 1, put_fail, NULL, &fail), -EFAULT);
	CHECK_EQ(fail, set.c[0].x[0].off);
	pages_set_release(&set);
	img_reader_close(&r);
	/* bounds of the owner: the last extent ends at SPACE + 8192 (zeros
	 * are dropped, so SPACE is the end of what was kept) */
	struct pages_set narrow = { 0 };
	CHECK_EQ(read_set(fd, &r, &narrow, 0, SPACE - 1), -EINVAL);
	pages_set_release(&narrow);
	img_reader_close(&r);
	struct pages_set high = { 0 };
	CHECK_EQ(read_set(fd, &r, &high, 200, SPACE), -EINVAL);
	pages_set_release(&high);
	img_reader_close(&r);
	close(fd);
}

TEST(round_trip)
{
	round_trip_with(3 * 4096, false);
	round_trip_with(512 * 1024, false);
}

TEST(round_trip_async)
{
	round_trip_with(3 * 4096, true);
	round_trip_with(512 * 1024, true);
}

/* A write that fails in the writer's thread comes back, not as a read error. */
TEST(async_write_fails)
{
	static struct space s;
	int fd = memfd_create("test-pages", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE };
	struct img_writer w;
	struct pages_writer pw;
	void *buf = aligned_alloc(4096, 8192), *buf2 = aligned_alloc(4096, 8192);
	int r = 0;
	CHECK(fd >= 0 && buf && buf2);
	fill_space(&s);
	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(pages_writer_init(&pw, &w, TYPE, 1, buf, 8192, read_space, &s), 0);
	CHECK_EQ(pages_writer_async(&pw, NULL), -EINVAL);
	CHECK_EQ(pages_writer_async(&pw, buf2), 0);
	CHECK_EQ(pages_writer_async(&pw, buf2), -EINVAL); /* once */
	CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
	for (uint64_t off = 0; r == 0 && off < SPACE; off += 4096)
		r = pages_add(&pw, off, 4096);
	if (r == 0)
		r = pages_flush(&pw);
	if (r == 0)
		r = pages_sync(&pw);
	CHECK_EQ(r, -EPERM);
	CHECK(!pw.read_failed);
	CHECK_EQ(pages_sync(&pw), -EPERM); /* kept */
	pages_writer_release(&pw);
	free(buf);
	free(buf2);
	close(fd);
}

TEST(writer_refuses)
{
	static struct space s;
	struct img_writer w;
	struct pages_writer pw;
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE };
	uint8_t *buf = aligned_alloc(4096, 8192);
	int fd = memfd_create("test-pages", MFD_CLOEXEC);

	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(pages_writer_init(&pw, &w, TYPE, 1, buf, 100, read_space, &s), -EINVAL);
	CHECK_EQ(pages_writer_init(&pw, &w, TYPE, 1, buf, 8192, read_space, &s), 0);
	CHECK_EQ(pages_add(&pw, 8192, 4096), 0);
	CHECK_EQ(pages_add(&pw, 4096, 4096), -EINVAL); /* backwards */
	CHECK_EQ(pages_add(&pw, UINT64_MAX - 10, 100), -EINVAL); /* wraps */
	/* all zero: nothing written */
	CHECK_EQ(pages_flush(&pw), 0);
	CHECK_EQ(pw.records, 0);
	/* a new owner starts over */
	CHECK_EQ(pages_retag(&pw, 2), 0);
	CHECK_EQ(pages_add(&pw, 0, 4096), 0);
	pages_writer_release(&pw);
	CHECK_EQ(pages_writer_init(&pw, &w, TYPE, 1, buf, 8192, read_fail, &s), 0);
	CHECK_EQ(pages_add(&pw, 0, 4096), 0);
	CHECK_EQ(pages_flush(&pw), -EIO);
	CHECK(pw.read_failed);
	pages_writer_release(&pw);
	pages_writer_release(NULL);
	free(buf);
	close(fd);
}

/* A record: bytes, pad to 8, extents, head, in an aligned buffer. */
struct forged {
	uint8_t *mem;
	struct img_record rec;
};

static void forge(struct forged *f, uint32_t magic, uint32_t n, const struct pages_extent *x,
		  uint32_t nx, uint64_t bytes)
{
	size_t tab = (bytes + 7) / 8 * 8, len = tab + (size_t)nx * 16 + 16;
	size_t size = (len + 4095) / 4096 * 4096;
	f->mem = aligned_alloc(4096, size);
	memset(f->mem, 0xab, size);
	struct pages_head h = { .magic = magic, .n = n, .tag = 7 };
	memcpy(f->mem + tab, x, (size_t)nx * 16);
	memcpy(f->mem + tab + (size_t)nx * 16, &h, sizeof(h));
	f->rec = (struct img_record){ .type = TYPE, .data = f->mem, .len = len };
}

static int parse_forged(uint32_t magic, uint32_t n, const struct pages_extent *x, uint32_t nx,
			uint64_t bytes)
{
	struct forged f;
	struct pages_chunk c;
	forge(&f, magic, n, x, nx, bytes);
	int r = pages_parse(&f.rec, &c);
	free(f.mem);
	return r;
}

TEST(forged_records)
{
	const struct pages_extent one[] = { { 4096, 4096 } };
	const struct pages_extent two[] = { { 0, 4096 }, { 8192, 100 } };
	const struct pages_extent overlap[] = { { 0, 8192 }, { 4096, 4096 } };
	const struct pages_extent back[] = { { 8192, 4096 }, { 0, 4096 } };
	const struct pages_extent empty[] = { { 0, 0 } };
	const struct pages_extent wrap[] = { { UINT64_MAX - 4095, 8192 } };
	const struct pages_extent huge[] = { { 0, UINT64_MAX } };

	CHECK_EQ(parse_forged(PAGES_MAGIC, 1, one, 1, 4096), 0);
	CHECK_EQ(parse_forged(PAGES_MAGIC, 2, two, 2, 4196), 0);
	CHECK_EQ(parse_forged(PAGES_MAGIC ^ 1, 1, one, 1, 4096), -EINVAL);
	CHECK_EQ(parse_forged(PAGES_MAGIC, 0, one, 1, 4096), -EINVAL);
	CHECK_EQ(parse_forged(PAGES_MAGIC, 1, one, 1, 4088), -EINVAL);  /* bytes short */
	CHECK_EQ(parse_forged(PAGES_MAGIC, 1, one, 1, 4104), -EINVAL);  /* bytes over */
	CHECK_EQ(parse_forged(PAGES_MAGIC, 2, two, 1, 4196), -EINVAL);  /* n past the table */
	CHECK_EQ(parse_forged(PAGES_MAGIC, 2, overlap, 2, 12288), -EINVAL);
	CHECK_EQ(parse_forged(PAGES_MAGIC, 2, back, 2, 8192), -EINVAL);
	CHECK_EQ(parse_forged(PAGES_MAGIC, 1, empty, 1, 0), -EINVAL);
	CHECK_EQ(parse_forged(PAGES_MAGIC, 1, wrap, 1, 8192), -EINVAL);
	CHECK_EQ(parse_forged(PAGES_MAGIC, 1, huge, 1, 4096), -EINVAL);
	/* n larger than the record holds: the table is never read past it */
	CHECK_EQ(parse_forged(PAGES_MAGIC, 300, one, 1, 0), -EINVAL);
	CHECK_EQ(parse_forged(PAGES_MAGIC, UINT32_MAX, one, 1, 4096), -EINVAL);

	/* shorter than a head, misaligned, no data */
	struct forged f;
	struct pages_chunk c;
	forge(&f, PAGES_MAGIC, 1, one, 1, 4096);
	uint64_t len = f.rec.len;
	f.rec.len = 15;
	CHECK_EQ(pages_parse(&f.rec, &c), -EINVAL);
	f.rec.len = len - 1; /* the head read one byte early */
	CHECK_EQ(pages_parse(&f.rec, &c), -EINVAL);
	f.rec.len = len;
	f.rec.data = f.mem + 8;
	CHECK_EQ(pages_parse(&f.rec, &c), -EINVAL);
	f.rec.data = NULL;
	CHECK_EQ(pages_parse(&f.rec, &c), -EINVAL);
	f.rec.data = f.mem;
	CHECK_EQ(pages_parse(&f.rec, &c), 0);
	CHECK_EQ(c.tag, 7);
	CHECK(c.data == f.mem);
	CHECK_EQ(c.bytes, 4096);

	/* a set: bounds and order across chunks */
	struct pages_set s = { 0 };
	CHECK_EQ(pages_set_add(&s, &c, 8192, 1 << 20), -EINVAL); /* below lo */
	CHECK_EQ(pages_set_add(&s, &c, 0, 8191), -EINVAL);       /* past hi */
	CHECK_EQ(s.n, 0);
	CHECK_EQ(pages_set_add(&s, &c, 0, 8192), 0);
	CHECK_EQ(pages_set_add(&s, &c, 0, 1 << 20), -EINVAL);    /* again: overlaps */
	CHECK_EQ(s.n, 1);
	CHECK_EQ(s.end, 8192);
	pages_set_release(&s);
	free(f.mem);
}

/* Chunks with a pages_check: pages_set_apply checks each record before its
 * chunk is put, once for chunks sharing it; a bad one stops the apply
 * before its own bytes are put, with -EBADMSG and the chunk's address. */
static int put_count(void *arg, const struct pages_chunk *c, uint64_t *ret_off)
{
	(void)ret_off;
	unsigned *n = arg;
	__atomic_fetch_add(n, (unsigned)c->bytes / 4096, __ATOMIC_RELAXED);
	return 0;
}

TEST(checked_late)
{
	static uint8_t data[4 * 4096];
	struct pages_extent x[4];
	struct pages_check k[2];
	struct pages_set set = { 0 };
	unsigned put = 0;
	uint64_t off = 0;

	memset(data, 0x11, sizeof(data));
	for (int i = 0; i < 4; i++)
		x[i] = (struct pages_extent){ (uint64_t)(i * 2) * 4096, 4096 };
	/* record 0: chunks 0 and 1; record 1: chunks 2 and 3 */
	for (int i = 0; i < 2; i++)
		k[i] = (struct pages_check){ .data = data + i * 8192, .len = 8192,
					     .crc = img_crc32c(0, data + i * 8192, 8192),
					     .index = (uint32_t)i };
	for (int i = 0; i < 4; i++) {
		struct pages_chunk c = { .n = 1, .x = &x[i], .data = data + i * 4096,
					 .bytes = 4096, .check = &k[i / 2] };
		CHECK_EQ(pages_set_add(&set, &c, 0, 1u << 20), 0);
	}
	CHECK_EQ(pages_set_apply(&set, 1, put_count, &put, &off), 0);
	CHECK_EQ(put, 4);
	CHECK_EQ(k[0].state, 1);
	CHECK_EQ(k[1].state, 1);

	/* record 1 damaged after the first check: the answer is kept */
	data[3 * 4096 + 7] ^= 1;
	put = 0;
	CHECK_EQ(pages_set_apply(&set, 1, put_count, &put, &off), 0);
	CHECK_EQ(put, 4);
	k[1].state = 0;
	put = 0;
	CHECK_EQ(pages_set_apply(&set, 1, put_count, &put, &off), -EBADMSG);
	CHECK_EQ(put, 2); /* record 0's two chunks, none of record 1's */
	CHECK_EQ(off, 4 * 4096);
	CHECK_EQ(k[1].state, -EBADMSG);
	CHECK_EQ(pages_check_run(&k[1]), -EBADMSG);
	CHECK_EQ(pages_check_run(&k[0]), 0);
	pages_set_release(&set);
}

/* pages_set_has and pages_set_covers across extents and chunks */
TEST(set_queries)
{
	/* [4K, 12K) and [12K, 16K) in one chunk, [24K, 28K) in the next: 16K-24K is a hole */
	const struct pages_extent a[] = {{4096, 8192}, {12288, 4096}}, b[] = {{24576, 4096}};
	struct pages_chunk c[] = {{.n = 2, .x = a}, {.n = 1, .x = b}};
	struct pages_set s = {.c = c, .n = 2};
	CHECK(!pages_set_has(&s, 0, 4096));
	CHECK(pages_set_has(&s, 0, 4097));
	CHECK(!pages_set_has(&s, 16384, 24576));
	CHECK(pages_set_has(&s, 16384, 24577));
	CHECK(pages_set_covers(&s, 4096, 16384));   /* two adjacent extents */
	CHECK(pages_set_covers(&s, 8192, 12288));   /* inside one */
	CHECK(pages_set_covers(&s, 24576, 28672));  /* the second chunk's */
	CHECK(pages_set_covers(&s, 8192, 8192));    /* empty */
	CHECK(!pages_set_covers(&s, 0, 8192));	    /* starts before */
	CHECK(!pages_set_covers(&s, 12288, 20480)); /* runs into the hole */
	CHECK(!pages_set_covers(&s, 4096, 28672));  /* across the hole */
	CHECK(!pages_set_covers(&s, 24576, 32768)); /* past the last */
	struct pages_set none = {0};
	CHECK(!pages_set_covers(&none, 0, 4096));
	CHECK(!pages_set_has(&none, 0, 4096));
}

int main(void)
{
	RUN(round_trip);
	RUN(round_trip_async);
	RUN(async_write_fails);
	RUN(writer_refuses);
	RUN(forged_records);
	RUN(checked_late);
	RUN(set_queries);
	return unit_done();
}
