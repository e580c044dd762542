/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * /proc/PID text parsers. Every parser walks the text with explicit
 * [p, end) spans, never past the terminating NUL, and copies into fixed-size
 * fields with bounds; garbage yields -EINVAL, never a crash. Outputs are
 * written only on success.
 */
#include "util/proc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(RLIMIT_RTTIME + 1 == PROC_NLIMITS, "PROC_NLIMITS must cover RLIMIT_*");
_Static_assert(RLIM_INFINITY == PROC_RLIM_INFINITY, "rlim_t infinity differs");

/* --- reading --------------------------------------------------------- */

int proc_read(pid_t pid, const char *name, char **ret_text, size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t cap = 4096, len = 0;
	char path[PATH_MAX];
	int n;

	if (pid < 0 || !name || !*name || !ret_text)
		return -EINVAL;
	if (pid == 0)
		n = snprintf(path, sizeof(path), "/proc/self/%s", name);
	else
		n = snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;

	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r;

		if (cap - len < 2) { /* room for at least one byte and the NUL */
			char *nb;

			if (cap > SIZE_MAX / 2)
				return -EFBIG;
			nb = realloc(buf, cap * 2);
			if (!nb)
				return -ENOMEM;
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';

	*ret_text = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}

/* records: a seq_file of many small records (task/TID/children): the
 * first read asks less than the page the kernel builds it in, so only the
 * text's end stops it short; a later, larger read may stop short where
 * that page is full, so the text is then read to its end. */
static int read_single(int dirfd, const char *name, size_t cap, bool records, char **ret_text)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	if (fd < 0)
		return -errno;
	for (bool first = true;; first = false) {
		char *nb = realloc(buf, cap);
		if (!nb)
			return -ENOMEM;
		buf = nb;
		/* a seq_file record that fits is given whole by one read */
		ssize_t r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		len += (size_t)r;
		if (r == 0 || (len < cap - 1 && (first || !records)))
			break;
		if (len < cap - 1)
			continue;
		if (cap > (1u << 30))
			return -EFBIG;
		cap *= 2;
	}
	buf[len] = '\0';
	/* kept by many (a thread's status until its dump): no room unused */
	char *fit = len + 1 < cap ? realloc(buf, len + 1) : NULL;
	*ret_text = fit ? fit : TAKE_PTR(buf);
	if (fit)
		buf = NULL;
	return 0;
}

int proc_read_single(int dirfd, const char *name, char **ret_text)
{
	return read_single(dirfd, name, 1024, false, ret_text);
}

int proc_read_records(int dirfd, const char *name, char **ret_text)
{
	return read_single(dirfd, name, 1024, true, ret_text);
}

int proc_read_one(pid_t pid, const char *name, char **ret_text)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	if (pid <= 0 || n < 0 || (size_t)n >= sizeof(path))
		return -EINVAL;
	return read_single(AT_FDCWD, path, 2048, false, ret_text);
}

/* --- span helpers ---------------------------------------------------- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static void skip_blanks(const char **pp, const char *end)
{
	while (*pp < end && is_blank(**pp))
		(*pp)++;
}

/* Only blanks remain in [p, end). */
static bool only_blanks(const char *p, const char *end)
{
	skip_blanks(&p, end);
	return p == end;
}

static int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

/*
 * An unsigned number in base 8, 10 or 16 (no sign, no prefix, no leading
 * blanks), at least one digit, at most max. Advances *pp past the digits.
 */
static int parse_u64(const char **pp, const char *end, unsigned base, uint64_t max, uint64_t *ret)
{
	const char *p = *pp;
	uint64_t v = 0;

	if (p >= end || digit_value(*p) >= (int)base)
		return -EINVAL;
	for (; p < end; p++) {
		int d = digit_value(*p);

		if (d >= (int)base)
			break;
		if ((uint64_t)d > max || v > (max - (uint64_t)d) / base)
			return -EINVAL;
		v = v * base + (uint64_t)d;
	}
	*pp = p;
	*ret = v;
	return 0;
}

/* A decimal number with an optional '-', within [min, max]. */
static int parse_i64(const char **pp, const char *end, int64_t min, int64_t max, int64_t *ret)
{
	const char *p = *pp;
	bool neg = false;
	uint64_t mag;
	int r;

	if (p < end && *p == '-') {
		neg = true;
		p++;
	}
	r = parse_u64(&p, end, 10, (uint64_t)INT64_MAX + 1, &mag);
	if (r < 0)
		return r;
	if (neg) {
		if (mag == (uint64_t)INT64_MAX + 1) {
			if (min != INT64_MIN)
				return -EINVAL;
			*ret = INT64_MIN;
		} else if (-(int64_t)mag < min) {
			return -EINVAL;
		} else {
			*ret = -(int64_t)mag;
		}
	} else {
		if (mag > (uint64_t)max)
			return -EINVAL;
		*ret = (int64_t)mag;
	}
	*pp = p;
	return 0;
}

