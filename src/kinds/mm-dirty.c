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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/userfaultfd.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "img/pages.h"
#include "kinds/mm.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/kernel.h"
#include "util/pagemap-scan.h"

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

#define PAGE 4096ull
#define TASK_END 0x7ffffffff000ull /* x86-64, 4-level page tables */
#define PRE_MAX (256ull << 20) /* bytes copied before the freeze, at most, per checkpoint */
#define PRE_PROCS 4096        /* processes of a tree pre-copied, at most */

struct pre_run {
	uint64_t addr, len;
	uint64_t off;           /* in data */
	bool copied;
};

struct mm_pre_task {
	pid_t pid;
	int uffd, memfd;        /* the task's fd numbers (its note) */
	int local;              /* ckpt's copy of its userfaultfd (the undo) */
	uint8_t gen[16];        /* the parent's id, what the note said */
	bool scanned;           /* its frozen scan began: no undo */
	struct pre_run *run;
	size_t nrun, caprun;
	uint8_t *data;
	uint8_t *valid;         /* a bit per page of data: pre_keep set it */
	uint64_t bytes, kept;   /* copied; of them used by the image */
	int pagemap;            /* its pagemap (its mm, whatever the pid is now) */
	/* its frozen scan (fz_scan), made at the freeze: every region of the
	 * vmas registered then, in order; final once made (joined) */
	struct page_region *fz;
	size_t nfz, capfz;
	bool fz_made;
	uint64_t fz_us;         /* how long it took */
	int fz_err;             /* it failed (-errno): the checkpoint fails */
};

struct mm_pre {
	struct mm_pre_task *t;
	size_t n;
	bool wp;                /* the frozen scans write-protect (no CKPT_KILL) */
	pthread_t scanner;      /* the frozen scans' thread (mm_pre_freeze) */
	bool scanning;          /* to be joined */
	uint64_t waited_us;     /* dump's wait for it */
};

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
	struct mm_pre_task *pre; /* its pre-copy (this checkpoint's), or NULL */
	uint64_t *live;         /* a pre-copy round: address, length, ... of the
				 * pages to read once the tree runs */
	size_t nlive, caplive;
};

static struct mm_pre_task *pre_of(const struct ckpt_ctx *ctx, pid_t pid);
static int pre_keep(struct mm_dirty *d, struct pages_writer *pw, uint64_t start, uint64_t end);

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

/* The note of ckpt's tracking memfd at fd of pid, into d; false if it is not one. */
static bool found(pid_t pid, struct mm_dirty *d, int fd)
{
	struct track_note n;
	if (read_note(pid, fd, &n) < 0)
		return false;
	d->memfd = fd;
	if (fd_is(pid, n.uffd, "anon_inode:[userfaultfd]"))
		d->uffd = n.uffd;
	d->own = n.pid == pid && d->uffd >= 0;
	memcpy(d->gen, n.gen, sizeof(d->gen));
	return true;
}

/* ckpt's tracking fds in pid (t, if seized), if any. t: what the fds
 * linked to at the freeze (fdtable_links), before ckpt made any; else
 * /proc is read. */
