/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The image container: writer and reader (the format is described in img.h).
 *
 * The writer never seeks: the fd may be a pipe or a socket. To a regular
 * file, small records are gathered in a buffer and go out together, before
 * the next aligned record or the trailer. A record goes out as one writev()
 * of what was gathered, its frame, pad and data where the kernel takes it all;
 * short writes, EINTR and EAGAIN (a non-blocking fd) are carried on from.
 * The stream offset it keeps is what places aligned data on a page boundary.
 * With img_writer_direct, an aligned record's page bytes go to the file by
 * O_DIRECT pwrite() at their place, between the buffered writes of what
 * comes before them (ending on the page boundary where they start) and
 * after them (starting on the one where they end): the two ways never
 * share a page of the file.
 *
 * The reader trusts nothing it has not checked: every length is compared
 * with what is left of the buffer before it is added to anything, so a
 * forged length of 2^64-1 is an error and not an overflow. Every byte of a
 * valid image is covered by a checksum or checked to be zero (the pad).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "img/img.h"
#include "img/seal.h"
#include "util/cleanup.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the image is little-endian");
_Static_assert(sizeof(struct img_header) == 140, "struct img_header is part of the format");
_Static_assert(sizeof(struct img_frame) == 24, "struct img_frame is part of the format");
_Static_assert(sizeof(struct img_trailer) == 24, "struct img_trailer is part of the format");
_Static_assert(sizeof(struct img_index_entry) == 96 && sizeof(struct img_index_foot) == 16,
	       "the index is part of the format");
_Static_assert(IMG_FLAG_PAD_MASK == IMG_PAGE_SIZE - 1, "a pad must fit the flags");

#define FRAME_CRC_LEN offsetof(struct img_frame, hdr_crc)
#define HEADER_CRC_LEN offsetof(struct img_header, crc)
#define STREAM_MAX (64ull << 30) /* largest image read from a pipe or socket */
#define STREAM_INITIAL (64u << 10)
#define WRITE_BATCH 64 /* iovecs handed to one writev() */

static const uint8_t zero_pad[IMG_PAGE_SIZE];

/* --- writing -------------------------------------------------------- */