/* The whole of [p, end), blanks around allowed, is one unsigned number. */
static int span_u64(const char *p, const char *end, unsigned base, uint64_t max, uint64_t *ret)
{
	uint64_t v;
	int r;

	skip_blanks(&p, end);
	r = parse_u64(&p, end, base, max, &v);
	if (r < 0)
		return r;
	if (!only_blanks(p, end))
		return -EINVAL;
	*ret = v;
	return 0;
}

static int span_i64(const char *p, const char *end, int64_t min, int64_t max, int64_t *ret)
{
	int64_t v;
	int r;

	skip_blanks(&p, end);
	r = parse_i64(&p, end, min, max, &v);
	if (r < 0)
		return r;
	if (!only_blanks(p, end))
		return -EINVAL;
	*ret = v;
	return 0;
}

/* Next line of a NUL-terminated text: [*ret_s, *ret_e) without the '\n'. */
static bool next_line(const char **cursor, const char **ret_s, const char **ret_e)
{
	const char *s = *cursor, *e;

	if (!*s)
		return false;
	e = strchrnul(s, '\n');
	*cursor = *e ? e + 1 : e;
	*ret_s = s;
	*ret_e = e;
	return true;
}

/*
 * "Key:value" lines: the key is what precedes the first ':'. Returns false
 * for a line without a colon.
 */
static bool split_key(const char *s, const char *e, const char **ret_key_end, const char **ret_val)
{
	const char *c = memchr(s, ':', (size_t)(e - s));

	if (!c)
		return false;
	*ret_key_end = c;
	*ret_val = c + 1;
	return true;
}

static bool key_is(const char *s, const char *key_end, const char *key)
{
	size_t n = strlen(key);

	return (size_t)(key_end - s) == n && memcmp(s, key, n) == 0;
}

