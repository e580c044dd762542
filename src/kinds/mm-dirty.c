/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Incremental checkpoints, the checkpoint side: which pages were written
 * since the parent image.
 *
 * The tracking lives in the task between two runs of ckpt: a userfaultfd
 * made by an injected userfaultfd() (UFFD_FEATURE_WP_ASYNC), with every
 * private anonymous vma registered in UFFDIO_REGISTER_MODE_WP, and a memfd
 * named "ckpt-track" whose first bytes (struct track_note) say which pid
 * made it, at which fd its userfaultfd is, and the id of the image whose
 * checkpoint last write-protected the pages (the generation). Both fds are
 * close-on-exec, at the lowest free fd from TRACK_FD_BASE up (half the
 * task's fd limit, if that is lower).
 *
 * At each checkpoint that tracks, the pages of the tracked vmas are read
 * by PAGEMAP_SCAN with PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC: the
 * pages are write-protected again as they are listed, and PAGE_IS_WRITTEN
 * says which ones the program wrote since the last time. A page written
 * goes to the image; a page not written (present or swapped) is listed in
 * MmTrack.from_parent, to be taken from the parent at restart. A vma not
 * registered before this checkpoint (new, mremap'd, forked into a child,
 * or the userfaultfd closed) has no such history: all its pages go.
 *
 * The generation is written to the memfd before any page is
 * write-protected, so a checkpoint that fails halfway leaves a generation
 * no complete image has: the next --parent is refused, never wrong.
 *
 * A checkpoint with CKPT_KILL (a migration's frozen round) neither
 * write-protects nor registers: nothing is tracked after it (if it fails,
 * the tree runs on with the new generation, which no complete image has).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "img/pages.h"
#include "kinds/mm.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"
#include "util/kernel.h"

#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15) /* 6.7 */
#endif

#define TRACK_NAME "ckpt-track"
#define TRACK_LINK "/memfd:" TRACK_NAME " (deleted)"
#define TRACK_MAGIC "CKPTTRK1"
#define TRACK_FD_BASE 1000 /* (or half the fd limit, if lower) */

struct track_note {
	char magic[8];
	int32_t pid;            /* ckpt's view of the process that made it */
	int32_t uffd;           /* its userfaultfd's fd number */
	uint8_t gen[16];        /* the image id of the last write-protect */
} __attribute__((packed));

struct mm_dirty {
	int uffd, memfd;        /* ckpt's fds in the task, -1: none */
	bool own;               /* they are the task's (not inherited by fork) */
	uint8_t gen[16];
	bool track;             /* tracking on after this checkpoint */
	bool incremental;       /* the tracked vmas give only their written pages */
	uint8_t parent_id[16];
	char *parent_path;
	bool *reg;              /* per vma: registered now (scanned write-protecting) */
	bool *had;              /* per vma: registered since the parent */
	size_t nvmas;
	uint64_t *from;         /* address, length, ...: the parent's pages */
	size_t nfrom, capfrom;
	uint64_t from_bytes;
	uint64_t *live;         /* a pre-copy round: address, length, ... of the
				 * pages to read once the tree runs */
	size_t nlive, caplive;
};

bool mm_dirty_tracked(const struct mm_dirty *d)
{
	return d && d->own;
}

bool mm_dirty_skip_fd(const struct task *t, int fd)
{
	const struct mm_dirty *d = mm_dirty_of(t);
	return d && fd >= 0 && (fd == d->uffd || fd == d->memfd);
}

bool mm_dirty_covers(const struct mm_dirty *d, size_t i)
{
	return d && d->reg && i < d->nvmas && (d->reg[i] || d->had[i]);
}

void mm_dirty_free(struct mm_dirty *d)
{
	if (!d)
		return;
	free(d->parent_path);
	free(d->reg);
	free(d->had);
	free(d->from);
	free(d->live);
	free(d);
}

static const char *opts_parent(const struct ckpt_ctx *ctx)
{
	const struct ckpt_opts *o = ctx->opts;
	if (!o || o->size < offsetof(struct ckpt_opts, parent) + sizeof(o->parent))
		return NULL;
	return o->parent;
}

/* ckpt_opts.parent_id (a pre-copy chain's parent, by id), or NULL */
static const uint8_t *opts_parent_id(const struct ckpt_ctx *ctx)
{
	const struct ckpt_opts *o = ctx->opts;
	if (!o || o->size < offsetof(struct ckpt_opts, parent_id) + sizeof(o->parent_id))
		return NULL;
	return o->parent_id;
}

/* Reads the note of the memfd at fd of t; 0 if it is ckpt's. */
static int read_note(pid_t pid, int fd, struct track_note *n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	_cleanup_close_ int f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	if (pread(f, n, sizeof(*n), 0) != (ssize_t)sizeof(*n) ||
	    memcmp(n->magic, TRACK_MAGIC, sizeof(n->magic)))
		return -ENOENT;
	return 0;
}

static bool fd_is(pid_t pid, int fd, const char *link)
{
	char path[64], buf[128];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	ssize_t n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return !strcmp(buf, link);
}

/* The note of ckpt's tracking memfd at fd of t, into d; false if it is not one. */
static bool found(struct task *t, struct mm_dirty *d, int fd)
{
	struct track_note n;
	if (read_note(t->pid, fd, &n) < 0)
		return false;
	d->memfd = fd;
	if (fd_is(t->pid, n.uffd, "anon_inode:[userfaultfd]"))
		d->uffd = n.uffd;
	d->own = n.pid == t->pid && d->uffd >= 0;
	memcpy(d->gen, n.gen, sizeof(d->gen));
	return true;
}

/* ckpt's tracking fds in t, if any. links: what the fds linked to at the
 * freeze (fdtable_links), before ckpt made any; else /proc is read. */
static void find_tracking(struct task *t, struct mm_dirty *d, bool links)
{
	const struct fd_link *l;
	size_t nl;
	if (links && fdtable_links(t, &l, &nl) == 0) {
		for (size_t i = 0; i < nl; i++)
			if (l[i].fd >= 3 && !strcmp(l[i].link, TRACK_LINK) && found(t, d, l[i].fd))
				return;
		return;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", t->pid);
	_cleanup_closedir_ DIR *dir = opendir(path);
	for (struct dirent *de; dir && (de = readdir(dir));) {
		if (de->d_name[0] == '.')
			continue;
		int fd = atoi(de->d_name);
		if (fd >= 3 && fd_is(t->pid, fd, TRACK_LINK) && found(t, d, fd))
			return;
	}
}

/* The id of the image at path (its header's). */
static int parent_id(struct ckpt_ctx *ctx, const char *path, uint8_t id[16])
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct img_header h;
	if (fd < 0)
		return log_fail(&ctx->log, -errno, "parent image %s: cannot open: %s", path,
				strerror(errno));
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, IMG_MAGIC, sizeof(h.magic)) ||
	    img_crc32c(0, &h, offsetof(struct img_header, crc)) != h.crc)
		return log_fail(&ctx->log, -EINVAL, "parent image %s: not a ckpt image (or a sealed "
				"one: incremental images are not sealed yet)", path);
	static const uint8_t zero[16];
	if (!memcmp(h.image_id, zero, sizeof(zero)))
		return log_fail(&ctx->log, -EINVAL, "parent image %s: made by a ckpt without image "
				"ids; it cannot be a parent", path);
	memcpy(id, h.image_id, 16);
	return 0;
}

