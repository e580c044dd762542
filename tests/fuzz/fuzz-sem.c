/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The restart's loader fed forged images: a structure-aware fuzzer.
 *
 * fuzz-img damages the container and expects every damage to be caught by
 * a checksum. Here the damage is what someone who can write the image file
 * would do: decode the records, change protobuf fields (ids, counts, sizes,
 * indexes, strings), duplicate, drop, reorder and retype records, change the
 * header, then re-encode with correct checksums and trailer, so that every
 * image reaches the protobuf and semantic layers: rst_load_only() (every
 * kind's load, the tree, the per-task checks; no process is made) and
 * ckpt_inspect(). The oracle is the sanitizers (ASan, UBSan, LSan after each
 * image) and a time limit per image: a crash, a leak, an error report or a
 * hang is a failure, and the image that caused it is written to --crash-dir
 * (keep it under tests/fuzz/regressions/, where the suite replays it).
 *
 *   fuzz-sem [--seconds N] [--iterations N] [--seed S] [--crash-dir D] SEED.img[.gz]|DIR...
 *   fuzz-sem --replay IMAGE|DIR...  each image loaded as it is (a refusal must say why)
 *
 * The mutation loop is deterministic for a given seed and corpus.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <protobuf-c/protobuf-c.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"
#include "img/img.h"
#include "util/features.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#define HANG_SECONDS 20

/* internal entry points of the library (core/ctx.h, which needs generated headers) */
int rst_load_only(int fd, char *errbuf, size_t errbuf_len);
const ProtobufCMessageDescriptor *inspect_descriptor_of(uint32_t type);

struct rec {
	uint32_t type, flags;
	uint8_t *data;
	size_t len;
	bool aligned;
};

struct image {
	struct img_header hdr;
	struct rec *r;
	size_t n;
};

/* test code: what the crash handlers need */
static int cur_fd = -1;
static const char *crash_dir = ".";
static uint64_t cur_iter;
static bool replaying;

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t below(uint64_t *s, size_t n)
{
	return n ? (size_t)(rnd(s) % n) : 0;
}

/* --- reading and writing images ------------------------------------- */

static int read_file(const char *path, uint8_t **ret, size_t *ret_len)
{
	size_t n = strlen(path), cap = 1 << 20, len = 0;
	FILE *f;
	bool gz = n > 3 && !strcmp(path + n - 3, ".gz");

	if (gz) {
		char cmd[4200];
		snprintf(cmd, sizeof(cmd), "gzip -dc '%s'", path);
		f = popen(cmd, "r");
	} else {
		f = fopen(path, "rb");
	}
	if (!f)
		return -errno;
	uint8_t *buf = malloc(cap);
	for (size_t k; buf && (k = fread(buf + len, 1, cap - len, f)) > 0;) {
		len += k;
		if (len == cap) {
			uint8_t *b = realloc(buf, cap *= 2);
			if (!b) {
				free(buf);
				buf = NULL;
			}
			buf = b;
		}
	}
	int rc = gz ? pclose(f) : fclose(f);
	if (!buf || rc != 0) {
		free(buf);
		return -EIO;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int to_memfd(const void *p, size_t len)
{
	int fd = memfd_create("fuzz-sem", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, p, len) != (ssize_t)len) {
		close(fd);
		return -EIO;
	}
	return fd;
}

static int parse(const uint8_t *p, size_t len, struct image *img)
{
	struct img_reader r;
	struct img_error err;
	struct img_record rec;
	int fd = to_memfd(p, len), ret;

	if (fd < 0)
		return fd;
	*img = (struct image){ 0 };
	ret = img_reader_open(&r, fd, &err);
	close(fd);
	if (ret < 0)
		return ret;
	ret = img_reader_validate(&r, &err);
	img->hdr = r.hdr;
	while (ret == 0 && (ret = img_reader_next(&r, &rec, &err)) == 0) {
		struct rec *v = realloc(img->r, (img->n + 1) * sizeof(*v));
		if (!v) {
			ret = -ENOMEM;
			break;
		}
		img->r = v;
		size_t data_off = (size_t)(rec.data - r.base);
		v[img->n] = (struct rec){
			.type = rec.type,
			.flags = rec.flags,
			.data = malloc(rec.len ? rec.len : 1),
			.len = rec.len,
			.aligned = data_off > rec.offset + sizeof(struct img_frame),
		};
		memcpy(v[img->n].data, rec.data, rec.len);
		img->n++;
	}
	img_reader_close(&r);
	if (ret == -ENODATA)
		ret = 0;
	if (ret < 0)
		fprintf(stderr, "fuzz-sem: bad seed image: %s\n", err.reason);
	return ret;
}

static void image_free(struct image *img)
{
	for (size_t i = 0; i < img->n; i++)
		free(img->r[i].data);
	free(img->r);
	*img = (struct image){ 0 };
}

static void image_copy(const struct image *src, struct image *dst)
{
	*dst = *src;
	dst->r = malloc((src->n + 1) * sizeof(*dst->r));
	for (size_t i = 0; i < src->n; i++) {
		dst->r[i] = src->r[i];
		dst->r[i].data = malloc(src->r[i].len ? src->r[i].len : 1);
		memcpy(dst->r[i].data, src->r[i].data, src->r[i].len);
	}
}

/* The image with correct frames, checksums and trailer; the header as given. */
static int serialize(const struct image *img)
{
	struct img_header h = { .arch = 62, .page_size = IMG_PAGE_SIZE };
	struct img_writer w;
	int fd = memfd_create("fuzz-sem", MFD_CLOEXEC), r;

	if (fd < 0)
		return -errno;
	r = img_writer_init(&w, fd, &h);
	for (size_t i = 0; r >= 0 && i < img->n; i++) {
		const struct rec *v = &img->r[i];
		struct iovec iov = { .iov_base = v->data, .iov_len = v->len };
		r = v->aligned ? img_write_aligned(&w, v->type, &iov, 1)
			       : img_write(&w, v->type, v->flags, v->data, v->len);
	}
	if (r >= 0)
		r = img_writer_finish(&w);
	h = img->hdr;
	h.crc = img_crc32c(0, &h, offsetof(struct img_header, crc));
	if (r >= 0 && pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		r = -EIO;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* --- protobuf field mutation ---------------------------------------- */

static uint64_t interesting(uint64_t *s, uint64_t old, bool wide)
{
	static const uint64_t v32[] = { 0, 1, 2, 3, 0x7f, 0xff, 0x1000, 0xffff, 0x10000,
					0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff };
	static const uint64_t v64[] = { 1ull << 32, (1ull << 32) + 1, 1ull << 40,
					0x7fffffffffffffffull, 0x8000000000000000ull,
					0xfffffffffffff000ull, ~0ull };
	switch (below(s, 6)) {
	case 0:
		return old + below(s, 5) - 2;
	case 1:
		return below(s, 48);
	case 2:
		return wide && below(s, 2) ? v64[below(s, sizeof(v64) / 8)]
					   : v32[below(s, sizeof(v32) / 8)];
	case 3:
		return old ^ (1ull << below(s, wide ? 64 : 32));
	case 4:
		return old * 2 + 1;
	default:
		return rnd(s);
	}
}

static size_t elt_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	default:
		return 4;
	}
}

static const char *const odd_strings[] = {
	"", "/", "\x1b]0;owned\x07\x1b[2J", "/tmp/../../etc/passwd", "a\nb", "\xc2\x9b" "31m",
	"/proc/self/mem", "relative", "\xff\xfe",
};

static void mutate_value(const ProtobufCFieldDescriptor *fd, void *p, uint64_t *s, int depth);

static void mutate_msg(ProtobufCMessage *m, uint64_t *s, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	if (!d->n_fields)
		return;
	const ProtobufCFieldDescriptor *fd = &d->fields[below(s, d->n_fields)];
	char *base = (char *)m;
	void *p = base + fd->offset;

	if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		if (*(uint32_t *)(base + fd->quantifier_offset) != fd->id)
			return;
	} else if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t *n = (size_t *)(base + fd->quantifier_offset);
		if (!*n)
			return;
		if (below(s, 8) == 0 && fd->type != PROTOBUF_C_TYPE_MESSAGE &&
		    fd->type != PROTOBUF_C_TYPE_STRING && fd->type != PROTOBUF_C_TYPE_BYTES) {
			/* one more element: a copy of one of them */
			size_t sz = elt_size(fd->type);
			char *v = realloc(*(char **)p, (*n + 1) * sz);
			if (!v)
				return;
			memcpy(v + *n * sz, v + below(s, *n) * sz, sz);
			*(char **)p = v;
			(*n)++;
			return;
		}
		p = *(char **)p + below(s, *n) * elt_size(fd->type);
	} else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->quantifier_offset &&
		   fd->type != PROTOBUF_C_TYPE_MESSAGE && fd->type != PROTOBUF_C_TYPE_STRING) {
		*(protobuf_c_boolean *)(base + fd->quantifier_offset) = 1;
	}
	mutate_value(fd, p, s, depth);
}

