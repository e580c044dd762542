/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Signalfds. One object per open file description: the signal mask from
 * /proc/PID/fdinfo ("sigmask:", hex, bit n-1 for signal n; the kernel has
 * taken SIGKILL and SIGSTOP out), O_NONBLOCK from fdtable. fds that share
 * one are found by fdobj.c. A signalfd holds no signals itself:
 * it reads those pending for whoever reads it, which signals.c restores.
 *
 * At restart ckpt makes it, signalfd(-1, &mask, flags), and fdtable passes
 * it on.
 */
#include <errno.h>
#include <fcntl.h>
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
	struct fdobj f;
	SignalfdEntry e;
};

static bool signalfd_claim(const struct fd_info *fi)
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

static int signalfd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			    void *obj)
{
	struct signalfd_obj *s = obj;
	_cleanup_free_ char *text = NULL;
	char name[32];

	snprintf(name, sizeof(name), "fdinfo/%d", fi->fd);
	int r = proc_read(t->pid, name, &text, NULL);
	if (r >= 0)
		r = parse(text, &s->e.sigmask);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (signalfd): cannot read its fdinfo",
				t->pid, fi->fd);
	s->e.flags = fi->fi.flags & O_NONBLOCK;
	return 0;
}

/* --- restart --------------------------------------------------------- */

static const char *signalfd_invalid(struct rst_ctx *ctx, const void *msg)
{
	const SignalfdEntry *e = msg;
	(void)ctx;
	if (e->sigmask & (SIGBIT(SIGKILL) | SIGBIT(SIGSTOP)))
		return "its mask holds SIGKILL or SIGSTOP";
	return e->flags & ~(uint32_t)O_NONBLOCK ? "unknown flags" : NULL;
}

static int signalfd_open(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *p = obj;
	const SignalfdEntry *e = p->msg;
	uint64_t mask = e->sigmask;
	/* the raw call: glibc's sigset_t would hide signals 32 and 33 */
	p->fd = (int)syscall(SYS_signalfd4, -1, &mask, sizeof(mask), SFD_CLOEXEC | (int)e->flags);
	if (p->fd < 0)
		return log_fail(&ctx->log, -errno, "signalfd %u: cannot make it: %s", e->id,
				strerror(errno));
	return 0;
}

static const struct fdobj_ops signalfd_file = {
	.kind = KIND_signalfd,
	.name = "signalfd",
	.type = SIGNALFD_ENTRY,
	.msg = &signalfd_entry__descriptor,
	.size = sizeof(struct signalfd_obj),
	.msg_off = offsetof(struct signalfd_obj, e),
	.id_off = offsetof(SignalfdEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = signalfd_claim,
	.collect = signalfd_collect,
	.invalid = signalfd_invalid,
	.open = signalfd_open,
};

static int signalfd_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &signalfd_file);
}

static int signalfd_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &signalfd_file);
}

static const ProtobufCMessageDescriptor *signalfd_descriptor(uint32_t sub)
{
	return sub == REC_SUB(SIGNALFD_ENTRY) ? &signalfd_entry__descriptor : NULL;
}

const struct kind_ops signalfd_ops = {
	.file = &signalfd_file,
	.dump = signalfd_dump,
	.load = fdobj_load,
	.prepare = signalfd_prepare,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = signalfd_descriptor,
};
