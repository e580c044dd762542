/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sealed images (src/img/seal.c): a round trip through a file and a pipe,
 * a stream that ends on a chunk boundary, and the refusal of everything not
 * made with the reader's key: another key, no key, a plain image, every
 * truncation, a flipped byte in the header and in every chunk, chunks
 * swapped, dropped or repeated, bytes after the end.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "img/img.h"
#include "img/seal.h"
#include "util/cleanup.h"
#include "unit.h"

#define SHDR sizeof(struct img_seal_header)
#define CSIZE ((size_t)IMG_SEAL_CHUNK + IMG_SEAL_ABYTES)

static const uint8_t key1[IMG_KEY_BYTES] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
					     17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };
static uint8_t key2[IMG_KEY_BYTES]; /* key1 with its last bit flipped, set in main */

static uint8_t pat(uint32_t rec, size_t i)
{
	return (uint8_t)(rec * 131u + i * 7u + (i >> 9));
}

static void make_hdr(struct img_header *h)
{
	memset(h, 0, sizeof(*h));
	h->arch = 62;
	h->page_size = IMG_PAGE_SIZE;
	strcpy(h->kernel_release, "6.1.0-test");
}

/*
 * An image with a record of small bytes, an aligned record of big bytes
 * and a record of tail bytes, sealed with key (plain with NULL) to fd.
 */
static int write_image(int fd, const uint8_t *key, size_t small, size_t big, size_t tail)
{
	struct img_seal *s = NULL;
	struct img_writer w;
	struct img_header h;
	uint8_t *buf = malloc(small + big + tail + 1);
	struct iovec iov;
	int r = buf ? 0 : -ENOMEM;

	for (size_t i = 0; buf && i < small + big + tail; i++)
		buf[i] = pat(i < small ? 1 : i < small + big ? 2 : 3, i);
	make_hdr(&h);
	if (r == 0 && key)
		r = img_seal_new(&s, fd, key, IMG_KEY_BYTES);
	r = r ?: img_writer_init_sealed(&w, fd, s, &h);
	r = r ?: img_write(&w, 1, 0, buf, small);
	iov = (struct iovec){ buf + small, big };
	r = r ?: img_write_aligned(&w, 2, &iov, 1);
	r = r ?: img_write(&w, 3, 0, buf + small + big, tail);
	r = r ?: img_writer_finish(&w);
	img_seal_free(s);
	free(buf);
	return r;
}

/* The bytes of a sealed (or plain) image, in memory. */
static uint8_t *make_image(const uint8_t *key, size_t small, size_t big, size_t tail,
			   size_t *ret_len)
{
	int fd = memfd_create("seal", MFD_CLOEXEC);
	struct stat st;
	uint8_t *buf = NULL;

	if (fd < 0)
		return NULL;
	if (write_image(fd, key, small, big, tail) == 0 && fstat(fd, &st) == 0) {
		buf = malloc((size_t)st.st_size);
		if (buf && pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
			free(buf);
			buf = NULL;
		}
		*ret_len = (size_t)st.st_size;
	}
	close(fd);
	return buf;
}

/* Opens buf (as a file) with key and walks it; the records are checked. */
static int open_check(const uint8_t *buf, size_t len, const uint8_t *key, struct img_error *err)
{
	int fd = memfd_create("seal-in", MFD_CLOEXEC);
	struct img_reader r;
	struct img_record rec;
	int ret;

	memset(err, 0, sizeof(*err));
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		return -999;
	ret = img_reader_open_key(&r, fd, key, IMG_KEY_BYTES, err);
	close(fd);
	if (ret < 0)
		return ret;
	ret = img_reader_validate(&r, err);
	while (ret == 0 && (ret = img_reader_next(&r, &rec, err)) == 0) {
		size_t base = rec.type == 1 ? 0 : 100; /* make_image's small is 100 where big > 0 */

		if (rec.type == 2 && (uintptr_t)rec.data % IMG_PAGE_SIZE)
			ret = -1000; /* aligned in the decrypted stream */
		for (size_t i = 0; ret == 0 && rec.type != 3 && i < rec.len; i++)
			if (rec.data[i] != pat(rec.type, base + i))
				ret = -1001;
	}
	img_reader_close(&r);
	return ret == -ENODATA ? 0 : ret;
}