static void mutate_value(const ProtobufCFieldDescriptor *fd, void *p, uint64_t *s, int depth)
{
	switch (fd->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		*(uint64_t *)p = interesting(s, *(uint64_t *)p, true);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)p = !*(protobuf_c_boolean *)p;
		break;
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_DOUBLE:
		break;
	case PROTOBUF_C_TYPE_STRING: {
		char **sp = p, *old = *sp;
		const char *src = odd_strings[below(s, sizeof(odd_strings) / sizeof(*odd_strings))];
		char *n = strdup(src);
		if (!n)
			break;
		if (old && old != (const char *)fd->default_value && old != protobuf_c_empty_string)
			free(old);
		*sp = n;
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = p;
		if (b->len && below(s, 2))
			b->data[below(s, b->len)] ^= (uint8_t)(1u << below(s, 8));
		else if (b->len)
			b->len = below(s, b->len);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		ProtobufCMessage *sub = *(ProtobufCMessage **)p;
		if (sub && depth < 6)
			mutate_msg(sub, s, depth + 1);
		break;
	}
	default: /* 32-bit integers and enums */
		*(uint32_t *)p = (uint32_t)interesting(s, *(uint32_t *)p, false);
		break;
	}
}

/* Decodes the record, changes 1-3 fields, encodes it again. */
static bool mutate_fields(struct rec *v, uint64_t *s)
{
	const ProtobufCMessageDescriptor *d = inspect_descriptor_of(v->type);
	if (!d)
		return false;
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, v->len, v->data);
	if (!m)
		return false;
	for (size_t k = 1 + below(s, 3); k--;)
		mutate_msg(m, s, 0);
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *out = malloc(len ? len : 1);
	if (out) {
		protobuf_c_message_pack(m, out);
		free(v->data);
		v->data = out;
		v->len = len;
		v->aligned = false;
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return true;
}

