/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The page store's compressed records (pages.h). Built twice: with zstd
 * (test-pages-z: a round trip where text-like records are compressed and
 * random ones stay plain, then forged and corrupted compressed records,
 * every one refused or failing to decompress, none read past) and without
 * (test-pages-nozstd: such a record, and an image whose header says it
 * holds them, are refused as unsupported, not as damaged).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "img/img.h"
#include "img/pages.h"
#include "unit.h"

#define SPACE (2u << 20)
#define TYPE 0x301u

static uint8_t space[SPACE];

/* the first half text-like, the second half noise (xorshift) */
static void fill(void)
{
	static const char *words[] = { "alpha ", "beta ", "user=", "status=ok ", "42 ", "name " };
	uint64_t x = 88172645463325252ull;
	size_t i = 0;
	while (i < SPACE / 2) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		const char *w = words[x % 6];
		for (; *w && i < SPACE / 2; w++)
			space[i++] = (uint8_t)*w;
	}
	for (; i < SPACE; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		space[i] = (uint8_t)(x >> 24) | 1;
	}
}

static int read_space(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	(void)arg;
	for (size_t i = 0; i < n; i++) {
		memcpy(dst, space + x[i].off, x[i].len);
		dst += x[i].len;
	}
	return 0;
}

static int put_extent(void *arg, uint64_t off, const uint8_t *src, uint64_t len)
{
	if (off + len > SPACE)
		return -ERANGE;
	memcpy((uint8_t *)arg + off, src, len);
	return 0;
}

static int put_chunk(void *arg, const struct pages_chunk *c, uint64_t *ret_off)
{
	*ret_off = c->x[0].off;
	return pages_chunk_each(c, put_extent, arg);
}

/* put for forged chunks: their extents may lie anywhere; nothing is kept */
static int put_any(void *arg, const struct pages_chunk *c, uint64_t *ret_off)
{
	(void)arg, (void)ret_off;
	return c->data && c->bytes <= (256u << 10) ? 0 : -EFAULT;
}

/* A record in an aligned buffer of its own, as the reader would hand it. */
struct rec {
	uint8_t *mem;
	struct img_record r;
};

static void rec_make(struct rec *f, const uint8_t *data, uint64_t len)
{
	f->mem = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	memcpy(f->mem, data, len);
	f->r = (struct img_record){ .type = TYPE, .data = f->mem, .len = len };
}

/* A compressed record by hand: frame bytes, pad, one extent, zlen, head. */
static void forge_z(struct rec *f, const uint8_t *frame, uint64_t zlen, uint64_t ext_len,
		    uint64_t zlen_field)
{
	uint64_t tab = (zlen + 7) / 8 * 8, len = tab + 16 + 8 + 16;
	uint8_t *b = calloc(1, len);
	memcpy(b, frame, zlen);
	struct pages_extent x = { 0, ext_len };
	struct pages_head h = { .magic = PAGES_MAGIC_ZSTD, .n = 1, .tag = 9 };
	memcpy(b + tab, &x, sizeof(x));
	memcpy(b + tab + 16, &zlen_field, 8);
	memcpy(b + tab + 24, &h, sizeof(h));
	rec_make(f, b, len);
	free(b);
}

#ifdef CKPT_HAVE_ZSTD
/* the image of space written through a compressor, records kept aside */
static struct rec recs[64];
static size_t nrecs;

