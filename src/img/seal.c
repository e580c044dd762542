/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sealed images (the format and its guarantees are in seal.h).
 *
 * The crypto is libsodium's, used as documented: crypto_kdf derives a
 * stream key and a key id from the image key, crypto_secretstream_
 * xchacha20poly1305 encrypts and authenticates the chunks. Nothing here is
 * a cipher or a MAC of its own.
 *
 * The writer buffers plaintext to whole chunks; a chunk that lies whole in
 * one piece of the caller's data is encrypted from it with no copy. The
 * reader reads one chunk at a time (pread from offset 0 for a regular file,
 * read for a pipe or a socket) and decrypts it straight into an anonymous
 * mapping that grows as needed; only once TAG_FINAL has been seen, and the
 * fd has nothing after it, is the mapping handed to img_reader_adopt().
 */
#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "img/seal.h"
#include "util/cleanup.h"

typedef crypto_secretstream_xchacha20poly1305_state stream_state;

_Static_assert(sizeof(struct img_seal_header) == 64, "struct img_seal_header is part of the format");
_Static_assert(IMG_SEAL_ABYTES == crypto_secretstream_xchacha20poly1305_ABYTES, "ABYTES");
_Static_assert(sizeof(((struct img_seal_header *)0)->stream) ==
		       crypto_secretstream_xchacha20poly1305_HEADERBYTES,
	       "secretstream header size");
_Static_assert(IMG_KEY_BYTES == crypto_kdf_KEYBYTES, "a key is a crypto_kdf master key");
_Static_assert(crypto_secretstream_xchacha20poly1305_KEYBYTES == 32, "stream key size");
_Static_assert(sizeof(((struct img_seal_header *)0)->key_id) >= crypto_kdf_BYTES_MIN, "key id");

#define KDF_CONTEXT "ckptimg1" /* crypto_kdf_CONTEXTBYTES */
#define SUBKEY_STREAM 1
#define SUBKEY_ID 2
#define PLAIN_MAX (64ull << 30) /* as the plain reader's STREAM_MAX */
#define PLAIN_INITIAL (1u << 20)
#define TAG_MESSAGE crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
#define TAG_FINAL crypto_secretstream_xchacha20poly1305_TAG_FINAL

struct img_seal {
	int fd;
	stream_state st;
	struct img_seal_header hdr;
	bool first;             /* the next chunk is the first: the header is its AD */
	bool finished;
	size_t fill;            /* plaintext bytes waiting in buf */
	uint8_t *buf;           /* IMG_SEAL_CHUNK bytes */
	uint8_t *out;           /* IMG_SEAL_CHUNK + IMG_SEAL_ABYTES bytes */
};

/* The stream key and the key id, each a crypto_kdf subkey of key. */
static int derive(const uint8_t *key, uint8_t stream_key[32], uint8_t id[16])
{
	if (crypto_kdf_derive_from_key(stream_key, 32, SUBKEY_STREAM, KDF_CONTEXT, key) != 0 ||
	    crypto_kdf_derive_from_key(id, 16, SUBKEY_ID, KDF_CONTEXT, key) != 0) {
		sodium_memzero(stream_key, 32);
		return -EIO;
	}
	return 0;
}

/* --- writing -------------------------------------------------------- */

/* After a failed read or write on fd: 0 to try again (interrupted, or
 * waited until fd is ready for events), or -errno. */