#define CHECK_OPEN(buf, len, key, want, substr)                                           \
	do {                                                                              \
		struct img_error e_;                                                      \
		int r_ = open_check(buf, len, key, &e_);                                  \
		CHECK_EQ(r_, want);                                                       \
		if ((substr) && !strstr(e_.reason, (substr) ? (substr) : "")) {           \
			fprintf(stderr, "%s:%d: reason '%s' lacks '%s'\n", __FILE__,      \
				__LINE__, e_.reason, (substr) ? (substr) : "");           \
			unit_.case_failed = 1;                                            \
		}                                                                         \
	} while (0)

TEST(roundtrip)
{
	size_t len = 0, plen = 0;
	uint8_t *img = make_image(key1, 100, 3 * IMG_SEAL_CHUNK + 12345, 77, &len);
	uint8_t *plain = make_image(NULL, 100, 3 * IMG_SEAL_CHUNK + 12345, 77, &plen);

	CHECK(img && plain);
	if (!img || !plain)
		return;
	CHECK(!memcmp(img, IMG_SEAL_MAGIC, 8));
	/* ciphertext: the header, 17 bytes a chunk, nothing of the plaintext */
	CHECK_EQ(len, SHDR + plen + (plen / IMG_SEAL_CHUNK + 1) * IMG_SEAL_ABYTES);
	CHECK(!memmem(img, len, plain + 4096, 64));
	CHECK_OPEN(img, len, key1, 0, NULL);
	CHECK_OPEN(plain, plen, NULL, 0, NULL);
	free(img);
	free(plain);
}

/* Plaintext of exactly two chunks: the final chunk is empty. */
TEST(chunk_boundary)
{
	/* header, a 10-byte record and an empty aligned one padded to 4096,
	 * then the tail record's frame and the trailer record */
	size_t fixed = IMG_PAGE_SIZE + sizeof(struct img_frame) + sizeof(struct img_frame) +
		       sizeof(struct img_trailer);
	size_t len = 0;
	uint8_t *img = make_image(key1, 10, 0, 2 * IMG_SEAL_CHUNK - fixed, &len);

	CHECK(img);
	if (!img)
		return;
	CHECK_EQ(len, SHDR + 2 * CSIZE + IMG_SEAL_ABYTES);
	CHECK_OPEN(img, len, key1, 0, NULL);
	/* without the empty final chunk: truncated, not damaged */
	CHECK_OPEN(img, len - IMG_SEAL_ABYTES, key1, -EBADMSG, "without its final chunk");
	/* bytes after the final chunk: read with it, so it fails */
	{
		uint8_t *more = malloc(len + 5);

		CHECK(more);
		if (more) {
			memcpy(more, img, len);
			memset(more + len, 0, 5);
			CHECK_OPEN(more, len + 5, key1, -EBADMSG, "chunk 2 fails");
		}
		free(more);
	}
	free(img);
}