/* Waits until fd is ready for events, for a non-blocking fd that said EAGAIN. */
static int wait_fd(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		if (poll(&p, 1, -1) >= 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

/*
 * Writes head[0..nhead) then iov[0..cnt) to fd, all of it. *offset advances
 * by what was written, also when an error cuts the write short.
 */
static int writev_all(int fd, const struct iovec *head, size_t nhead, const struct iovec *iov,
		      size_t cnt, uint64_t *offset)
{
	size_t i = 0, done = 0; /* entry i of head||iov, of which done bytes are out */
	size_t total = nhead + cnt;

	while (i < total) {
		struct iovec batch[WRITE_BATCH];
		size_t n = 0, left;
		ssize_t k;

		for (size_t j = i; j < total && n < WRITE_BATCH; j++) {
			const struct iovec *v = j < nhead ? &head[j] : &iov[j - nhead];
			size_t skip = j == i ? done : 0;

			if (v->iov_len == skip)
				continue;
			batch[n].iov_base = (uint8_t *)v->iov_base + skip;
			batch[n].iov_len = v->iov_len - skip;
			n++;
		}
		if (n == 0)
			return 0;

		k = writev(fd, batch, (int)n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int r = wait_fd(fd, POLLOUT);

				if (r < 0)
					return r;
				continue;
			}
			return -errno;
		}
		if (k == 0)
			return -EIO;
		*offset += (uint64_t)k;

		/* step past what went out: whole entries, then part of one */
		for (left = (size_t)k; i < total; i++, done = 0) {
			const struct iovec *v = i < nhead ? &head[i] : &iov[i - nhead];
			size_t rest = v->iov_len - done;

			if (left < rest) {
				done += left;
				break;
			}
			left -= rest;
		}
	}
	return 0;
}

/* The writer's output: fd, or the seal that encrypts to it; what was
 * gathered first. */
static int write_out(struct img_writer *w, const struct iovec *head, size_t nhead,
		     const struct iovec *iov, size_t cnt)
{
	uint64_t *offset = &w->offset, gathered = 0;
	struct iovec g[3];
	size_t ng = 0;

	if (w->buf_len) { /* counted in offset when gathered */
		g[ng++] = (struct iovec){ .iov_base = w->buf, .iov_len = w->buf_len };
		gathered = w->buf_len;
		w->buf_len = 0;
	}
	for (size_t i = 0; i < nhead && ng < 3; i++)
		g[ng++] = head[i];
	if (!gathered)
		ng = 0;
	uint64_t at = *offset - gathered;
	int r = w->seal ? img_seal_write(w->seal, ng ? g : head, ng ? ng : nhead, iov, cnt, &at)
			: writev_all(w->fd, ng ? g : head, ng ? ng : nhead, iov, cnt, &at);
	*offset = at;
	return r;
}

/* Gathers a small record (frame, data) for a later write; 0 if it does not
 * fit (the caller writes it), 1 if gathered, or -errno. */
#define GATHER_SIZE (128u << 10)
#define GATHER_RECORD_MAX (8u << 10)
static int gather(struct img_writer *w, const struct img_frame *f, const struct iovec *iov,
		  size_t cnt, uint64_t len)
{
	if (!w->gather || len > GATHER_RECORD_MAX)
		return 0;
	if (!w->buf && !(w->buf = malloc(GATHER_SIZE)))
		return 0;
	if (w->buf_len + sizeof(*f) + len > GATHER_SIZE) {
		int r = write_out(w, NULL, 0, NULL, 0);
		if (r < 0)
			return r;
	}
	memcpy(w->buf + w->buf_len, f, sizeof(*f));
	w->buf_len += sizeof(*f);
	for (size_t i = 0; i < cnt; i++) {
		if (iov[i].iov_len) /* an empty record may have no data pointer */
			memcpy(w->buf + w->buf_len, iov[i].iov_base, iov[i].iov_len);
		w->buf_len += iov[i].iov_len;
	}
	w->offset += sizeof(*f) + len;
	return 1;
}

static void direct_off(struct img_writer *w)
{
	if (w->direct)
		close(w->dfd);
	w->direct = false;
	w->dfd = -1;
}

/*
 * The bytes of an aligned record that go out directly: the whole pages at
 * the start of iov[0], if its memory is page-aligned and they are at least
 * IMG_DIRECT_MIN. A direct write waits for the disk: for a small record
 * that wait (0.3-1.5 ms here, measured by strace) is more than what the
 * page cache's write-back costs at the fsync, and a tree of 100 small
 * processes made 100 such waits, one per process's pages, most of the
 * step "dump". Smaller records go through the page cache, as on tmpfs.
 */
#define IMG_DIRECT_MIN (256u << 10)
static size_t direct_len(const struct img_writer *w, const struct iovec *iov, size_t cnt)
{
	if (!w->direct || !cnt || (uintptr_t)iov[0].iov_base % IMG_PAGE_SIZE ||
	    iov[0].iov_len < IMG_DIRECT_MIN)
		return 0;
	return iov[0].iov_len / IMG_PAGE_SIZE * IMG_PAGE_SIZE;
}

/*
 * An aligned record whose first dlen bytes of data go out directly: what
 * was gathered, the frame and the pad to fd (ending on a page boundary),
 * the dlen bytes to dfd, the rest to fd again after a seek past them.
 */
static int write_direct(struct img_writer *w, const struct iovec *head, size_t nhead,
			const struct iovec *iov, size_t cnt, size_t dlen)
{
	const uint8_t *p = iov[0].iov_base;
	size_t done = 0;
	int r = write_out(w, head, nhead, NULL, 0);

	if (r < 0)
		return r;
	while (done < dlen) {
		ssize_t k = pwrite(w->dfd, p + done, dlen - done,
				   (off_t)(w->dbase + w->offset + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EINVAL) {
			direct_off(w); /* refused after all: the rest the ordinary way */
			break;
		}
		if (k <= 0) {
			r = k < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)k;
	}
	w->offset += done;
	w->direct_bytes += done;
	if (done && lseek(w->fd, (off_t)(w->dbase + w->offset), SEEK_SET) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		return r;
	struct iovec first = { .iov_base = (void *)(p + done), .iov_len = iov[0].iov_len - done };
	return write_out(w, &first, 1, iov + 1, cnt - 1);
}

int img_writer_direct(struct img_writer *w)
{
	struct statx sx;
	char path[64];
	off_t pos;
	int fl, dfd;

	if (!w || w->finished || w->seal || !w->gather || w->direct)
		return -EINVAL;
	fl = fcntl(w->fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if (fl & O_APPEND)
		return -EINVAL;
	if (statx(w->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & STATX_DIOALIGN) || !sx.stx_dio_offset_align || !sx.stx_dio_mem_align ||
	    IMG_PAGE_SIZE % sx.stx_dio_offset_align || IMG_PAGE_SIZE % sx.stx_dio_mem_align)
		return -EOPNOTSUPP;
	/* stream offset 0 must be on a page boundary of the file */
	uint64_t written = w->offset - w->buf_len;
	pos = lseek(w->fd, 0, SEEK_CUR);
	if (pos < 0)
		return -errno;
	if ((uint64_t)pos < written || ((uint64_t)pos - written) % IMG_PAGE_SIZE)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", w->fd);
	dfd = open(path, O_WRONLY | O_DIRECT | O_NOCTTY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	w->dfd = dfd;
	w->dbase = (uint64_t)pos - written;
	w->direct = true;
	return 0;
}

void img_writer_drop(struct img_writer *w)
{
	if (!w)
		return;
	direct_off(w);
	free(w->index);
	w->index = NULL;
	w->nindex = 0;
	free(w->buf);
	w->buf = NULL;
	w->buf_len = 0;
}

int img_writer_init(struct img_writer *w, int fd, struct img_header *hdr)
{
	return img_writer_init_sealed(w, fd, NULL, hdr);
}

int img_writer_init_sealed(struct img_writer *w, int fd, struct img_seal *seal,
			   struct img_header *hdr)
{
	struct img_writer n = { .fd = fd, .seal = seal, .dfd = -1 };
	struct iovec iov;
	int r;

	if (!w || fd < 0 || !hdr)
		return -EINVAL;
	if (hdr->page_size != IMG_PAGE_SIZE)
		return -EINVAL;
	if (!memchr(hdr->kernel_release, 0, sizeof(hdr->kernel_release)))
		return -EINVAL;

	memcpy(hdr->magic, IMG_MAGIC, sizeof(hdr->magic));
	hdr->version = IMG_VERSION;
	hdr->header_size = sizeof(*hdr);
	hdr->crc = img_crc32c(0, hdr, HEADER_CRC_LEN);

	iov = (struct iovec){ .iov_base = hdr, .iov_len = sizeof(*hdr) };
	r = write_out(&n, &iov, 1, NULL, 0);
	if (r < 0)
		return r;
	struct stat st;
	n.gather = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	*w = n;
	return 0;
}

/* An index entry for the record of frame f about to be written at
 * w->offset: the frame and the last bytes of iov (len bytes). */
static int index_add(struct img_writer *w, const struct img_frame *f, const struct iovec *iov,
		     size_t cnt, uint64_t len)
{
	if (w->nindex >= IMG_INDEX_MAX)
		return -EOVERFLOW;
	if (w->nindex % 256 == 0) {
		struct img_index_entry *n = realloc(w->index, (w->nindex + 256) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		w->index = n;
	}
	struct img_index_entry *e = &w->index[w->nindex];
	*e = (struct img_index_entry){.offset = w->offset,
				      .length = f->length,
				      .flags = f->flags,
				      .data_crc = f->data_crc,
				      .end_len = (uint32_t)MIN(len, (uint64_t)IMG_INDEX_END)};
	/* the last end_len bytes, from the iovecs' ends backwards */
	size_t want = e->end_len;
	for (size_t i = cnt; want && i-- > 0;) {
		size_t k = MIN(want, iov[i].iov_len);
		memcpy(e->end + want - k, (const uint8_t *)iov[i].iov_base + iov[i].iov_len - k, k);
		want -= k;
	}
	w->nindex++;
	return 0;
}

/*
 * One record: frame, pad (aligned only) and data, in one writev() where the
 * kernel takes it. The trailer goes through here too, and is not counted.
 */
static int write_record(struct img_writer *w, uint32_t type, uint32_t flags,
			const struct iovec *iov, size_t cnt, bool aligned, const uint32_t *data_crc)
{
	struct img_frame f = { .type = type };
	struct iovec head[2];
	uint64_t len = 0;
	uint32_t crc = 0;
	size_t pad = 0;
	int r;

	for (size_t i = 0; i < cnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		if (iov[i].iov_len > IMG_MAX_RECORD - len)
			return -EFBIG;
		len += iov[i].iov_len;
	}
	if (type != IMG_REC_TRAILER && w->records >= UINT32_MAX)
		return -EOVERFLOW; /* the reader numbers records in 32 bits */

	for (size_t i = 0; !data_crc && i < cnt; i++)
		crc = img_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	if (data_crc)
		crc = *data_crc;
	if (aligned)
		pad = (size_t)(-(w->offset + sizeof(f)) & (IMG_PAGE_SIZE - 1));

	f.flags = flags | (uint32_t)pad;
	f.length = pad + len;
	f.hdr_crc = img_crc32c(0, &f, FRAME_CRC_LEN);
	f.data_crc = crc;

	if (aligned && w->index_type == type && (r = index_add(w, &f, iov, cnt, len)) < 0)
		return r;
	head[0] = (struct iovec){ .iov_base = &f, .iov_len = sizeof(f) };
	head[1] = (struct iovec){ .iov_base = (void *)zero_pad, .iov_len = pad };
	size_t dlen = aligned ? direct_len(w, iov, cnt) : 0;
	r = aligned || type == IMG_REC_TRAILER ? 0 : gather(w, &f, iov, cnt, len);
	if (r == 0 && dlen)
		r = write_direct(w, head, pad ? 2 : 1, iov, cnt, dlen);
	else if (r == 0)
		r = write_out(w, head, pad ? 2 : 1, iov, cnt);
	if (r < 0)
		return r;
	if (type != IMG_REC_TRAILER) {
		w->records++;
		w->data_bytes += len;
	}
	if (w->wrote)
		w->wrote(w->wrote_arg, w->offset);
	return 0;
}

static bool user_type(uint32_t type)
{
	return type >= 1 && type < IMG_REC_TRAILER;
}

int img_write(struct img_writer *w, uint32_t type, uint32_t flags, const void *data, size_t len)
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };

	if (!w || w->finished || !user_type(type) || (flags & IMG_FLAG_PAD_MASK))
		return -EINVAL;
	return write_record(w, type, flags, &iov, 1, false, NULL);
}

int img_write_aligned(struct img_writer *w, uint32_t type, const struct iovec *iov, int iovcnt)
{
	if (!w || w->finished || !user_type(type) || iovcnt < 0 || (iovcnt > 0 && !iov))
		return -EINVAL;
	return write_record(w, type, 0, iov, (size_t)iovcnt, true, NULL);
}

int img_write_aligned_crc(struct img_writer *w, uint32_t type, const struct iovec *iov,
			  int iovcnt, uint32_t crc)
{
	if (!w || w->finished || !user_type(type) || iovcnt < 0 || (iovcnt > 0 && !iov))
		return -EINVAL;
	return write_record(w, type, 0, iov, (size_t)iovcnt, true, &crc);
}

int img_writer_index(struct img_writer *w, uint32_t type)
{
	if (!w || w->finished || !user_type(type) || type == IMG_REC_INDEX)
		return -EINVAL;
	w->index_type = type;
	return 0;
}

int img_writer_finish(struct img_writer *w)
{
	struct img_trailer t;
	struct iovec iov = { .iov_base = &t, .iov_len = sizeof(t) };
	struct stat st;
	int r;

	if (!w || w->finished)
		return -EINVAL;
	if (w->nindex) {
		struct img_index_foot foot = {
		    .type = w->index_type, .magic = IMG_INDEX_MAGIC, .n = w->nindex};
		struct iovec x[2] = {{w->index, w->nindex * sizeof(*w->index)},
				     {&foot, sizeof(foot)}};
		r = write_record(w, IMG_REC_INDEX, 0, x, 2, false, NULL);
		if (r < 0)
			return r;
	}
	t = (struct img_trailer){
		.records = w->records,
		.data_bytes = w->data_bytes,
		.magic = IMG_TRAILER_MAGIC,
	};
	/* whatever happens now, nothing more may be appended */
	w->finished = true;

	r = write_record(w, IMG_REC_TRAILER, 0, &iov, 1, false, NULL);
	img_writer_drop(w);
	if (r >= 0 && w->seal)
		r = img_seal_finish(w->seal);
	if (r < 0)
		return r;
	if (fstat(w->fd, &st) < 0)
		return -errno;
	if (S_ISREG(st.st_mode) && fsync(w->fd) < 0)
		return -errno;
	return 0;
}

/* --- reading -------------------------------------------------------- */

__attribute__((format(printf, 6, 7))) static int fail(struct img_error *err, int r, int64_t index,
						      uint64_t offset, uint32_t type,
						      const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return r;
	err->index = index;
	err->offset = offset;
	err->type = type;
	va_start(ap, fmt);
	vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
	va_end(ap);
	return r;
}

/*
 * Reads fd to its end into an anonymous mapping that doubles as it fills,
 * up to STREAM_MAX. A regular file (one that could not be mapped, or says
 * it is empty, as /proc files do) is read with pread() from offset 0, as the
 * mapping would have been. The result is read-only, trimmed to whole pages.
 */
static int load_stream(int fd, bool seekable, uint8_t **ret_base, size_t *ret_size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t cap = STREAM_INITIAL, size = 0, want;
	uint8_t *base;
	int r;

	base = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return -errno;

	for (;;) {
		ssize_t k;

		if (size == cap) {
			size_t ncap = MIN(cap * 2, (size_t)STREAM_MAX + page);
			void *p;

			if (cap > STREAM_MAX) {
				r = -EFBIG;
				goto fail;
			}
			p = mremap(base, cap, ncap, MREMAP_MAYMOVE);
			if (p == MAP_FAILED) {
				r = -errno;
				goto fail;
			}
			base = p;
			cap = ncap;
		}

		if (seekable)
			k = pread(fd, base + size, cap - size, (off_t)size);
		else
			k = read(fd, base + size, cap - size);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				r = wait_fd(fd, POLLIN);
				if (r < 0)
					goto fail;
				continue;
			}
			r = -errno;
			goto fail;
		}
		if (k == 0)
			break;
		size += (size_t)k;
	}
	if (size > STREAM_MAX) {
		r = -EFBIG;
		goto fail;
	}

	if (size == 0) {
		munmap(base, cap);
		*ret_base = NULL;
		*ret_size = 0;
		return 0;
	}
	want = ALIGN_UP(size, page);
	if (want < cap)
		munmap(base + want, cap - want);
	if (mprotect(base, want, PROT_READ) < 0) {
		r = -errno;
		cap = want;
		goto fail;
	}
	*ret_base = base;
	*ret_size = size;
	return 0;
fail:
	munmap(base, cap);
	return r;
}

static int check_header(struct img_reader *r, struct img_error *err)
{
	struct img_header h;
	uint32_t version;

	if (r->size == 0)
		return fail(err, -EINVAL, -1, 0, 0, "empty image");
	if (r->size < sizeof(h.magic))
		return fail(err, -EINVAL, -1, 0, 0, "truncated in header (%zu of %zu bytes)",
			    r->size, sizeof(h));
	if (memcmp(r->base, IMG_MAGIC, sizeof(h.magic)))
		return fail(err, -EINVAL, -1, 0, 0, "not a ckpt image (bad magic)");
	if (r->size < offsetof(struct img_header, version) + sizeof(version))
		return fail(err, -EINVAL, -1, 0, 0, "truncated in header (%zu of %zu bytes)",
			    r->size, sizeof(h));
	memcpy(&version, r->base + offsetof(struct img_header, version), sizeof(version));
	/* before anything else: a newer header may be laid out differently */
	if (version > IMG_VERSION)
		return fail(err, -EINVAL, -1, offsetof(struct img_header, version), 0,
			    "image format version %u is newer than this ckpt (%u)", version,
			    IMG_VERSION);
	if (version == 0)
		return fail(err, -EINVAL, -1, offsetof(struct img_header, version), 0,
			    "bad image format version 0");
	if (version < IMG_VERSION)
		return fail(err, -EINVAL, -1, offsetof(struct img_header, version), 0,
			    "image format version %u was made by an older ckpt; this one reads "
			    "version %u (restart it with the ckpt that made it)", version,
			    IMG_VERSION);
	if (r->size < sizeof(h))
		return fail(err, -EINVAL, -1, 0, 0, "truncated in header (%zu of %zu bytes)",
			    r->size, sizeof(h));

	memcpy(&h, r->base, sizeof(h));
	if (h.header_size != sizeof(h))
		return fail(err, -EINVAL, -1, offsetof(struct img_header, header_size), 0,
			    "header size %u, expected %zu", h.header_size, sizeof(h));
	if (img_crc32c(0, &h, HEADER_CRC_LEN) != h.crc)
		return fail(err, -EBADMSG, -1, 0, 0, "header checksum mismatch");
	if (h.page_size != IMG_PAGE_SIZE)
		return fail(err, -EINVAL, -1, offsetof(struct img_header, page_size), 0,
			    "page size %u is not supported (only %u)", h.page_size, IMG_PAGE_SIZE);
	if (h.flags & ~IMG_HDR_FLAGS_KNOWN & IMG_HDR_ZSTD)
		return fail(err, -EPROTONOSUPPORT, -1, offsetof(struct img_header, flags), 0,
			    "the image holds pages compressed with zstd, and this ckpt was built "
			    "without zstd");
	if (h.flags & ~IMG_HDR_FLAGS_KNOWN)
		return fail(err, -EINVAL, -1, offsetof(struct img_header, flags), 0,
			    "unknown header flags 0x%x (an image of a newer ckpt?)",
			    h.flags & ~IMG_HDR_FLAGS_KNOWN);
	const char *end = memchr(h.kernel_release, 0, sizeof(h.kernel_release));
	if (!end)
		return fail(err, -EINVAL, -1, offsetof(struct img_header, kernel_release), 0,
			    "kernel release in the header is not terminated");
	/* every byte is meaningful or zero: after the release's NUL, the reserved bytes */
	for (const char *p = end; p < h.kernel_release + sizeof(h.kernel_release); p++)
		if (*p)
			return fail(err, -EINVAL, -1, offsetof(struct img_header, kernel_release), 0,
				    "bytes after the kernel release in the header are not zero");
	for (size_t i = 0; i < sizeof(h.reserved); i++)
		if (h.reserved[i])
			return fail(err, -EINVAL, -1, offsetof(struct img_header, reserved) + i, 0,
				    "reserved header byte %zu is 0x%02x, not zero", i,
				    (uint8_t)h.reserved[i]);
	r->hdr = h;
	return 0;
}

static int open_fd(struct img_reader *r, int fd, bool populate, struct img_error *err)
{
	struct img_reader n = { 0 };
	struct stat st;
	int ret;

	if (!r)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		return fail(err, ret, -1, 0, 0, "cannot stat the image: %s", strerror(-ret));
	}

	if (S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ,
			       MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);

		if (p != MAP_FAILED) {
			n.base = p;
			n.size = (size_t)st.st_size;
			n.mapped = true;
		}
	}
	if (!n.mapped) {
		ret = load_stream(fd, S_ISREG(st.st_mode), &n.base, &n.size);
		if (ret == -EFBIG)
			return fail(err, ret, -1, 0, 0, "image is larger than %llu GiB",
				    STREAM_MAX >> 30);
		if (ret < 0)
			return fail(err, ret, -1, 0, 0, "cannot read the image: %s",
				    strerror(-ret));
	}

	if (img_seal_detect(n.base, n.size)) {
		img_reader_close(&n);
		return fail(err, -ENOKEY, -1, 0, 0, "image is encrypted: it needs its key");
	}
	ret = img_reader_adopt(r, n.base, n.size, err);
	if (ret == 0)
		r->mapped = n.mapped;
	if (ret == 0 && n.mapped && !populate) {
		r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		r->sparse = r->fd >= 0;
	}
	return ret;
}