static int io_retry(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	if (errno == EINTR)
		return 0;
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t k = write(fd, p, len);

		if (k < 0) {
			int r = io_retry(fd, POLLOUT);
			if (r < 0)
				return r;
			continue;
		}
		if (k == 0)
			return -EIO;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

static int push(struct img_seal *s, const uint8_t *m, size_t len, unsigned char tag)
{
	unsigned long long clen = 0;
	const unsigned char *ad = s->first ? (const unsigned char *)&s->hdr : NULL;

	if (crypto_secretstream_xchacha20poly1305_push(&s->st, s->out, &clen, m, len, ad,
						       ad ? sizeof(s->hdr) : 0, tag) != 0)
		return -EIO;
	s->first = false;
	return write_all(s->fd, s->out, (size_t)clen);
}

int img_seal_new(struct img_seal **ret, int fd, const uint8_t *key, size_t key_len)
{
	uint8_t stream_key[32];
	struct img_seal *s;
	int r;

	if (!ret || fd < 0 || !key || key_len != IMG_KEY_BYTES)
		return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = fd;
	s->first = true;
	s->buf = malloc(IMG_SEAL_CHUNK);
	s->out = malloc(IMG_SEAL_CHUNK + IMG_SEAL_ABYTES);
	if (!s->buf || !s->out) {
		r = -ENOMEM;
		goto fail;
	}

	memcpy(s->hdr.magic, IMG_SEAL_MAGIC, sizeof(s->hdr.magic));
	s->hdr.version = IMG_SEAL_VERSION;
	s->hdr.header_size = sizeof(s->hdr);
	s->hdr.chunk_size = IMG_SEAL_CHUNK;
	r = derive(key, stream_key, s->hdr.key_id);
	if (r == 0 && crypto_secretstream_xchacha20poly1305_init_push(&s->st, s->hdr.stream,
								      stream_key) != 0)
		r = -EIO;
	sodium_memzero(stream_key, sizeof(stream_key));
	if (r == 0)
		r = write_all(fd, (const uint8_t *)&s->hdr, sizeof(s->hdr));
	if (r < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	img_seal_free(s);
	return r;
}

int img_seal_write(struct img_seal *s, const struct iovec *head, size_t nhead,
		   const struct iovec *iov, size_t cnt, uint64_t *offset)
{
	if (!s || s->finished)
		return -EINVAL;
	for (size_t i = 0; i < nhead + cnt; i++) {
		const struct iovec *v = i < nhead ? &head[i] : &iov[i - nhead];
		const uint8_t *p = v->iov_base;
		size_t len = v->iov_len;

		while (len) {
			size_t n;
			int r;

			if (s->fill == 0 && len >= IMG_SEAL_CHUNK) {
				/* a whole chunk in the caller's data: no copy */
				r = push(s, p, IMG_SEAL_CHUNK, TAG_MESSAGE);
				n = IMG_SEAL_CHUNK;
			} else {
				n = MIN(IMG_SEAL_CHUNK - s->fill, len);
				memcpy(s->buf + s->fill, p, n);
				s->fill += n;
				r = 0;
				if (s->fill == IMG_SEAL_CHUNK) {
					r = push(s, s->buf, s->fill, TAG_MESSAGE);
					s->fill = 0;
				}
			}
			if (r < 0)
				return r;
			p += n;
			len -= n;
			*offset += n;
		}
	}
	return 0;
}

int img_seal_finish(struct img_seal *s)
{
	int r;

	if (!s || s->finished)
		return -EINVAL;
	s->finished = true;
	r = push(s, s->buf, s->fill, TAG_FINAL);
	sodium_memzero(s->buf, s->fill);
	s->fill = 0;
	return r;
}

void img_seal_free(struct img_seal *s)
{
	if (!s)
		return;
	if (s->buf)
		sodium_memzero(s->buf, IMG_SEAL_CHUNK);
	if (s->out)
		sodium_memzero(s->out, IMG_SEAL_CHUNK + IMG_SEAL_ABYTES);
	free(s->buf);
	free(s->out);
	sodium_memzero(s, sizeof(*s));
	free(s);
}

bool img_seal_detect(const void *buf, size_t size)
{
	return buf && size >= 8 && !memcmp(buf, IMG_SEAL_MAGIC, 8);
}

/* --- reading -------------------------------------------------------- */

__attribute__((format(printf, 4, 5))) static int fail(struct img_error *err, int r,
						      uint64_t offset, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return r;
	err->index = -1;
	err->offset = offset;
	err->type = 0;
	va_start(ap, fmt);
	vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
	va_end(ap);
	return r;
}

/* len bytes at off (seekable) or next (not); fewer only at the end of fd. */
static ssize_t read_full(int fd, bool seekable, uint64_t off, uint8_t *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t k = seekable ? pread(fd, buf + got, len - got, (off_t)(off + got))
				     : read(fd, buf + got, len - got);

		if (k < 0) {
			int r = io_retry(fd, POLLIN);
			if (r < 0)
				return r;
			continue;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/* The plaintext: an anonymous mapping of cap bytes, size of them filled. */
struct plain {
	uint8_t *base;
	size_t size, cap;
};

static int plain_reserve(struct plain *p, size_t more)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), ncap;
	void *q;

	if (more > PLAIN_MAX || p->size > PLAIN_MAX - more)
		return -EFBIG;
	if (p->size + more <= p->cap)
		return 0;
	ncap = ALIGN_UP(MAX(p->cap * 2, p->size + more), page);
	q = p->base ? mremap(p->base, p->cap, ncap, MREMAP_MAYMOVE)
		    : mmap(NULL, ncap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q == MAP_FAILED)
		return -errno;
	/* huge pages where the kernel has them: one fault per 2 MiB, not per 4 KiB
	 * (the plain reader maps the file and takes no such faults) */
	madvise(q, ncap, MADV_HUGEPAGE);
	p->base = q;
	p->cap = ncap;
	return 0;
}

static void plain_free(struct plain *p)
{
	if (p->base)
		munmap(p->base, p->cap);
	*p = (struct plain){ 0 };
}

/* Read-only, trimmed to whole pages: what img_reader_adopt() takes over. */
static int plain_seal_off(struct plain *p)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), want = ALIGN_UP(p->size, page);

	if (p->size == 0) {
		plain_free(p);
		return 0;
	}
	if (want < p->cap) {
		munmap(p->base + want, p->cap - want);
		p->cap = want;
	}
	if (mprotect(p->base, want, PROT_READ) < 0)
		return -errno;
	return 0;
}

