/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pipes. A pipe is two kinds of object: the pipe itself (its size and the
 * bytes buffered in it, read without consuming them: ckpt takes a copy of a
 * read end with pidfd_getfd and tee()s it into a pipe of its own) and each
 * open end (an open file description: O_RDONLY or O_WRONLY, O_NONBLOCK),
 * shared between fds as kcmp says (fdobj.c). The buffer code is
 * pipe-buf.c's, shared with fifo.c.
 *
 * At restart ckpt makes the pipe, sizes it, writes the data back, and opens
 * every end anew through /proc/self/fd, so two ends that were different
 * open files stay different. An end missing from the image must be closed
 * everywhere (it is then not reopened); a pipe to a process outside the
 * image is refused by fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/pipe-buf.h"
#include "pipe.pb-c.h"
#include "util/cleanup.h"

enum {
	PIPE_ENTRY = REC_TYPE(KID_pipe, 1),
	PIPE_END_ENTRY = REC_TYPE(KID_pipe, 2),
};
#define PIPE_MAX_DATA (16u << 20)

/* checkpoint and restart objects, both kinds in one struct */
struct pipe_obj {
	struct fdobj f;         /* an end: a task holding it, and its fd; a pipe: -1 */
	bool is_end;
	PipeEntry pipe;         /* !is_end (checkpoint) */
	PipeEndEntry end;       /* is_end (checkpoint) */
	uint8_t *data;
	pid_t rpid;             /* pipe: a task holding a read end, and its fd */
	int rfd;
	bool has_read, has_write; /* pipe: ends seen */
};

struct pipe_robj {
	bool is_end;
	PipeEntry *pipe;
	PipeEndEntry *end;
	int fds[2];             /* pipe: ckpt's own ends */
	int fd;                 /* end: the reopened end */
};

static bool pipe_fd_claim(const struct fd_info *fi)
{
	return S_ISFIFO(fi->st.st_mode) && !strncmp(fi->path, "pipe:", 5);
}

/* The pipe of inode ino, or (is_end) any end of it. */
static struct pipe_obj *find(struct ckpt_ctx *ctx, uint64_t ino, bool is_end)
{
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_pipe, ino));) {
		struct pipe_obj *p = o->ptr;
		if (p->is_end == is_end)
			return p;
	}
	return NULL;
}

static int add(struct ckpt_ctx *ctx, uint64_t ino, struct pipe_obj *p, uint32_t *ret_id)
{
	struct obj *o;
	int r = objhash_add(&ctx->objs, KIND_pipe, ino, 0, p, &o);
	if (r < 0) {
		free(p);
		return r;
	}
	*ret_id = o->id;
	return 0;
}

static int pipe_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   uint32_t *ret_id)
{
	uint64_t ino = fi->st.st_ino;
	bool writer = (fi->fi.flags & O_ACCMODE) == O_WRONLY;
	struct pipe_obj *p, *e;
	uint32_t id;
	int r;

	if ((fi->fi.flags & O_ACCMODE) == O_RDWR)
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (%s): a pipe opened read-write",
				t->pid, fi->fd, fi->path);
	p = find(ctx, ino, false);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		pipe_entry__init(&p->pipe);
		p->pipe.pipe_id = ino;
		p->f.fd = p->rfd = -1;
		r = add(ctx, ino, p, &p->pipe.id);
		if (r < 0)
			return r;
	}
	if (writer)
		p->has_write = true;
	if (!writer && p->rfd < 0) { /* the read end the data is read through */
		p->has_read = true;
		p->rpid = t->pid;
		p->rfd = fi->fd;
	}
	struct obj *o = fdobj_find(ctx, KIND_pipe, ino, offsetof(struct pipe_obj, f), t->pid, fi->fd);
	if (o) {
		*ret_id = o->id;
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->is_end = true;
	pipe_end_entry__init(&e->end);
	e->end.pipe_id = ino;
	e->end.flags = fi->fi.flags & (O_ACCMODE | O_NONBLOCK);
	e->f = (struct fdobj){ .pid = t->pid, .fd = fi->fd };
	r = add(ctx, ino, e, &id);
	if (r < 0)
		return r;
	e->end.id = id;
	*ret_id = id;
	return 0;
}