/* Bounded copy of [s, e) into dst[size], always NUL-terminated. */
static void copy_span(char *dst, size_t size, const char *s, const char *e)
{
	size_t n = MIN((size_t)(e - s), size - 1);

	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* --- maps / smaps ---------------------------------------------------- */

static const char deleted_suffix[] = " (deleted)";

static int parse_maps_span(const char *s, const char *e, struct proc_vma *ret)
{
	struct proc_vma v = {};
	const char *p = s, *path_s, *path_e;
	uint64_t x;
	char *path;
	int r;

	r = parse_u64(&p, e, 16, UINT64_MAX, &v.start);
	if (r < 0)
		return r;
	if (p >= e || *p++ != '-')
		return -EINVAL;
	r = parse_u64(&p, e, 16, UINT64_MAX, &v.end);
	if (r < 0)
		return r;
	if (v.end <= v.start)
		return -EINVAL;
	if (p >= e || !is_blank(*p))
		return -EINVAL;
	skip_blanks(&p, e);

	if (e - p < 5 || (p[0] != 'r' && p[0] != '-') || (p[1] != 'w' && p[1] != '-') ||
	    (p[2] != 'x' && p[2] != '-') || (p[3] != 's' && p[3] != 'p') || !is_blank(p[4]))
		return -EINVAL;
	v.prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
		 (p[2] == 'x' ? PROT_EXEC : 0);
	v.shared = p[3] == 's';
	p += 4;
	skip_blanks(&p, e);

	r = parse_u64(&p, e, 16, UINT64_MAX, &v.pgoff);
	if (r < 0)
		return r;
	if (p >= e || !is_blank(*p))
		return -EINVAL;
	skip_blanks(&p, e);

	r = parse_u64(&p, e, 16, UINT32_MAX, &x);
	if (r < 0)
		return r;
	v.dev_major = (uint32_t)x;
	if (p >= e || *p++ != ':')
		return -EINVAL;
	r = parse_u64(&p, e, 16, UINT32_MAX, &x);
	if (r < 0)
		return r;
	v.dev_minor = (uint32_t)x;
	if (p >= e || !is_blank(*p))
		return -EINVAL;
	skip_blanks(&p, e);

	r = parse_u64(&p, e, 10, UINT64_MAX, &v.ino);
	if (r < 0)
		return r;
	/* the inode ends the line (anonymous) or is followed by blanks */
	if (p < e && !is_blank(*p))
		return -EINVAL;
	skip_blanks(&p, e);

	/* the rest of the line is the path, spaces and all */
	path_s = p;
	path_e = e;
	if ((size_t)(path_e - path_s) >= sizeof(deleted_suffix) - 1 &&
	    memcmp(path_e - (sizeof(deleted_suffix) - 1), deleted_suffix,
		   sizeof(deleted_suffix) - 1) == 0) {
		path_e -= sizeof(deleted_suffix) - 1;
		v.deleted = true;
	}
	path = strndup(path_s, (size_t)(path_e - path_s));
	if (!path)
		return -ENOMEM;
	v.path = path;

	*ret = v;
	return 0;
}

int proc_parse_maps_line(const char *line, struct proc_vma *ret)
{
	if (!line || !ret)
		return -EINVAL;
	return parse_maps_span(line, strchrnul(line, '\n'), ret);
}

/* VmFlags codes, indexed by bit number */
static const char vmflag_names[32][2] = {
	"rd", "wr", "ex", "sh", "mr", "mw", "me", "ms", "gd", "pf", "lo",
	"io", "sr", "rr", "dc", "de", "ac", "nr", "ht", "sf", "ar", "wf",
	"dd", "sd", "mm", "hg", "nh", "mg", "um", "uw", "ss", "dp",
};

static void parse_vmflags(const char *p, const char *e, struct proc_vma *v)
{
	size_t used = 0;
	bool full = false;

	v->vmflags = 0;
	v->unknown_flags[0] = '\0';
	for (;;) {
		const char *t;
		size_t n, need;
		unsigned i;

		skip_blanks(&p, e);
		if (p >= e)
			break;
		t = p;
		while (p < e && !is_blank(*p))
			p++;
		n = (size_t)(p - t);
		if (n == 2) {
			for (i = 0; i < ARRAY_SIZE(vmflag_names); i++)
				if (t[0] == vmflag_names[i][0] && t[1] == vmflag_names[i][1])
					break;
			if (i < ARRAY_SIZE(vmflag_names)) {
				v->vmflags |= 1u << i;
				continue;
			}
		}
		/* unknown: kept whole while they fit; the first that does not ends the list */
		need = (used ? 1 : 0) + n;
		if (full || used + need >= sizeof(v->unknown_flags)) {
			full = true;
			continue;
		}
		if (used)
			v->unknown_flags[used++] = ' ';
		memcpy(v->unknown_flags + used, t, n);
		used += n;
		v->unknown_flags[used] = '\0';
	}
}

/* "   123 kB" */
static int parse_kb(const char *p, const char *e, uint64_t *ret)
{
	uint64_t v;
	int r;

	skip_blanks(&p, e);
	r = parse_u64(&p, e, 10, UINT64_MAX, &v);
	if (r < 0)
		return r;
	skip_blanks(&p, e);
	if (e - p >= 2 && p[0] == 'k' && p[1] == 'B')
		p += 2;
	if (!only_blanks(p, e))
		return -EINVAL;
	*ret = v;
	return 0;
}

/* A mapping header starts with "hex-"; a key line with "Name:". */
static bool is_maps_header(const char *s, const char *e)
{
	const char *p = s;

	while (p < e && digit_value(*p) < 16)
		p++;
	return p > s && p < e && *p == '-';
}

static bool is_key_line(const char *s, const char *e)
{
	const char *p = s;

	while (p < e && (*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			 (*p >= '0' && *p <= '9')))
		p++;
	return p > s && p < e && *p == ':';
}

static int smaps_key(const char *s, const char *e, struct proc_vma *v)
{
	const char *ke, *val;

	if (!split_key(s, e, &ke, &val))
		return -EINVAL;
	if (key_is(s, ke, "Rss"))
		return parse_kb(val, e, &v->rss_kb);
	if (key_is(s, ke, "Anonymous"))
		return parse_kb(val, e, &v->anon_kb);
	if (key_is(s, ke, "Swap"))
		return parse_kb(val, e, &v->swap_kb);
	if (key_is(s, ke, "KernelPageSize"))
		return parse_kb(val, e, &v->page_kb);
	if (key_is(s, ke, "VmFlags"))
		parse_vmflags(val, e, v);
	/* everything else (Size, Pss, THPeligible, ProtectionKey...) is ignored */
	return 0;
}

int proc_parse_smaps(const char *text, struct proc_vmas *ret)
{
	struct proc_vmas vs = {};
	size_t cap = 0;
	const char *cur = text, *s, *e;
	int r = 0;

	if (!text || !ret)
		return -EINVAL;

	while (next_line(&cur, &s, &e)) {
		if (only_blanks(s, e))
			continue;
		if (is_maps_header(s, e)) {
			if (vs.n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct proc_vma *nv;

				if (ncap > SIZE_MAX / sizeof(*nv)) {
					r = -ENOMEM;
					goto fail;
				}
				nv = realloc(vs.v, ncap * sizeof(*nv));
				if (!nv) {
					r = -ENOMEM;
					goto fail;
				}
				vs.v = nv;
				cap = ncap;
			}
			r = parse_maps_span(s, e, &vs.v[vs.n]);
			if (r < 0)
				goto fail;
			vs.n++;
		} else if (is_key_line(s, e) && vs.n > 0) {
			r = smaps_key(s, e, &vs.v[vs.n - 1]);
			if (r < 0)
				goto fail;
		} else {
			r = -EINVAL;
			goto fail;
		}
	}

	*ret = vs;
	return 0;
fail:
	proc_vmas_free(&vs);
	return r;
}

void proc_vmas_free(struct proc_vmas *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++)
		free(v->v[i].path);
	free(v->v);
	*v = (struct proc_vmas){};
}