/* Reads and checks the outer header; derives the stream key into state. */
static int open_header(int fd, bool seekable, const uint8_t *key, stream_state *st,
		       struct img_seal_header *ret, struct img_error *err)
{
	struct img_seal_header h;
	uint8_t stream_key[32], id[16];
	ssize_t got = read_full(fd, seekable, 0, (uint8_t *)&h, sizeof(h));
	int r;

	if (got < 0)
		return fail(err, (int)got, 0, "cannot read the image: %s", strerror((int)-got));
	if (got == 0)
		return fail(err, -EINVAL, 0, "empty image");
	if ((size_t)got >= sizeof(h.magic) && !memcmp(h.magic, IMG_MAGIC, sizeof(h.magic)))
		return fail(err, -EKEYREJECTED, 0,
			    "image is not encrypted: it was not made with a key");
	if ((size_t)got < sizeof(h.magic) || memcmp(h.magic, IMG_SEAL_MAGIC, sizeof(h.magic)))
		return fail(err, -EINVAL, 0, "not a ckpt image (bad magic)");
	if ((size_t)got < sizeof(h))
		return fail(err, -EBADMSG, 0, "truncated in the encryption header (%zd of %zu bytes)",
			    got, sizeof(h));
	if (h.version > IMG_SEAL_VERSION)
		return fail(err, -EINVAL, 8, "encrypted image format version %u is newer than this "
			    "ckpt (%u)", h.version, IMG_SEAL_VERSION);
	if (h.version == 0 || h.header_size != sizeof(h) || h.flags)
		return fail(err, -EINVAL, 8, "bad encryption header (version %u, size %u, flags 0x%x)",
			    h.version, h.header_size, h.flags);
	if (h.chunk_size < IMG_SEAL_CHUNK_MIN || h.chunk_size > IMG_SEAL_CHUNK_MAX)
		return fail(err, -EINVAL, offsetof(struct img_seal_header, chunk_size),
			    "encrypted chunk size %u is out of bounds", h.chunk_size);

	r = derive(key, stream_key, id);
	if (r < 0)
		return fail(err, r, 0, "cannot derive keys");
	if (sodium_memcmp(id, h.key_id, sizeof(id)) != 0)
		r = fail(err, -EKEYREJECTED, offsetof(struct img_seal_header, key_id),
			 "image was not made with this key");
	else if (crypto_secretstream_xchacha20poly1305_init_pull(st, h.stream, stream_key) != 0)
		r = fail(err, -EBADMSG, offsetof(struct img_seal_header, stream),
			 "bad encryption stream header");
	sodium_memzero(stream_key, sizeof(stream_key));
	sodium_memzero(id, sizeof(id));
	*ret = h;
	return r;
}

/* Every chunk, authenticated and decrypted into p, up to TAG_FINAL and EOF. */
static int open_chunks(int fd, bool seekable, stream_state *st, const struct img_seal_header *h,
		       struct plain *p, struct img_error *err)
{
	size_t csize = (size_t)h->chunk_size + IMG_SEAL_ABYTES;
	_cleanup_free_ uint8_t *c = malloc(csize);
	uint64_t off = sizeof(*h);