/* --- record and header mutation ------------------------------------- */

static void dup_record(struct image *m, size_t i, size_t at)
{
	struct rec c = m->r[i];
	c.data = malloc(c.len ? c.len : 1);
	memcpy(c.data, m->r[i].data, c.len);
	struct rec *v = realloc(m->r, (m->n + 1) * sizeof(*v));
	if (!v) {
		free(c.data);
		return;
	}
	m->r = v;
	memmove(v + at + 1, v + at, (m->n - at) * sizeof(*v));
	v[at] = c;
	m->n++;
}

static void mutate_header(struct img_header *h, uint64_t *s)
{
	switch (below(s, 6)) {
	case 0:
		h->flags ^= 1u << below(s, 32);
		break;
	case 1:
		h->reserved[below(s, sizeof(h->reserved))] ^= 1;
		break;
	case 2:
		h->xfeatures ^= 1ull << below(s, 64);
		break;
	case 3:
		h->xsave_size = (uint32_t)interesting(s, h->xsave_size, false);
		break;
	case 4:
		h->kernel_release[below(s, sizeof(h->kernel_release))] = (char)rnd(s);
		break;
	default:
		h->arch = (uint32_t)interesting(s, h->arch, false);
		break;
	}
}

static void mutate(struct image *m, const struct image *all, size_t nall, uint64_t *s)
{
	size_t k = 1 + below(s, 4);

	while (k-- && m->n) {
		size_t i = below(s, m->n), j = below(s, m->n);
		unsigned what = (unsigned)below(s, 100);

		if (what < 55) { /* a field of a record that has one */
			for (int tries = 0; tries < 8 && !mutate_fields(&m->r[i], s); tries++)
				i = below(s, m->n);
		} else if (what < 65) {
			dup_record(m, i, j);
		} else if (what < 72) {
			free(m->r[i].data);
			memmove(m->r + i, m->r + i + 1, (m->n - i - 1) * sizeof(*m->r));
			m->n--;
		} else if (what < 78) {
			struct rec t = m->r[i];
			m->r[i] = m->r[j];
			m->r[j] = t;
		} else if (what < 84) {
			m->r[i].type = m->r[j].type;
		} else if (what < 90) { /* a record of another seed image */
			const struct image *o = &all[below(s, nall)];
			const struct rec *src = o->n ? &o->r[below(s, o->n)] : NULL;
			struct rec *v = src ? realloc(m->r, (m->n + 1) * sizeof(*v)) : NULL;
			if (v) {
				m->r = v;
				memmove(v + j + 1, v + j, (m->n - j) * sizeof(*v));
				v[j] = *src;
				v[j].data = malloc(src->len ? src->len : 1);
				memcpy(v[j].data, src->data, src->len);
				m->n++;
			}
		} else if (what < 96) {
			if (m->r[i].len)
				m->r[i].data[below(s, m->r[i].len)] = (uint8_t)rnd(s);
		} else {
			mutate_header(&m->hdr, s);
		}
	}
}