/* --- status ---------------------------------------------------------- */

/*
 * Blank-separated numbers: the first cap go to arr, the rest are only
 * counted. *ret_n is how many were stored, *ret_total how many were seen.
 */
static int parse_list(const char *p, const char *e, uint64_t max, uint32_t *arr, uint32_t cap,
		      uint32_t *ret_n, uint32_t *ret_total)
{
	uint32_t n = 0, total = 0;

	for (;;) {
		uint64_t x;
		int r;

		skip_blanks(&p, e);
		if (p >= e)
			break;
		r = parse_u64(&p, e, 10, max, &x);
		if (r < 0)
			return r;
		if (p < e && !is_blank(*p))
			return -EINVAL;
		if (n < cap)
			arr[n++] = (uint32_t)x;
		if (total < UINT32_MAX)
			total++;
	}
	*ret_n = n;
	*ret_total = total;
	return 0;
}

static int parse_pid_span(const char *p, const char *e, pid_t *ret)
{
	int64_t v;
	int r = span_i64(p, e, 0, INT_MAX, &v);

	if (r < 0)
		return r;
	*ret = (pid_t)v;
	return 0;
}

static int parse_int_span(const char *p, const char *e, int *ret)
{
	int64_t v;
	int r = span_i64(p, e, INT_MIN, INT_MAX, &v);

	if (r < 0)
		return r;
	*ret = (int)v;
	return 0;
}

static int parse_u32_span(const char *p, const char *e, unsigned base, uint32_t *ret)
{
	uint64_t v;
	int r = span_u64(p, e, base, UINT32_MAX, &v);

	if (r < 0)
		return r;
	*ret = (uint32_t)v;
	return 0;
}

/* Exactly four numbers: real, effective, saved, fs. */
static int parse_ids(const char *p, const char *e, uint32_t ids[4])
{
	uint32_t tmp[4], n, total;
	int r = parse_list(p, e, UINT32_MAX, tmp, 4, &n, &total);

	if (r < 0)
		return r;
	if (total != 4)
		return -EINVAL;
	memcpy(ids, tmp, sizeof(tmp));
	return 0;
}

/* NSpid, NSsid: capped at cap entries (outermost first) */
static int parse_pid_list(const char *p, const char *e, pid_t *arr, uint32_t cap, uint32_t *ret_n)
{
	uint32_t tmp[32], n, total;
	int r;

	if (cap > ARRAY_SIZE(tmp))
		cap = ARRAY_SIZE(tmp);
	r = parse_list(p, e, INT_MAX, tmp, cap, &n, &total);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < n; i++)
		arr[i] = (pid_t)tmp[i];
	*ret_n = n;
	return 0;
}

static int parse_name(const char *p, const char *e, char *dst, size_t size)
{
	/* the kernel writes "Name:\t" then the (escaped) comm: keep leading spaces */
	if (p < e && *p == '\t')
		p++;
	else
		skip_blanks(&p, e);
	copy_span(dst, size, p, e);
	return 0;
}

enum {
	HAVE_NAME = 1 << 0,
	HAVE_PID = 1 << 1,
	HAVE_UID = 1 << 2,
};

