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

/*
 * The objects of one (kind, key) that stand for open files, sorted by the
 * order kcmp(KCMP_FILE) gives open files (1: less, 2: greater; a total
 * order of the kernel's obfuscated pointers), so that an fd is found in
 * log2(n) calls where every object was asked before: 2,000 fds of
 * /dev/null, each its own open file, took 4.1 s of kcmp (500: 0.34 s).
 * Kept per checkpoint in ctx->fdobj_index, filled from the hash's chain of
 * the key (newest first) with what was added since the last look.
 */
struct fdobj_group {
	int kind;
	uint64_t key;
	const struct obj **v; /* sorted */
	size_t n, cap;
	const struct obj *newest; /* the newest object of the key in v (or passed) */
	bool unordered;           /* kcmp gave no order: ask each */
	/* the last fd not found, and where it goes: the object the caller then
	 * adds for it is put there with no search */
	pid_t miss_pid;
	int miss_fd;
	size_t miss_at;
	struct fdobj_group *next;
};

#define FDOBJ_BUCKETS 1024

struct fdobj_index {
	struct fdobj_group *b[FDOBJ_BUCKETS];
};

void fdobj_index_free(struct fdobj_index *x)
{
	for (size_t i = 0; x && i < FDOBJ_BUCKETS; i++)
		for (struct fdobj_group *g = x->b[i], *n; g; g = n) {
			n = g->next;
			free(g->v);
			free(g);
		}
	free(x);
}

static struct fdobj_group *group_of(struct ckpt_ctx *ctx, int kind, uint64_t key)
{
	if (!ctx->fdobj_index && !(ctx->fdobj_index = calloc(1, sizeof(*ctx->fdobj_index))))
		return NULL;
	struct fdobj_group **b = &ctx->fdobj_index->b[(key * 0x9e3779b97f4a7c15ull ^ (uint64_t)kind) %
						      FDOBJ_BUCKETS];
	for (struct fdobj_group *g = *b; g; g = g->next)
		if (g->kind == kind && g->key == key)
			return g;
	struct fdobj_group *g = calloc(1, sizeof(*g));
	if (g) {
		*g = (struct fdobj_group){ .kind = kind, .key = key, .miss_fd = -1, .next = *b };
		*b = g;
	}
	return g;
}

static const struct fdobj *fdobj_at(const struct obj *o, size_t off)
{
	return (const struct fdobj *)((const char *)o->ptr + off);
}

/* Where pid's fd is, or would go, in g->v: *at; 0 if found there, 1 if
 * not, -1 if kcmp gave no order. */
static int group_search(const struct fdobj_group *g, size_t off, pid_t pid, int fd, size_t *at)
{
	size_t lo = 0, hi = g->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct fdobj *f = fdobj_at(g->v[mid], off);
		long c = syscall(SYS_kcmp, pid, f->pid, KCMP_FILE, fd, f->fd);
		if (c == 0) {
			*at = mid;
			return 0;
		}
		if (c != 1 && c != 2)
			return -1;
		if (c == 1)
			hi = mid;
		else
			lo = mid + 1;
	}
	*at = lo;
	return 1;
}

/* The objects of g's key added since the last look, into g->v. */
static void group_fill(const struct objhash *h, struct fdobj_group *g, size_t off)
{
	const struct obj *first = NULL;
	for (struct obj *o = NULL; (o = objhash_next_key(h, o, g->kind, g->key)) && o != g->newest;) {
		const struct fdobj *f = fdobj_at(o, off);
		size_t at;
		first = first ? first : o;
		if (f->fd < 0 || g->unordered)
			continue;
		if (g->n == g->cap) {
			size_t cap = g->cap ? 2 * g->cap : 8;
			const struct obj **v = realloc(g->v, cap * sizeof(*v));
			if (!v) {
				g->unordered = true;
				continue;
			}
			g->v = v;
			g->cap = cap;
		}
		if (f->pid == g->miss_pid && f->fd == g->miss_fd && g->miss_at <= g->n)
			at = g->miss_at;
		else if (group_search(g, off, f->pid, f->fd, &at) < 0) {
			g->unordered = true;
			continue;
		}
		g->miss_fd = -1;
		memmove(g->v + at + 1, g->v + at, (g->n - at) * sizeof(*g->v));
		g->v[at] = o;
		g->n++;
	}
	g->newest = first ? first : g->newest;
}

struct obj *fdobj_find(struct ckpt_ctx *ctx, int kind, uint64_t key, size_t off, pid_t pid,
		       int fd)
{
	const struct objhash *h = &ctx->objs;
	struct fdobj_group *g = fd >= 0 ? group_of(ctx, kind, key) : NULL;
	size_t at;
	if (g)
		group_fill(h, g, off);
	if (g && !g->unordered) {
		int r = group_search(g, off, pid, fd, &at);
		if (r == 1) {
			g->miss_pid = pid;
			g->miss_fd = fd;
			g->miss_at = at;
		}
		if (r >= 0)
			return r == 0 ? (struct obj *)g->v[at] : NULL;
		g->unordered = true;
	}
	for (struct obj *o = NULL; (o = objhash_next_key(h, o, kind, key));) {
		const struct fdobj *f = fdobj_at(o, off);
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
	o = fdobj_find(ctx, ops->kind, key, 0, t->pid, fi->fd);
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