int img_reader_pread(const struct img_reader *r, const uint8_t *at, void *buf, size_t len)
{
	if (!r || !r->base || at < r->base || (size_t)(at - r->base) > r->size ||
	    len > r->size - (size_t)(at - r->base))
		return -EINVAL;
	if (!r->sparse) {
		memcpy(buf, at, len);
		return 0;
	}
	for (size_t done = 0; done < len;) {
		ssize_t k = pread(r->fd, (uint8_t *)buf + done, len - done,
				  (off_t)(at - r->base + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		done += (size_t)k;
	}
	return 0;
}

int img_reader_end(const struct img_reader *r, const struct img_record *rec, const uint8_t **ret,
		   size_t *len)
{
	if (r && rec && r->idx && rec->type == r->crc_later) { /* the index's, by offset */
		size_t lo = 0, hi = r->nidx;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (r->idx[mid].offset < rec->offset)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo >= r->nidx || r->idx[lo].offset != rec->offset ||
		    r->idx[lo].end_len > rec->len)
			return -ENOENT;
		*ret = r->idx[lo].end;
		*len = r->idx[lo].end_len;
		return 1;
	}
	size_t lo = 0, hi = r && rec ? r->nends : 0;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->ends[mid].index < rec->index)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= (r && rec ? r->nends : 0) || r->ends[lo].index != rec->index ||
	    r->ends[lo].len > rec->len)
		return -ENOENT;
	*ret = r->ends[lo].b;
	*len = r->ends[lo].len;
	return 0;
}