TEST(pipe_stream)
{
	struct img_reader r;
	struct img_error err;
	int p[2], status = 0;
	pid_t pid;

	CHECK_EQ(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		_exit(write_image(p[1], key1, 100, 2 * IMG_SEAL_CHUNK + 5, 9) == 0 ? 0 : 1);
	}
	close(p[1]);
	CHECK_EQ(img_reader_open_key(&r, p[0], key1, IMG_KEY_BYTES, &err), 0);
	close(p[0]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(!r.mapped);
	CHECK_EQ(img_reader_validate(&r, &err), 0);
	img_reader_close(&r);
}

TEST(keys)
{
	size_t len = 0, plen = 0;
	uint8_t *img = make_image(key1, 100, 5000, 7, &len);
	uint8_t *plain = make_image(NULL, 100, 5000, 7, &plen);
	struct img_reader r;
	struct img_error err;

	CHECK(img && plain);
	if (!img || !plain)
		return;
	CHECK_OPEN(img, len, key2, -EKEYREJECTED, "not made with this key");
	CHECK_OPEN(img, len, NULL, -ENOKEY, "encrypted");
	CHECK_OPEN(plain, plen, key1, -EKEYREJECTED, "not encrypted");
	CHECK_EQ(img_reader_open_sealed(&r, 0, key1, 16, &err), -EINVAL);
	CHECK(img_seal_detect(img, len));
	CHECK(!img_seal_detect(plain, plen));
	CHECK(!img_seal_detect(img, 7));
	free(img);
	free(plain);
}

TEST(truncated)
{
	size_t len = 0;
	uint8_t *img = make_image(key1, 100, 2 * IMG_SEAL_CHUNK, 7, &len);

	CHECK(img);
	if (!img)
		return;
	/* every cut in the header, around every chunk boundary, and a sample inside */
	for (size_t cut = 0; cut < len; cut += cut < SHDR + 64 ? 1 : 4099) {
		struct img_error e;
		int r = open_check(img, cut, key1, &e);

		CHECK(r < 0 && r != -999);
		CHECK(e.reason[0]);
		if (r >= 0)
			fprintf(stderr, "cut at %zu accepted\n", cut);
	}
	for (size_t c = 1; SHDR + c * CSIZE <= len; c++)
		for (size_t d = 0; d < 3; d++)
			CHECK_OPEN(img, SHDR + c * CSIZE - 1 + d, key1, -EBADMSG, NULL);
	CHECK_OPEN(img, SHDR + 2 * CSIZE, key1, -EBADMSG, "without its final chunk");
	CHECK_OPEN(img, len - 1, key1, -EBADMSG, "fails authentication");
	free(img);
}

TEST(flipped)
{
	size_t len = 0;
	uint8_t *img = make_image(key1, 100, 2 * IMG_SEAL_CHUNK, 7, &len);

	CHECK(img);
	if (!img)
		return;
	/* every byte of the outer header */
	for (size_t i = 0; i < SHDR; i++) {
		struct img_error e;

		img[i] ^= 0x01;
		CHECK(open_check(img, len, key1, &e) < 0);
		img[i] ^= 0x01;
	}
	/* in every chunk: its first bytes, middle and last bytes (the MAC) */
	for (size_t c = 0; SHDR + c * CSIZE < len; c++) {
		size_t start = SHDR + c * CSIZE, end = MIN(start + CSIZE, len);
		size_t at[] = { start, start + 1, start + 2, (start + end) / 2, end - 17, end - 1 };

		for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
			img[at[k]] ^= 0x80;
			CHECK_OPEN(img, len, key1, -EBADMSG, "fails authentication");
			img[at[k]] ^= 0x80;
		}
	}
	CHECK_OPEN(img, len, key1, 0, NULL);
	free(img);
}

TEST(reordered)
{
	size_t len = 0;
	uint8_t *img = make_image(key1, 100, 3 * IMG_SEAL_CHUNK, 7, &len);
	uint8_t *mod = img ? malloc(len + CSIZE + 1) : NULL;

	CHECK(img && mod);
	if (!img || !mod)
		return;
	CHECK(len > SHDR + 3 * CSIZE);
	/* chunks 1 and 2 swapped */
	memcpy(mod, img, len);
	memcpy(mod + SHDR + CSIZE, img + SHDR + 2 * CSIZE, CSIZE);
	memcpy(mod + SHDR + 2 * CSIZE, img + SHDR + CSIZE, CSIZE);
	CHECK_OPEN(mod, len, key1, -EBADMSG, "chunk 1 fails");
	/* chunk 1 dropped */
	memcpy(mod, img, SHDR + CSIZE);
	memcpy(mod + SHDR + CSIZE, img + SHDR + 2 * CSIZE, len - SHDR - 2 * CSIZE);
	CHECK_OPEN(mod, len - CSIZE, key1, -EBADMSG, "chunk 1 fails");
	/* chunk 1 repeated */
	memcpy(mod, img, SHDR + 2 * CSIZE);
	memcpy(mod + SHDR + 2 * CSIZE, img + SHDR + CSIZE, len - SHDR - CSIZE);
	CHECK_OPEN(mod, len + CSIZE, key1, -EBADMSG, "chunk 2 fails");
	/* bytes after a short final chunk: read with it, so it fails */
	memcpy(mod, img, len);
	mod[len] = 0;
	CHECK_OPEN(mod, len + 1, key1, -EBADMSG, "chunk 3 fails");
	/* the header of another image made with the same key */
	{
		size_t len2 = 0;
		uint8_t *other = make_image(key1, 100, 3 * IMG_SEAL_CHUNK, 7, &len2);

		CHECK(other && len2 == len);
		if (other) {
			memcpy(mod, img, len);
			memcpy(mod, other, SHDR);
			CHECK_OPEN(mod, len, key1, -EBADMSG, "chunk 0 fails");
		}
		free(other);
	}
	free(img);
	free(mod);
}

int main(void)
{
	memcpy(key2, key1, sizeof(key2));
	key2[IMG_KEY_BYTES - 1] ^= 1;
	signal(SIGPIPE, SIG_IGN);
	RUN(roundtrip);
	RUN(chunk_boundary);
	RUN(pipe_stream);
	RUN(keys);
	RUN(truncated);
	RUN(flipped);
	RUN(reordered);
	return unit_done();
}
