/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Named FIFOs: an fd whose file is S_ISFIFO with a real path. As for
 * pipes, two kinds of object: the FIFO (its path, size and the bytes
 * buffered in it, read without consuming them: tee() from a pidfd_getfd
 * copy of a read end into a pipe of ckpt's own) and each open end (an open
 * file description: O_RDONLY, O_WRONLY or O_RDWR, O_NONBLOCK), shared
 * between fds as kcmp says (fdobj.c). The buffer code is pipe-buf.c's,
 * shared with pipe.c.
 *
 * At restart ckpt finds the path with O_PATH and checks it is a FIFO,
 * then opens it O_RDWR | O_NONBLOCK through /proc/self/fd (so that no
 * open blocks, whatever ends the image has), writes the data back, and opens
 * every end anew through /proc/self/fd with its flags and O_NONBLOCK,
 * which it then clears if the end had it not; its own O_RDWR end is
 * closed before the restored processes run. A FIFO with only read ends
 * and no data is opened without it, so that its readers still see no
 * POLLHUP until a writer comes.
 *
 * A FIFO whose name was removed (" (deleted)") is saved with the path it
 * had, its mode and owner; restart makes it again there with mkfifo (or at
 * a free name beside it, PATH.ckpt-PID-N, when the path is taken), opens
 * it O_PATH and removes the name at once: its ends then read
 * "PATH (deleted)" again.
 *
 * Ends held outside the image: a FIFO whose read side is only outside is
 * refused at checkpoint (a write end polls POLLERR when there is no reader
 * anywhere: then it is fine); one whose write side is only outside cannot
 * be told. If a FIFO is still open somewhere when restart opens it, it
 * may hold bytes: they are left as they are, and the saved ones are not
 * written a second time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "fifo.pb-c.h"
#include "kinds/mnt.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/pipe-buf.h"
#include "util/cleanup.h"

enum {
	FIFO_ENTRY = REC_TYPE(KID_fifo, 1),
	FIFO_END_ENTRY = REC_TYPE(KID_fifo, 2),
};
#define FIFO_MAX_DATA (16u << 20)

/* checkpoint: a FIFO or one open end of it */
struct fifo_obj {
	struct fdobj f;	  /* end: a task holding it, and its fd; FIFO: -1 */
	bool is_end;
	FifoEntry e;	  /* FIFO */
	FifoEndEntry end; /* end */
	char *path;
	uint8_t *data;
	uint64_t dev;
	pid_t rpid, wpid; /* FIFO: a reader and a writer in the image (0: none)... */
	int rfd, wfd;	  /* ...and their fds */
};

/* restart */
struct fifo_robj {
	bool is_end;
	FifoEntry *e;
	FifoEndEntry *end;
	int path_fd;	 /* FIFO: an O_PATH fd of it, checked to be a FIFO */
	int holder;	 /* FIFO: ckpt's O_RDWR end, -1 if none */
	int fd;		 /* end: the reopened end */
	bool has_writer; /* FIFO: an end of the image writes */
};

static bool fifo_fd_claim(const struct fd_info *fi)
{
	return S_ISFIFO(fi->st.st_mode) && fi->path[0] == '/';
}

/* The FIFO of (dev, ino), or NULL. */
static struct fifo_obj *find(struct ckpt_ctx *ctx, uint64_t dev, uint64_t ino)
{
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_fifo, ino));) {
		struct fifo_obj *f = o->ptr;
		if (!f->is_end && f->dev == dev)
			return f;
	}
	return NULL;
}

static int add(struct ckpt_ctx *ctx, uint64_t ino, struct fifo_obj *f, uint32_t *ret_id)
{
	struct obj *o;
	int r = objhash_add(&ctx->objs, KIND_fifo, ino, 0, f, &o);
	if (r < 0) {
		free(f->path);
		free(f);
		return r;
	}
	*ret_id = o->id;
	return 0;
}

static int new_fifo(struct ckpt_ctx *ctx, const struct fd_info *fi, bool deleted,
		    struct fifo_obj **ret)
{
	struct fifo_obj *f = calloc(1, sizeof(*f));
	size_t n = strlen(fi->path) - (deleted ? 10 : 0);
	if (!f || !(f->path = strndup(fi->path, n))) {
		free(f);
		return -ENOMEM;
	}
	fifo_entry__init(&f->e);
	if (deleted) {
		f->e.has_deleted = f->e.deleted = true;
		f->e.has_mode = f->e.has_uid = f->e.has_gid = true;
		f->e.mode = fi->st.st_mode & 07777;
		f->e.uid = fi->st.st_uid;
		f->e.gid = fi->st.st_gid;
	}
	f->f.fd = -1;
	f->e.path = f->path;
	f->e.ino = fi->st.st_ino;
	f->e.has_dev = true;
	f->e.dev = f->dev = fi->st.st_dev;
	int r = add(ctx, fi->st.st_ino, f, &f->e.id);
	if (r < 0)
		return r;
	*ret = f;
	return 0;
}