static int status_line(const char *s, const char *ke, const char *v, const char *e,
		       struct proc_status *st, unsigned *have)
{
	uint64_t x;
	int r;

	if (key_is(s, ke, "Name")) {
		*have |= HAVE_NAME;
		return parse_name(v, e, st->name, sizeof(st->name));
	}
	if (key_is(s, ke, "State")) {
		skip_blanks(&v, e);
		st->state = v < e ? *v : '\0';
		return 0;
	}
	if (key_is(s, ke, "Tgid"))
		return parse_pid_span(v, e, &st->tgid);
	if (key_is(s, ke, "Pid")) {
		*have |= HAVE_PID;
		return parse_pid_span(v, e, &st->pid);
	}
	if (key_is(s, ke, "PPid"))
		return parse_pid_span(v, e, &st->ppid);
	if (key_is(s, ke, "TracerPid"))
		return parse_pid_span(v, e, &st->tracer_pid);
	if (key_is(s, ke, "Umask"))
		return parse_u32_span(v, e, 8, &st->umask);
	if (key_is(s, ke, "Uid")) {
		*have |= HAVE_UID;
		return parse_ids(v, e, st->uid);
	}
	if (key_is(s, ke, "Gid"))
		return parse_ids(v, e, st->gid);
	if (key_is(s, ke, "Groups")) /* capped at ARRAY_SIZE(groups) */
		return parse_list(v, e, UINT32_MAX, st->groups, ARRAY_SIZE(st->groups),
				  &st->ngroups, &st->ngroups_total);
	if (key_is(s, ke, "NSpid"))
		return parse_pid_list(v, e, st->nspid, ARRAY_SIZE(st->nspid), &st->nspid_n);
	if (key_is(s, ke, "NSpgid"))
		return parse_pid_list(v, e, st->nspgid, ARRAY_SIZE(st->nspgid), &st->nspgid_n);
	if (key_is(s, ke, "NSsid"))
		return parse_pid_list(v, e, st->nssid, ARRAY_SIZE(st->nssid), &st->nssid_n);
	if (key_is(s, ke, "Threads"))
		return parse_u32_span(v, e, 10, &st->threads);
	if (key_is(s, ke, "NoNewPrivs"))
		return parse_int_span(v, e, &st->no_new_privs);
	if (key_is(s, ke, "Seccomp"))
		return parse_int_span(v, e, &st->seccomp);
	if (key_is(s, ke, "Seccomp_filters"))
		return parse_int_span(v, e, &st->seccomp_filters);

	static const struct {
		const char *key;
		size_t off;
	} masks[] = {
		{ "SigPnd", offsetof(struct proc_status, sig_pnd) },
		{ "ShdPnd", offsetof(struct proc_status, shd_pnd) },
		{ "SigBlk", offsetof(struct proc_status, sig_blk) },
		{ "SigIgn", offsetof(struct proc_status, sig_ign) },
		{ "SigCgt", offsetof(struct proc_status, sig_cgt) },
		{ "CapInh", offsetof(struct proc_status, cap_inh) },
		{ "CapPrm", offsetof(struct proc_status, cap_prm) },
		{ "CapEff", offsetof(struct proc_status, cap_eff) },
		{ "CapBnd", offsetof(struct proc_status, cap_bnd) },
		{ "CapAmb", offsetof(struct proc_status, cap_amb) },
	};
	for (size_t i = 0; i < ARRAY_SIZE(masks); i++) {
		if (!key_is(s, ke, masks[i].key))
			continue;
		r = span_u64(v, e, 16, UINT64_MAX, &x);
		if (r < 0)
			return r;
		memcpy((char *)st + masks[i].off, &x, sizeof(x));
		return 0;
	}
	return 0; /* a key we do not need */
}

int proc_parse_status(const char *text, struct proc_status *ret)
{
	struct proc_status st = {};
	const char *cur = text, *s, *e, *ke, *v;
	unsigned have = 0;
	int r;

	if (!text || !ret)
		return -EINVAL;
	while (next_line(&cur, &s, &e)) {
		if (only_blanks(s, e))
			continue;
		if (!split_key(s, e, &ke, &v))
			return -EINVAL;
		r = status_line(s, ke, v, e, &st, &have);
		if (r < 0)
			return r;
	}
	if (have != (HAVE_NAME | HAVE_PID | HAVE_UID))
		return -EINVAL;
	*ret = st;
	return 0;
}