	if (!c)
		return fail(err, -ENOMEM, 0, "out of memory");
	for (uint64_t i = 0;; i++, off += csize) {
		unsigned long long mlen = 0;
		unsigned char tag = 0;
		uint8_t extra;
		ssize_t got = read_full(fd, seekable, off, c, csize);
		int r;

		if (got < 0)
			return fail(err, (int)got, off, "cannot read the image: %s",
				    strerror((int)-got));
		if ((size_t)got < IMG_SEAL_ABYTES)
			return fail(err, -EBADMSG, off, "truncated: the encrypted stream ends "
				    "without its final chunk (after %llu chunks)",
				    (unsigned long long)i);
		r = plain_reserve(p, (size_t)got - IMG_SEAL_ABYTES);
		if (r < 0)
			return fail(err, r, off, "image is larger than %llu GiB or out of memory",
				    PLAIN_MAX >> 30);
		if (crypto_secretstream_xchacha20poly1305_pull(
			    st, p->base + p->size, &mlen, &tag, c, (unsigned long long)got,
			    i == 0 ? (const unsigned char *)h : NULL, i == 0 ? sizeof(*h) : 0) != 0)
			return fail(err, -EBADMSG, off, "encrypted chunk %llu fails authentication: "
				    "the image is damaged, modified or truncated",
				    (unsigned long long)i);
		p->size += (size_t)mlen;
		if (tag == TAG_FINAL) {
			got = read_full(fd, seekable, off + (uint64_t)got, &extra, 1);
			if (got != 0)
				return fail(err, -EBADMSG, off, "data after the final encrypted chunk");
			return 0;
		}
		if (tag != TAG_MESSAGE)
			return fail(err, -EBADMSG, off, "encrypted chunk %llu has tag %u",
				    (unsigned long long)i, tag);
		if ((size_t)got < csize)
			return fail(err, -EBADMSG, off, "truncated: the encrypted stream ends "
				    "without its final chunk (after %llu chunks)",
				    (unsigned long long)i + 1);
	}
}

int img_reader_open_sealed(struct img_reader *r, int fd, const uint8_t *key, size_t key_len,
			   struct img_error *err)
{
	struct img_seal_header h;
	struct plain p = { 0 };
	stream_state st;
	struct stat sb;
	bool seekable;
	int ret;

	if (!r)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	if (!key || key_len != IMG_KEY_BYTES)
		return fail(err, -EINVAL, 0, "a key is %u bytes, this one %zu", IMG_KEY_BYTES,
			    key_len);
	if (sodium_init() < 0)
		return fail(err, -EIO, 0, "libsodium cannot be initialised");
	if (fstat(fd, &sb) < 0) {
		ret = -errno;
		return fail(err, ret, 0, "cannot stat the image: %s", strerror(-ret));
	}
	seekable = S_ISREG(sb.st_mode);

	ret = open_header(fd, seekable, key, &st, &h, err);
	/* a file's size says how much plaintext to expect: one mapping, no mremap */
	if (ret == 0 && seekable && (uint64_t)sb.st_size > sizeof(h)) {
		uint64_t csize = (uint64_t)h.chunk_size + IMG_SEAL_ABYTES;
		uint64_t n = ((uint64_t)sb.st_size - sizeof(h) + csize - 1) / csize;

		ret = plain_reserve(&p, (size_t)MIN(n * h.chunk_size, PLAIN_MAX));
		if (ret < 0)
			ret = fail(err, ret, 0, "cannot map %llu bytes for the image: %s",
				   (unsigned long long)(n * h.chunk_size), strerror(-ret));
	} else if (ret == 0) {
		ret = plain_reserve(&p, PLAIN_INITIAL);
		if (ret < 0)
			ret = fail(err, ret, 0, "out of memory");
	}
	if (ret == 0)
		ret = open_chunks(fd, seekable, &st, &h, &p, err);
	sodium_memzero(&st, sizeof(st));
	if (ret == 0) {
		ret = plain_seal_off(&p);
		if (ret < 0)
			ret = fail(err, ret, 0, "mprotect: %s", strerror(-ret));
	}
	if (ret < 0) {
		plain_free(&p);
		return ret;
	}
	if (!p.base)
		return fail(err, -EINVAL, 0, "empty image");
	return img_reader_adopt(r, p.base, p.size, err);
}

int img_reader_open_key(struct img_reader *r, int fd, const uint8_t *key, size_t key_len,
			struct img_error *err)
{
	if (key)
		return img_reader_open_sealed(r, fd, key, key_len, err);
	return img_reader_open(r, fd, err);
}