static int fifo_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   uint32_t *ret_id)
{
	uint32_t acc = fi->fi.flags & O_ACCMODE;
	struct fifo_obj *f, *e;
	size_t n = strlen(fi->path);
	int r;

	bool deleted = n > 10 && !strcmp(fi->path + n - 10, " (deleted)");
	if (mnt_own_root(ctx)) /* its path is the container's, not the host's */
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a named FIFO in a container with a root of its "
				"own; not supported yet",
				t->pid, fi->fd, fi->path);
	if (acc == 3 || (fi->fi.flags & O_PATH))
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d fd %d (%s): a FIFO opened with flags %#o; not supported yet", t->pid,
		    fi->fd, fi->path, fi->fi.flags);
	f = find(ctx, fi->st.st_dev, fi->st.st_ino);
	if (!f && (r = new_fifo(ctx, fi, deleted, &f)) < 0)
		return r;
	if (acc != O_WRONLY && !f->rpid) {
		f->rpid = t->pid;
		f->rfd = fi->fd;
	}
	if (acc != O_RDONLY && !f->wpid) {
		f->wpid = t->pid;
		f->wfd = fi->fd;
	}
	struct obj *o = fdobj_find(ctx, KIND_fifo, fi->st.st_ino, offsetof(struct fifo_obj, f),
				   t->pid, fi->fd);
	if (o) {
		*ret_id = o->id;
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->is_end = true;
	fifo_end_entry__init(&e->end);
	e->end.fifo_id = f->e.id;
	e->end.flags = fi->fi.flags & (O_ACCMODE | O_NONBLOCK);
	e->dev = f->dev;
	e->f = (struct fdobj){ .pid = t->pid, .fd = fi->fd };
	r = add(ctx, fi->st.st_ino, e, &e->end.id);
	if (r < 0)
		return r;
	*ret_id = e->end.id;
	return 0;
}

/* A copy of pid's fd in ckpt, logged if it cannot be had. */
static int copy_fd(struct ckpt_ctx *ctx, const struct fifo_obj *f, pid_t pid, int fd)
{
	struct task *t = ctx_find_task(ctx, pid);
	int r = t ? puppet_getfd(&t->pup, fd) : -ESRCH;
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (%s): cannot take a copy: %s", pid, fd,
				f->path, strerror(-r));
	return r;
}

/* tee()s what the FIFO holds out of the read end rfd, without taking it out. */
static int peek(struct ckpt_ctx *ctx, struct fifo_obj *f, int rfd)
{
	struct pipe_buf b;
	int r = pipe_buf_peek(rfd, &b);
	if (r < 0)
		return log_fail(&ctx->log, r, "FIFO '%s': cannot read what it holds: %s", f->path,
				strerror(-r));
	f->e.size = b.size;
	f->data = b.data;
	f->e.has_data = b.len > 0;
	f->e.data.data = b.data;
	f->e.data.len = b.len;
	return 0;
}

/*
 * The FIFO's data, through a read end of the image, or, when it has none
 * and no reader exists anywhere (a write end polls POLLERR), through a
 * read end ckpt opens for the time of the tee.
 */
static int save_fifo(struct ckpt_ctx *ctx, struct fifo_obj *f)
{
	_cleanup_close_ int rfd = -1;
	if (f->rpid) {
		rfd = copy_fd(ctx, f, f->rpid, f->rfd);
		return rfd < 0 ? rfd : peek(ctx, f, rfd);
	}
	_cleanup_close_ int wfd = copy_fd(ctx, f, f->wpid, f->wfd);
	if (wfd < 0)
		return wfd;
	struct pollfd pfd = {.fd = wfd, .events = POLLOUT};
	if (poll(&pfd, 1, 0) < 0)
		return -errno;
	if (!(pfd.revents & POLLERR)) {
		char who[512];
		bool inherited = ctx_outside_holders(ctx, f->dev, f->e.ino, O_RDONLY, f->wfd, who,
						     sizeof(who));
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): the FIFO's read end is held outside the image%s%s",
				f->wpid, f->wfd, f->path, who, inherited ? "" : "; not supported yet");
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", wfd);
	rfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (rfd < 0)
		return log_fail(&ctx->log, -errno, "FIFO '%s': cannot open a read end: %s", f->path,
				strerror(errno));
	return peek(ctx, f, rfd);
}