long proc_status_groups(const char *text, uint32_t *arr, uint32_t cap)
{
	const char *cur = text, *s, *e, *ke, *v;
	uint32_t n, total;

	if (!text)
		return -EINVAL;
	while (next_line(&cur, &s, &e)) {
		if (only_blanks(s, e) || !split_key(s, e, &ke, &v) || !key_is(s, ke, "Groups"))
			continue;
		int r = parse_list(v, e, UINT32_MAX, arr, cap, &n, &total);
		return r < 0 ? r : (long)total;
	}
	return -ENOENT;
}

/* --- stat ------------------------------------------------------------ */

enum stat_type {
	SF_NONE, /* not kept; must still be a number */
	SF_PID,
	SF_INT,
	SF_U64,
	SF_I64,
};

#define SF(n, t, f) [n] = { t, offsetof(struct proc_stat, f) }
static const struct {
	uint8_t type;
	uint16_t off;
} stat_fields[53] = {
	SF(4, SF_PID, ppid),
	SF(5, SF_PID, pgrp),
	SF(6, SF_PID, session),
	SF(7, SF_INT, tty_nr),
	SF(8, SF_PID, tpgid),
	SF(9, SF_U64, flags),
	SF(18, SF_I64, priority),
	SF(19, SF_I64, nice),
	SF(20, SF_I64, num_threads),
	SF(22, SF_U64, start_time),
	SF(38, SF_INT, exit_signal),
	SF(26, SF_U64, start_code),
	SF(27, SF_U64, end_code),
	SF(28, SF_U64, start_stack),
	SF(45, SF_U64, start_data),
	SF(46, SF_U64, end_data),
	SF(47, SF_U64, start_brk),
	SF(48, SF_U64, arg_start),
	SF(49, SF_U64, arg_end),
	SF(50, SF_U64, env_start),
	SF(51, SF_U64, env_end),
	SF(52, SF_INT, exit_code),
};
#undef SF

static int stat_field(const char *t, const char *te, unsigned idx, struct proc_stat *st)
{
	char *dst = (char *)st + stat_fields[idx].off;
	const char *p = t;
	int64_t i;
	uint64_t u;
	int r;

	switch (stat_fields[idx].type) {
	case SF_PID:
	case SF_INT: {
		int v;

		r = parse_i64(&p, te, stat_fields[idx].type == SF_PID ? -1 : INT_MIN, INT_MAX, &i);
		if (r < 0 || p != te)
			return -EINVAL;
		v = (int)i;
		memcpy(dst, &v, sizeof(v));
		return 0;
	}
	case SF_U64:
		r = parse_u64(&p, te, 10, UINT64_MAX, &u);
		if (r < 0 || p != te)
			return -EINVAL;
		memcpy(dst, &u, sizeof(u));
		return 0;
	case SF_I64:
		r = parse_i64(&p, te, INT64_MIN, INT64_MAX, &i);
		if (r < 0 || p != te)
			return -EINVAL;
		memcpy(dst, &i, sizeof(i));
		return 0;
	default:
		/* any 64-bit integer, signed or not */
		if (p < te && *p == '-')
			p++;
		r = parse_u64(&p, te, 10, UINT64_MAX, &u);
		if (r < 0 || p != te)
			return -EINVAL;
		return 0;
	}
}

int proc_parse_stat(const char *text, struct proc_stat *ret)
{
	_Static_assert(sizeof(pid_t) == sizeof(int), "pid_t is stored as int");
	struct proc_stat st = {};
	const char *p = text, *open, *close, *e;
	unsigned idx;
	int64_t pid;
	int r;

	if (!text || !ret)
		return -EINVAL;
	/* the comm may hold anything, even ')' and '\n': it ends at the last ')' */
	open = strchr(text, '(');
	close = strrchr(text, ')');
	if (!open || !close || close < open)
		return -EINVAL;

	r = parse_i64(&p, open, 0, INT_MAX, &pid);
	if (r < 0 || !only_blanks(p, open) || p == open)
		return -EINVAL;
	st.pid = (pid_t)pid;
	copy_span(st.comm, sizeof(st.comm), open + 1, close);

	p = close + 1;
	e = strchrnul(p, '\n');
	if (p >= e || *p != ' ')
		return -EINVAL;
	for (idx = 3;; idx++) {
		const char *t;

		while (p < e && *p == ' ')
			p++;
		if (p >= e)
			break;
		t = p;
		while (p < e && *p != ' ')
			p++;
		if (idx == 3) {
			if (p - t != 1)
				return -EINVAL;
			st.state = *t;
		} else if (idx < ARRAY_SIZE(stat_fields)) {
			r = stat_field(t, p, idx, &st);
			if (r < 0)
				return r;
		}
		/* fields past exit_code (newer kernels) are ignored */
	}
	if (idx <= 22) /* idx is one past the last field seen */
		return -EINVAL;
	*ret = st;
	return 0;
}