/* space through a writer of bufsize bytes, keep: records kept aside */
static void round_trip_with(size_t bufsize, bool keep)
{
	struct pages_z *z;
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE };
	struct img_writer w;
	struct pages_writer pw;
	void *buf = aligned_alloc(4096, bufsize);
	int fd = memfd_create("test-pages-z", MFD_CLOEXEC);

	fill();
	CHECK_EQ(pages_z_new(&z, 1, 2, bufsize), 0);
	h.flags = IMG_HDR_ZSTD;
	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(pages_writer_init(&pw, &w, TYPE, 42, buf, bufsize, read_space, NULL), 0);
	struct pages_z *small;
	CHECK_EQ(pages_z_new(&small, 1, 0, 4096), 0);
	CHECK_EQ(pages_writer_compress(&pw, small), -EINVAL); /* its buffer is too small */
	pages_z_free(small);
	CHECK_EQ(pages_writer_compress(&pw, z), 0);
	CHECK_EQ(pages_add(&pw, 0, SPACE), 0);
	CHECK_EQ(pages_flush(&pw), 0);
	pages_writer_release(&pw);
	CHECK_EQ(img_writer_finish(&w), 0);

	struct pages_z_stats st;
	pages_z_stats(z, &st);
	CHECK_EQ(st.raw, SPACE);
	CHECK_EQ(st.records, SPACE / bufsize);
	/* the text half is compressed, the noise half stays plain */
	CHECK_EQ(st.compressed, st.records / 2);
	CHECK(st.stored < SPACE / 2 + SPACE / 8);
	pages_z_free(z);

	struct img_reader r;
	struct img_error err;
	struct img_record rec;
	struct pages_set set = { 0 };
	int e;
	lseek(fd, 0, SEEK_SET);
	CHECK_EQ(img_reader_open(&r, fd, &err), 0);
	CHECK_EQ(img_reader_validate(&r, &err), 0);
	while ((e = img_reader_next(&r, &rec, &err)) == 0) {
		struct pages_chunk c;
		CHECK_EQ(pages_parse(&rec, &c), 0);
		CHECK((c.z != NULL) == (c.x[0].off < SPACE / 2));
		CHECK(c.z ? !c.data && c.zlen < c.bytes : c.data != NULL);
		CHECK_EQ(pages_set_add(&set, &c, 0, SPACE), 0);
		if (keep && nrecs < 64)
			rec_make(&recs[nrecs++], rec.data, rec.len);
	}
	CHECK_EQ(e, -ENODATA);
	/* a compressed chunk is not handed out as it is */
	CHECK_EQ(pages_chunk_each(&set.c[0], put_extent, NULL), -EINVAL);
	static uint8_t back[SPACE];
	uint64_t off = 1;
	CHECK_EQ(pages_set_apply(&set, 2, put_chunk, back, &off), 0);
	CHECK(!memcmp(back, space, SPACE));
	memset(back, 0, SPACE);
	CHECK_EQ(pages_set_apply(&set, 1, put_chunk, back, &off), 0);
	CHECK(!memcmp(back, space, SPACE));
	pages_set_release(&set);
	img_reader_close(&r);
	close(fd);
	free(buf);
}

TEST(round_trip)
{
	/* records of one piece each, then of several pieces (256 KiB) */
	round_trip_with(16 * 1024, true);
	round_trip_with(1 << 20, false);
}

/* The compressed records of one SPACE-long record of space, filled as it is. */
static uint64_t one_record_compressed(void)
{
	struct pages_z *z;
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE, .flags = IMG_HDR_ZSTD };
	struct img_writer w;
	struct pages_writer pw;
	void *buf = aligned_alloc(4096, SPACE);
	int fd = memfd_create("test-pages-z", MFD_CLOEXEC);
	struct pages_z_stats st;

	CHECK_EQ(pages_z_new(&z, 1, 0, SPACE), 0);
	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(pages_writer_init(&pw, &w, TYPE, 42, buf, SPACE, read_space, NULL), 0);
	CHECK_EQ(pages_writer_compress(&pw, z), 0);
	CHECK_EQ(pages_add(&pw, 0, SPACE), 0);
	CHECK_EQ(pages_flush(&pw), 0);
	pages_writer_release(&pw);
	CHECK_EQ(img_writer_finish(&w), 0);
	pages_z_stats(z, &st);
	CHECK_EQ(st.records, 1);
	pages_z_free(z);
	close(fd);
	free(buf);
	return st.compressed;
}

/* The samples taken before a record is compressed (z_worth): a record of
 * noise is written plain; one whose last quarter only is text (only the
 * last sample finds it) is still compressed whole. */
