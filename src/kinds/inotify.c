/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inotify instances. An instance is an open file description (shared
 * between fds, fdobj.c finds); its fdinfo lists each watch as "inotify wd:W
 * ino:I sdev:D mask:M ... f_handle:H" (numbers in hex). A watch is saved
 * with its wd, its mask (IN_ONESHOT and IN_EXCL_UNLINK included; the
 * add-time flags IN_ONLYDIR, IN_DONT_FOLLOW, IN_MASK_* are not kept by the
 * kernel) and the watched object: the kernel's file handle, resolved with
 * open_by_handle_at through a mount of that device, to a path that lstat
 * shows to be the same inode. A watch whose object has no path any more
 * (a file deleted since) is kept when an fd of the image holds that file
 * (found in collect_end, same device and inode): it is saved by that open
 * file's objref, and watched at restart through ckpt's fd of the remade
 * file (/proc/self/fd/N: memfd.c remakes deleted files, deleted again);
 * held at no fd of the image, it is refused by pid, fd and wd.
 *
 * Queued events cannot be read without taking them from the task, so an
 * instance with a non-empty queue (FIONREAD on a copy of the fd) is
 * refused: the checkpoint would lose them.
 *
 * Restart: the instance is made on ckpt's side and the watches added in wd
 * order by path. The kernel hands out wds in increasing order, one past the
 * last one given (idr_alloc_cyclic), so a gap before a saved wd is filled
 * by adding and removing a dummy watch (on a memfd of ckpt's) until the
 * counter reaches it; the IN_IGNORED events this queues are read off again,
 * with anything the real watches caught meanwhile (like the events of the
 * downtime between checkpoint and restart, those are not delivered), and
 * again once every task is built (restore_end: the events of ckpt's own
 * work, such as a stale socket file removed). A wd
 * that still does not come out equal fails the restart, naming it. The
 * counter ends one past the highest saved wd, not past watches removed
 * before the checkpoint; wds above INOTIFY_MAX_WD are refused (filling the
 * gap would take seconds).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "inotify.pb-c.h"
#include "kinds/mnt.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/fsnotify.h"
#include "util/cleanup.h"

enum { INOTIFY_ENTRY = REC_TYPE(KID_inotify, 1) };

#define INOTIFY_MAX_WD	    (1 << 20)
#define INOTIFY_MAX_WATCHES (1u << 20)
#define IN_KEPT		    (IN_ALL_EVENTS | IN_EXCL_UNLINK | IN_ONESHOT)
#define DRAIN_EVERY	    4096 /* dummies between two reads of the queue (it holds 16384) */

/* checkpoint: one instance */
struct inotify_obj {
	struct fdobj f;
	InotifyEntry e;
	InotifyWatch *w;
	InotifyWatch **pw;
	size_t cap;
	uint32_t *kdev; /* per watch: the device as the kernel encodes it */
};

static bool inotify_claim(const struct fd_info *fi)
{
	return !strcmp(fi->path, "anon_inode:inotify");
}

static void inotify_free(void *ptr)
{
	struct inotify_obj *p = ptr;
	for (size_t i = 0; i < p->e.n_watches; i++) {
		free(p->w[i].path);
		free(p->w[i].handle.data);
	}
	free(p->w);
	free(p->pw);
	free(p->kdev);
}

static int parse_handle(const char *hex, InotifyWatch *w, unsigned bytes)
{
	struct fsnotify_handle fh;
	int r = fsnotify_parse_handle(hex, bytes, 0, &fh);
	if (r < 0)
		return r;
	w->handle.data = malloc(bytes ? bytes : 1);
	if (!w->handle.data)
		return -ENOMEM;
	memcpy(w->handle.data, fh.data, bytes);
	w->handle.len = bytes;
	w->has_handle = true;
	return 0;
}

/* "inotify wd:W ino:I sdev:D mask:M ignored_mask:0 [fhandle-bytes:B
 * fhandle-type:T f_handle:H]" into the next watch */
static int add_watch_line(struct inotify_obj *p, char *line)
{
	unsigned wd = 0, mask = 0, sdev = 0, bytes = 0, type = 0;
	unsigned long long ino = 0;
	const char *hex = NULL;
	int seen = 0;

	if (p->e.n_watches == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 8;
		InotifyWatch *nw = realloc(p->w, cap * sizeof(*nw));
		uint32_t *nk = nw ? realloc(p->kdev, cap * sizeof(*nk)) : NULL;
		if (nw)
			p->w = nw;
		if (!nk)
			return -ENOMEM;
		p->kdev = nk;
		p->cap = cap;
	}
	InotifyWatch *w = &p->w[p->e.n_watches++];
	inotify_watch__init(w);
	w->path = NULL;
	for (char *save, *tok = strtok_r(line + 8, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		seen += sscanf(tok, "wd:%x", &wd) == 1;
		seen += sscanf(tok, "ino:%llx", &ino) == 1;
		seen += sscanf(tok, "sdev:%x", &sdev) == 1;
		seen += sscanf(tok, "mask:%x", &mask) == 1;
		sscanf(tok, "fhandle-bytes:%x", &bytes);
		sscanf(tok, "fhandle-type:%x", &type);
		if (!strncmp(tok, "f_handle:", 9))
			hex = tok + 9;
	}
	if (seen != 4)
		return -EINVAL;
	w->wd = wd;
	w->mask = mask;
	w->ino = ino;
	p->kdev[p->e.n_watches - 1] = sdev;
	w->has_handle_type = hex != NULL;
	w->handle_type = type;
	return hex ? parse_handle(hex, w, bytes) : 0;
}

/* The path of the watched object, through the task's mounts of its device. */
static int resolve(struct task *t, InotifyWatch *w, uint32_t kdev)
{
	struct fsnotify_handle fh = {.bytes = (unsigned)w->handle.len, .type = (int)w->handle_type};
	struct stat st;

	if (!w->has_handle)
		return -EOPNOTSUPP;
	if (w->handle.len > FSNOTIFY_HANDLE_MAX)
		return -EINVAL;
	memcpy(fh.data, w->handle.data, w->handle.len);
	int r = fsnotify_resolve(t->pid, &fh, kdev, w->ino, &w->path, &st);
	if (r < 0)
		return r;
	w->mode = st.st_mode;
	w->dev = st.st_dev;
	return 0;
}

static int cmp_wd(const void *a, const void *b)
{
	const InotifyWatch *x = a, *y = b;
	return x->wd < y->wd ? -1 : x->wd > y->wd;
}

static int check_watches(struct ckpt_ctx *ctx, struct task *t, int fd, struct inotify_obj *p)
{
	for (size_t i = 0; i < p->e.n_watches; i++) {
		InotifyWatch *w = &p->w[i];
		if (w->mask & ~(uint32_t)IN_KEPT)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d wd %u (inotify): unknown mask bits %#x",
					t->pid, fd, w->wd, w->mask & ~(uint32_t)IN_KEPT);
		if (w->wd < 1 || w->wd > INOTIFY_MAX_WD)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d wd %u (inotify): watch descriptors above %d "
					"cannot be given back",
					t->pid, fd, w->wd, INOTIFY_MAX_WD);
		int r = resolve(t, w, p->kdev[i]);
		if (r == -ENOENT || r == -ESTALE) { /* deleted: looked for in collect_end */
			free(w->path);
			if (!(w->path = strdup("")))
				return -ENOMEM;
			w->dev = fsnotify_dev(p->kdev[i]);
			continue;
		}
		if (r < 0)
			return log_fail(
			    &ctx->log, r == -ENOMEM ? r : -EOPNOTSUPP,
			    "pid %d fd %d wd %u (inotify): the watched object (inode %llu "
			    "on %u:%u) %s",
			    t->pid, fd, w->wd, (unsigned long long)w->ino, p->kdev[i] >> 20,
			    p->kdev[i] & 0xfffff, fsnotify_why_unresolved(r));
	}
	return 0;
}