/* --- limits ---------------------------------------------------------- */

static const char *const limit_names[PROC_NLIMITS] = {
	[RLIMIT_CPU] = "Max cpu time",
	[RLIMIT_FSIZE] = "Max file size",
	[RLIMIT_DATA] = "Max data size",
	[RLIMIT_STACK] = "Max stack size",
	[RLIMIT_CORE] = "Max core file size",
	[RLIMIT_RSS] = "Max resident set",
	[RLIMIT_NPROC] = "Max processes",
	[RLIMIT_NOFILE] = "Max open files",
	[RLIMIT_MEMLOCK] = "Max locked memory",
	[RLIMIT_AS] = "Max address space",
	[RLIMIT_LOCKS] = "Max file locks",
	[RLIMIT_SIGPENDING] = "Max pending signals",
	[RLIMIT_MSGQUEUE] = "Max msgqueue size",
	[RLIMIT_NICE] = "Max nice priority",
	[RLIMIT_RTPRIO] = "Max realtime priority",
	[RLIMIT_RTTIME] = "Max realtime timeout",
};

/* "unlimited" or a decimal number, followed by a blank or the line's end */
static int parse_limit(const char **pp, const char *e, uint64_t *ret)
{
	static const char unl[] = "unlimited";
	const char *p = *pp;
	int r;

	skip_blanks(&p, e);
	if ((size_t)(e - p) >= sizeof(unl) - 1 && memcmp(p, unl, sizeof(unl) - 1) == 0) {
		p += sizeof(unl) - 1;
		*ret = PROC_RLIM_INFINITY;
	} else {
		r = parse_u64(&p, e, 10, UINT64_MAX, ret);
		if (r < 0)
			return r;
	}
	if (p < e && !is_blank(*p))
		return -EINVAL;
	*pp = p;
	return 0;
}

int proc_parse_limits(const char *text, struct proc_limits *ret)
{
	struct proc_limits lim = {};
	const char *cur = text, *s, *e;
	unsigned seen = 0;
	int r;

	if (!text || !ret)
		return -EINVAL;
	while (next_line(&cur, &s, &e)) {
		const char *p;
		unsigned i;

		for (i = 0; i < PROC_NLIMITS; i++) {
			size_t n = strlen(limit_names[i]);

			if ((size_t)(e - s) > n && memcmp(s, limit_names[i], n) == 0 &&
			    is_blank(s[n]))
				break;
		}
		if (i == PROC_NLIMITS)
			continue; /* the header, or a limit we do not know */
		if (seen & (1u << i))
			return -EINVAL;
		p = s + strlen(limit_names[i]);
		r = parse_limit(&p, e, &lim.soft[i]);
		if (r < 0)
			return r;
		r = parse_limit(&p, e, &lim.hard[i]);
		if (r < 0)
			return r;
		seen |= 1u << i;
	}
	if (seen != (1u << PROC_NLIMITS) - 1)
		return -EINVAL;
	*ret = lim;
	return 0;
}

/* --- fdinfo ---------------------------------------------------------- */

int proc_parse_fdinfo(const char *text, struct proc_fdinfo *ret)
{
	struct proc_fdinfo fi = {};
	const char *cur = text, *s, *e, *ke, *v;
	bool have_pos = false, have_flags = false;
	int64_t i;
	int r;

	if (!text || !ret)
		return -EINVAL;
	while (next_line(&cur, &s, &e)) {
		if (!split_key(s, e, &ke, &v))
			continue; /* kind-specific lines need not be "key:" */
		if (key_is(s, ke, "pos")) {
			/* printed as %lli: a huge unsigned offset shows negative */
			r = span_i64(v, e, INT64_MIN, INT64_MAX, &i);
			if (r < 0)
				return r;
			fi.pos = (uint64_t)i;
			have_pos = true;
		} else if (key_is(s, ke, "flags")) {
			r = parse_u32_span(v, e, 8, &fi.flags);
			if (r < 0)
				return r;
			have_flags = true;
		} else if (key_is(s, ke, "mnt_id")) {
			r = parse_int_span(v, e, &fi.mnt_id);
			if (r < 0)
				return r;
		} else if (key_is(s, ke, "ino")) {
			r = span_u64(v, e, 10, UINT64_MAX, &fi.ino);
			if (r < 0)
				return r;
		}
	}
	if (!have_pos || !have_flags)
		return -EINVAL;
	*ret = fi;
	return 0;
}