/* Reads what the pipe holds without taking it out. */
static int peek(struct ckpt_ctx *ctx, struct pipe_obj *p)
{
	struct task *t = ctx_find_task(ctx, p->rpid);
	if (!t)
		return -ESRCH;
	_cleanup_close_ int rfd = puppet_getfd(&t->pup, p->rfd);
	if (rfd < 0)
		return log_fail(&ctx->log, rfd, "pid %d fd %d (pipe): cannot take a copy: %s",
				p->rpid, p->rfd, strerror(-rfd));
	struct pipe_buf b;
	int r = pipe_buf_peek(rfd, &b);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (pipe): cannot read what it holds: %s",
				p->rpid, p->rfd, strerror(-r));
	p->pipe.size = b.size;
	p->data = b.data;
	p->pipe.has_data = b.len > 0;
	p->pipe.data.data = b.data;
	p->pipe.data.len = b.len;
	return 0;
}

/*
 * 1 if the end missing from the image is closed everywhere, not held by a
 * process outside: a write end polls POLLERR without readers, a read end
 * POLLHUP without writers. Restart then simply does not reopen it.
 */
static int other_end_closed(struct ckpt_ctx *ctx, const struct pipe_obj *e, uint64_t *ret_dev)
{
	struct task *t = e ? ctx_find_task(ctx, e->f.pid) : NULL;
	if (!t)
		return -ESRCH;
	_cleanup_close_ int fd = puppet_getfd(&t->pup, e->f.fd);
	if (fd < 0)
		return log_fail(&ctx->log, fd, "pid %d fd %d (pipe): cannot take a copy: %s",
				e->f.pid, e->f.fd, strerror(-fd));
	bool writer = (e->end.flags & O_ACCMODE) == O_WRONLY;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	*ret_dev = (uint64_t)st.st_dev;
	struct pollfd pfd = { .fd = fd, .events = writer ? POLLOUT : POLLIN };
	if (poll(&pfd, 1, 0) < 0)
		return -errno;
	return (pfd.revents & (writer ? POLLERR : POLLHUP)) != 0;
}

static int pipe_collect_end(struct ckpt_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_pipe, o));) {
		struct pipe_obj *p = o->ptr;
		if (p->is_end)
			continue;
		if (!p->has_read || !p->has_write) {
			struct pipe_obj *e = find(ctx, p->pipe.pipe_id, true);
			uint64_t dev = 0;
			int r = other_end_closed(ctx, e, &dev);
			if (r < 0)
				return r;
			if (!r) {
				/* e exists: other_end_closed found its task */
				char who[512];
				bool inherited = ctx_outside_holders(ctx, dev, p->pipe.pipe_id,
								     p->has_read ? O_WRONLY : O_RDONLY,
								     e->f.fd, who, sizeof(who));
				return log_fail(&ctx->log, -EOPNOTSUPP,
						"pid %d fd %d (pipe:[%llu]): its %s end is held outside "
						"the image%s%s",
						e->f.pid, e->f.fd, (unsigned long long)p->pipe.pipe_id,
						p->has_read ? "write" : "read", who,
						inherited ? "" : "; not supported yet");
			}
		}
		if (!p->has_read)
			continue; /* no reader anywhere: what it holds is lost anyway */
		int r = peek(ctx, p);
		if (r < 0)
			return r;
	}
	return 0;
}

static int pipe_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	/* pipes first, then their ends */
	for (int pass = 0; pass < 2; pass++) {
		for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_pipe, o));) {
			if (o->dumped)
				continue;
			struct pipe_obj *p = o->ptr;
			if (p->is_end != (pass == 1))
				continue;
			int r = p->is_end ? ctx_write_msg(ctx, PIPE_END_ENTRY, &p->end.base)
					  : ctx_write_msg(ctx, PIPE_ENTRY, &p->pipe.base);
			if (r < 0)
				return r;
			o->dumped = true;
		}
	}
	return 0;
}

/* --- restart --------------------------------------------------------- */