int img_reader_open(struct img_reader *r, int fd, struct img_error *err)
{
	return open_fd(r, fd, true, err);
}

int img_reader_open_lazy(struct img_reader *r, int fd, struct img_error *err)
{
	return open_fd(r, fd, false, err);
}

int img_reader_adopt(struct img_reader *r, uint8_t *base, size_t size, struct img_error *err)
{
	struct img_reader n = { .base = base, .size = size };
	int ret;

	if (!r)
		return -EINVAL;
	ret = check_header(&n, err);
	if (ret < 0) {
		img_reader_close(&n);
		return ret;
	}
	n.pos = sizeof(struct img_header);
	*r = n;
	return 0;
}

/*
 * The data bytes of the records before end, by their frames: every one of
 * them has been checked by img_reader_next() on the way to end, so this
 * only re-reads lengths, still without trusting them.
 */
static int sum_data(const struct img_reader *r, size_t end, uint64_t *ret_sum)
{
	size_t pos = sizeof(struct img_header);
	uint64_t sum = 0;

	while (pos < end) {
		struct img_frame f;
		size_t pad;

		if (end - pos < sizeof(f))
			return -EINVAL;
		memcpy(&f, r->base + pos, sizeof(f));
		pad = f.flags & IMG_FLAG_PAD_MASK;
		if (f.length > end - pos - sizeof(f) || pad > f.length)
			return -EINVAL;
		sum += f.length - pad;
		pos += sizeof(f) + (size_t)f.length;
	}
	*ret_sum = sum;
	return 0;
}