static int read_watches(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			struct inotify_obj *p)
{
	_cleanup_free_ char *text = NULL;
	char name[32];
	int r;

	snprintf(name, sizeof(name), "fdinfo/%d", fi->fd);
	r = proc_read(t->pid, name, &text, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (inotify): cannot read its fdinfo: %s",
				t->pid, fi->fd, strerror(-r));
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "inotify ", 8))
			continue;
		if (p->e.n_watches >= INOTIFY_MAX_WATCHES)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (inotify): more than %u watches", t->pid,
					fi->fd, INOTIFY_MAX_WATCHES);
		r = add_watch_line(p, line);
		if (r < 0)
			return log_fail(&ctx->log, r,
					"pid %d fd %d (inotify): cannot parse a watch", t->pid,
					fi->fd);
	}
	/* sort watches and their devices together */
	for (size_t i = 0; i < p->e.n_watches; i++)
		p->w[i].dev = p->kdev[i];
	qsort(p->w, p->e.n_watches, sizeof(*p->w), cmp_wd);
	for (size_t i = 0; i < p->e.n_watches; i++)
		p->kdev[i] = (uint32_t)p->w[i].dev;
	return check_watches(ctx, t, fi->fd, p);
}

static int inotify_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   void *obj)
{
	struct inotify_obj *p = obj;
	int r = fsnotify_check_queue(ctx, t, fi->fd, "inotify");
	if (r < 0)
		return r;
	p->e.flags = fi->fi.flags & O_NONBLOCK;
	r = read_watches(ctx, t, fi, p);
	if (r >= 0 && p->e.n_watches && mnt_own_root(ctx)) /* paths are the container's */
		r = log_fail(&ctx->log, -EOPNOTSUPP,
			     "pid %d fd %d (inotify): watches in a container with a root of its "
			     "own; not supported yet",
			     t->pid, fi->fd);
	if (r >= 0 && p->e.n_watches && !(p->pw = calloc(p->e.n_watches, sizeof(*p->pw))))
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < p->e.n_watches; i++)
		p->pw[i] = &p->w[i];
	p->e.watches = p->pw;
	return r;
}