static int pipe_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	struct pipe_robj *p = calloc(1, sizeof(*p));
	uint32_t id;

	if (!p)
		return -ENOMEM;
	p->fds[0] = p->fds[1] = p->fd = -1;
	if (rec->type == PIPE_ENTRY) {
		p->pipe = rctx_unpack(ctx, rec, &pipe_entry__descriptor);
		if (!p->pipe || p->pipe->size > (1u << 30) ||
		    (p->pipe->has_data && p->pipe->data.len > MIN(p->pipe->size, PIPE_MAX_DATA))) {
			if (p->pipe)
				pipe_entry__free_unpacked(p->pipe, NULL);
			free(p);
			return log_fail(&ctx->log, -EINVAL, "record %u: pipe entry is not valid",
					rec->index);
		}
		id = p->pipe->id;
	} else if (rec->type == PIPE_END_ENTRY) {
		p->is_end = true;
		p->end = rctx_unpack(ctx, rec, &pipe_end_entry__descriptor);
		if (!p->end || ((p->end->flags & O_ACCMODE) != O_RDONLY &&
				(p->end->flags & O_ACCMODE) != O_WRONLY)) {
			if (p->end)
				pipe_end_entry__free_unpacked(p->end, NULL);
			free(p);
			return log_fail(&ctx->log, -EINVAL, "record %u: pipe end is not valid",
					rec->index);
		}
		id = p->end->id;
	} else {
		free(p);
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown pipe subtype", rec->index);
	}
	uint64_t key = p->is_end ? p->end->pipe_id : p->pipe->pipe_id;
	if (objhash_add(&ctx->objs, KIND_pipe, key, id, p, NULL) < 0) {
		if (p->pipe)
			pipe_entry__free_unpacked(p->pipe, NULL);
		if (p->end)
			pipe_end_entry__free_unpacked(p->end, NULL);
		free(p);
		return log_fail(&ctx->log, -EINVAL, "record %u: object %u defined twice", rec->index,
				id);
	}
	return 0;
}

static int make_pipe(struct rst_ctx *ctx, void *obj)
{
	struct pipe_robj *p = obj;
	const PipeEntry *e = p->pipe;
	if (p->is_end)
		return 0;
	if (pipe2(p->fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return log_fail(&ctx->log, -errno, "cannot make a pipe: %s", strerror(errno));
	int r = pipe_buf_fill(p->fds[1], e->size, e->has_data ? e->data.data : NULL,
			      e->has_data ? e->data.len : 0);
	if (r < 0)
		return log_fail(&ctx->log, r, "pipe %u: cannot size it to %u bytes and put %zu "
				"bytes back: %s", e->id, e->size, e->has_data ? e->data.len : 0,
				strerror(-r));
	return 0;
}

static int open_end(struct rst_ctx *ctx, void *obj)
{
	struct pipe_robj *e = obj, *p = NULL;
	if (!e->is_end)
		return 0;
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_pipe, e->end->pipe_id));)
		if (!((struct pipe_robj *)o->ptr)->is_end)
			p = o->ptr;
	if (!p || p->fds[0] < 0)
		return log_fail(&ctx->log, -EINVAL, "image has a pipe end of a pipe it lacks");
	bool w = (e->end->flags & O_ACCMODE) == O_WRONLY;
	int r = pipe_buf_open_end(p->fds[w ? 1 : 0], w ? O_WRONLY : O_RDONLY,
				  e->end->flags & O_NONBLOCK, &e->fd);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot open a pipe end: %s", strerror(-r));
	return 0;
}

/* pipes first, then their ends */
static int pipe_prepare(struct rst_ctx *ctx)
{
	int r = fdobj_prepare(ctx, KIND_pipe, make_pipe);
	return r < 0 ? r : fdobj_prepare(ctx, KIND_pipe, open_end);
}

static int pipe_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct pipe_robj *p = robj;
	if (!p->is_end || p->fd < 0)
		return log_fail(&ctx->log, -EINVAL, "an fd refers to a pipe, not a pipe end");
	*ret_fd = p->fd;
	return 0;
}

static void pipe_free_obj(void *ptr)
{
	struct pipe_obj *p = ptr;
	if (p)
		free(p->data);
	free(p);
}

static void pipe_free_robj(void *ptr)
{
	struct pipe_robj *p = ptr;
	if (!p)
		return;
	for (int i = 0; i < 2; i++)
		if (p->fds[i] >= 0)
			close(p->fds[i]);
	if (p->fd >= 0)
		close(p->fd);
	if (p->pipe)
		pipe_entry__free_unpacked(p->pipe, NULL);
	if (p->end)
		pipe_end_entry__free_unpacked(p->end, NULL);
	free(p);
}

static const ProtobufCMessageDescriptor *pipe_descriptor(uint32_t sub)
{
	if (sub == REC_SUB(PIPE_ENTRY))
		return &pipe_entry__descriptor;
	return sub == REC_SUB(PIPE_END_ENTRY) ? &pipe_end_entry__descriptor : NULL;
}

const struct kind_ops pipe_ops = {
	.fd_claim = pipe_fd_claim,
	.fd_collect = pipe_fd_collect,
	.fd_get = pipe_fd_get,
	.collect_end = pipe_collect_end,
	.dump = pipe_dump,
	.load = pipe_load,
	.prepare = pipe_prepare,
	.free_obj = pipe_free_obj,
	.free_robj = pipe_free_robj,
	.descriptor = pipe_descriptor,
};