/* The trailer's frame and data checksum are good; does it agree with the stream? */
static int check_trailer(struct img_reader *r, const struct img_frame *f, size_t pos,
			 struct img_error *err)
{
	int64_t idx = r->next_index;
	struct img_trailer t;
	uint64_t sum;
	size_t end;

	if (f->flags)
		return fail(err, -EINVAL, idx, pos, f->type, "trailer has flags 0x%x", f->flags);
	if (f->length != sizeof(t))
		return fail(err, -EINVAL, idx, pos, f->type, "trailer has length %llu, expected %zu",
			    (unsigned long long)f->length, sizeof(t));
	end = pos + sizeof(*f) + sizeof(t);
	if (end != r->size)
		return fail(err, -EINVAL, idx, pos, f->type, "%zu bytes after the trailer",
			    r->size - end);

	if (img_reader_pread(r, r->base + pos + sizeof(*f), &t, sizeof(t)) < 0)
		return fail(err, -EIO, idx, pos, f->type, "cannot read the trailer");
	if (t.magic != IMG_TRAILER_MAGIC)
		return fail(err, -EINVAL, idx, pos, f->type, "bad trailer magic 0x%08x", t.magic);
	if (t.reserved)
		return fail(err, -EINVAL, idx, pos, f->type, "trailer reserved field is 0x%x",
			    t.reserved);
	if (t.records != r->next_index)
		return fail(err, -EINVAL, idx, pos, f->type,
			    "trailer counts %llu records, the image has %u",
			    (unsigned long long)t.records, r->next_index);
	/* sparse: the frames were read once each, by pread, on the way here */
	if (r->sparse)
		sum = r->data_sum;
	else if (sum_data(r, pos, &sum) < 0)
		return fail(err, -EINVAL, idx, pos, f->type, "records before the trailer changed");
	if (t.data_bytes != sum)
		return fail(err, -EINVAL, idx, pos, f->type,
			    "trailer counts %llu data bytes, the image has %llu",
			    (unsigned long long)t.data_bytes, (unsigned long long)sum);
	return -ENODATA;
}