/* --- running --------------------------------------------------------- */

static void save_current(const char *why)
{
	char path[4200];
	struct stat st;

	if (cur_fd < 0 || fstat(cur_fd, &st) < 0)
		return;
	snprintf(path, sizeof(path), "%s/fuzz-sem-%s-%" PRIu64 ".img", crash_dir, why, cur_iter);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0)
		return;
	for (off_t off = 0; off < st.st_size;) {
		char buf[65536];
		ssize_t k = pread(cur_fd, buf, sizeof(buf), off);
		if (k <= 0 || write(out, buf, (size_t)k) != k)
			break;
		off += k;
	}
	close(out);
	fprintf(stderr, "fuzz-sem: the image is saved as %s\n", path);
}

static void on_death(void)
{
	save_current("crash");
}

static void on_alarm(int sig)
{
	(void)sig;
	fprintf(stderr, "fuzz-sem: iteration %" PRIu64 " hangs (over %d s)\n", cur_iter,
		HANG_SECONDS);
	save_current("hang");
	_exit(3);
}

static int base_fds = -1; /* open fds besides the image's, between iterations */

static int count_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* Loads the image in fd as a restart would, and inspects it. */
static int run_one(int fd, char *err, size_t errlen)
{
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	char ierr[256];

	if (base_fds < 0)
		base_fds = count_fds() - 1; /* without null */

	cur_fd = fd;
	alarm(HANG_SECONDS);
	int r = rst_load_only(fd, err, errlen);
	if (null >= 0) {
		if (ckpt_inspect(fd, null, (int)(cur_iter & 1), ierr, sizeof(ierr)) < 0 && !ierr[0])
			r = r < 0 ? r : -EPROTO;
		close(null);
	}
	alarm(0);
	/* the loader must close only what it opened: fd 0 stays, and none leaks */
	if (fcntl(0, F_GETFD) < 0) {
		fprintf(stderr, "fuzz-sem: iteration %" PRIu64 " closed fd 0\n", cur_iter);
		save_current("fd0");
		exit(1);
	}
	if ((cur_iter % 64 == 63 || replaying) && count_fds() != base_fds) {
		fprintf(stderr, "fuzz-sem: %d fds open, %d before: an fd leaks (iterations up to %"
			PRIu64 ")\n", count_fds(), base_fds, cur_iter);
		save_current("fdleak");
		exit(1);
	}
#if SANITIZED
	if ((cur_iter % 64 == 63 || replaying) && __lsan_do_recoverable_leak_check()) {
		fprintf(stderr, "fuzz-sem: a leak in iterations up to %" PRIu64 " (replay them one by one)\n", cur_iter);
		save_current("leak");
		exit(1);
	}
#endif
	cur_fd = -1;
	return r;
}