static int fifo_collect_end(struct ckpt_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_fifo, o));) {
		struct fifo_obj *f = o->ptr;
		if (f->is_end)
			continue;
		int r = save_fifo(ctx, f);
		if (r < 0)
			return r;
	}
	return 0;
}

static int fifo_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	for (int pass = 0; pass < 2; pass++) {
		for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_fifo, o));) {
			if (o->dumped)
				continue;
			struct fifo_obj *f = o->ptr;
			if (f->is_end != (pass == 1))
				continue;
			int r = f->is_end ? ctx_write_msg(ctx, FIFO_END_ENTRY, &f->end.base)
					  : ctx_write_msg(ctx, FIFO_ENTRY, &f->e.base);
			if (r < 0)
				return r;
			o->dumped = true;
		}
	}
	return 0;
}

/* --- restart --------------------------------------------------------- */

static struct fifo_robj *fifo_of(struct rst_ctx *ctx, uint32_t id)
{
	struct obj *o;
	if (objhash_get(&ctx->objs, id, KIND_fifo, &o) < 0)
		return NULL;
	struct fifo_robj *f = o->ptr;
	return f->is_end ? NULL : f;
}

static bool fifo_valid(const FifoEntry *e)
{
	size_t n = strlen(e->path);
	return e->path[0] == '/' && n < 4000 && e->size <= (1u << 30) &&
	       (!e->has_data || e->data.len <= MIN(e->size, FIFO_MAX_DATA)) &&
	       (!e->deleted || (e->has_mode && e->has_uid && e->has_gid && !(e->mode & ~07777u)));
}

/* A FIFO whose name was removed: made again at its path (or a free name
 * beside it), opened O_PATH, and its name removed. */
static int remake_deleted(struct rst_ctx *ctx, const FifoEntry *e, int *ret_fd)
{
	char tmp[4096];
	const char *name = e->path;
	int r = mkfifo(name, 0600) < 0 ? -errno : 0;
	for (int i = 0; r == -EEXIST && i < 100; i++) {
		snprintf(tmp, sizeof(tmp), "%s.ckpt-%d-%d", e->path, (int)getpid(), i);
		name = tmp;
		r = mkfifo(name, 0600) < 0 ? -errno : 0;
	}
	if (r < 0) /* nothing made: nothing to remove */
		return log_fail(&ctx->log, r, "FIFO '%s' (deleted): cannot make it again: %s",
				e->path, strerror(-r));
	int fd = open(name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchownat(fd, "", e->uid, e->gid, AT_EMPTY_PATH) < 0 ||
	    chmod(name, e->mode) < 0)
		r = -errno;
	unlink(name);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return log_fail(&ctx->log, r, "FIFO '%s' (deleted): cannot make it again: %s",
				e->path, strerror(-r));
	}
	*ret_fd = fd;
	return 0;
}

static int fifo_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	struct fifo_robj *f = calloc(1, sizeof(*f)), *ff = NULL;
	uint32_t id = 0;
	uint64_t key = 0;
	bool ok = false;

	if (!f)
		return -ENOMEM;
	f->path_fd = f->holder = f->fd = -1;
	if (rec->type == FIFO_ENTRY) {
		f->e = rctx_unpack(ctx, rec, &fifo_entry__descriptor);
		ok = f->e && fifo_valid(f->e);
		id = ok ? f->e->id : 0;
		key = ok ? f->e->ino : 0;
	} else if (rec->type == FIFO_END_ENTRY) {
		f->is_end = true;
		f->end = rctx_unpack(ctx, rec, &fifo_end_entry__descriptor);
		ff = f->end ? fifo_of(ctx, f->end->fifo_id) : NULL;
		ok = ff && (f->end->flags & O_ACCMODE) != 3 &&
		     !(f->end->flags & ~(uint32_t)(O_ACCMODE | O_NONBLOCK));
		id = ok ? f->end->id : 0;
		key = ok ? ff->e->ino : 0;
	}
	if (ok && objhash_add(&ctx->objs, KIND_fifo, key, id, f, NULL) == 0) {
		if (ff && (f->end->flags & O_ACCMODE) != O_RDONLY)
			ff->has_writer = true;
		return 0;
	}
	if (f->e)
		fifo_entry__free_unpacked(f->e, NULL);
	if (f->end)
		fifo_end_entry__free_unpacked(f->end, NULL);
	free(f);
	return log_fail(&ctx->log, -EINVAL, "record %u: FIFO record is not valid or defined twice",
			rec->index);
}

/*
 * Finds the FIFO by its path (O_PATH: opening anything else, a device,
 * might do something), then opens it with an O_RDWR end of ckpt's own and
 * puts its data back.
 */