int mm_dirty_collect(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty **ret)
{
	const char *parent = opts_parent(ctx);
	const uint8_t *by_id = opts_parent_id(ctx);
	struct mm_dirty *d = calloc(1, sizeof(*d));
	char hex[33];
	int r;

	*ret = d;
	if (!d)
		return -ENOMEM;
	d->uffd = d->memfd = -1;
	find_tracking(t, d, true);
	d->track = (ctx->flags & (CKPT_TRACK | CKPT_PRECOPY)) || parent || by_id;
	if (by_id) {
		/* a pre-copy chain: the parent is named by its id, which the
		 * target names its copy by (RESTART_PLAIN_PARENTS) */
		memcpy(d->parent_id, by_id, sizeof(d->parent_id));
		for (size_t i = 0; i < 16; i++)
			snprintf(hex + 2 * i, 3, "%02x", by_id[i]);
		parent = hex;
	} else if (!parent) {
		return 0;
	} else if (ctx->key) {
		return log_fail(&ctx->log, -EOPNOTSUPP, "--parent: sealed incremental images are "
				"not supported yet");
	} else if ((r = parent_id(ctx, parent, d->parent_id)) < 0) {
		return r;
	}
	if (!d->own) {
		log_info(&ctx->log, "pid %d: its writes were not tracked since %s: all its pages "
			 "are saved", t->pid, parent);
		return 0;
	}
	if (memcmp(d->gen, d->parent_id, sizeof(d->gen)))
		return log_fail(&ctx->log, -ESTALE,
				"pid %d: %s is not the image of its last tracked checkpoint (the "
				"image was replaced, or the process was checkpointed again since): "
				"checkpoint it without --parent, or with the newest image",
				t->pid, parent);
	d->parent_path = by_id ? strdup(hex) : realpath(parent, NULL);
	if (!d->parent_path)
		return -errno;
	d->incremental = true;
	return 0;
}