static void find_tracking(pid_t pid, struct task *t, struct mm_dirty *d)
{
	const struct fd_link *l;
	size_t nl;
	if (t && fdtable_links(t, &l, &nl) == 0) {
		for (size_t i = 0; i < nl; i++)
			if (l[i].fd >= 3 && !strcmp(l[i].link, TRACK_LINK) && found(pid, d, l[i].fd))
				return;
		return;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	_cleanup_closedir_ DIR *dir = opendir(path);
	for (struct dirent *de; dir && (de = readdir(dir));) {
		if (de->d_name[0] == '.')
			continue;
		int fd = atoi(de->d_name);
		if (fd >= 3 && fd_is(pid, fd, TRACK_LINK) && found(pid, d, fd))
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
	find_tracking(t->pid, t, d);
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
	/* a pre-copy of this checkpoint gave it the new generation already */
	d->pre = pre_of(ctx, t->pid);
	if (d->pre && memcmp(d->gen, ctx->image_id, sizeof(d->gen)))
		d->pre = NULL;
	if (!d->pre && memcmp(d->gen, d->parent_id, sizeof(d->gen)))
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

/* The note of pid's tracking memfd (at fd memfd) says generation gen. */
static int write_note(struct ckpt_ctx *ctx, pid_t pid, int uffd, int memfd, const uint8_t gen[16])
{
	struct track_note n = { .pid = pid, .uffd = uffd };
	char path[64];
	memcpy(n.magic, TRACK_MAGIC, sizeof(n.magic));
	memcpy(n.gen, gen, sizeof(n.gen));
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, memfd);
	_cleanup_close_ int f = open(path, O_WRONLY | O_CLOEXEC);
	if (f < 0 || pwrite(f, &n, sizeof(n), 0) != (ssize_t)sizeof(n))
		return log_fail(&ctx->log, -errno, "pid %d fd %d (tracking note): cannot write: %s",
				pid, memfd, strerror(errno));
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
	if (d->pre) /* from now on its pages are protected again: no undo */
		d->pre->scanned = true;
	if (!d->own && (r = make_tracking(ctx, t, d)) < 0)
		return r;
	r = write_note(ctx, t->pid, d->uffd, d->memfd, ctx->image_id);
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
	find_tracking(t->pid, NULL, &d);
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

/* One region of the frozen scan of a covered vma: written (or not tracked
 * since the parent): to the image; else from the pre-copy or the parent. */
static int scan_region(struct mm_dirty *d, struct pages_writer *pw, bool incr,
		       const struct page_region *g, uint64_t start, uint64_t end)
{
	if (incr && !(g->categories & PAGE_IS_WRITTEN))
		return d->pre ? pre_keep(d, pw, start, end) : from_add(d, start, end);
	return pw ? pages_add(pw, start, end - start) : live_add(d, start, end);
}

static const struct mm_pre_task *fz_of(struct ckpt_ctx *ctx, pid_t pid);
static size_t fz_find(const struct mm_pre_task *p, uint64_t addr);
static void fz_join(struct mm_pre *pre);

/* Vma v's regions from its process's frozen scan, made at the freeze (the
 * vma was registered then: "uw" at collect, which came after). */
static int scan_from_fz(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d, int pagemap,
			const struct mm_pre_task *p, bool incr, const VmaEntry *v,
			struct pages_writer *pw)
{
	if (p->fz_err < 0)
		return log_fail(&ctx->log, p->fz_err, "pid %d: PAGEMAP_SCAN (tracking) at the freeze: %s",
				t->pid, strerror(-p->fz_err));
	/* a write-protecting scan passes over a vma whose registration is not
	 * async (not ckpt's), which the scan vma by vma refuses: so here */
	struct page_region one;
	struct pm_scan_arg chk = {
		.size = sizeof(chk),
		.flags = PM_SCAN_CHECK_WPASYNC,
		.start = v->start,
		.end = v->start + PAGE,
		.vec = (uint64_t)(uintptr_t)&one,
		.vec_len = 1,
		.category_mask = PAGE_IS_WPALLOWED,
		.return_mask = PAGE_IS_WPALLOWED,
	};
	if (ioctl(pagemap, PAGEMAP_SCAN, &chk) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: PAGEMAP_SCAN (tracking) of %llx-%llx: %s",
				t->pid, (unsigned long long)v->start, (unsigned long long)v->end,
				strerror(errno));
	for (size_t k = fz_find(p, v->start); k < p->nfz && p->fz[k].start < v->end; k++) {
		const struct page_region *g = &p->fz[k];
		int r = scan_region(d, pw, incr, g, MAX(g->start, v->start), MIN(g->end, v->end));
		if (r < 0)
			return r;
	}
	return pw ? pages_flush(pw) : 0;
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
	struct pm_scan s;
	int r;

	/* scanned at the freeze already (registered then, and since the parent) */
	const struct mm_pre_task *p = d->had[i] && d->reg[i] ? fz_of(ctx, t->pid) : NULL;
	if (p)
		return scan_from_fz(ctx, t, d, pagemap, p, incr, v, pw);
	pm_scan_start(&s, pagemap,
		      &(struct pm_scan_arg){
			  .flags = d->reg[i] ? wp | PM_SCAN_CHECK_WPASYNC : 0,
			  .start = v->start,
			  .end = v->end,
			  .category_inverted = PAGE_IS_PFNZERO | PAGE_IS_FILE,
			  .category_mask = PAGE_IS_PFNZERO | PAGE_IS_FILE,
			  .category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			  .return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_WRITTEN,
		      },
		      regs, ARRAY_SIZE(regs));
	for (const struct page_region *g; (g = pm_scan_next(&s));)
		if ((r = scan_region(d, pw, incr, g, g->start, g->end)) < 0)
			return r;
	if (s.err < 0)
		return log_fail(&ctx->log, s.err,
				"pid %d: PAGEMAP_SCAN (tracking) of %llx-%llx: %s", t->pid,
				(unsigned long long)pm_scan_pos(&s), (unsigned long long)v->end,
				strerror(-s.err));
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
		if (d->pre)
			log_info(&ctx->log, "pid %d: of its pre-copy, %llu KiB not written since "
				 "taken from it, %llu KiB read again", t->pid,
				 (unsigned long long)(d->pre->kept >> 10),
				 (unsigned long long)((d->pre->bytes - d->pre->kept) >> 10));
		if (d->pre && d->pre->fz_made)
			log_debug(&ctx->log, "pid %d: its scan at the freeze: %zu regions in %llu us "
				  "(dump waited %llu us for the scans)", t->pid, d->pre->nfz,
				  (unsigned long long)d->pre->fz_us,
				  (unsigned long long)ctx->mm_pre->waited_us);
	}
	return ctx_write_msg(ctx, MM_REC_TRACK, &m.base);
}

/* --- pre-copy: the written pages copied before the freeze ---------------
 *
 * A checkpoint with a parent first copies, while the tree still runs, the
 * pages each tracked process wrote since the parent (step "pre-copy",
 * before "seize"): the note gets the new generation, a write-protecting
 * PAGEMAP_SCAN of the whole address space (vmas not registered are skipped
 * by the kernel) lists the written pages (A0) and protects them again, and
 * they are read into ckpt's memory. Under the freeze, mm_dirty_scan's
 * write-protecting scan then lists as written only what was written since
 * the pre-copy's scan (A1): those pages are read from the process, as
 * always. A page the frozen scan lists as not written and present is in
 * the image if it is in A0 (its copy, which cannot have changed since: a
 * write would have made it written again), else left to the parent. So a
 * page written again after its pre-copy comes from the frozen process, and
 * a copy is used only for a page the frozen scan saw present and unwritten
 * in a vma tracked since the parent (pre_keep marks those; mm_read
 * serves only them from the copy): a page dropped, unmapped or remapped
 * since the pre-copy never comes from it.
 *
 * A checkpoint that fails before its frozen scan of a process puts the
 * process's tracking back (mm_pre_end): the pages of A0 are un-protected
 * (UFFDIO_WRITEPROTECT, mode 0: written again, for the next checkpoint)
 * and the note gets back the parent's id, so --parent PREV works again.
 */

/* The processes of the tree under root, as they are now (not seized). */
static size_t tree_pids(pid_t root, pid_t *out, size_t max)
{
	size_t n = 0;
	out[n++] = root;
	for (size_t i = 0; i < n; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task", out[i]);
		_cleanup_closedir_ DIR *dir = opendir(path);
		for (struct dirent *de; dir && (de = readdir(dir));) {
			if (de->d_name[0] == '.')
				continue;
			char cp[320];
			snprintf(cp, sizeof(cp), "/proc/%d/task/%s/children", out[i], de->d_name);
			_cleanup_fclose_ FILE *f = fopen(cp, "re");
			for (int c; f && n < max && fscanf(f, "%d", &c) == 1;)
				out[n++] = c;
		}
	}
	return n;
}

static int pre_add(struct mm_pre_task *p, uint64_t start, uint64_t end)
{
	if (p->nrun && p->run[p->nrun - 1].addr + p->run[p->nrun - 1].len == start) {
		p->run[p->nrun - 1].len += end - start;
		p->bytes += end - start;
		return 0;
	}
	if (p->nrun == p->caprun) {
		size_t cap = p->caprun ? 2 * p->caprun : 256;
		struct pre_run *n = realloc(p->run, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->run = n;
		p->caprun = cap;
	}
	p->run[p->nrun++] = (struct pre_run){ start, end - start, p->bytes, true };
	p->bytes += end - start;
	return 0;
}

/* The pages of p written since the parent, listed and protected again (at
 * most budget bytes: the rest stay written, for the frozen scan). */
static int pre_scan(struct mm_pre_task *p, int pagemap, uint64_t budget)
{
	struct page_region regs[512];
	const uint64_t excl = PAGE_IS_PFNZERO | PAGE_IS_FILE;
	struct pm_scan s;
	pm_scan_start(&s, pagemap,
		      &(struct pm_scan_arg){
			  .flags = PM_SCAN_WP_MATCHING,
			  .start = 0,
			  .end = TASK_END,
			  .max_pages = budget / PAGE,
			  .category_inverted = excl,
			  .category_mask = excl | PAGE_IS_WRITTEN,
			  .category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			  .return_mask = PAGE_IS_WRITTEN,
		      },
		      regs, ARRAY_SIZE(regs));
	for (const struct page_region *g; (g = pm_scan_next(&s));) {
		int r = pre_add(p, g->start, g->end);
		if (r < 0)
			return r;
	}
	return s.err;
}

/* The pages of A0 read into p->data; a run that cannot be read all is not
 * copied (the frozen checkpoint reads it). alone: the only process (else
 * process_vm_readv, which unshares what a tree shares copy-on-write, is not
 * used). */
static int pre_read(struct mm_pre_task *p, bool alone)
{
	p->data = malloc(p->bytes ? p->bytes : 1);
	p->valid = calloc(p->bytes / PAGE / 8 + 1, 1);
	if (!p->data || !p->valid)
		return -ENOMEM;
	size_t done = 0;
	struct iovec remote[1024]; /* IOV_MAX */
	while (alone && done < p->nrun) {
		size_t k = MIN(p->nrun - done, ARRAY_SIZE(remote));
		uint64_t bytes = 0;
		for (size_t i = 0; i < k; i++) {
			remote[i] = (struct iovec){ (void *)(uintptr_t)p->run[done + i].addr,
						    p->run[done + i].len };
			bytes += p->run[done + i].len;
		}
		struct iovec local = { p->data + p->run[done].off, bytes };
		if (process_vm_readv(p->pid, &local, 1, remote, k, 0) != (ssize_t)bytes)
			break;
		done += k;
	}
	if (done == p->nrun)
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	_cleanup_close_ int mem = open(path, O_RDONLY | O_CLOEXEC);
	for (size_t i = done; i < p->nrun; i++) {
		struct pre_run *u = &p->run[i];
		u->copied = mem >= 0 && !proc_mem_read_gone(mem, u->addr, u->len, p->data + u->off);
	}
	return 0;
}

/* The undo: A0's pages written again (for the next checkpoint), the note
 * back to the parent's id. */
static void pre_undo(struct ckpt_ctx *ctx, struct mm_pre_task *p)
{
	int bad = 0;
	for (size_t i = 0; i < p->nrun; i++) {
		struct uffdio_writeprotect wp = { .range = { p->run[i].addr, p->run[i].len } };
		/* a range unmapped since (or no longer registered) has nothing to put back */
		if (ioctl(p->local, UFFDIO_WRITEPROTECT, &wp) < 0 && errno != ENOENT)
			bad = -errno;
	}
	/* and what the frozen scan found written since the pre-copy (and
	 * protected, if it did) */
	for (size_t i = 0; i < p->nfz; i++) {
		struct uffdio_writeprotect wp = { .range = { p->fz[i].start,
							     p->fz[i].end - p->fz[i].start } };
		if ((p->fz[i].categories & PAGE_IS_WRITTEN) &&
		    ioctl(p->local, UFFDIO_WRITEPROTECT, &wp) < 0 && errno != ENOENT)
			bad = -errno;
	}
	if (bad) {
		log_warn(&ctx->log, "pid %d: its tracking could not be put back after the failure "
			 "(%s): the next --parent of it is refused", p->pid, strerror(-bad));
		return;
	}
	if (write_note(ctx, p->pid, p->uffd, p->memfd, p->gen) == 0)
		log_info(&ctx->log, "pid %d: tracking put back as it was after the failure", p->pid);
}

/* One process's pre-copy; 0 if it has none (not tracked, not since the
 * parent), 1 if it has one. */
static int pre_one(struct ckpt_ctx *ctx, struct mm_pre_task *p, const uint8_t parent[16],
		   uint64_t budget, bool alone)
{
	struct mm_dirty d = { .uffd = -1, .memfd = -1 };
	find_tracking(p->pid, NULL, &d);
	if (!d.own || memcmp(d.gen, parent, sizeof(d.gen)))
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", p->pid);
	_cleanup_close_ int pagemap = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (pagemap < 0 || pidfd < 0)
		return 0;
	p->local = (int)syscall(SYS_pidfd_getfd, pidfd, d.uffd, 0);
	if (p->local < 0)
		return 0;
	p->pagemap = TAKE_FD(pagemap);
	p->uffd = d.uffd;
	p->memfd = d.memfd;
	memcpy(p->gen, d.gen, sizeof(p->gen));
	/* the generation first: a pre-copy (or checkpoint) that fails halfway
	 * leaves one no complete image has */
	int r = write_note(ctx, p->pid, p->uffd, p->memfd, ctx->image_id);
	if (r < 0)
		return r;
	r = pre_scan(p, p->pagemap, budget);
	p->scanned = r < 0; /* what it protected is not known: no undo, the next
			     * --parent is refused */
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: pre-copy: PAGEMAP_SCAN failed: %s",
				p->pid, strerror(-r));
	return pre_read(p, alone) < 0 ? -ENOMEM : 1;
}

int mm_pre_copy(struct ckpt_ctx *ctx)
{
	const char *path = opts_parent(ctx);
	const uint8_t *by_id = opts_parent_id(ctx);
	static const uint8_t none[16];
	uint8_t parent[16];
	if (by_id)
		memcpy(parent, by_id, sizeof(parent));
	else if (!path || ctx->key || parent_id(ctx, path, parent) < 0)
		return 0; /* collect says why */
	if (!memcmp(ctx->image_id, none, sizeof(none)) &&
	    getrandom(ctx->image_id, sizeof(ctx->image_id), 0) != (ssize_t)sizeof(ctx->image_id))
		return 0;
	_cleanup_free_ pid_t *pids = malloc(PRE_PROCS * sizeof(*pids));
	struct mm_pre *pre = calloc(1, sizeof(*pre));
	size_t n = pids ? tree_pids(ctx->pid, pids, PRE_PROCS) : 0;
	if (pre && n)
		pre->t = calloc(n, sizeof(*pre->t));
	if (!pre || !pre->t) {
		free(pre);
		return 0; /* no pre-copy: the frozen checkpoint does it all */
	}
	ctx->mm_pre = pre;
	uint64_t left = PRE_MAX;
	for (size_t i = 0; i < n && left >= PAGE; i++) {
		struct mm_pre_task *p = &pre->t[pre->n];
		*p = (struct mm_pre_task){ .pid = pids[i], .local = -1, .pagemap = -1 };
		int r = pre_one(ctx, p, parent, left, n == 1);
		if (r < 0 && p->local < 0)
			return r;
		if (r < 0) { /* the note has the new generation */
			pre->n++;
			return r;
		}
		if (r == 0) {
			free(p->run);
			if (p->pagemap >= 0)
				close(p->pagemap);
			continue;
		}
		left -= p->bytes;
		pre->n++;
		log_info(&ctx->log, "pid %d: pre-copy: %llu KiB written since the parent copied "
			 "while it runs", p->pid, (unsigned long long)(p->bytes >> 10));
		CKPT_FAULT(CKPT_FAULT_PRECOPY);
	}
	return 0;
}

/* --- the frozen scan, at the freeze -------------------------------------
 *
 * A process with a pre-copy has its frozen scan (what mm_dirty_scan does
 * vma by vma) made right after the seize, of its whole address space at
 * once, by a thread of ckpt's while step "collect" reads /proc: smaps and
 * numa_maps walk the same page tables (the other CPU), and the three walks
 * were one after the other. Write-protecting (no CKPT_KILL), the kernel
 * passes over the vmas not registered, so this lists (and protects) what
 * the per-vma scans would for the vmas registered since the parent: the
 * tree is held, nothing registers or writes meanwhile but ckpt, which
 * registers only vmas without that history (mm_dirty_begin; those are
 * scanned vma by vma as before). mm_dirty_scan takes a vma's regions from
 * here. A failure fails the checkpoint (what it protected is not known);
 * a checkpoint refused after it puts back what it protected (pre_undo). */

#define FZ_CALL_PAGES 16384 /* 64 MiB a call: about 1 ms of walk */

static void fz_scan(struct mm_pre_task *p, bool wp)
{
	uint64_t t0 = now_us();
	struct page_region regs[512];
	struct pm_scan s;
	pm_scan_start(&s, p->pagemap,
		      &(struct pm_scan_arg){
			  .flags = wp ? PM_SCAN_WP_MATCHING : 0,
			  .start = 0,
			  .end = TASK_END,
			  .category_inverted = PAGE_IS_PFNZERO | PAGE_IS_FILE,
			  .category_mask = PAGE_IS_PFNZERO | PAGE_IS_FILE,
			  .category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			  .return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_WRITTEN,
		      },
		      regs, ARRAY_SIZE(regs));
	/* collect injects an mmap (its scratch area) meanwhile: a call of 1 GiB
	 * kept it waiting the whole walk */
	s.call_pages = FZ_CALL_PAGES;
	for (const struct page_region *g; !p->fz_err && (g = pm_scan_next(&s));) {
		if (p->nfz == p->capfz) {
			size_t cap = p->capfz ? 2 * p->capfz : 256;
			struct page_region *n = realloc(p->fz, cap * sizeof(*n));
			if (!n) {
				p->fz_err = -ENOMEM;
				break;
			}
			p->fz = n;
			p->capfz = cap;
		}
		p->fz[p->nfz++] = *g;
	}
	if (!p->fz_err)
		p->fz_err = s.err < 0 ? s.err : pm_scan_pos(&s) < TASK_END ? -EIO : 0;
	p->fz_us = now_us() - t0;
	p->fz_made = true;
}

static void *fz_thread(void *arg)
{
	struct mm_pre *pre = arg;
	for (size_t i = 0; i < pre->n; i++)
		if (pre->t[i].pagemap >= 0)
			fz_scan(&pre->t[i], pre->wp);
	return NULL;
}

static void fz_join(struct mm_pre *pre)
{
	uint64_t t0 = now_us();
	if (pre->scanning)
		pthread_join(pre->scanner, NULL);
	if (pre->scanning)
		pre->waited_us = now_us() - t0;
	pre->scanning = false;
}

int mm_pre_freeze(struct ckpt_ctx *ctx)
{
	struct mm_pre *pre = ctx->mm_pre;
	if (!pre || !pre->n)
		return 0;
	pre->wp = !(ctx->flags & CKPT_KILL);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* no signal for it: ckpt's thread takes them */
	pre->scanning = pthread_create(&pre->scanner, NULL, fz_thread, pre) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* no thread: the per-vma scans under dump, as without a pre-copy */
	return 0;
}

/* pid's frozen scan (joined), or NULL if it has none */
static const struct mm_pre_task *fz_of(struct ckpt_ctx *ctx, pid_t pid)
{
	struct mm_pre_task *p = pre_of(ctx, pid);
	if (!p)
		return NULL;
	fz_join(ctx->mm_pre);
	return p->fz_made ? p : NULL;
}

/* The first region of p's frozen scan that ends after addr. */
static size_t fz_find(const struct mm_pre_task *p, uint64_t addr)
{
	return pm_region_first(p->fz, p->nfz, addr);
}

static struct mm_pre_task *pre_of(const struct ckpt_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; ctx->mm_pre && i < ctx->mm_pre->n; i++)
		if (ctx->mm_pre->t[i].pid == pid)
			return &ctx->mm_pre->t[i];
	return NULL;
}

void mm_pre_end(struct ckpt_ctx *ctx, bool failed)
{
	struct mm_pre *pre = ctx->mm_pre;
	if (!pre)
		return;
	fz_join(pre);
	for (size_t i = 0; i < pre->n; i++) {
		struct mm_pre_task *p = &pre->t[i];
		/* a failed frozen scan: what it protected is not known */
		if (failed && !p->scanned && p->fz_err && p->local >= 0)
			log_warn(&ctx->log, "pid %d: its frozen scan failed (%s): the next --parent "
				 "of it is refused", p->pid, strerror(-p->fz_err));
		else if (failed && !p->scanned && p->local >= 0)
			pre_undo(ctx, p);
		if (p->local >= 0)
			close(p->local);
		if (p->pagemap >= 0)
			close(p->pagemap);
		free(p->run);
		free(p->data);
		free(p->valid);
		free(p->fz);
	}
	free(pre->t);
	free(pre);
	ctx->mm_pre = NULL;
}

/* The run of p holding addr, or the first after it (p->nrun: none). */
static size_t pre_find(const struct mm_pre_task *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nrun;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (p->run[mid].addr + p->run[mid].len <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* [start, end), present and not written since the pre-copy in a vma tracked
 * since the parent: its pages of A0 to the image (their copies kept), the
 * others left to the parent. */
static int pre_keep(struct mm_dirty *d, struct pages_writer *pw, uint64_t start, uint64_t end)
{
	struct mm_pre_task *p = d->pre;
	int r = 0;
	for (size_t i = pre_find(p, start); r >= 0 && start < end; i++) {
		uint64_t a = i < p->nrun ? MAX(p->run[i].addr, start) : end;
		a = MIN(a, end);
		if (a > start && (r = from_add(d, start, a)) < 0)
			return r;
		if (a == end)
			break;
		const struct pre_run *u = &p->run[i];
		uint64_t b = MIN(u->addr + u->len, end);
		for (uint64_t x = a; u->copied && x < b; x += PAGE) {
			uint64_t pg = (u->off + x - u->addr) / PAGE;
			p->valid[pg / 8] |= (uint8_t)(1u << (pg % 8));
		}
		p->kept += u->copied ? b - a : 0;
		r = pw ? pages_add(pw, a, b - a) : live_add(d, a, b);
		start = b;
	}
	return r;
}

const struct mm_pre_task *mm_dirty_pre(const struct mm_dirty *d)
{
	return d ? d->pre : NULL;
}

uint64_t mm_pre_fill(const struct mm_pre_task *p, uint64_t addr, uint64_t end, uint8_t *dst,
		     bool *got)
{
	size_t i = pre_find(p, addr);
	*got = false;
	if (i == p->nrun || p->run[i].addr >= end)
		return end - addr;
	const struct pre_run *u = &p->run[i];
	if (u->addr > addr)
		return u->addr - addr;
	uint64_t b = MIN(u->addr + u->len, end), x = addr;
	for (; x < b; x += PAGE) {
		uint64_t pg = (u->off + x - u->addr) / PAGE;
		bool v = u->copied && (p->valid[pg / 8] & (1u << (pg % 8)));
		if (x == addr)
			*got = v;
		else if (v != *got)
			break;
	}
	if (*got && dst)
		memcpy(dst, p->data + u->off + (addr - u->addr), x - addr);
	return x - addr;
}
