/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The common parts of the fd kinds with one record per open file (fdobj.h). */
#include "kinds/fdobj.h"

#include <errno.h>

#include "core/ctx.h"

int fdobj_dump(struct ckpt_ctx *ctx, int kind, uint32_t type, size_t off)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, kind, o));) {
		if (o->dumped)
			continue;
		int r = ctx_write_msg(ctx, type, (const ProtobufCMessage *)((char *)o->ptr + off));
		if (r < 0)
			return r;
		o->dumped = true;
	}
	return 0;
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