/* --- setup: the userfaultfd and the memfd in the task ------------------ */

/* TRACK_FD_BASE, or half the task's own fd limit if that is lower. */
static int track_fd_base(pid_t pid)
{
	struct proc_limits pl;
	char *text = NULL;
	int r = proc_read(pid, "limits", &text, NULL);
	if (r >= 0)
		r = proc_parse_limits(text, &pl);
	free(text);
	if (r >= 0 && pl.soft[RLIMIT_NOFILE] / 2 < TRACK_FD_BASE)
		return pl.soft[RLIMIT_NOFILE] > 16 ? (int)(pl.soft[RLIMIT_NOFILE] / 2) : 3;
	return TRACK_FD_BASE;
}

/* Moves the task's fd to a high number; the new one, or -errno. */
static long move_high(struct task *t, long fd)
{
	long hi = puppet_syscall(&t->pup, SYS_fcntl, fd, F_DUPFD_CLOEXEC, track_fd_base(t->pid));
	puppet_syscall(&t->pup, SYS_close, fd);
	return hi;
}

/* A new userfaultfd and memfd in t (the inherited ones closed). */
static int make_tracking(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d)
{
	if (d->uffd >= 0)
		puppet_syscall(&t->pup, SYS_close, d->uffd);
	if (d->memfd >= 0)
		puppet_syscall(&t->pup, SYS_close, d->memfd);
	d->uffd = d->memfd = -1;
	long fd = puppet_syscall(&t->pup, SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		fd = puppet_syscall(&t->pup, SYS_userfaultfd,
				    O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return log_fail(&ctx->log, (int)fd, "pid %d: cannot make a userfaultfd in it for "
				"tracking: %s", t->pid, strerror((int)-fd));
	long ufd = move_high(t, fd);
	if (ufd < 0)
		return log_fail(&ctx->log, (int)ufd, "pid %d: cannot move its tracking fd: %s",
				t->pid, strerror((int)-ufd));
	d->uffd = (int)ufd;
	_cleanup_close_ int local = puppet_getfd(&t->pup, d->uffd);
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC };
	if (local < 0 || ioctl(local, UFFDIO_API, &api) < 0)
		return log_fail(&ctx->log, local < 0 ? local : -errno,
				"pid %d fd %d (userfaultfd): no write-protect async mode: %s",
				t->pid, d->uffd, strerror(local < 0 ? -local : errno));
	uint64_t name = puppet_scratch_put(&t->pup, 0, TRACK_NAME, sizeof(TRACK_NAME));
	fd = puppet_syscall(&t->pup, SYS_memfd_create, name, MFD_CLOEXEC);
	long mfd = fd < 0 ? fd : move_high(t, fd);
	if (mfd < 0)
		return log_fail(&ctx->log, (int)mfd, "pid %d: cannot make its tracking memfd: %s",
				t->pid, strerror((int)-mfd));
	d->memfd = (int)mfd;
	d->own = true;
	log_debug(&ctx->log, "pid %d: tracking set up: userfaultfd at fd %d, note at fd %d",
		  t->pid, d->uffd, d->memfd);
	return 0;
}

static int write_note(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d)
{
	struct track_note n = { .pid = t->pid, .uffd = d->uffd };
	char path[64];
	memcpy(n.magic, TRACK_MAGIC, sizeof(n.magic));
	memcpy(n.gen, ctx->image_id, sizeof(n.gen));
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", t->pid, d->memfd);
	_cleanup_close_ int f = open(path, O_WRONLY | O_CLOEXEC);
	if (f < 0 || pwrite(f, &n, sizeof(n), 0) != (ssize_t)sizeof(n))
		return log_fail(&ctx->log, -errno, "pid %d fd %d (tracking note): cannot write: %s",
				t->pid, d->memfd, strerror(errno));
	return 0;
}

static bool trackable(const VmaEntry *v)
{
	return v->kind == VMA_KIND__VMA_ANON && !v->shared && !v->inherit;
}

bool mm_dirty_may_cover(const struct mm_dirty *d, const VmaEntry *v)
{
	return d && d->track && trackable(v);
}

/* Registers the trackable vmas of e not registered yet. */
static int register_vmas(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d,
			 const MmEntry *e)
{
	_cleanup_close_ int uffd = puppet_getfd(&t->pup, d->uffd);
	if (uffd < 0)
		return log_fail(&ctx->log, uffd, "pid %d fd %d (userfaultfd): cannot take it: %s",
				t->pid, d->uffd, strerror(-uffd));
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		if (!trackable(v))
			continue;
		if (d->had[i]) {
			d->reg[i] = true;
			continue;
		}
		/* the tree dies after this image: a vma with no history goes
		 * whole, registered or not */
		if (ctx->flags & CKPT_KILL)
			continue;
		struct uffdio_register reg = {
			.range = { v->start, v->end - v->start },
			.mode = UFFDIO_REGISTER_MODE_WP,
		};
		d->reg[i] = ioctl(uffd, UFFDIO_REGISTER, &reg) == 0;
		if (!d->reg[i])
			log_debug(&ctx->log, "pid %d vma %llx-%llx: not tracked: %s", t->pid,
				  (unsigned long long)v->start, (unsigned long long)v->end,
				  strerror(errno));
	}
	return 0;
}