static int open_fifo(struct rst_ctx *ctx, void *obj)
{
	struct fifo_robj *f = obj;
	if (f->is_end)
		return 0;
	const FifoEntry *e = f->e;
	struct stat st;
	char path[64];
	int held = 0;

	if (e->deleted) {
		int r = remake_deleted(ctx, e, &f->path_fd);
		if (r < 0)
			return r;
	} else {
		f->path_fd = open(e->path, O_PATH | O_CLOEXEC);
	}
	if (f->path_fd < 0)
		return log_fail(&ctx->log, -errno, "FIFO '%s': cannot open it: %s", e->path,
				strerror(errno));
	if (fstat(f->path_fd, &st) < 0 || !S_ISFIFO(st.st_mode))
		return log_fail(&ctx->log, -ESTALE, "FIFO '%s': is no longer a FIFO", e->path);
	if (!f->has_writer && !e->has_data)
		return 0; /* readers only: opened by themselves, see open_end() */
	/* a dry run beside the live original: its data stays as it is */
	bool keep = ctx->flags & RESTART_VERIFY;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->path_fd);
	f->holder = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (f->holder < 0)
		return log_fail(&ctx->log, -errno, "FIFO '%s': cannot open it: %s", e->path,
				strerror(errno));
	if (ioctl(f->holder, FIONREAD, &held) < 0)
		return -errno;
	if (keep)
		return 0;
	if (held > 0) {
		log_warn(&ctx->log,
			 "FIFO '%s': still open outside the image and holds %d bytes; left as they "
			 "are, the %zu saved ones not written again",
			 e->path, held, e->has_data ? e->data.len : 0);
		return 0;
	}
	int r = pipe_buf_fill(f->holder, e->size, e->has_data ? e->data.data : NULL,
			      e->has_data ? e->data.len : 0);
	if (r < 0)
		return log_fail(&ctx->log, r, "FIFO '%s': cannot size it to %u bytes and put %zu "
				"bytes back: %s", e->path, e->size, e->has_data ? e->data.len : 0,
				strerror(-r));
	return 0;
}

static int open_end(struct rst_ctx *ctx, void *obj)
{
	struct fifo_robj *end = obj;
	if (!end->is_end)
		return 0;
	struct fifo_robj *f = fifo_of(ctx, end->end->fifo_id);
	if (!f || f->path_fd < 0)
		return -EINVAL;
	int r = pipe_buf_open_end(f->holder >= 0 ? f->holder : f->path_fd,
				  (int)(end->end->flags & O_ACCMODE), end->end->flags & O_NONBLOCK,
				  &end->fd);
	if (r < 0)
		return log_fail(&ctx->log, r, "FIFO '%s': cannot open an end of it: %s",
				f->e->path, strerror(-r));
	return 0;
}

/* FIFOs first, then their ends */
static int fifo_prepare(struct rst_ctx *ctx)
{
	int r = fdobj_prepare(ctx, KIND_fifo, open_fifo);
	return r < 0 ? r : fdobj_prepare(ctx, KIND_fifo, open_end);
}

static int fifo_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct fifo_robj *f = robj;
	if (!f->is_end || f->fd < 0)
		return log_fail(&ctx->log, -EINVAL, "an fd refers to a FIFO, not an end of it");
	*ret_fd = f->fd;
	return 0;
}

static void fifo_free_obj(void *ptr)
{
	struct fifo_obj *f = ptr;
	if (f) {
		free(f->path);
		free(f->data);
	}
	free(f);
}

static void fifo_free_robj(void *ptr)
{
	struct fifo_robj *f = ptr;
	if (!f)
		return;
	if (f->path_fd >= 0)
		close(f->path_fd);
	if (f->holder >= 0)
		close(f->holder);
	if (f->fd >= 0)
		close(f->fd);
	if (f->e)
		fifo_entry__free_unpacked(f->e, NULL);
	if (f->end)
		fifo_end_entry__free_unpacked(f->end, NULL);
	free(f);
}

static const ProtobufCMessageDescriptor *fifo_descriptor(uint32_t sub)
{
	if (sub == REC_SUB(FIFO_ENTRY))
		return &fifo_entry__descriptor;
	return sub == REC_SUB(FIFO_END_ENTRY) ? &fifo_end_entry__descriptor : NULL;
}

const struct kind_ops fifo_ops = {
    .fd_claim = fifo_fd_claim,
    .fd_collect = fifo_fd_collect,
    .fd_get = fifo_fd_get,
    .collect_end = fifo_collect_end,
    .dump = fifo_dump,
    .load = fifo_load,
    .prepare = fifo_prepare,
    .free_obj = fifo_free_obj,
    .free_robj = fifo_free_robj,
    .descriptor = fifo_descriptor,
};