int img_reader_next(struct img_reader *r, struct img_record *ret, struct img_error *err)
{
	int64_t idx;
	struct img_frame f;
	size_t pos, left, pad, data_off, data_len;

	if (!r || !r->base || r->pos > r->size)
		return fail(err, -EBADF, -1, 0, 0, "image is not open");
	idx = r->next_index;
	pos = r->pos;
	left = r->size - pos;

	if (left == 0)
		return fail(err, -EINVAL, idx, pos, 0, "truncated: no trailer (image incomplete)");
	if (left < sizeof(f))
		return fail(err, -EINVAL, idx, pos, 0, "truncated in frame (%zu of %zu bytes)", left,
			    sizeof(f));
	/* sparse: the frame and what may be its pad, in one pread up to the
	 * page boundary where a padded record's data starts (a pad is shorter
	 * than a page), so that the first page of the data is not read; once
	 * validated, the frame kept from the first pass (its pad was checked) */
	uint8_t buf[IMG_END_KEEP + sizeof(f) + IMG_PAGE_SIZE];
	uint8_t *head = buf + IMG_END_KEEP;
	bool kept = r->sparse && r->validated && r->next_index < r->nframes;
	/* a record of the index: its frame is the index's (checked against
	 * the file when the record is used), not read now */
	const struct img_index_entry *ie =
	    r->idx && !kept && r->idx_next < r->nidx && r->idx[r->idx_next].offset == pos
		? &r->idx[r->idx_next]
		: NULL;
	bool late = ie || (kept && r->idx && r->frames[r->next_index].type == r->crc_later);
	if (r->idx && !kept && !ie && r->idx_next < r->nidx && r->idx[r->idx_next].offset < pos)
		return fail(err, -EINVAL, idx, pos, 0,
			    "the image's index names a record at offset "
			    "%llu, which is not where a record starts",
			    (unsigned long long)r->idx[r->idx_next].offset);
	size_t upto = ((pos + sizeof(f)) / IMG_PAGE_SIZE + 1) * IMG_PAGE_SIZE - pos;
	size_t got = r->sparse ? MIN(left, upto) : sizeof(f);
	/* the previous record's last bytes too, when its data is checked
	 * later (and the index did not give them): it ends here, so they
	 * are in the same pread (and page) */
	const struct img_frame *prev = r->sparse && !kept && !ie && !r->idx && r->nframes &&
					       r->next_index == r->nframes
					       ? &r->frames[r->nframes - 1]
					       : NULL;
	size_t end = prev && r->crc_later && prev->type == r->crc_later
			     ? MIN((size_t)IMG_END_KEEP, (size_t)(prev->length -
								   (prev->flags & IMG_FLAG_PAD_MASK)))
			     : 0;
	if (ie) {
		f = (struct img_frame){.type = r->crc_later,
				       .flags = ie->flags,
				       .length = ie->length,
				       .data_crc = ie->data_crc};
		f.hdr_crc = img_crc32c(0, &f, FRAME_CRC_LEN);
		end = 0; /* img_reader_end() finds it in the index */
	} else if (r->sparse && !kept &&
		   img_reader_pread(r, r->base + pos - end, head - end, got + end) < 0) {
		return fail(err, -EIO, idx, pos, 0, "cannot read the frame");
	}
	if (end && r->nends % 256 == 0) {
		struct img_end *ne = realloc(r->ends, (r->nends + 256) * sizeof(*ne));
		if (!ne)
			return fail(err, -ENOMEM, idx, pos, 0, "out of memory");
		r->ends = ne;
	}
	if (end) { /* the record before's */
		struct img_end *e = &r->ends[r->nends++];
		e->index = r->next_index - 1;
		e->len = (uint32_t)end;
		memcpy(e->b, head - end, end);
	}
	if (kept)
		f = r->frames[r->next_index];
	else if (!ie)
		memcpy(&f, r->sparse ? head : r->base + pos, sizeof(f));
	if (r->idx && !ie && !kept && f.type == r->crc_later)
		return fail(err, -EINVAL, idx, pos, f.type,
			    "the record is not in the image's index");
	if (img_crc32c(0, &f, FRAME_CRC_LEN) != f.hdr_crc)
		return fail(err, -EBADMSG, idx, pos, 0, "frame checksum mismatch");
	left -= sizeof(f);

	if (f.type == 0 || f.type > IMG_REC_TRAILER)
		return fail(err, -EINVAL, idx, pos, f.type, "bad record type 0x%x", f.type);
	pad = f.flags & IMG_FLAG_PAD_MASK;
	if (pad > f.length)
		return fail(err, -EINVAL, idx, pos, f.type, "pad %zu exceeds the record length %llu",
			    pad, (unsigned long long)f.length);
	if (f.length - pad > IMG_MAX_RECORD)
		return fail(err, -EINVAL, idx, pos, f.type,
			    "record claims %llu bytes, more than the maximum %llu",
			    (unsigned long long)(f.length - pad), IMG_MAX_RECORD);
	if (f.length > left)
		return fail(err, -EINVAL, idx, pos, f.type,
			    "truncated: record claims %llu bytes, %zu left",
			    (unsigned long long)f.length, left);

	/* from here on pos + sizeof(f) + f.length <= r->size */
	data_off = pos + sizeof(f) + pad;
	data_len = (size_t)(f.length - pad);
	if (pad && data_off % IMG_PAGE_SIZE)
		return fail(err, -EINVAL, idx, pos, f.type,
			    "pad %zu does not align the data (at offset %zu)", pad, data_off);
	if (pad && r->sparse && !kept && pad > got - sizeof(f)) /* not after the checks above */
		return fail(err, -EINVAL, idx, pos, f.type, "pad %zu runs past a page", pad);
	if (ie && ie->end_len != MIN((uint64_t)IMG_INDEX_END, f.length - pad))
		return fail(err, -EINVAL, idx, pos, f.type, "its index entry keeps %u end bytes",
			    ie->end_len);
	if (pad && !kept && !ie &&
	    memcmp(r->sparse ? head + sizeof(f) : r->base + pos + sizeof(f), zero_pad, pad))
		return fail(err, -EINVAL, idx, pos, f.type, "pad is not zero");
	/* once validated, data checksums are not computed again (frames are) */
	if (!r->validated && img_crc32c(0, r->base + data_off, data_len) != f.data_crc)
		return fail(err, -EBADMSG, idx, pos, f.type, "data checksum mismatch");

	if (f.type == IMG_REC_TRAILER && r->idx && !kept && r->idx_next < r->nidx)
		return fail(err, -EINVAL, idx, pos, f.type,
			    "the image's index names a record at "
			    "offset %llu, which is not where a record starts",
			    (unsigned long long)r->idx[r->idx_next].offset);
	if (f.type == IMG_REC_TRAILER)
		return check_trailer(r, &f, pos, err);
	if (r->next_index == UINT32_MAX)
		return fail(err, -EINVAL, idx, pos, f.type, "too many records");

	*ret = (struct img_record){
		.type = f.type,
		.flags = f.flags & ~IMG_FLAG_PAD_MASK,
		.index = r->next_index,
		.offset = pos,
		.data = r->base + data_off,
		.len = data_len,
		.data_crc = f.data_crc,
		.late = late,
	};
	r->idx_next += ie != NULL;
	if (r->sparse && r->next_index == r->nframes) {
		if (r->nframes % 256 == 0) {
			struct img_frame *nf = realloc(r->frames, (r->nframes + 256) * sizeof(*nf));
			if (!nf)
				return fail(err, -ENOMEM, idx, pos, f.type, "out of memory");
			r->frames = nf;
		}
		r->frames[r->nframes++] = f;
	}
	r->pos = data_off + data_len;
	r->data_sum += data_len;
	r->next_index++;
	return 0;
}