int mm_dirty_begin(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d, const MmEntry *e)
{
	int r;
	if (!d || !d->track)
		return 0;
	d->nvmas = e->n_vmas;
	d->reg = calloc(e->n_vmas ? e->n_vmas : 1, sizeof(*d->reg));
	d->had = calloc(e->n_vmas ? e->n_vmas : 1, sizeof(*d->had));
	if (!d->reg || !d->had)
		return -ENOMEM;
	/* "uw" at collect, with the task's own tracking: registered by ckpt, and
	 * write-protected at the parent's checkpoint */
	for (size_t i = 0; d->own && i < e->n_vmas; i++)
		d->had[i] = trackable(e->vmas[i]) && (e->vmas[i]->vmflags & VMF_UW);
	if (!d->own && (r = make_tracking(ctx, t, d)) < 0)
		return r;
	r = write_note(ctx, t, d);
	return r < 0 ? r : register_vmas(ctx, t, d, e);
}

static int from_add(struct mm_dirty *d, uint64_t start, uint64_t end)
{
	if (d->nfrom && d->from[d->nfrom - 2] + d->from[d->nfrom - 1] == start) {
		d->from[d->nfrom - 1] += end - start;
		d->from_bytes += end - start;
		return 0;
	}
	if (d->nfrom + 2 > d->capfrom) {
		size_t cap = d->capfrom ? 2 * d->capfrom : 256;
		uint64_t *n = realloc(d->from, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->from = n;
		d->capfrom = cap;
	}
	d->from[d->nfrom++] = start;
	d->from[d->nfrom++] = end - start;
	d->from_bytes += end - start;
	return 0;
}

static int live_add(struct mm_dirty *d, uint64_t start, uint64_t end)
{
	if (d->nlive && d->live[d->nlive - 2] + d->live[d->nlive - 1] == start) {
		d->live[d->nlive - 1] += end - start;
		return 0;
	}
	if (d->nlive + 2 > d->caplive) {
		size_t cap = d->caplive ? 2 * d->caplive : 256;
		uint64_t *n = realloc(d->live, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->live = n;
		d->caplive = cap;
	}
	d->live[d->nlive++] = start;
	d->live[d->nlive++] = end - start;
	return 0;
}

size_t mm_dirty_live_runs(const struct mm_dirty *d, const uint64_t **ret)
{
	*ret = d ? d->live : NULL;
	return d ? d->nlive : 0;
}

int mm_dirty_untrack(struct ckpt_ctx *ctx, struct task *t)
{
	struct mm_dirty d = { .uffd = -1, .memfd = -1 };
	find_tracking(t, &d, false);
	if (d.uffd < 0 && d.memfd < 0)
		return 0;
	/* the last close of the userfaultfd unregisters every vma and clears
	 * the write protection */
	long r = d.uffd >= 0 ? puppet_syscall(&t->pup, SYS_close, d.uffd) : 0;
	long r2 = puppet_syscall(&t->pup, SYS_close, d.memfd);
	if (r < 0 || r2 < 0)
		return log_fail(&ctx->log, (int)(r < 0 ? r : r2), "pid %d: cannot close its "
				"tracking fds %d and %d: %s", t->pid, d.uffd, d.memfd,
				strerror((int)-(r < 0 ? r : r2)));
	log_info(&ctx->log, "pid %d: dirty tracking removed (fds %d and %d closed)", t->pid,
		 d.uffd, d.memfd);
	return 1;
}

int mm_dirty_scan(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d, int pagemap, size_t i,
		  const VmaEntry *v, struct pages_writer *pw)
{
	bool incr = d->incremental && d->had[i] && d->reg[i];
	/* a checkpoint that kills the tree (a migration's frozen round) lists
	 * the pages written without write-protecting them again: nothing
	 * tracks them after it; a tree that runs on after a failure has its
	 * tracking removed, or a generation no complete image has */
	unsigned wp = ctx->flags & CKPT_KILL ? 0 : PM_SCAN_WP_MATCHING;
	struct page_region regs[512];
	uint64_t pos = v->start;
	int r;

	while (pos < v->end) {
		struct pm_scan_arg arg = {
			.size = sizeof(arg),
			.flags = d->reg[i] ? wp | PM_SCAN_CHECK_WPASYNC : 0,
			.start = pos,
			.end = v->end,
			.vec = (uint64_t)(uintptr_t)regs,
			.vec_len = ARRAY_SIZE(regs),
			.category_inverted = PAGE_IS_PFNZERO | PAGE_IS_FILE,
			.category_mask = PAGE_IS_PFNZERO | PAGE_IS_FILE,
			.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_WRITTEN,
		};
		long n = ioctl(pagemap, PAGEMAP_SCAN, &arg);
		if (n < 0)
			return log_fail(&ctx->log, -errno, "pid %d: PAGEMAP_SCAN (tracking) of "
					"%llx-%llx: %s", t->pid, (unsigned long long)pos,
					(unsigned long long)v->end, strerror(errno));
		for (long k = 0; k < n; k++) {
			const struct page_region *g = &regs[k];
			if (incr && !(g->categories & PAGE_IS_WRITTEN))
				r = from_add(d, g->start, g->end);
			else
				r = pw ? pages_add(pw, g->start, g->end - g->start)
				       : live_add(d, g->start, g->end);
			if (r < 0)
				return r;
		}
		if (arg.walk_end <= pos)
			break;
		pos = arg.walk_end;
	}
	return pw ? pages_flush(pw) : 0;
}

int mm_dirty_end(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d)
{
	if (!d || !d->track)
		return 0;
	MmTrack m = MM_TRACK__INIT;
	m.pid = (uint32_t)t->vpid;
	m.has_tracked = true;
	m.tracked = true;
	m.has_live = m.live = (ctx->flags & CKPT_PRECOPY) != 0;
	if (d->incremental) {
		m.has_parent_id = true;
		m.parent_id.data = d->parent_id;
		m.parent_id.len = sizeof(d->parent_id);
		m.parent_path = d->parent_path;
		m.n_from_parent = d->nfrom;
		m.from_parent = d->from;
		m.has_parent_bytes = true;
		m.parent_bytes = d->from_bytes;
		log_info(&ctx->log, "pid %d: %llu KiB not written since the parent, left to it",
			 t->pid, (unsigned long long)(d->from_bytes >> 10));
	}
	return ctx_write_msg(ctx, MM_REC_TRACK, &m.base);
}