struct same_inode {
	dev_t dev;
	uint64_t ino;
	uint32_t mode;
};

static bool holds_inode(pid_t pid, int fd, void *arg)
{
	struct same_inode *k = arg;
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	if (stat(path, &st) < 0 || st.st_dev != k->dev || st.st_ino != k->ino)
		return false;
	k->mode = st.st_mode;
	return true;
}

/* Every task's fds are known now: a deleted watched file, by the open file
 * of the image that holds it. */
static int inotify_collect_end(struct ckpt_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_inotify, o));) {
		struct inotify_obj *p = o->ptr;
		for (size_t i = 0; i < p->e.n_watches; i++) {
			InotifyWatch *w = &p->w[i];
			if (w->path[0])
				continue;
			struct same_inode k = { .dev = (dev_t)w->dev, .ino = w->ino };
			if (fdtable_find_file(ctx, holds_inode, &k, &w->file_id) < 0)
				return log_fail(&ctx->log, -EOPNOTSUPP,
						"pid %d fd %d wd %u (inotify): the watched object "
						"(inode %llu) has no path any more (deleted) and is "
						"open at no fd of the image; not supported",
						p->f.pid, p->f.fd, w->wd, (unsigned long long)w->ino);
			w->has_file_id = true;
			w->mode = k.mode;
		}
	}
	return 0;
}

/* --- restart --------------------------------------------------------- */