/*
 * A sparse reader's index (validation with crc_later): the foot before the
 * trailer, then the index record, each read with one pread and checked
 * (frame, checksum, every entry inside the records before it, in order,
 * not overlapping). Anything that does not check leaves r without an
 * index, and the walk reads every frame: an image without one (older), or
 * whose index is damaged (the walk then finds the damage and names it).
 */
static void load_index(struct img_reader *r)
{
	struct {
		struct img_index_foot foot;
		struct img_frame f;
		struct img_trailer t;
	} __attribute__((packed)) tail;
	size_t hs = sizeof(struct img_header);
	if (r->size < hs + sizeof(struct img_frame) + sizeof(tail) ||
	    img_reader_pread(r, r->base + r->size - sizeof(tail), &tail, sizeof(tail)) < 0)
		return;
	if (tail.f.type != IMG_REC_TRAILER || tail.f.length != sizeof(tail.t) ||
	    tail.foot.magic != IMG_INDEX_MAGIC || tail.foot.type != r->crc_later || !tail.foot.n ||
	    tail.foot.n > IMG_INDEX_MAX)
		return;
	size_t len = tail.foot.n * sizeof(struct img_index_entry) + sizeof(tail.foot);
	size_t before = r->size - sizeof(tail) + sizeof(tail.foot); /* where the index ends */
	if (before < hs + sizeof(struct img_frame) + len)
		return;
	size_t at = before - len - sizeof(struct img_frame);
	uint8_t *b = malloc(sizeof(struct img_frame) + len);
	struct img_frame f;
	if (!b || img_reader_pread(r, r->base + at, b, sizeof(f) + len) < 0)
		goto out;
	memcpy(&f, b, sizeof(f));
	if (f.type != IMG_REC_INDEX || f.flags || f.length != len ||
	    img_crc32c(0, &f, FRAME_CRC_LEN) != f.hdr_crc ||
	    img_crc32c(0, b + sizeof(f), len) != f.data_crc)
		goto out;
	struct img_index_entry *e = (struct img_index_entry *)(b + sizeof(f));
	uint64_t next = hs; /* the entries lie in order before the index */
	for (size_t i = 0; i < tail.foot.n; i++) {
		uint64_t pad = e[i].flags & IMG_FLAG_PAD_MASK;
		if (e[i].offset < next || e[i].offset > at || at - e[i].offset < sizeof(f) ||
		    e[i].length > at - e[i].offset - sizeof(f) || pad > e[i].length ||
		    e[i].reserved ||
		    e[i].end_len != MIN((uint64_t)IMG_INDEX_END, e[i].length - pad))
			goto out;
		next = e[i].offset + sizeof(f) + e[i].length;
	}
	memmove(b, e, len - sizeof(tail.foot));
	r->idx = (struct img_index_entry *)b;
	r->nidx = tail.foot.n;
	r->idx_next = 0; /* the validation's walk meets them all, once */
	return;
out:
	free(b);
}

