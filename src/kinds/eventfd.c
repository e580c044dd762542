/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Eventfds. One object per open file description (an eventfd cannot be
 * opened again, so the description is the eventfd): the counter and
 * EFD_SEMAPHORE from /proc/PID/fdinfo ("eventfd-count:" in hex,
 * "eventfd-semaphore:"), O_NONBLOCK from fdtable. fds that share one (dup,
 * fork) are found by fdobj.c; "eventfd-id:" is only the key.
 *
 * At restart ckpt makes the eventfd itself, eventfd(count, flags) (a count
 * above UINT_MAX is written in), and fdtable passes it on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/ctx.h"
#include "eventfd.pb-c.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "util/cleanup.h"

enum { EVENTFD_ENTRY = REC_TYPE(KID_eventfd, 1) };
#define EVENTFD_MAX_COUNT (UINT64_MAX - 1)

struct eventfd_obj {
	struct fdobj f;
	EventfdEntry e;
};

static bool eventfd_claim(const struct fd_info *fi)
{
	return !strcmp(fi->path, "anon_inode:[eventfd]");
}

/* The value after "key" at the start of a line of text, or NULL. */
static const char *field(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n))
			return p + n;
	return NULL;
}

static int parse(const char *text, uint64_t *ret_count, bool *ret_sem, uint64_t *ret_key)
{
	const char *c = field(text, "eventfd-count:"), *s = field(text, "eventfd-semaphore:");
	const char *id = field(text, "eventfd-id:");
	char *end;

	if (!c || !s)
		return -EINVAL;
	errno = 0;
	*ret_count = strtoull(c, &end, 16);
	if (errno || end == c)
		return -EINVAL;
	*ret_sem = strtol(s, &end, 10) != 0;
	if (end == s)
		return -EINVAL;
	*ret_key = id ? strtoull(id, NULL, 10) : 0;
	return 0;
}

static int read_fdinfo(struct ckpt_ctx *ctx, struct task *t, int fd, uint64_t *ret_count,
		       bool *ret_sem, uint64_t *ret_key)
{
	_cleanup_free_ char *text = NULL;
	char name[32];

	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	int r = proc_read(t->pid, name, &text, NULL);
	if (r >= 0)
		r = parse(text, ret_count, ret_sem, ret_key);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (eventfd): cannot read its fdinfo",
				t->pid, fd);
	return 0;
}

/* "eventfd-id:" is only a key: kcmp tells eventfds apart */
static int eventfd_key(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		       uint64_t *ret_key)
{
	uint64_t count;
	bool sem;
	return read_fdinfo(ctx, t, fi->fd, &count, &sem, ret_key);
}

static int eventfd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   void *obj)
{
	struct eventfd_obj *e = obj;
	uint64_t key;
	bool sem;
	int r = read_fdinfo(ctx, t, fi->fd, &e->e.count, &sem, &key);
	e->e.semaphore = sem;
	e->e.flags = fi->fi.flags & O_NONBLOCK;
	return r;
}

/* --- restart --------------------------------------------------------- */

static const char *eventfd_invalid(struct rst_ctx *ctx, const void *msg)
{
	const EventfdEntry *e = msg;
	(void)ctx;
	if (e->count > EVENTFD_MAX_COUNT)
		return "its count is out of range";
	return e->flags & ~(uint32_t)O_NONBLOCK ? "unknown flags" : NULL;
}

static int eventfd_open(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *p = obj;
	const EventfdEntry *m = p->msg;
	bool big = m->count > UINT_MAX;
	int flags = EFD_CLOEXEC | (m->semaphore ? EFD_SEMAPHORE : 0) | (int)m->flags;

	p->fd = eventfd(big ? 0 : (unsigned int)m->count, flags);
	if (p->fd < 0)
		return log_fail(&ctx->log, -errno, "eventfd %u: cannot make it: %s", m->id,
				strerror(errno));
	/* on an empty counter a write of up to UINT64_MAX - 1 never blocks */
	if (big && write(p->fd, &m->count, sizeof(m->count)) != sizeof(m->count))
		return log_fail(&ctx->log, -errno,
				"eventfd %u: cannot set its count to %" PRIu64 ": %s", m->id,
				m->count, strerror(errno));
	return 0;
}

static const struct fdobj_ops eventfd_file = {
	.kind = KIND_eventfd,
	.name = "eventfd",
	.type = EVENTFD_ENTRY,
	.msg = &eventfd_entry__descriptor,
	.size = sizeof(struct eventfd_obj),
	.msg_off = offsetof(struct eventfd_obj, e),
	.id_off = offsetof(EventfdEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = eventfd_claim,
	.key = eventfd_key,
	.collect = eventfd_collect,
	.invalid = eventfd_invalid,
	.open = eventfd_open,
};

static int eventfd_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &eventfd_file);
}

static int eventfd_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &eventfd_file);
}

static const ProtobufCMessageDescriptor *eventfd_descriptor(uint32_t sub)
{
	return sub == REC_SUB(EVENTFD_ENTRY) ? &eventfd_entry__descriptor : NULL;
}

const struct kind_ops eventfd_ops = {
	.file = &eventfd_file,
	.dump = eventfd_dump,
	.load = fdobj_load,
	.prepare = eventfd_prepare,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = eventfd_descriptor,
};
