/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pipes. A pipe is two kinds of object: the pipe itself (its size and the
 * bytes buffered in it, read without consuming them: ckpt takes a copy of a
 * read end with pidfd_getfd and tee()s it into a pipe of its own) and each
 * open end (an open file description: O_RDONLY or O_WRONLY, O_NONBLOCK),
 * shared between fds as kcmp says.
 *
 * At restart ckpt makes the pipe, sizes it, writes the data back, and opens
 * every end anew through /proc/self/fd, so two ends that were different
 * open files stay different. An end missing from the image must be closed
 * everywhere (it is then not reopened); a pipe to a process outside the
 * image is refused by fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "pipe.pb-c.h"
#include "util/cleanup.h"

enum {
	PIPE_ENTRY = REC_TYPE(KID_pipe, 1),
	PIPE_END_ENTRY = REC_TYPE(KID_pipe, 2),
};
#define PIPE_MAX_DATA (16u << 20)

/* checkpoint and restart objects, both kinds in one struct */
struct pipe_obj {
	bool is_end;
	PipeEntry pipe;         /* !is_end (checkpoint) */
	PipeEndEntry end;       /* is_end (checkpoint) */
	uint8_t *data;
	pid_t pid;              /* a task holding the end, and its fd */
	int fd;
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

/* The pipe (or, is_end, the end that is the open file of pid's fd; any end
 * for pid 0) of inode ino. */
static struct pipe_obj *find(struct ckpt_ctx *ctx, uint64_t ino, bool is_end, pid_t pid, int fd)
{
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_pipe, ino));) {
		struct pipe_obj *p = o->ptr;
		if (p->is_end != is_end)
			continue;
		if (!is_end || pid == 0 || syscall(SYS_kcmp, p->pid, pid, KCMP_FILE, p->fd, fd) == 0)
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
	p = find(ctx, ino, false, 0, 0);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		pipe_entry__init(&p->pipe);
		p->pipe.pipe_id = ino;
		p->fd = -1;
		r = add(ctx, ino, p, &p->pipe.id);
		if (r < 0)
			return r;
	}
	if (writer)
		p->has_write = true;
	if (!writer && p->fd < 0) { /* the read end the data is read through */
		p->has_read = true;
		p->pid = t->pid;
		p->fd = fi->fd;
	}
	e = find(ctx, ino, true, t->pid, fi->fd);
	if (e) {
		*ret_id = e->end.id;
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->is_end = true;
	pipe_end_entry__init(&e->end);
	e->end.pipe_id = ino;
	e->end.flags = fi->fi.flags & (O_ACCMODE | O_NONBLOCK);
	e->pid = t->pid;
	e->fd = fi->fd;
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
	struct task *t = ctx_find_task(ctx, p->pid);
	if (!t)
		return -ESRCH;
	_cleanup_close_ int rfd = puppet_getfd(&t->pup, p->fd);
	if (rfd < 0)
		return log_fail(&ctx->log, rfd, "pid %d fd %d (pipe): cannot take a copy: %s",
				p->pid, p->fd, strerror(-rfd));
	int size = fcntl(rfd, F_GETPIPE_SZ);
	int tmp[2];
	if (size < 0 || pipe2(tmp, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	p->pipe.size = (uint32_t)size;
	int r = 0;
	if (fcntl(tmp[1], F_SETPIPE_SZ, size) < 0) {
		r = log_fail(&ctx->log, -errno, "pid %d fd %d (pipe): cannot make a %d-byte pipe: %s",
			     p->pid, p->fd, size, strerror(errno));
		goto out;
	}
	ssize_t n = tee(rfd, tmp[1], (size_t)size, SPLICE_F_NONBLOCK);
	if (n < 0 && errno == EAGAIN)
		n = 0;
	if (n < 0) {
		r = log_fail(&ctx->log, -errno, "pid %d fd %d (pipe): tee: %s", p->pid, p->fd,
			     strerror(errno));
		goto out;
	}
	if (n > 0) {
		p->data = malloc((size_t)n);
		if (!p->data || read(tmp[0], p->data, (size_t)n) != n) {
			r = -EIO;
			goto out;
		}
		p->pipe.has_data = true;
		p->pipe.data.data = p->data;
		p->pipe.data.len = (size_t)n;
	}
out:
	close(tmp[0]);
	close(tmp[1]);
	return r;
}

/*
 * 1 if the end missing from the image is closed everywhere, not held by a
 * process outside: a write end polls POLLERR without readers, a read end
 * POLLHUP without writers. Restart then simply does not reopen it.
 */
static int other_end_closed(struct ckpt_ctx *ctx, const struct pipe_obj *e)
{
	struct task *t = e ? ctx_find_task(ctx, e->pid) : NULL;
	if (!t)
		return -ESRCH;
	_cleanup_close_ int fd = puppet_getfd(&t->pup, e->fd);
	if (fd < 0)
		return log_fail(&ctx->log, fd, "pid %d fd %d (pipe): cannot take a copy: %s", e->pid,
				e->fd, strerror(-fd));
	bool writer = (e->end.flags & O_ACCMODE) == O_WRONLY;
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
			struct pipe_obj *e = find(ctx, p->pipe.pipe_id, true, 0, 0);
			int r = other_end_closed(ctx, e);
			if (r < 0)
				return r;
			if (!r)
				return log_fail(&ctx->log, -EOPNOTSUPP,
						"pid %d fd %d (pipe:[%llu]): its %s end is held outside "
						"the image; not supported yet",
						e ? e->pid : 0, e ? e->fd : -1,
						(unsigned long long)p->pipe.pipe_id,
						p->has_read ? "write" : "read");
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

static int make_pipe(struct rst_ctx *ctx, struct pipe_robj *p)
{
	const PipeEntry *e = p->pipe;
	if (pipe2(p->fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return log_fail(&ctx->log, -errno, "cannot make a pipe: %s", strerror(errno));
	if (fcntl(p->fds[1], F_SETPIPE_SZ, e->size) < 0)
		return log_fail(&ctx->log, -errno, "cannot size a pipe to %u bytes: %s", e->size,
				strerror(errno));
	size_t done = 0;
	while (e->has_data && done < e->data.len) {
		ssize_t n = write(p->fds[1], e->data.data + done, e->data.len - done);
		if (n <= 0)
			return log_fail(&ctx->log, n < 0 ? -errno : -EIO,
					"cannot put %zu bytes back into a pipe", e->data.len);
		done += (size_t)n;
	}
	return 0;
}

static int open_end(struct rst_ctx *ctx, struct pipe_robj *e)
{
	struct pipe_robj *p = NULL;
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_pipe, e->end->pipe_id));)
		if (!((struct pipe_robj *)o->ptr)->is_end)
			p = o->ptr;
	if (!p || p->fds[0] < 0)
		return log_fail(&ctx->log, -EINVAL, "image has a pipe end of a pipe it lacks");
	bool w = (e->end->flags & O_ACCMODE) == O_WRONLY;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->fds[w ? 1 : 0]);
	e->fd = open(path, (w ? O_WRONLY : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
	if (e->fd < 0)
		return log_fail(&ctx->log, -errno, "cannot open a pipe end: %s", strerror(errno));
	if (!(e->end->flags & O_NONBLOCK) &&
	    fcntl(e->fd, F_SETFL, fcntl(e->fd, F_GETFL) & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int pipe_prepare(struct rst_ctx *ctx)
{
	for (int pass = 0; pass < 2; pass++) {
		for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_pipe, o));) {
			struct pipe_robj *p = o->ptr;
			int r = 0;
			if (pass == 0 && !p->is_end)
				r = make_pipe(ctx, p);
			else if (pass == 1 && p->is_end)
				r = open_end(ctx, p);
			if (r < 0)
				return r;
		}
	}
	return 0;
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