int img_reader_verify(const struct img_reader *r, uint32_t index, uint64_t offset)
{
	if (!r || !r->base || index >= r->nframes || offset > r->size)
		return -EINVAL;
	/* through the mapping: the caller reads the record's bytes from it
	 * next (the lazy server has no fd of the image) */
	const struct img_frame *f = &r->frames[index];
	size_t pad = f->flags & IMG_FLAG_PAD_MASK;
	const uint8_t *p = r->base + offset, *end;
	size_t end_len;
	struct img_record rec = {
		.type = f->type, .index = index, .offset = offset, .len = f->length - pad };
	if (f->length > r->size - offset - sizeof(*f) ||
	    img_reader_end(r, &rec, &end, &end_len) < 0)
		return -EINVAL; /* not a record of r's */
	if (memcmp(p, f, sizeof(*f)) || memcmp(p + sizeof(*f), zero_pad, pad) ||
	    memcmp(p + sizeof(*f) + f->length - end_len, end, end_len))
		return -EPROTO;
	return 0;
}

void img_reader_rewind(struct img_reader *r)
{
	if (!r || !r->base)
		return;
	r->pos = sizeof(struct img_header);
	r->next_index = 0;
	r->data_sum = 0;
}

/*
 * Validation checks every frame on one pass, then the data checksums with
 * two threads (the copy from the page cache and the crc are what restart
 * time goes to). The first bad record in stream order is the one reported.
 */
struct crc_job {
	const uint8_t *base;
	const size_t *frame_off; /* per record: offset of its frame */
	const uint8_t **data;
	const uint64_t *len;
	const uint32_t *type;
	const uint32_t *crc;    /* per record: its frame's data_crc */
	size_t n;
	size_t next;            /* atomic */
	size_t first_bad;       /* atomic min; n if none */
	uint32_t skip;          /* a type whose data is checked later, or 0 */
	bool indexed;		/* the index record's checksum was checked (load_index) */
};

static void *crc_worker(void *arg)
{
	struct crc_job *j = arg;
	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (i >= j->n)
			break;
		if ((j->skip && j->type[i] == j->skip) ||
		    (j->indexed && j->type[i] == IMG_REC_INDEX) ||
		    img_crc32c(0, j->data[i], j->len[i]) == j->crc[i])
			continue;
		size_t cur = __atomic_load_n(&j->first_bad, __ATOMIC_RELAXED);
		while (i < cur && !__atomic_compare_exchange_n(&j->first_bad, &cur, i, false,
							       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	return NULL;
}

static int check_data(struct img_reader *r, size_t n, const size_t *off, const uint8_t **data,
		      const uint64_t *len, const uint32_t *type, const uint32_t *crc, uint64_t total,
		      struct img_error *err)
{
	struct crc_job j = {.base = r->base,
			    .frame_off = off,
			    .data = data,
			    .len = len,
			    .type = type,
			    .crc = crc,
			    .n = n,
			    .first_bad = n,
			    .skip = r->crc_later,
			    .indexed = r->idx != NULL};
	pthread_t helper;
	bool two = total >= (32u << 20) && pthread_create(&helper, NULL, crc_worker, &j) == 0;

	crc_worker(&j);
	if (two)
		pthread_join(helper, NULL);
	if (j.first_bad < n)
		return fail(err, -EBADMSG, (int64_t)j.first_bad, off[j.first_bad], type[j.first_bad],
			    "data checksum mismatch");
	return 0;
}

int img_reader_validate(struct img_reader *r, struct img_error *err)
{
	struct img_record rec;
	size_t n = 0, cap = 0;
	size_t *off = NULL;
	const uint8_t **data = NULL;
	uint64_t *len = NULL, total = 0;
	uint32_t *type = NULL, *crc = NULL;
	int ret;

	if (!r)
		return -EINVAL;
	/* frames only on this pass: data checksums below */
	r->validated = true;
	img_reader_rewind(r);
	if (r->sparse && r->crc_later && !r->idx && !r->nframes)
		load_index(r);
	while ((ret = img_reader_next(r, &rec, err)) == 0) {
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			size_t *o = realloc(off, cap * sizeof(*o));
			const uint8_t **d = o ? realloc(data, cap * sizeof(*d)) : NULL;
			uint64_t *l = d ? realloc(len, cap * sizeof(*l)) : NULL;
			uint32_t *t = l ? realloc(type, cap * sizeof(*t)) : NULL;
			uint32_t *c = t ? realloc(crc, cap * sizeof(*c)) : NULL;
			if (o)
				off = o;
			if (d)
				data = d;
			if (l)
				len = l;
			if (t)
				type = t;
			if (c)
				crc = c;
			if (!c) {
				ret = -ENOMEM;
				break;
			}
		}
		off[n] = rec.offset;
		data[n] = rec.data;
		len[n] = rec.len;
		type[n] = rec.type;
		crc[n] = rec.data_crc;
		/* what check_data() reads: a record checked later is not (the
		 * helper thread is made only for enough bytes to share) */
		total += (r->crc_later && rec.type == r->crc_later) ||
				 (r->idx && rec.type == IMG_REC_INDEX)
			     ? 0
			     : rec.len;
		n++;
	}
	if (ret == -ENODATA) {
		/* the trailer's own data, at pos */
		struct {
			struct img_frame f;
			struct img_trailer t;
		} __attribute__((packed)) ft;
		if (img_reader_pread(r, r->base + r->pos, &ft, sizeof(ft)) < 0)
			ret = fail(err, -EIO, (int64_t)n, r->pos, IMG_REC_TRAILER,
				   "cannot read the trailer");
		else if (img_crc32c(0, &ft.t, sizeof(ft.t)) != ft.f.data_crc)
			ret = fail(err, -EBADMSG, (int64_t)n, r->pos, ft.f.type,
				   "data checksum mismatch");
		else
			ret = check_data(r, n, off, data, len, type, crc, total, err);
	}
	free(off);
	free(data);
	free(len);
	free(type);
	free(crc);
	img_reader_rewind(r);
	r->validated = ret == 0;
	return ret;
}

void img_reader_close(struct img_reader *r)
{
	if (!r)
		return;
	if (r->sparse)
		close(r->fd);
	free(r->frames);
	free(r->ends);
	free(r->idx);
	if (r->base && r->size)
		munmap(r->base, r->size);
	*r = (struct img_reader){ 0 };
}