static const char *inotify_invalid(struct rst_ctx *ctx, const void *msg)
{
	const InotifyEntry *e = msg;
	(void)ctx;
	if (e->flags & ~(uint32_t)O_NONBLOCK)
		return "unknown flags";
	if (e->n_watches > INOTIFY_MAX_WATCHES)
		return "too many watches";
	for (size_t i = 0; i < e->n_watches; i++) {
		const InotifyWatch *w = e->watches[i];
		if (w->wd < 1 || w->wd > INOTIFY_MAX_WD || (i && w->wd <= e->watches[i - 1]->wd))
			return "a wd is out of order or range";
		if (!(w->mask & IN_ALL_EVENTS) || (w->mask & ~(uint32_t)IN_KEPT))
			return "a watch has no events or unknown mask bits";
		if (w->path[0] != '/' && !(w->has_file_id && !w->path[0]))
			return "a watch has no absolute path (nor the open file of a deleted one)";
		if (!S_ISDIR(w->mode) && !S_ISREG(w->mode) && !S_ISLNK(w->mode) &&
		    !S_ISCHR(w->mode) && !S_ISBLK(w->mode) && !S_ISFIFO(w->mode) &&
		    !S_ISSOCK(w->mode))
			return "a watch has no file type";
		if (w->has_handle && w->handle.len > FSNOTIFY_HANDLE_MAX)
			return "a file handle is too long";
	}
	return NULL;
}

/* Reads the queue empty; returns the bytes read. */
static size_t drain(int fd)
{
	char buf[65536];
	size_t total = 0;
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		total += (size_t)n;
	return total;
}

/* Adds and removes the dummy watch until the next wd handed out is wd. */
static int fill_gap(struct rst_ctx *ctx, int fd, const char *dummy, int *next, uint32_t wd)
{
	for (unsigned n = 1; *next < (int)wd; n++) {
		int d = inotify_add_watch(fd, dummy, IN_ACCESS);
		if (d < 0)
			return log_fail(&ctx->log, -errno, "inotify: cannot add a dummy watch: %s",
					strerror(errno));
		if (inotify_rm_watch(fd, d) < 0)
			return -errno;
		if (d >= (int)wd)
			return log_fail(&ctx->log, -EIO,
					"inotify: wd %u cannot be given back (%d came first)", wd,
					d);
		*next = d + 1;
		if (n % DRAIN_EVERY == 0)
			drain(fd);
	}
	return 0;
}

/* A deleted file's watch, through ckpt's fd of the remade (deleted) file. */
static int add_deleted(struct rst_ctx *ctx, int fd, const InotifyWatch *w)
{
	char path[64];
	int lfd, r = fdtable_local_fd(ctx, w->file_id, &lfd);
	if (r < 0)
		return log_fail(&ctx->log, r, "inotify wd %u: the deleted file it watched (open "
				"file %u) is not there", w->wd, w->file_id);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", lfd);
	int got = inotify_add_watch(fd, path, w->mask);
	if (got < 0)
		return log_fail(&ctx->log, -errno, "inotify wd %u: cannot watch the deleted file "
				"again: %s", w->wd, strerror(errno));
	if (got != (int)w->wd)
		return log_fail(&ctx->log, -EIO, "inotify wd %u: watching the deleted file gave "
				"wd %d instead", w->wd, got);
	return 0;
}

static int add_one(struct rst_ctx *ctx, int fd, const InotifyWatch *w)
{
	struct stat st;
	if (w->has_file_id)
		return add_deleted(ctx, fd, w);
	uint32_t mask = w->mask | IN_DONT_FOLLOW | (S_ISDIR(w->mode) ? IN_ONLYDIR : 0);

	if (lstat(w->path, &st) < 0)
		return log_fail(&ctx->log, -errno, "inotify wd %u: cannot find '%s': %s", w->wd,
				w->path, strerror(errno));
	if ((st.st_mode & S_IFMT) != (w->mode & S_IFMT))
		return log_fail(&ctx->log, -ESTALE,
				"inotify wd %u: '%s' is no longer the same type of file", w->wd,
				w->path);
	if (st.st_ino != w->ino || st.st_dev != w->dev)
		log_warn(&ctx->log, "inotify wd %u: '%s' is another file than at the checkpoint",
			 w->wd, w->path);
	int got = inotify_add_watch(fd, w->path, mask);
	if (got < 0)
		return log_fail(&ctx->log, -errno, "inotify wd %u: cannot watch '%s': %s", w->wd,
				w->path, strerror(errno));
	if (got != (int)w->wd)
		return log_fail(&ctx->log, -EIO, "inotify wd %u: watching '%s' gave wd %d instead",
				w->wd, w->path, got);
	return 0;
}

