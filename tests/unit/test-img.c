/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The image container: crc32c, write then read back through a file, a pipe
 * and a socket, and the reader's refusal of every truncation, every flipped
 * bit and every forged field we can think of.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "img/img.h"
#include "util/cleanup.h"
#include "unit.h"

#define FRAME_SZ sizeof(struct img_frame)
#define HDR_SZ sizeof(struct img_header)

static uint8_t pat(uint32_t rec, size_t i)
{
	return (uint8_t)(rec * 131u + i * 7u + (i >> 9));
}

static void fill(uint8_t *buf, size_t len, uint32_t rec)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pat(rec, i);
}

static bool check_pat(const uint8_t *buf, size_t len, uint32_t rec)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pat(rec, i))
			return false;
	return true;
}

static void make_hdr(struct img_header *h)
{
	memset(h, 0, sizeof(*h));
	h->arch = 62;
	h->page_size = IMG_PAGE_SIZE;
	h->xfeatures = 0x2e7;
	h->xsave_size = 2696;
	h->created_ns = 1700000000123456789ull;
	strcpy(h->kernel_release, "6.1.0-test");
}

static int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t k = write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

static int memfd_with(const void *buf, size_t len)
{
	int fd = memfd_create("test-img", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (write_full(fd, buf, len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The whole content of fd, which is a memfd or a file, from offset 0. */
static uint8_t *slurp(int fd, size_t *ret_len)
{
	struct stat st;
	uint8_t *buf;

	if (fstat(fd, &st) < 0)
		return NULL;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		return NULL;
	}
	*ret_len = (size_t)st.st_size;
	return buf;
}

/* Opens and validates an in-memory image; the reader is closed again. */
static int check_image(const void *buf, size_t len, struct img_error *err)
{
	struct img_reader r;
	int fd, ret;

	memset(err, 0, sizeof(*err));
	fd = memfd_with(buf, len);
	if (fd < 0)
		return -999;
	ret = img_reader_open(&r, fd, err);
	close(fd);
	if (ret < 0)
		return ret;
	ret = img_reader_validate(&r, err);
	img_reader_close(&r);
	return ret;
}

/* A reject that says why. */
#define CHECK_REJECT(buf, len, substr)                                                  \
	do {                                                                            \
		struct img_error e_;                                                    \
		int r_ = check_image(buf, len, &e_);                                    \
		CHECK(r_ < 0 && r_ != -999);                                            \
		CHECK(e_.reason[0] != '\0');                                            \
		if ((substr) && !strstr(e_.reason, (substr) ? (substr) : "")) {         \
			fprintf(stderr, "%s:%d: reason '%s' lacks '%s'\n", __FILE__,    \
				__LINE__, e_.reason, (substr) ? (substr) : "");         \
			unit_.case_failed = 1;                                          \
		}                                                                       \
	} while (0)

/*
 * A small image: odd-sized records around an aligned one, a zero-length
 * record and an aligned record of no data. Written unfinished when
 * finish is false (so tests can append their own trailer).
 */
static uint8_t *small_image(size_t *ret_len, bool finish, struct img_writer *ret_w)
{
	struct img_header h;
	struct img_writer w;
	uint8_t a[37], b[5000], c[3];
	struct iovec iov[2];
	uint8_t *buf;
	int fd, bad = 0;

	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	fill(c, sizeof(c), 3);
	make_hdr(&h);
	fd = memfd_create("small", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	bad |= img_writer_init(&w, fd, &h);
	bad |= img_write(&w, 1, 0, a, sizeof(a));
	iov[0] = (struct iovec){ b, 100 };
	iov[1] = (struct iovec){ b + 100, sizeof(b) - 100 };
	bad |= img_write_aligned(&w, 2, iov, 2);
	bad |= img_write(&w, 3, 0x5000, c, sizeof(c));
	bad |= img_write(&w, 4, 0, NULL, 0);
	bad |= img_write_aligned(&w, 5, NULL, 0);
	if (finish)
		bad |= img_writer_finish(&w);
	buf = bad ? NULL : slurp(fd, ret_len);
	close(fd);
	if (ret_w)
		*ret_w = w;
	return buf;
}

static void fix_frame_crc(uint8_t *frame)
{
	uint32_t crc = img_crc32c(0, frame, 16);

	memcpy(frame + 16, &crc, sizeof(crc));
}

static void fix_header_crc(uint8_t *buf)
{
	uint32_t crc = img_crc32c(0, buf, offsetof(struct img_header, crc));

	memcpy(buf + offsetof(struct img_header, crc), &crc, sizeof(crc));
}

/* Appends a frame + data with correct checksums at buf + len. */
static size_t put_record(uint8_t *buf, size_t len, uint32_t type, uint32_t flags,
			 const void *data, size_t dlen)
{
	struct img_frame f = { .type = type, .flags = flags, .length = dlen };

	f.hdr_crc = img_crc32c(0, &f, 16);
	f.data_crc = img_crc32c(0, data, dlen);
	memcpy(buf + len, &f, sizeof(f));
	memcpy(buf + len + sizeof(f), data, dlen);
	return len + sizeof(f) + dlen;
}

/* --- crc32c --------------------------------------------------------- */

TEST(crc_vectors)
{
	uint8_t buf[32];

	CHECK_EQ(img_crc32c(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ(img_crc32c_sw(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ(img_crc32c(0, "", 0), 0);
	CHECK_EQ(img_crc32c(0, NULL, 0), 0);
	CHECK_EQ(img_crc32c(0, "a", 1), 0xc1d04330u);
	/* RFC 3720, B.4 */
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(img_crc32c(0, buf, 32), 0x8a9136aau);
	memset(buf, 0xff, sizeof(buf));
	CHECK_EQ(img_crc32c(0, buf, 32), 0x62a8ab43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	CHECK_EQ(img_crc32c(0, buf, 32), 0x46dd794eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	CHECK_EQ(img_crc32c(0, buf, 32), 0x113fdb5cu);
}

/* hardware against table, at every alignment and across the lane sizes */
TEST(crc_hw_matches_sw)
{
	size_t n = 3 * 4096 * 3 + 3 * 256 * 2 + 123;
	uint8_t *buf = malloc(n + 8);
	uint64_t x = 88172645463325252ull;

	CHECK(buf != NULL);
	if (!buf)
		return;
	for (size_t i = 0; i < n + 8; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t off = 0; off < 8; off++) {
		for (size_t len = 0; len < 1600; len++)
			if (img_crc32c(0, buf + off, len) != img_crc32c_sw(0, buf + off, len)) {
				CHECK_EQ(img_crc32c(0, buf + off, len),
					 img_crc32c_sw(0, buf + off, len));
				off = 8;
				break;
			}
	}
	for (size_t len = 3 * 4096 - 9; len <= n; len += 997)
		CHECK_EQ(img_crc32c(0x1234, buf + 3, len), img_crc32c_sw(0x1234, buf + 3, len));
	CHECK_EQ(img_crc32c(0, buf, n), img_crc32c_sw(0, buf, n));
	free(buf);
}

TEST(crc_chaining)
{
	size_t n = 70000;
	uint8_t *buf = malloc(n);
	uint32_t whole;

	CHECK(buf != NULL);
	if (!buf)
		return;
	fill(buf, n, 9);
	whole = img_crc32c(0, buf, n);
	CHECK_EQ(img_crc32c_sw(0, buf, n), whole);
	for (size_t cut = 0; cut <= n; cut += (cut < 64 ? 1 : 4099))
		CHECK_EQ(img_crc32c(img_crc32c(0, buf, cut), buf + cut, n - cut), whole);
	/* many small pieces */
	{
		uint32_t c = 0;
		size_t pos = 0, step = 1;

		while (pos < n) {
			size_t k = step < n - pos ? step : n - pos;

			c = img_crc32c(c, buf + pos, k);
			pos += k;
			step = step * 3 % 8191 + 1;
		}
		CHECK_EQ(c, whole);
	}
	CHECK_EQ(img_crc32c_sw(img_crc32c(0, buf, 1000), buf + 1000, n - 1000), whole);
	free(buf);
}

/* --- writing and reading back --------------------------------------- */

struct expect {
	uint32_t type, flags;
	size_t len;
	uint32_t pat;  /* the data is fill(..., pat) */
	bool aligned;  /* written with img_write_aligned() */
	size_t pad;    /* bytes between frame and data */
};

TEST(roundtrip_file)
{
	static const struct expect ex[] = {
		{ 1, 0x1000, 5, 1, false, 0 },
		{ 2, 0, 4096 + 1000, 2, true, 4096 - HDR_SZ - 24 - 5 - 24 },
		{ 3, 0, 7, 3, false, 0 },
		{ 4, 0, 8192, 4, true, 4096 - 1000 - 24 - 7 - 24 },
		{ 5, 0, 4096 - 48, 4, false, 0 },
		{ 6, 0, 100, 4, true, 0 }, /* the frame ends on a page boundary: no pad */
		{ 7, 0xabc000, 0, 0, false, 0 },
		{ 8, 0, 0, 0, true, 4096 - 100 - 24 - 24 },
		{ IMG_REC_TRAILER - 1, 0xfffff000u, 3, 7, false, 0 },
	};
	struct img_header h, hw;
	struct img_writer w;
	struct img_reader r;
	struct img_record rec;
	struct img_error err;
	uint8_t *bufs[ARRAY_SIZE(ex)];
	uint64_t data_bytes = 0;
	struct stat st;
	int fd;

	make_hdr(&h);
	hw = h;
	fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		fd = memfd_create("roundtrip", MFD_CLOEXEC);
	CHECK(fd >= 0);
	if (fd < 0)
		return;

	CHECK_EQ(img_writer_init(&w, fd, &hw), 0);
	CHECK_EQ(memcmp(hw.magic, IMG_MAGIC, 8), 0);
	CHECK_EQ(hw.version, IMG_VERSION);
	CHECK_EQ(hw.header_size, HDR_SZ);
	CHECK_EQ(w.offset, HDR_SZ);
	for (size_t i = 0; i < ARRAY_SIZE(ex); i++) {
		uint64_t before = w.offset;

		bufs[i] = malloc(ex[i].len + 1);
		fill(bufs[i], ex[i].len, ex[i].pat);
		if (ex[i].aligned) {
			/* cut in pieces, one of them empty */
			size_t q = ex[i].len / 3;
			struct iovec iov[4] = {
				{ bufs[i], q },
				{ bufs[i] + q, 0 },
				{ bufs[i] + q, q },
				{ bufs[i] + 2 * q, ex[i].len - 2 * q },
			};

			CHECK_EQ(img_write_aligned(&w, ex[i].type, ex[i].len ? iov : NULL,
						   ex[i].len ? 4 : 0),
				 0);
			CHECK_EQ((before + FRAME_SZ + ex[i].pad) % IMG_PAGE_SIZE, 0);
		} else {
			CHECK_EQ(img_write(&w, ex[i].type, ex[i].flags, ex[i].len ? bufs[i] : NULL,
					   ex[i].len),
				 0);
		}
		CHECK_EQ(w.offset, before + FRAME_SZ + ex[i].pad + ex[i].len);
		data_bytes += ex[i].len;
	}
	CHECK_EQ(w.records, ARRAY_SIZE(ex));
	CHECK_EQ(w.data_bytes, data_bytes);
	CHECK_EQ(img_writer_finish(&w), 0);
	CHECK(w.finished);
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK_EQ((uint64_t)st.st_size, w.offset);

	CHECK_EQ(img_reader_open(&r, fd, &err), 0);
	CHECK(r.mapped);
	CHECK_EQ(r.size, w.offset);
	CHECK_EQ(r.hdr.arch, 62);
	CHECK_EQ(r.hdr.page_size, IMG_PAGE_SIZE);
	CHECK_EQ(r.hdr.xfeatures, h.xfeatures);
	CHECK_EQ(r.hdr.xsave_size, h.xsave_size);
	CHECK_EQ(r.hdr.created_ns, h.created_ns);
	CHECK_STR(r.hdr.kernel_release, "6.1.0-test");
	CHECK_EQ(img_reader_validate(&r, &err), 0);
	CHECK(r.validated);

	for (int pass = 0; pass < 2; pass++) {
		uint64_t off = HDR_SZ;

		for (size_t i = 0; i < ARRAY_SIZE(ex); i++) {
			CHECK_EQ(img_reader_next(&r, &rec, &err), 0);
			CHECK_EQ(rec.type, ex[i].type);
			CHECK_EQ(rec.flags, ex[i].aligned ? 0 : ex[i].flags);
			CHECK_EQ(rec.index, i);
			CHECK_EQ(rec.offset, off);
			CHECK_EQ(rec.len, ex[i].len);
			CHECK_EQ(rec.data - r.base, off + FRAME_SZ + ex[i].pad);
			if (ex[i].aligned) {
				CHECK_EQ((rec.data - r.base) % IMG_PAGE_SIZE, 0);
				CHECK_EQ((uintptr_t)rec.data % IMG_PAGE_SIZE, 0);
			}
			CHECK(check_pat(rec.data, rec.len, ex[i].pat));
			off += FRAME_SZ + ex[i].pad + ex[i].len;
		}
		CHECK_EQ(img_reader_next(&r, &rec, &err), -ENODATA);
		CHECK_EQ(img_reader_next(&r, &rec, &err), -ENODATA);
		CHECK_EQ(r.pos, off);
		img_reader_rewind(&r);
	}
	img_reader_close(&r);
	CHECK(r.base == NULL);
	img_reader_close(&r);
	close(fd);
	for (size_t i = 0; i < ARRAY_SIZE(ex); i++)
		free(bufs[i]);
}

/*
 * The records of direct_records() to fd: small ones, aligned ones from
 * page-aligned memory of whole pages and with a tail inside a page, from
 * unaligned memory, of several iovecs, one of no data.
 */
#define DIRECT_MIN_PAGES 64 /* img.c's IMG_DIRECT_MIN */
#define DIRECT_BIG_PAGES 80 /* direct_records' largest record */
/* The whole pages of direct_records' records 0, 6, 12 and 18, which go
 * by direct I/O: 1 + 64, 2 + 1 + 64, 3 + 2 + 64, 4 + 3 + 64 */
#define DIRECT_PAGES 272
static int direct_records(struct img_writer *w, uint8_t *big)
{
	int bad = 0;
	for (uint32_t i = 0; i < 24; i++) {
		uint8_t small[300];
		fill(small, sizeof(small), i);
		bad |= img_write(w, 1, 0, small, (i * 37) % sizeof(small));
		/* one in six of 256 KiB or more: only those go by direct I/O */
		size_t len =
		    (size_t)((i % 5) + 1 + (i % 6 ? 0 : DIRECT_MIN_PAGES)) * IMG_PAGE_SIZE +
		    (i % 3 ? 0 : 777 * i);
		uint8_t *at = big + (i % 4 == 1 ? 8 : 0); /* unaligned: the ordinary way */
		fill(at, len, i + 100);
		struct iovec iov[3] = { { at, len }, { small, 8 }, { small, i } };
		bad |= img_write_aligned(w, 2, iov, i % 2 ? 3 : 1);
	}
	bad |= img_write_aligned(w, 3, NULL, 0);
	return bad;
}

/* A disk directory of the test, or NULL: the build directory (cwd) or
 * /var/tmp, whichever has direct I/O (statx STATX_DIOALIGN). */
static const char *direct_dir(void)
{
	static const char *const dirs[] = { ".", "/var/tmp" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		struct statx sx;
		int fd = open(dirs[i], O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		bool ok = fd >= 0 && statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
			  (sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align;
		if (fd >= 0)
			close(fd);
		if (ok)
			return dirs[i];
	}
	return NULL;
}

/*
 * img_writer_direct: to a file on a disk the page bytes go by O_DIRECT and
 * the file is byte for byte what the ordinary writer makes (also after a
 * first write that leaves the file's position one page on); to a memfd or
 * a tmpfs, a pipe, an unaligned position or O_APPEND it is refused and the
 * writer goes on as before.
 */
TEST(direct_writes)
{
	const char *dir = direct_dir();
	struct img_header h1, h2;
	struct img_writer w1, w2;
	struct img_error err;
	struct img_reader r;
	size_t len1 = 0, len2 = 0;
	uint8_t *big = mmap(NULL, DIRECT_BIG_PAGES * IMG_PAGE_SIZE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ref = memfd_create("direct-ref", MFD_CLOEXEC);

	CHECK(big != MAP_FAILED && ref >= 0);
	if (big == MAP_FAILED || ref < 0)
		return;
	make_hdr(&h1);
	CHECK_EQ(img_writer_init(&w1, ref, &h1), 0);
	CHECK_EQ(img_writer_direct(&w1), -EOPNOTSUPP); /* a memfd: shmem has none */
	CHECK_EQ(direct_records(&w1, big), 0);
	CHECK_EQ(img_writer_finish(&w1), 0);
	CHECK_EQ(w1.direct_bytes, 0);
	uint8_t *want = slurp(ref, &len1);
	CHECK(want != NULL);

	if (!dir) {
		fprintf(stderr, "direct_writes: no directory with direct I/O (., /var/tmp): "
				"only the refusals checked\n");
	} else {
		for (int skip = 0; skip < 2 && want; skip++) {
			int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
			CHECK(fd >= 0);
			if (fd < 0)
				break;
			/* skip: the stream starts one page into the file */
			if (skip)
				CHECK_EQ(lseek(fd, IMG_PAGE_SIZE, SEEK_SET), IMG_PAGE_SIZE);
			make_hdr(&h2);
			CHECK_EQ(img_writer_init(&w2, fd, &h2), 0);
			CHECK_EQ(img_writer_direct(&w2), 0);
			CHECK(w2.direct);
			CHECK_EQ(direct_records(&w2, big), 0);
			CHECK_EQ(img_writer_finish(&w2), 0);
			CHECK(!w2.direct && w2.dfd == -1); /* closed */
			CHECK_EQ(w2.direct_bytes, DIRECT_PAGES * IMG_PAGE_SIZE);
			CHECK_EQ(w2.offset, w1.offset);
			uint8_t *got = slurp(fd, &len2);
			CHECK(got != NULL);
			CHECK_EQ(len2, len1 + (skip ? IMG_PAGE_SIZE : 0));
			if (got && len2 == len1 + (skip ? IMG_PAGE_SIZE : 0))
				CHECK_EQ(memcmp(got + (skip ? IMG_PAGE_SIZE : 0), want, len1), 0);
			free(got);
			if (!skip) {
				CHECK_EQ(img_reader_open(&r, fd, &err), 0);
				CHECK_EQ(img_reader_validate(&r, &err), 0);
				img_reader_close(&r);
			}
			close(fd);
		}
		/* an unaligned position, O_APPEND: refused, written as before */
		int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		CHECK(fd >= 0);
		if (fd >= 0) {
			CHECK_EQ(write(fd, "x", 1), 1);
			make_hdr(&h2);
			CHECK_EQ(img_writer_init(&w2, fd, &h2), 0);
			CHECK_EQ(img_writer_direct(&w2), -EINVAL);
			CHECK_EQ(fcntl(fd, F_SETFL, O_APPEND), 0);
			CHECK_EQ(img_writer_direct(&w2), -EINVAL);
			CHECK_EQ(direct_records(&w2, big), 0);
			CHECK_EQ(img_writer_finish(&w2), 0);
			CHECK_EQ(w2.direct_bytes, 0);
			close(fd);
		}
	}
	/* a tmpfs takes O_DIRECT at open, but has no direct I/O: refused */
	int shm = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (shm >= 0) {
		make_hdr(&h2);
		CHECK_EQ(img_writer_init(&w2, shm, &h2), 0);
		CHECK_EQ(img_writer_direct(&w2), -EOPNOTSUPP);
		img_writer_drop(&w2);
		close(shm);
	}
	int p[2];
	CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
	make_hdr(&h2);
	CHECK_EQ(img_writer_init(&w2, p[1], &h2), 0);
	CHECK_EQ(img_writer_direct(&w2), -EINVAL); /* not a regular file */
	img_writer_drop(&w2);
	close(p[0]);
	close(p[1]);
	free(want);
	close(ref);
	munmap(big, DIRECT_BIG_PAGES * IMG_PAGE_SIZE);
}

/* Small records to a regular file are gathered, over many fills of the
 * writer's buffer, with aligned ones between: all read back in order. */
TEST(gathered_records)
{
	struct img_header h;
	struct img_writer w;
	struct img_reader r;
	struct img_record rec;
	struct img_error err;
	uint8_t buf[8192];
	int fd = memfd_create("gathered", MFD_CLOEXEC);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	make_hdr(&h);
	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK(w.gather);
	for (uint32_t i = 0; i < 300; i++) {
		size_t len = (i * 131) % 8000;
		fill(buf, sizeof(buf), (uint8_t)i);
		if (i % 97 == 50) {
			struct iovec iov = { buf, 4096 };
			CHECK_EQ(img_write_aligned(&w, 2, &iov, 1), 0);
		} else {
			CHECK_EQ(img_write(&w, 1, 0, buf, len), 0);
		}
	}
	CHECK_EQ(img_writer_finish(&w), 0);
	CHECK(w.buf == NULL);
	CHECK_EQ((uint64_t)lseek(fd, 0, SEEK_END), w.offset);
	CHECK_EQ(img_reader_open(&r, fd, &err), 0);
	CHECK_EQ(img_reader_validate(&r, &err), 0);
	for (uint32_t i = 0; i < 300; i++) {
		CHECK_EQ(img_reader_next(&r, &rec, &err), 0);
		bool aligned = i % 97 == 50;
		CHECK_EQ(rec.type, aligned ? 2u : 1u);
		CHECK_EQ(rec.len, aligned ? 4096 : (i * 131) % 8000);
		CHECK(check_pat(rec.data, rec.len, (uint8_t)i));
		if (aligned)
			CHECK_EQ((rec.data - r.base) % IMG_PAGE_SIZE, 0);
	}
	CHECK_EQ(img_reader_next(&r, &rec, &err), -ENODATA);
	img_reader_close(&r);
	close(fd);
}

TEST(writer_rejects)
{
	struct img_header h;
	struct img_writer w;
	struct iovec iov = { .iov_base = NULL, .iov_len = 1 };
	uint8_t x = 0;
	int fd = memfd_create("rejects", MFD_CLOEXEC);

	CHECK(fd >= 0);
	make_hdr(&h);
	h.page_size = 65536;
	CHECK_EQ(img_writer_init(&w, fd, &h), -EINVAL);
	make_hdr(&h);
	memset(h.kernel_release, 'x', sizeof(h.kernel_release));
	CHECK_EQ(img_writer_init(&w, fd, &h), -EINVAL);
	make_hdr(&h);
	CHECK_EQ(img_writer_init(&w, -1, &h), -EINVAL);
	CHECK_EQ(img_writer_init(&w, 1000000, &h), -EBADF);

	CHECK_EQ(img_writer_init(&w, fd, &h), 0);
	CHECK_EQ(img_write(&w, 0, 0, &x, 1), -EINVAL);
	CHECK_EQ(img_write(&w, IMG_REC_TRAILER, 0, &x, 1), -EINVAL);
	CHECK_EQ(img_write(&w, 0x10000, 0, &x, 1), -EINVAL);
	CHECK_EQ(img_write(&w, 1, 1, &x, 1), -EINVAL);
	CHECK_EQ(img_write(&w, 1, IMG_FLAG_PAD_MASK, &x, 1), -EINVAL);
	CHECK_EQ(img_write(&w, 1, 0, NULL, 1), -EINVAL);
	CHECK_EQ(img_write(&w, 1, 0, &x, (size_t)IMG_MAX_RECORD + 1), -EFBIG);
	CHECK_EQ(img_write_aligned(&w, 0, &iov, 1), -EINVAL);
	CHECK_EQ(img_write_aligned(&w, IMG_REC_TRAILER, &iov, 1), -EINVAL);
	CHECK_EQ(img_write_aligned(&w, 1, &iov, 1), -EINVAL);
	CHECK_EQ(img_write_aligned(&w, 1, &iov, -1), -EINVAL);
	CHECK_EQ(img_write_aligned(&w, 1, NULL, 1), -EINVAL);
	{
		struct iovec big[2] = { { &x, (size_t)IMG_MAX_RECORD }, { &x, 1 } };

		CHECK_EQ(img_write_aligned(&w, 1, big, 2), -EFBIG);
	}
	/* nothing of the above reached the fd */
	CHECK_EQ(w.offset, HDR_SZ);
	CHECK_EQ(w.records, 0);
	CHECK_EQ(lseek(fd, 0, SEEK_END), (off_t)HDR_SZ);

	CHECK_EQ(img_writer_finish(&w), 0);
	CHECK_EQ(img_writer_finish(&w), -EINVAL);
	CHECK_EQ(img_write(&w, 1, 0, &x, 1), -EINVAL);
	CHECK_EQ(img_write_aligned(&w, 1, NULL, 0), -EINVAL);
	close(fd);
}

TEST(writer_epipe)
{
	struct img_header h;
	struct img_writer w;
	struct sigaction sa = { .sa_handler = SIG_IGN }, old;
	uint8_t buf[100] = { 0 };
	int p[2];

	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(sigaction(SIGPIPE, &sa, &old), 0);
	make_hdr(&h);
	CHECK_EQ(img_writer_init(&w, p[1], &h), 0);
	close(p[0]);
	CHECK_EQ(img_write(&w, 1, 0, buf, sizeof(buf)), -EPIPE);
	CHECK_EQ(w.records, 0);
	sigaction(SIGPIPE, &old, NULL);
	close(p[1]);
}

/* --- pipes and sockets ---------------------------------------------- */

enum stream_mode {
	STREAM_PIPE,
	STREAM_PIPE_NONBLOCK, /* the writer sees short writes and EAGAIN */
	STREAM_PIPE_SIGNALS,  /* both sides see EINTR and short transfers */
	STREAM_SOCKET,
	STREAM_MODE_MAX,
};

#define STREAM_RECORDS 48

static size_t stream_len(uint32_t i)
{
	return i % 3 == 0 ? (i + 1) * 4096 * 5 : i * 977 + 1;
}

static int stream_write(int fd)
{
	struct img_header h;
	struct img_writer w;
	uint8_t *buf = malloc(stream_len(STREAM_RECORDS) * 2);
	int r;

	if (!buf)
		return -ENOMEM;
	make_hdr(&h);
	r = img_writer_init(&w, fd, &h);
	for (uint32_t i = 0; r == 0 && i < STREAM_RECORDS; i++) {
		size_t len = stream_len(i);

		fill(buf, len, i);
		if (i % 3 == 0) {
			struct iovec iov[4];
			size_t q = len / 4;

			for (int k = 0; k < 4; k++)
				iov[k] = (struct iovec){ buf + k * q, k == 3 ? len - 3 * q : q };
			r = img_write_aligned(&w, 100 + i, iov, 4);
		} else {
			r = img_write(&w, 100 + i, i << 12, buf, len);
		}
	}
	if (r == 0)
		r = img_writer_finish(&w);
	free(buf);
	return r;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void set_ticker(bool on)
{
	struct itimerval it = { { 0, on ? 100 : 0 }, { 0, on ? 100 : 0 } };
	struct sigaction sa = { .sa_handler = on ? on_alarm : SIG_DFL };

	/* no SA_RESTART: a blocked read or write comes back with EINTR */
	if (on)
		sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	if (!on)
		sigaction(SIGALRM, &sa, NULL);
}

static void stream_roundtrip(enum stream_mode mode)
{
	struct img_reader r;
	struct img_record rec;
	struct img_error err;
	int fds[2], status = -1, ret;
	uint32_t n = 0;
	pid_t pid;

	if (mode == STREAM_SOCKET)
		CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
	else
		CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
	if (mode == STREAM_PIPE_NONBLOCK || mode == STREAM_PIPE_SIGNALS)
		fcntl(fds[1], F_SETPIPE_SZ, 4096);

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* a writer gone wrong must not fill the reader's memory for long */
		struct rlimit cpu = { 5, 5 };

		setrlimit(RLIMIT_CPU, &cpu);
		close(fds[0]);
		if (mode == STREAM_PIPE_NONBLOCK)
			fcntl(fds[1], F_SETFL, O_NONBLOCK);
		if (mode == STREAM_PIPE_SIGNALS)
			set_ticker(true);
		ret = stream_write(fds[1]);
		_exit(ret == 0 ? 0 : 1);
	}
	close(fds[1]);
	if (mode == STREAM_PIPE_SIGNALS)
		set_ticker(true);
	ret = img_reader_open(&r, fds[0], &err);
	if (mode == STREAM_PIPE_SIGNALS)
		set_ticker(false);
	close(fds[0]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(ret, 0);
	if (ret < 0) {
		fprintf(stderr, "mode %d: %s\n", mode, err.reason);
		return;
	}
	CHECK(!r.mapped);
	CHECK_EQ((uintptr_t)r.base % 4096, 0);
	CHECK_EQ(img_reader_validate(&r, &err), 0);
	while ((ret = img_reader_next(&r, &rec, &err)) == 0) {
		CHECK_EQ(rec.index, n);
		CHECK_EQ(rec.type, 100 + n);
		CHECK_EQ(rec.len, stream_len(n));
		CHECK(check_pat(rec.data, rec.len, n));
		if (n % 3 == 0) {
			CHECK_EQ((uintptr_t)rec.data % IMG_PAGE_SIZE, 0);
			CHECK_EQ(rec.flags, 0);
		} else {
			CHECK_EQ(rec.flags, n << 12);
		}
		n++;
	}
	CHECK_EQ(ret, -ENODATA);
	CHECK_EQ(n, STREAM_RECORDS);
	img_reader_close(&r);
}

TEST(stream_pipe)
{
	stream_roundtrip(STREAM_PIPE);
}

TEST(stream_pipe_nonblock)
{
	stream_roundtrip(STREAM_PIPE_NONBLOCK);
}

TEST(stream_pipe_signals)
{
	stream_roundtrip(STREAM_PIPE_SIGNALS);
}

TEST(stream_socket)
{
	stream_roundtrip(STREAM_SOCKET);
}

/* a stream cut short is refused just like a short file */
TEST(stream_truncated)
{
	struct img_reader r;
	struct img_error err;
	size_t len = 0;
	uint8_t *img = small_image(&len, true, NULL);
	int p[2];

	CHECK(img != NULL);
	if (!img)
		return;
	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(write_full(p[1], img, len - 1), 0);
	close(p[1]);
	CHECK_EQ(img_reader_open(&r, p[0], &err), 0);
	CHECK_EQ(img_reader_validate(&r, &err), -EINVAL);
	CHECK(strstr(err.reason, "truncated") != NULL);
	CHECK_EQ(err.index, 5);
	img_reader_close(&r);
	close(p[0]);
	free(img);
}

/* --- hostile input -------------------------------------------------- */

TEST(empty_input)
{
	struct img_reader r;
	struct img_error err;
	int p[2], fd;

	CHECK_REJECT("", 0, "empty image");

	CHECK_EQ(pipe(p), 0);
	close(p[1]);
	CHECK_EQ(img_reader_open(&r, p[0], &err), -EINVAL);
	CHECK_STR(err.reason, "empty image");
	CHECK_EQ(err.index, -1);
	CHECK(r.base == NULL);
	img_reader_close(&r);
	close(p[0]);

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(img_reader_open(&r, fd, &err), -EINVAL);
	CHECK_STR(err.reason, "empty image");
	close(fd);

	CHECK_EQ(img_reader_open(&r, -1, &err), -EBADF);
	CHECK(err.reason[0] != '\0');
}

TEST(closed_reader)
{
	struct img_reader r;
	struct img_record rec;
	struct img_error err;

	memset(&r, 0, sizeof(r));
	img_reader_close(&r);
	img_reader_close(NULL);
	img_reader_rewind(&r);
	CHECK_EQ(img_reader_next(&r, &rec, &err), -EBADF);
	CHECK_EQ(img_reader_validate(&r, &err), -EBADF);
	CHECK(!r.validated);
}

TEST(truncated_everywhere)
{
	size_t len = 0;
	uint8_t *img = small_image(&len, true, NULL);
	struct img_error err;

	CHECK(img != NULL);
	if (!img)
		return;
	CHECK_EQ(check_image(img, len, &err), 0);
	for (size_t cut = 0; cut < len; cut++) {
		int r = check_image(img, cut, &err);

		if (r >= 0 || !err.reason[0]) {
			fprintf(stderr, "cut at %zu of %zu accepted\n", cut, len);
			CHECK(r < 0 && err.reason[0]);
			break;
		}
	}
	CHECK_REJECT(img, 0, "empty");
	CHECK_REJECT(img, 5, "truncated in header");
	CHECK_REJECT(img, 100, "truncated in header");
	CHECK_REJECT(img, HDR_SZ, "truncated: no trailer");
	CHECK_REJECT(img, HDR_SZ + 10, "truncated in frame");
	CHECK_REJECT(img, HDR_SZ + FRAME_SZ + 3, "truncated: record claims 37 bytes, 3 left");
	CHECK_REJECT(img, len - FRAME_SZ - sizeof(struct img_trailer), "no trailer");
	CHECK_REJECT(img, len - 1, "truncated: record claims 24 bytes, 23 left");
	free(img);
}

TEST(bitflip_everywhere)
{
	size_t len = 0;
	uint8_t *img = small_image(&len, true, NULL);
	struct img_error err;
	size_t fails = 0;

	CHECK(img != NULL);
	if (!img)
		return;
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			int r;

			/* every bit of the header and the frames, one bit elsewhere */
			if (i >= 512 && i < len - 64 && bit != (int)(i % 8))
				continue;
			img[i] ^= (uint8_t)(1u << bit);
			r = check_image(img, len, &err);
			img[i] ^= (uint8_t)(1u << bit);
			if (r >= 0 || !err.reason[0]) {
				if (fails++ < 5)
					fprintf(stderr, "flip of bit %d at %zu accepted\n", bit, i);
				unit_.case_failed = 1;
			}
		}
	}
	CHECK_EQ(fails, 0);
	CHECK_EQ(check_image(img, len, &err), 0);
	/* and the reasons are the right ones */
	img[HDR_SZ + FRAME_SZ + 1] ^= 0x10;
	CHECK_REJECT(img, len, "data checksum mismatch");
	img[HDR_SZ + FRAME_SZ + 1] ^= 0x10;
	img[HDR_SZ + 9] ^= 0x01;
	CHECK_REJECT(img, len, "frame checksum mismatch");
	img[HDR_SZ + 9] ^= 0x01;
	img[HDR_SZ + FRAME_SZ + 37 + FRAME_SZ + 5] ^= 0x80; /* in the pad */
	CHECK_REJECT(img, len, "pad is not zero");
	img[HDR_SZ + FRAME_SZ + 37 + FRAME_SZ + 5] ^= 0x80;
	img[70] ^= 0x04;
	CHECK_REJECT(img, len, "header checksum mismatch");
	img[70] ^= 0x04;
	CHECK_EQ(check_image(img, len, &err), 0);
	free(img);
}

TEST(header_fields)
{
	size_t len = 0;
	uint8_t *img = small_image(&len, true, NULL);
	uint8_t *m = malloc(len);
	struct img_error err;
	uint32_t v;

	CHECK(img != NULL && m != NULL);
	if (!img || !m)
		goto out;

#define RESET() memcpy(m, img, len)
#define PUT32(off, val) (v = (val), memcpy(m + (off), &v, 4))
	RESET();
	PUT32(offsetof(struct img_header, version), 7);
	fix_header_crc(m);
	CHECK_EQ(check_image(m, len, &err), -EINVAL);
	CHECK_STR(err.reason, "image format version 7 is newer than this ckpt (2)");
	CHECK_EQ(err.index, -1);
	/* also when the rest of the header is not what version 2 expects */
	PUT32(offsetof(struct img_header, header_size), 4096);
	CHECK_REJECT(m, len, "version 7 is newer");

	RESET();
	PUT32(offsetof(struct img_header, version), 0);
	fix_header_crc(m);
	CHECK_REJECT(m, len, "version 0");

	RESET();
	PUT32(offsetof(struct img_header, version), 1);
	fix_header_crc(m);
	CHECK_REJECT(m, len, "version 1 was made by an older ckpt");

	RESET();
	m[0] = 'X';
	CHECK_REJECT(m, len, "not a ckpt image");
	RESET();
	m[7] = 'X';
	CHECK_REJECT(m, len, "not a ckpt image");
	CHECK_REJECT("ELF\x7f\0\0\0\0\0\0", 10, "not a ckpt image");

	RESET();
	PUT32(offsetof(struct img_header, header_size), 200);
	fix_header_crc(m);
	CHECK_REJECT(m, len, "header size 200");

	RESET();
	PUT32(offsetof(struct img_header, page_size), 65536);
	fix_header_crc(m);
	CHECK_REJECT(m, len, "page size 65536");

	RESET();
	memset(m + offsetof(struct img_header, kernel_release), 'k', 65);
	fix_header_crc(m);
	CHECK_REJECT(m, len, "kernel release");

	RESET();
	PUT32(offsetof(struct img_header, arch), 183);
	CHECK_REJECT(m, len, "header checksum mismatch");
	fix_header_crc(m);
	CHECK_EQ(check_image(m, len, &err), 0); /* arch is the caller's to judge */
#undef PUT32
#undef RESET
out:
	free(m);
	free(img);
}

/* a forged frame with a good hdr_crc: the reader must not believe it */
TEST(forged_frames)
{
	size_t len = 0;
	uint8_t *img = small_image(&len, true, NULL);
	uint8_t *m = malloc(len);
	size_t fr = HDR_SZ;                         /* first frame */
	size_t fa = HDR_SZ + FRAME_SZ + 37;         /* the aligned record's frame */
	static const uint64_t lengths[] = {
		UINT64_MAX, UINT64_MAX - 23, UINT64_MAX - 4095, 1ull << 63, (1ull << 32) + 1,
		(1ull << 32) + 4096, 1ull << 40, 36, 38, 0,
	};
	struct img_frame f;

	CHECK(img != NULL && m != NULL);
	if (!img || !m)
		goto out;

	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		for (int which = 0; which < 2; which++) {
			size_t at = which ? fa : fr;

			memcpy(m, img, len);
			memcpy(&f, m + at, sizeof(f));
			f.length = lengths[i];
			memcpy(m + at, &f, sizeof(f));
			fix_frame_crc(m + at);
			CHECK_REJECT(m, len, NULL);
		}
	}
	memcpy(m, img, len);
	memcpy(&f, m + fr, sizeof(f));
	f.length = UINT64_MAX;
	memcpy(m + fr, &f, sizeof(f));
	fix_frame_crc(m + fr);
	CHECK_REJECT(m, len, "more than the maximum");
	f.length = (uint64_t)len;
	memcpy(m + fr, &f, sizeof(f));
	fix_frame_crc(m + fr);
	CHECK_REJECT(m, len, "truncated: record claims");

	/* pad forgeries on the aligned record: every wrong pad, and pad > length */
	for (uint32_t pad = 0; pad <= IMG_FLAG_PAD_MASK; pad++) {
		struct img_error err;
		int r;

		memcpy(m, img, len);
		memcpy(&f, m + fa, sizeof(f));
		if (pad == (f.flags & IMG_FLAG_PAD_MASK))
			continue;
		f.flags = pad;
		memcpy(m + fa, &f, sizeof(f));
		fix_frame_crc(m + fa);
		r = check_image(m, len, &err);
		if (r >= 0 || !err.reason[0]) {
			fprintf(stderr, "pad %u accepted\n", pad);
			CHECK(r < 0);
			break;
		}
	}
	memcpy(m, img, len);
	memcpy(&f, m + fr, sizeof(f));
	f.flags = 100; /* more than its 37 bytes */
	memcpy(m + fr, &f, sizeof(f));
	fix_frame_crc(m + fr);
	CHECK_REJECT(m, len, "exceeds the record length");
	f.flags = 12;
	memcpy(m + fr, &f, sizeof(f));
	fix_frame_crc(m + fr);
	CHECK_REJECT(m, len, "does not align");

	/* types */
	for (int t = 0; t < 3; t++) {
		static const uint32_t types[] = { 0, IMG_REC_TRAILER + 1, UINT32_MAX };

		memcpy(m, img, len);
		memcpy(&f, m + fr, sizeof(f));
		f.type = types[t];
		memcpy(m + fr, &f, sizeof(f));
		fix_frame_crc(m + fr);
		CHECK_REJECT(m, len, "bad record type");
	}
	/* a user record made a trailer */
	memcpy(m, img, len);
	memcpy(&f, m + fr, sizeof(f));
	f.type = IMG_REC_TRAILER;
	memcpy(m + fr, &f, sizeof(f));
	fix_frame_crc(m + fr);
	CHECK_REJECT(m, len, "trailer");
	/* the trailer made a user record */
	memcpy(m, img, len);
	memcpy(&f, m + len - 48, sizeof(f));
	f.type = 9;
	memcpy(m + len - 48, &f, sizeof(f));
	fix_frame_crc(m + len - 48);
	CHECK_REJECT(m, len, "no trailer");
out:
	free(m);
	free(img);
}

TEST(trailer_cases)
{
	struct img_writer w;
	size_t len = 0, n;
	uint8_t *img = small_image(&len, false, &w);
	uint8_t *m = malloc(len + 4096);
	struct img_trailer t;
	struct img_error err;

	CHECK(img != NULL && m != NULL);
	if (!img || !m)
		goto out;
	CHECK_EQ(w.records, 5);

	CHECK_REJECT(img, len, "truncated: no trailer (image incomplete)");

#define TRAILER(rec, bytes, mg)                                                  \
	(t = (struct img_trailer){ .records = (rec), .data_bytes = (bytes), .magic = (mg) }, \
	 memcpy(m, img, len), put_record(m, len, IMG_REC_TRAILER, 0, &t, sizeof(t)))
	/* a hand-made good one first, or the rest proves nothing */
	n = TRAILER(w.records, w.data_bytes, IMG_TRAILER_MAGIC);
	CHECK_EQ(check_image(m, n, &err), 0);

	n = TRAILER(w.records + 1, w.data_bytes, IMG_TRAILER_MAGIC);
	CHECK_REJECT(m, n, "trailer counts 6 records, the image has 5");
	n = TRAILER(w.records - 1, w.data_bytes, IMG_TRAILER_MAGIC);
	CHECK_REJECT(m, n, "trailer counts 4 records");
	n = TRAILER(w.records, w.data_bytes + 1, IMG_TRAILER_MAGIC);
	CHECK_REJECT(m, n, "data bytes");
	n = TRAILER(w.records, w.data_bytes - 4096, IMG_TRAILER_MAGIC);
	CHECK_REJECT(m, n, "data bytes");
	n = TRAILER(w.records, w.data_bytes, IMG_TRAILER_MAGIC ^ 1);
	CHECK_REJECT(m, n, "trailer magic");
	n = TRAILER(w.records, w.data_bytes, IMG_TRAILER_MAGIC);
	m[n] = 0;
	CHECK_REJECT(m, n + 1, "1 bytes after the trailer");
	/* two trailers */
	memcpy(m + n, m + n - 48, 48);
	CHECK_REJECT(m, n + 48, "48 bytes after the trailer");
	/* reserved, length and flags */
	t = (struct img_trailer){ w.records, w.data_bytes, IMG_TRAILER_MAGIC, 1 };
	n = put_record(m, len, IMG_REC_TRAILER, 0, &t, sizeof(t));
	CHECK_REJECT(m, n, "reserved");
	{
		uint8_t big[32] = { 0 };

		memcpy(big, &(struct img_trailer){ w.records, w.data_bytes, IMG_TRAILER_MAGIC, 0 },
		       sizeof(t));
		n = put_record(m, len, IMG_REC_TRAILER, 0, big, sizeof(big));
		CHECK_REJECT(m, n, "trailer has length 32");
		n = put_record(m, len, IMG_REC_TRAILER, 0, big, 16);
		CHECK_REJECT(m, n, "trailer has length 16");
	}
	t = (struct img_trailer){ w.records, w.data_bytes, IMG_TRAILER_MAGIC, 0 };
	n = put_record(m, len, IMG_REC_TRAILER, 0x1000, &t, sizeof(t));
	CHECK_REJECT(m, n, "trailer has flags");
#undef TRAILER

	/* the error names the trailer */
	t = (struct img_trailer){ 0, 0, IMG_TRAILER_MAGIC, 0 };
	n = put_record(m, len, IMG_REC_TRAILER, 0, &t, sizeof(t));
	CHECK_EQ(check_image(m, n, &err), -EINVAL);
	CHECK_EQ(err.index, 5);
	CHECK_EQ(err.offset, len);
	CHECK_EQ(err.type, IMG_REC_TRAILER);
out:
	img_writer_drop(&w); /* never finished: its gathering buffer */
	free(m);
	free(img);
}

/* records that the reader walked, then a forged one: index and offset in err */
TEST(error_location)
{
	size_t len = 0;
	uint8_t *img = small_image(&len, true, NULL);
	struct img_reader r;
	struct img_record rec;
	struct img_error err;
	size_t off3 = 0;
	int fd, ret;

	CHECK(img != NULL);
	if (!img)
		return;
	fd = memfd_with(img, len);
	CHECK_EQ(img_reader_open(&r, fd, &err), 0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(img_reader_next(&r, &rec, &err), 0);
	off3 = rec.offset;
	img_reader_close(&r);
	close(fd);

	img[off3 + FRAME_SZ] ^= 1; /* data of record 2 (type 3) */
	fd = memfd_with(img, len);
	CHECK_EQ(img_reader_open(&r, fd, &err), 0);
	ret = img_reader_validate(&r, &err);
	CHECK_EQ(ret, -EBADMSG);
	CHECK_EQ(err.index, 2);
	CHECK_EQ(err.offset, off3);
	CHECK_EQ(err.type, 3);
	CHECK_STR(err.reason, "data checksum mismatch");
	CHECK(!r.validated);
	/* rewound: the first record is still there to read */
	CHECK_EQ(img_reader_next(&r, &rec, &err), 0);
	CHECK_EQ(rec.index, 0);
	img_reader_close(&r);
	close(fd);
	free(img);
}

/*
 * The index (img_writer_index): records of type 7 (two of three aligned
 * ones) in the index before the trailer; a sparse reader validating with
 * crc_later 7 takes them from it (late), img_reader_verify compares them
 * with the file; a damaged pad is found by the verify, an index entry at
 * no record's start by the validation; an image whose index does not
 * check is read frame by frame.
 */
static uint8_t *indexed_image(size_t *ret_len)
{
	struct img_header h;
	struct img_writer w;
	static uint8_t a[3 * 4096 + 40], b[200], c[5];
	struct iovec iov = {a, sizeof(a)};
	int fd, bad = 0;
	fill(a, sizeof(a), 7);
	fill(b, sizeof(b), 8);
	fill(c, sizeof(c), 9);
	make_hdr(&h);
	fd = memfd_create("indexed", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	bad |= img_writer_init(&w, fd, &h);
	bad |= img_writer_index(&w, 7);
	bad |= img_write(&w, 1, 0, c, sizeof(c));
	bad |= img_write_aligned(&w, 7, &iov, 1);
	bad |= img_write(&w, 1, 0, c, sizeof(c));
	iov = (struct iovec){b, sizeof(b)};
	bad |= img_write_aligned(&w, 8, &iov, 1); /* another type: not indexed */
	bad |= img_write_aligned(&w, 7, &iov, 1);
	bad |= img_writer_finish(&w);
	uint8_t *buf = bad ? NULL : slurp(fd, ret_len);
	close(fd);
	return buf;
}

/* Validates buf as a lazy restart does (sparse, crc_later 7): 0 and the
 * records in *r (open), or the error. */
static int lazy_open(const uint8_t *buf, size_t len, struct img_reader *r, struct img_error *err)
{
	int fd = memfd_with(buf, len);
	if (fd < 0)
		return -999;
	int ret = img_reader_open_lazy(r, fd, err);
	close(fd);
	if (ret < 0)
		return ret;
	r->crc_later = 7;
	ret = img_reader_validate(r, err);
	if (ret < 0)
		img_reader_close(r);
	return ret;
}

TEST(index)
{
	size_t len;
	uint8_t *buf = indexed_image(&len);
	CHECK(buf != NULL);
	if (!buf)
		return;
	struct img_error err;
	struct img_record rec;
	struct img_reader r;
	/* every reader takes it as a record */
	CHECK_EQ(check_image(buf, len, &err), 0);
	CHECK_EQ(lazy_open(buf, len, &r, &err), 0);
	CHECK(r.idx != NULL && r.nidx == 2);
	int n = 0, late = 0, idx = 0;
	while (img_reader_next(&r, &rec, &err) == 0) {
		n++;
		late += rec.late;
		idx += rec.type == IMG_REC_INDEX;
		if (rec.late) {
			CHECK_EQ(rec.type, 7);
			CHECK_EQ(img_reader_verify(&r, rec.index, rec.offset), 0);
			const uint8_t *end;
			size_t end_len;
			CHECK_EQ(img_reader_end(&r, &rec, &end, &end_len), 1); /* the index's */
			CHECK(end_len == MIN(rec.len, (uint64_t)IMG_INDEX_END) &&
			      !memcmp(end, rec.data + rec.len - end_len, end_len));
		}
	}
	CHECK_EQ(n, 6);
	CHECK_EQ(late, 2);
	CHECK_EQ(idx, 1);
	/* the first indexed record's frame, at the index's offset */
	size_t at = (size_t)r.idx[0].offset, at2 = (size_t)r.idx[1].offset, ix = 0;
	for (size_t p = HDR_SZ; p < len;) {
		struct img_frame f;
		memcpy(&f, buf + p, sizeof(f));
		if (f.type == IMG_REC_INDEX)
			ix = p;
		p += FRAME_SZ + f.length;
	}
	img_reader_close(&r);
	CHECK(ix != 0);

	/* a damaged pad: the index takes the record; the verify finds it */
	uint8_t *d = malloc(len);
	memcpy(d, buf, len);
	d[at + FRAME_SZ + 1] ^= 1;
	CHECK_REJECT(d, len, "pad is not zero"); /* without --lazy: refused */
	CHECK_EQ(lazy_open(d, len, &r, &err), 0);
	while (img_reader_next(&r, &rec, &err) == 0)
		if (rec.late && rec.offset == at)
			CHECK_EQ(img_reader_verify(&r, rec.index, rec.offset), -EPROTO);
		else if (rec.late)
			CHECK_EQ(img_reader_verify(&r, rec.index, rec.offset), 0);
	img_reader_close(&r);

	/* the record's last byte (its data checksum recomputed): the index's
	 * end differs */
	memcpy(d, buf, len);
	struct img_frame f2;
	memcpy(&f2, d + at2, sizeof(f2));
	size_t pad2 = f2.flags & IMG_FLAG_PAD_MASK, dl2 = f2.length - pad2;
	d[at2 + FRAME_SZ + f2.length - 1] ^= 1;
	f2.data_crc = img_crc32c(0, d + at2 + FRAME_SZ + pad2, dl2);
	memcpy(d + at2, &f2, sizeof(f2));
	CHECK_EQ(check_image(d, len, &err), 0); /* a forgery the frames cannot see */
	CHECK_EQ(lazy_open(d, len, &r, &err), 0);
	while (img_reader_next(&r, &rec, &err) == 0)
		if (rec.late && rec.offset == at2)
			CHECK_EQ(img_reader_verify(&r, rec.index, rec.offset), -EPROTO);
	img_reader_close(&r);

	/* an entry moved back 8 bytes (the index's checksum recomputed):
	 * refused at load, naming the offset */
	memcpy(d, buf, len);
	struct img_frame fi;
	memcpy(&fi, d + ix, sizeof(fi));
	uint64_t o = at2 - 8;
	memcpy(d + ix + FRAME_SZ + sizeof(struct img_index_entry), &o, sizeof(o));
	fi.data_crc = img_crc32c(0, d + ix + FRAME_SZ, fi.length);
	memcpy(d + ix, &fi, sizeof(fi));
	CHECK(lazy_open(d, len, &r, &err) < 0 && strstr(err.reason, "not where a record starts"));

	/* the index's bytes damaged: not used; the walk reads every frame and
	 * refuses the index's checksum */
	memcpy(d, buf, len);
	d[ix + FRAME_SZ + 3] ^= 1;
	CHECK(lazy_open(d, len, &r, &err) < 0 && strstr(err.reason, "data checksum mismatch"));
	free(d);
	free(buf);
}

int main(void)
{
	/* a writer gone wrong must not fill /tmp or memory: EFBIG instead */
	struct rlimit fsize = { 1ul << 30, 1ul << 30 };

	signal(SIGXFSZ, SIG_IGN);
	setrlimit(RLIMIT_FSIZE, &fsize);

	RUN(crc_vectors);
	RUN(crc_hw_matches_sw);
	RUN(crc_chaining);
	RUN(roundtrip_file);
	RUN(gathered_records);
	RUN(direct_writes);
	RUN(writer_rejects);
	RUN(writer_epipe);
	RUN(stream_pipe);
	RUN(stream_pipe_nonblock);
	RUN(stream_pipe_signals);
	RUN(stream_socket);
	RUN(stream_truncated);
	RUN(empty_input);
	RUN(closed_reader);
	RUN(truncated_everywhere);
	RUN(bitflip_everywhere);
	RUN(header_fields);
	RUN(forged_frames);
	RUN(trailer_cases);
	RUN(error_location);
	RUN(index);
	return unit_done();
}
