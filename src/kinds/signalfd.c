/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Signalfds. One object per open file description: the signal mask from
 * /proc/PID/fdinfo ("sigmask:", hex, bit n-1 for signal n; the kernel has
 * taken SIGKILL and SIGSTOP out), O_NONBLOCK from fdtable. fds that share
 * one are found with kcmp(KCMP_FILE). A signalfd holds no signals itself:
 * it reads those pending for whoever reads it, which signals.c restores.
 *
 * At restart ckpt makes it, signalfd(-1, &mask, flags), and fdtable passes
 * it on.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "signalfd.pb-c.h"
#include "util/cleanup.h"

enum { SIGNALFD_ENTRY = REC_TYPE(KID_signalfd, 1) };
#define SIGBIT(n) (1ull << ((n)-1))

struct signalfd_obj {
	SignalfdEntry e;
	pid_t pid; /* a task holding it, and its fd, for kcmp */
	int fd;
};

struct signalfd_robj {
	SignalfdEntry *e;
	int fd; /* ckpt's signalfd */
};

static bool signalfd_fd_claim(const struct fd_info *fi)
{
	return !strcmp(fi->path, "anon_inode:[signalfd]");
}

static int parse(const char *text, uint64_t *ret_mask)
{
	const char *p = NULL;
	char *end;

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, "sigmask:", 8))
			p = l + 8;
	if (!p)
		return -EINVAL;
	errno = 0;
	*ret_mask = strtoull(p, &end, 16);
	return errno || end == p ? -EINVAL : 0;
}

static int signalfd_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			       uint32_t *ret_id)
{
	_cleanup_free_ char *text = NULL;
	char name[32];
	uint64_t mask;
	struct obj *o;

	snprintf(name, sizeof(name), "fdinfo/%d", fi->fd);
	int r = proc_read(t->pid, name, &text, NULL);
	if (r >= 0)
		r = parse(text, &mask);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (signalfd): cannot read its fdinfo",
				t->pid, fi->fd);
	for (o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_signalfd, 0));) {
		struct signalfd_obj *s = o->ptr;
		if (syscall(SYS_kcmp, s->pid, t->pid, KCMP_FILE, s->fd, fi->fd) == 0) {
			*ret_id = o->id;
			return 0;
		}
	}
	struct signalfd_obj *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	signalfd_entry__init(&s->e);
	s->e.sigmask = mask;
	s->e.flags = fi->fi.flags & O_NONBLOCK;
	s->pid = t->pid;
	s->fd = fi->fd;
	r = objhash_add(&ctx->objs, KIND_signalfd, 0, 0, s, &o);
	if (r < 0) {
		free(s);
		return r;
	}
	s->e.id = o->id;
	*ret_id = o->id;
	return 0;
}

static int signalfd_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, KIND_signalfd, SIGNALFD_ENTRY, offsetof(struct signalfd_obj, e));
}

/* --- restart --------------------------------------------------------- */

static void signalfd_free_robj(void *ptr);

static int signalfd_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != SIGNALFD_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown signalfd subtype",
				rec->index);
	struct signalfd_robj *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->e = rctx_unpack(ctx, rec, &signalfd_entry__descriptor);
	if (!s->e || (s->e->sigmask & (SIGBIT(SIGKILL) | SIGBIT(SIGSTOP))) ||
	    (s->e->flags & ~(uint32_t)O_NONBLOCK)) {
		if (s->e)
			signalfd_entry__free_unpacked(s->e, NULL);
		free(s);
		return log_fail(&ctx->log, -EINVAL, "record %u: signalfd entry is not valid",
				rec->index);
	}
	return fdobj_register(ctx, rec, KIND_signalfd, s->e->id, s, signalfd_free_robj);
}

static int signalfd_prepare(struct rst_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_signalfd, o));) {
		struct signalfd_robj *s = o->ptr;
		uint64_t mask = s->e->sigmask;
		/* the raw call: glibc's sigset_t would hide signals 32 and 33 */
		s->fd = (int)syscall(SYS_signalfd4, -1, &mask, sizeof(mask),
				     SFD_CLOEXEC | (int)s->e->flags);
		if (s->fd < 0)
			return log_fail(&ctx->log, -errno, "signalfd %u: cannot make it: %s",
					s->e->id, strerror(errno));
	}
	return 0;
}

static int signalfd_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct signalfd_robj *p = robj;
	return fdobj_fd(ctx, p->fd, "signalfd", p->e->id, ret_fd);
}

static void signalfd_free_robj(void *ptr)
{
	struct signalfd_robj *s = ptr;
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (s->e)
		signalfd_entry__free_unpacked(s->e, NULL);
	free(s);
}

static const ProtobufCMessageDescriptor *signalfd_descriptor(uint32_t sub)
{
	return sub == REC_SUB(SIGNALFD_ENTRY) ? &signalfd_entry__descriptor : NULL;
}

const struct kind_ops signalfd_ops = {
    .fd_claim = signalfd_fd_claim,
    .fd_collect = signalfd_fd_collect,
    .fd_get = signalfd_fd_get,
    .dump = signalfd_dump,
    .load = signalfd_load,
    .prepare = signalfd_prepare,
    .free_obj = free,
    .free_robj = signalfd_free_robj,
    .descriptor = signalfd_descriptor,
};