static int inotify_open(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *p = obj;
	const InotifyEntry *e = p->msg;
	_cleanup_close_ int dummy_fd = -1;
	char dummy[64];
	int next = 1, r;

	p->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (p->fd < 0)
		return log_fail(&ctx->log, -errno, "cannot make an inotify instance: %s",
				strerror(errno));
	for (size_t i = 0; i < e->n_watches; i++) {
		const InotifyWatch *w = e->watches[i];
		if (next < (int)w->wd && dummy_fd < 0) {
			dummy_fd = memfd_create("ckpt-inotify-gap", MFD_CLOEXEC);
			if (dummy_fd < 0)
				return -errno;
		}
		snprintf(dummy, sizeof(dummy), "/proc/self/fd/%d", dummy_fd);
		if ((r = fill_gap(ctx, p->fd, dummy, &next, w->wd)) < 0 ||
		    (r = add_one(ctx, p->fd, w)) < 0)
			return r;
		next = (int)w->wd + 1;
	}
	size_t dropped = drain(p->fd);
	log_debug(&ctx->log, "inotify: %zu watches, %zu bytes of events read off", e->n_watches,
		  dropped);
	if (!(e->flags & O_NONBLOCK) && fcntl(p->fd, F_SETFL, 0) < 0)
		return -errno;
	return 0;
}

static const struct fdobj_ops inotify_file = {
	.kind = KIND_inotify,
	.name = "inotify",
	.type = INOTIFY_ENTRY,
	.msg = &inotify_entry__descriptor,
	.size = sizeof(struct inotify_obj),
	.msg_off = offsetof(struct inotify_obj, e),
	.id_off = offsetof(InotifyEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = inotify_claim,
	.collect = inotify_collect,
	.free = inotify_free,
	.invalid = inotify_invalid,
	.open = inotify_open,
};

static int inotify_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &inotify_file);
}

static int inotify_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &inotify_file);
}

/*
 * Every task is built: what the watches caught meanwhile is read off, ckpt's
 * own work among it (the unix kind's removal of a listener's stale socket
 * file in a watched directory: gpg-agent took that IN_DELETE for its
 * socket's removal and shut down, with its sockets). The instance starts
 * empty, as it was saved.
 */
static int inotify_restore_end(struct rst_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_inotify, o));) {
		struct fdobj_r *p = o->ptr;
		const InotifyEntry *e = p->msg;
		if (p->fd < 0)
			continue;
		if (fcntl(p->fd, F_SETFL, O_NONBLOCK) < 0)
			return -errno;
		size_t dropped = drain(p->fd);
		if (dropped)
			log_debug(&ctx->log, "inotify %u: %zu bytes of events of the restart read off",
				  e->id, dropped);
		if (!(e->flags & O_NONBLOCK) && fcntl(p->fd, F_SETFL, 0) < 0)
			return -errno;
	}
	return 0;
}

static const ProtobufCMessageDescriptor *inotify_descriptor(uint32_t sub)
{
	return sub == REC_SUB(INOTIFY_ENTRY) ? &inotify_entry__descriptor : NULL;
}

const struct kind_ops inotify_ops = {
	.file = &inotify_file,
	.collect_end = inotify_collect_end,
	.dump = inotify_dump,
	.load = fdobj_load,
	.prepare = inotify_prepare,
	.restore_end = inotify_restore_end,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = inotify_descriptor,
};