/* Seeds made on another CPU: the header says this one's, so the kinds are reached. */
static void adopt_cpu(struct image *img)
{
	img->hdr.xfeatures = features_xcr0();
	img->hdr.xsave_size = features_xsave_size();
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The arguments, a directory standing for its *.img and *.img.gz files, sorted. */
static char **expand(int argc, char **argv, int *ret_n)
{
	char **v = NULL;
	int n = 0;

	for (int i = 0; i < argc; i++) {
		struct stat st;
		DIR *d = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? opendir(argv[i]) : NULL;
		if (!d) {
			v = realloc(v, (size_t)(n + 1) * sizeof(*v));
			v[n++] = strdup(argv[i]);
			continue;
		}
		int first = n;
		for (struct dirent *e; (e = readdir(d));) {
			size_t l = strlen(e->d_name);
			if ((l > 4 && !strcmp(e->d_name + l - 4, ".img")) ||
			    (l > 7 && !strcmp(e->d_name + l - 7, ".img.gz"))) {
				v = realloc(v, (size_t)(n + 1) * sizeof(*v));
				if (asprintf(&v[n], "%s/%s", argv[i], e->d_name) < 0)
					exit(2);
				n++;
			}
		}
		closedir(d);
		qsort(v + first, (size_t)(n - first), sizeof(*v), by_name);
	}
	*ret_n = n;
	return v;
}

static int replay(int argc, char **argv)
{
	int bad = 0;

	for (int i = 0; i < argc; i++) {
		uint8_t *p;
		size_t len;
		char err[512] = "";
		if (read_file(argv[i], &p, &len) < 0) {
			fprintf(stderr, "fuzz-sem: cannot read %s\n", argv[i]);
			bad++;
			continue;
		}
		int fd = to_memfd(p, len);
		free(p);
		int r = fd < 0 ? fd : run_one(fd, err, sizeof(err));
		if (fd >= 0)
			close(fd);
		/* the oracle is the sanitizers and the time limit; a refusal needs a reason */
		if (r < 0 && !err[0]) {
			fprintf(stderr, "FAIL %s: refused without a message\n", argv[i]);
			bad++;
		} else {
			printf("ok %s: %s\n", argv[i], r < 0 ? err : "loaded (checked later, at restore)");
		}
	}
	printf("%d passed, %d failed\n", argc - bad, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t seed = 1, iterations = UINT64_MAX;
	double seconds = 10;
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--replay") && fcntl(0, F_GETFD) < 0 &&
		    open("/dev/null", O_RDONLY) != 0)
			return 2;
		if (!strcmp(argv[i], "--replay"))
		{
			int n;
			char **v = expand(argc - i - 1, argv + i + 1, &n);
			signal(SIGALRM, on_alarm);
			replaying = true;
			int r = replay(n, v);
			for (int k = 0; k < n; k++)
				free(v[k]);
			free(v);
			return r;
		}
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--iterations"))
			iterations = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--crash-dir"))
			crash_dir = argv[++i];
		else
			break;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: %s [--seconds N] [--iterations N] [--seed S] [--crash-dir D] "
				"SEED.img... | --replay IMAGE...\n", argv[0]);
		return 2;
	}
	signal(SIGALRM, on_alarm);
	if (fcntl(0, F_GETFD) < 0 && open("/dev/null", O_RDONLY) != 0)
		return 2;
#if SANITIZED
	__sanitizer_set_death_callback(on_death);
#else
	(void)on_death;
#endif
	int nargs;
	char **args = expand(argc - i, argv + i, &nargs);
	size_t nseeds = (size_t)nargs;
	if (!nseeds) {
		fprintf(stderr, "fuzz-sem: no seed image\n");
		return 2;
	}
	struct image *seeds = calloc(nseeds, sizeof(*seeds));
	for (size_t k = 0; k < nseeds; k++) {
		uint8_t *p;
		size_t len;
		if (read_file(args[k], &p, &len) < 0) {
			fprintf(stderr, "fuzz-sem: cannot read seed %s\n", args[k]);
			exit(2);
		}
		int r = parse(p, len, &seeds[k]);
		free(p);
		if (r < 0) {
			fprintf(stderr, "fuzz-sem: cannot use seed %s\n", args[k]);
			exit(2);
		}
		adopt_cpu(&seeds[k]);
	}

	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t s = seed, refused = 0, accepted = 0;
	for (cur_iter = 0; cur_iter < iterations; cur_iter++) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > seconds)
			break;
		struct image m;
		char err[512] = "";
		image_copy(&seeds[below(&s, nseeds)], &m);
		mutate(&m, seeds, nseeds, &s);
		int fd = serialize(&m);
		image_free(&m);
		if (fd < 0)
			continue;
		int r = run_one(fd, err, sizeof(err));
		close(fd);
		if (r < 0)
			refused++;
		else
			accepted++;
	}
	for (size_t k = 0; k < nseeds; k++) {
		image_free(&seeds[k]);
		free(args[k]);
	}
	free(seeds);
	free(args);
	printf("fuzz-sem: %" PRIu64 " forged images (seed %" PRIu64 "): %" PRIu64
	       " refused, %" PRIu64 " loaded\n",
	       cur_iter, seed, refused, accepted);
	printf("%" PRIu64 " passed, 0 failed\n", cur_iter);
	return 0;
}