/* The fds of process pid open on (dev, ino), added to ret from *n on. */
static void holders_of(pid_t pid, uint64_t dev, uint64_t ino, struct proc_holder *ret,
		       size_t max, size_t *n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	_cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_closedir_ DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d)
		return;
	dfd = -1; /* the DIR owns it */
	char comm[16] = "?";
	for (struct dirent *de; (de = readdir(d));) {
		struct stat st;
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || (uint64_t)st.st_dev != dev ||
		    (uint64_t)st.st_ino != ino)
			continue;
		if (*n < max) {
			struct proc_holder *h = &ret[*n];
			*h = (struct proc_holder){ .pid = pid, .fd = (int)fd };
			_cleanup_free_ char *text = NULL;
			size_t len;
			struct proc_fdinfo fi;
			snprintf(path, sizeof(path), "fdinfo/%ld", fd);
			if (proc_read(pid, path, &text, &len) >= 0 && proc_parse_fdinfo(text, &fi) >= 0)
				h->flags = fi.flags;
			if (!strcmp(comm, "?")) {
				_cleanup_free_ char *c = NULL;
				if (proc_read(pid, "comm", &c, &len) >= 0) {
					c[strcspn(c, "\n")] = '\0';
					snprintf(comm, sizeof(comm), "%s", c);
				}
			}
			memcpy(h->comm, comm, sizeof(comm));
		}
		(*n)++;
	}
}

int proc_find_holders(uint64_t dev, uint64_t ino, proc_skip_fn skip, void *arg,
		      struct proc_holder *ret, size_t max)
{
	_cleanup_closedir_ DIR *d = opendir("/proc");
	size_t n = 0;
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name || pid <= 0 || (skip && skip(arg, (pid_t)pid)))
			continue;
		holders_of((pid_t)pid, dev, ino, ret, max, &n);
	}
	return n > INT_MAX ? INT_MAX : (int)n;
}

int proc_ns_stat(pid_t pid, const char *name, struct stat *st)
{
	char path[64];
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, name);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	return stat(path, st) < 0 ? -errno : 0;
}

bool proc_ns_same(pid_t a, pid_t b, const char *name)
{
	struct stat sa, sb;
	return proc_ns_stat(a, name, &sa) == 0 && proc_ns_stat(b, name, &sb) == 0 &&
	       sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

bool proc_same_netns(pid_t pid)
{
	return pid > 0 && proc_ns_same(pid, 0, "net");
}

static int read_stat(pid_t pid, struct proc_stat *ret)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read(pid, "stat", &text, NULL);
	return r < 0 ? r : proc_parse_stat(text, ret);
}

/*
 * The kernel's rule (will_become_orphaned_pgrp): a group is orphaned when
 * no live member has a parent in another group of the same session; a
 * SIGTSTP, SIGTTIN or SIGTTOU sent to it is then dropped.
 */
bool proc_pgrp_orphaned(pid_t pgrp)
{
	_cleanup_closedir_ DIR *d = opendir("/proc");
	if (!d)
		return true;
	for (struct dirent *de; (de = readdir(d));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		struct proc_stat st, parent;
		if (*end || end == de->d_name || pid <= 0 || read_stat((pid_t)pid, &st) < 0 ||
		    st.pgrp != pgrp || st.state == 'Z' || st.state == 'X')
			continue;
		if (read_stat(st.ppid, &parent) == 0 && parent.pgrp != pgrp &&
		    parent.session == st.session)
			return false;
	}
	return true;
}

uint64_t proc_mem_read_gone(int fd, uint64_t off, uint64_t len, uint8_t *dst)
{
	const uint64_t page = 4096;
	uint64_t done = 0, zeros = 0;
	while (fd >= 0 && done < len) {
		ssize_t got = pread(fd, dst + done, len - done, (off_t)(off + done));
		if (got > 0) {
			done += (uint64_t)got;
			continue;
		}
		/* the page at off + done is gone (EIO), or the read failed */
		uint64_t n = page - (off + done) % page;
		n = n < len - done ? n : len - done;
		memset(dst + done, 0, n);
		done += n;
		zeros += n;
	}
	memset(dst + done, 0, len - done);
	return zeros + (len - done);
}