TEST(sampled)
{
	fill();
	/* noise: the second half copied over the first */
	memcpy(space, space + SPACE / 2, SPACE / 2);
	CHECK_EQ(one_record_compressed(), 0);
	fill();
	/* noise, then the text's first quarter last */
	uint8_t *text = malloc(SPACE / 4);
	memcpy(text, space, SPACE / 4);
	memcpy(space, space + SPACE / 2, SPACE / 2);
	memcpy(space + SPACE / 2, space + SPACE / 2 + SPACE / 4, SPACE / 4);
	memcpy(space + 3 * SPACE / 4, text, SPACE / 4);
	free(text);
	CHECK_EQ(one_record_compressed(), 1);
}

/* the first compressed record kept by round_trip */
static const struct rec *first_z(void)
{
	struct pages_chunk c;
	for (size_t i = 0; i < nrecs; i++)
		if (pages_parse(&recs[i].r, &c) == 0 && c.z)
			return &recs[i];
	return NULL;
}

TEST(forged_compressed)
{
	const struct rec *good = first_z();
	struct pages_chunk c;
	CHECK(good != NULL);
	if (!good)
		return;
	CHECK_EQ(pages_parse(&good->r, &c), 0);
	const uint8_t *frame = c.z;
	uint64_t zlen = c.zlen, raw = c.bytes;
	struct rec f;

#define Z(zl, ext, field, want)                                     \
	do {                                                        \
		forge_z(&f, frame, zl, ext, field);                 \
		CHECK_EQ(pages_parse(&f.r, &c), want);              \
		free(f.mem);                                        \
	} while (0)
	Z(zlen, raw, zlen, 0);
	Z(zlen, raw, zlen + 8, -EINVAL);        /* zlen past the pad */
	Z(zlen, raw, 0, -EINVAL);
	Z(zlen, raw, UINT64_MAX, -EINVAL);
	Z(zlen, raw - 4096, zlen, -EINVAL);     /* the frame holds more than the extents */
	Z(zlen, raw + 4096, zlen, -EINVAL);     /* or less */
	Z(zlen, PAGES_MAX_RAW + 4096, zlen, -EINVAL); /* more than a record may hold */
	Z(zlen, UINT64_MAX, zlen, -EINVAL);
	Z(zlen - 16, raw, zlen - 16, -EINVAL);  /* a truncated frame */
#undef Z
	/* a second frame after the first, inside zlen */
	uint8_t *two = malloc(2 * zlen);
	memcpy(two, frame, zlen);
	memcpy(two + zlen, frame, zlen);
	forge_z(&f, two, 2 * zlen, raw, 2 * zlen);
	CHECK_EQ(pages_parse(&f.r, &c), -EINVAL);
	free(f.mem);
	free(two);
}

/*
 * Random bytes of a good compressed record changed (the record's checksum
 * would be made good again by a forger): parse refuses, or decompression
 * fails with -EBADMSG, or it gives exactly the record's size; never more,
 * never a crash (the suite's ASan build checks the "never read past").
 */
