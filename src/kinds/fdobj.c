/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Open files: identity by kcmp, and the table-driven fd kinds (fdobj.h). */
#include "kinds/fdobj.h"

#include <errno.h>
#include <linux/kcmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"

bool fdobj_same(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b)
{
	return fd_a >= 0 && fd_b >= 0 && syscall(SYS_kcmp, pid_a, pid_b, KCMP_FILE, fd_a, fd_b) == 0;
}

struct obj *fdobj_find(const struct objhash *h, int kind, uint64_t key, size_t off, pid_t pid,
		       int fd)
{
	for (struct obj *o = NULL; (o = objhash_next_key(h, o, kind, key));) {
		const struct fdobj *f = (const struct fdobj *)((const char *)o->ptr + off);
		if (fdobj_same(f->pid, f->fd, pid, fd))
			return o;
	}
	return NULL;
}

static uint32_t *id_of(const struct fdobj_ops *ops, void *msg)
{
	return (uint32_t *)((char *)msg + ops->id_off);
}

int fdobj_collect(struct ckpt_ctx *ctx, const struct fdobj_ops *ops, struct task *t,
		  const struct fd_info *fi, uint32_t *ret_id)
{
	uint64_t key = fi->st.st_ino;
	struct obj *o;
	int r = ops->key ? ops->key(ctx, t, fi, &key) : 0;
	if (r < 0)
		return r;
	o = fdobj_find(&ctx->objs, ops->kind, key, 0, t->pid, fi->fd);
	if (o) {
		*ret_id = o->id;
		return 0;
	}
	struct fdobj *f = calloc(1, ops->size);
	if (!f)
		return -ENOMEM;
	*f = (struct fdobj){ .ops = ops, .pid = t->pid, .fd = fi->fd };
	void *msg = (char *)f + ops->msg_off;
	protobuf_c_message_init(ops->msg, msg);
	r = ops->collect(ctx, t, fi, f);
	if (r >= 0)
		r = objhash_add(&ctx->objs, ops->kind, key, 0, f, &o);
	if (r < 0) {
		fdobj_free_obj(f);
		return r;
	}
	*id_of(ops, msg) = o->id;
	*ret_id = o->id;
	return 0;
}

int fdobj_dump(struct ckpt_ctx *ctx, const struct fdobj_ops *ops)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, ops->kind, o));) {
		if (o->dumped)
			continue;
		int r = ctx_write_msg(ctx, ops->type,
				      (const ProtobufCMessage *)((char *)o->ptr + ops->msg_off));
		if (r < 0)
			return r;
		o->dumped = true;
	}
	return 0;
}

void fdobj_free_obj(void *obj)
{
	struct fdobj *f = obj;
	if (f && f->ops && f->ops->free)
		f->ops->free(f);
	free(f);
}

/* --- restart --------------------------------------------------------- */

int fdobj_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	const struct kind_info *ki = kind_by_rec(rec->type, NULL);
	const struct fdobj_ops *ops = ki ? ki->ops->file : NULL;
	if (!ops || rec->type != ops->type)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown %s subtype %u", rec->index,
				ki ? ki->name : "fd kind", REC_SUB(rec->type));
	void *msg = rctx_unpack(ctx, rec, ops->msg);
	if (!msg)
		return -EINVAL;
	const char *why = ops->invalid ? ops->invalid(ctx, msg) : NULL;
	struct fdobj_r *p = why ? NULL : calloc(1, ops->rsize);
	if (!p) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return why ? log_fail(&ctx->log, -EINVAL, "record %u: %s entry: %s", rec->index,
				      ops->name, why)
			   : -ENOMEM;
	}
	*p = (struct fdobj_r){ .ops = ops, .msg = msg, .id = *id_of(ops, msg), .fd = -1 };
	return fdobj_register(ctx, rec, ops->kind, p->id, p, fdobj_free_robj);
}

int fdobj_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct fdobj_r *p = robj;
	if (p->fd < 0 && p->ops->late && p->ops->open) {
		int r = p->ops->open(ctx, p);
		if (r < 0)
			return r;
	}
	return fdobj_fd(ctx, p->fd, p->ops->name, p->id, ret_fd);
}

void fdobj_free_robj(void *robj)
{
	struct fdobj_r *p = robj;
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->msg)
		protobuf_c_message_free_unpacked(p->msg, NULL);
	free(p);
}

int fdobj_prepare(struct rst_ctx *ctx, int kind, int (*open)(struct rst_ctx *ctx, void *obj))
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, kind, o));) {
		int r = open(ctx, o->ptr);
		if (r < 0)
			return r;
	}
	return 0;
}

int fdobj_prepare_all(struct rst_ctx *ctx, const struct fdobj_ops *ops)
{
	if (ops->late || !ops->open)
		return 0;
	return fdobj_prepare(ctx, ops->kind, ops->open);
}

int fdobj_register(struct rst_ctx *ctx, const struct img_record *rec, int kind, uint32_t id,
		   void *robj, void (*free_robj)(void *))
{
	if (objhash_add(&ctx->objs, kind, 0, id, robj, NULL) == 0)
		return 0;
	free_robj(robj);
	return log_fail(&ctx->log, -EINVAL, "record %u: object %u defined twice", rec->index, id);
}

int fdobj_fd(struct rst_ctx *ctx, int fd, const char *what, uint32_t id, int *ret_fd)
{
	if (fd < 0)
		return log_fail(&ctx->log, -EBADF, "%s %u was not made", what, id);
	*ret_fd = fd;
	return 0;
}