TEST(corrupted_frames)
{
	const struct rec *good = first_z();
	CHECK(good != NULL);
	if (!good)
		return;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint8_t *buf = NULL;
	size_t cap = 0;
	unsigned refused = 0, bad = 0, ok = 0;
	for (int it = 0; it < 3000; it++) {
		struct rec f;
		struct pages_chunk c, plain;
		rec_make(&f, good->r.data, good->r.len);
		int flips = 1 + it % 4;
		for (int k = 0; k < flips; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* mostly inside the frame, sometimes in the table */
			uint64_t at = it % 8 ? x % (f.r.len - 40) : x % f.r.len;
			f.mem[at] ^= (uint8_t)(x >> 32) | 1;
		}
		int r = pages_parse(&f.r, &c);
		if (r < 0) {
			CHECK_EQ(r, -EINVAL);
			refused++;
		} else {
			CHECK(c.bytes <= PAGES_MAX_RAW);
			r = pages_chunk_plain(&c, &buf, &cap, &plain);
			CHECK(r == 0 || r == -EBADMSG);
			if (r == 0)
				CHECK(plain.data == buf && cap >= plain.bytes && !plain.z);
			r == 0 ? ok++ : bad++;
			/* streamed in pieces by pages_set_apply: the same verdict */
			struct pages_set set = { 0 };
			static uint8_t back[SPACE];
			uint64_t off;
			CHECK_EQ(pages_set_add(&set, &c, 0, UINT64_MAX), 0);
			CHECK_EQ(pages_set_apply(&set, 1, put_any, back, &off), r);
			pages_set_release(&set);
		}
		free(f.mem);
	}
	free(buf);
	fprintf(stderr, "corrupted frames: %u refused by parse, %u by decompression, %u decoded\n",
		refused, bad, ok);
	CHECK(refused > 0 && bad > 0);

	/* through pages_set_apply: the error and where */
	struct rec f;
	struct pages_chunk c;
	struct pages_set set = { 0 };
	rec_make(&f, good->r.data, good->r.len);
	CHECK_EQ(pages_parse(&f.r, &c), 0);
	memset(f.mem + 64, 0x5a, c.zlen / 2); /* the blocks, not the frame header */
	CHECK_EQ(pages_parse(&f.r, &c), 0);
	CHECK_EQ(pages_set_add(&set, &c, 0, SPACE), 0);
	static uint8_t back[SPACE];
	uint64_t off = 1;
	CHECK_EQ(pages_set_apply(&set, 2, put_chunk, back, &off), -EBADMSG);
	CHECK_EQ(off, c.x[0].off);
	CHECK(strstr(pages_strerror(-EBADMSG), "decompress") != NULL);
	pages_set_release(&set);
	free(f.mem);
}

TEST(header_flag)
{
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE, .flags = IMG_HDR_ZSTD };
	struct img_writer w;
	struct img_reader r;
	struct img_error err;
	int fd = memfd_create("test-pages-z", MFD_CLOEXEC);
	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(img_writer_finish(&w), 0);
	lseek(fd, 0, SEEK_SET);
	CHECK_EQ(img_reader_open(&r, fd, &err), 0);
	CHECK_EQ(r.hdr.flags, IMG_HDR_ZSTD);
	img_reader_close(&r);
	close(fd);
	CHECK(pages_have_zstd());
}
#else
TEST(no_zstd)
{
	static const uint8_t frame[32] = { 0x28, 0xb5, 0x2f, 0xfd };
	struct rec f;
	struct pages_chunk c;
	struct pages_z *z = (struct pages_z *)1;

	CHECK(!pages_have_zstd());
	CHECK_EQ(pages_z_new(&z, 1, 0, 4096), -EPROTONOSUPPORT);
	CHECK(z == NULL);
	/* a well-formed compressed record: unsupported, not damaged */
	forge_z(&f, frame, sizeof(frame), 4096, sizeof(frame));
	CHECK_EQ(pages_parse(&f.r, &c), -EPROTONOSUPPORT);
	CHECK(strstr(pages_strerror(-EPROTONOSUPPORT), "without zstd") != NULL);
	free(f.mem);
	/* a damaged one is still damaged */
	forge_z(&f, frame, sizeof(frame), 4096, 0);
	CHECK_EQ(pages_parse(&f.r, &c), -EINVAL);
	free(f.mem);

	/* an image whose header says it holds compressed pages */
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE, .flags = IMG_HDR_ZSTD };
	struct img_writer w;
	struct img_reader r;
	struct img_error err;
	int fd = memfd_create("test-pages-z", MFD_CLOEXEC);
	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(img_writer_finish(&w), 0);
	lseek(fd, 0, SEEK_SET);
	CHECK_EQ(img_reader_open(&r, fd, &err), -EPROTONOSUPPORT);
	CHECK(strstr(err.reason, "built without zstd") != NULL);
	close(fd);
	(void)fill;
	(void)put_chunk;
	(void)read_space;
	(void)put_any;
}
#endif

int main(void)
{
#ifdef CKPT_HAVE_ZSTD
	RUN(round_trip);
	RUN(forged_compressed);
	RUN(corrupted_frames);
	RUN(header_flag);
	RUN(sampled);
	for (size_t i = 0; i < nrecs; i++)
		free(recs[i].mem);
#else
	RUN(no_zstd);
#endif
	return unit_done();
}
