/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Eventfds. One object per open file description (an eventfd cannot be
 * opened again, so the description is the eventfd): the counter and
 * EFD_SEMAPHORE from /proc/PID/fdinfo ("eventfd-count:" in hex,
 * "eventfd-semaphore:"), O_NONBLOCK from fdtable. fds that share one (dup,
 * fork) are found with kcmp(KCMP_FILE); "eventfd-id:" is only the key.
 *
 * At restart ckpt makes the eventfd itself, eventfd(count, flags) (a count
 * above UINT_MAX is written in), and fdtable passes it on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "eventfd.pb-c.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "util/cleanup.h"

enum { EVENTFD_ENTRY = REC_TYPE(KID_eventfd, 1) };
#define EVENTFD_MAX_COUNT (UINT64_MAX - 1)

struct eventfd_obj {
	EventfdEntry e;
	pid_t pid; /* a task holding it, and its fd, for kcmp */
	int fd;
};

struct eventfd_robj {
	EventfdEntry *e;
	int fd; /* ckpt's eventfd */
};

static bool eventfd_fd_claim(const struct fd_info *fi)
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

static int eventfd_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			      uint32_t *ret_id)
{
	_cleanup_free_ char *text = NULL;
	char name[32];
	uint64_t count, key;
	bool sem;
	struct obj *o;

	snprintf(name, sizeof(name), "fdinfo/%d", fi->fd);
	int r = proc_read(t->pid, name, &text, NULL);
	if (r >= 0)
		r = parse(text, &count, &sem, &key);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (eventfd): cannot read its fdinfo",
				t->pid, fi->fd);
	for (o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_eventfd, key));) {
		struct eventfd_obj *e = o->ptr;
		if (syscall(SYS_kcmp, e->pid, t->pid, KCMP_FILE, e->fd, fi->fd) == 0) {
			*ret_id = o->id;
			return 0;
		}
	}
	struct eventfd_obj *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	eventfd_entry__init(&e->e);
	e->e.count = count;
	e->e.semaphore = sem;
	e->e.flags = fi->fi.flags & O_NONBLOCK;
	e->pid = t->pid;
	e->fd = fi->fd;
	r = objhash_add(&ctx->objs, KIND_eventfd, key, 0, e, &o);
	if (r < 0) {
		free(e);
		return r;
	}
	e->e.id = o->id;
	*ret_id = o->id;
	return 0;
}

static int eventfd_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, KIND_eventfd, EVENTFD_ENTRY, offsetof(struct eventfd_obj, e));
}

/* --- restart --------------------------------------------------------- */

static void eventfd_free_robj(void *ptr);

static int eventfd_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != EVENTFD_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown eventfd subtype",
				rec->index);
	struct eventfd_robj *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fd = -1;
	e->e = rctx_unpack(ctx, rec, &eventfd_entry__descriptor);
	if (!e->e || e->e->count > EVENTFD_MAX_COUNT || (e->e->flags & ~(uint32_t)O_NONBLOCK)) {
		if (e->e)
			eventfd_entry__free_unpacked(e->e, NULL);
		free(e);
		return log_fail(&ctx->log, -EINVAL, "record %u: eventfd entry is not valid",
				rec->index);
	}
	return fdobj_register(ctx, rec, KIND_eventfd, e->e->id, e, eventfd_free_robj);
}

static int make(struct rst_ctx *ctx, struct eventfd_robj *e)
{
	const EventfdEntry *m = e->e;
	bool big = m->count > UINT_MAX;
	int flags = EFD_CLOEXEC | (m->semaphore ? EFD_SEMAPHORE : 0) | (int)m->flags;

	e->fd = eventfd(big ? 0 : (unsigned int)m->count, flags);
	if (e->fd < 0)
		return log_fail(&ctx->log, -errno, "eventfd %u: cannot make it: %s", m->id,
				strerror(errno));
	/* on an empty counter a write of up to UINT64_MAX - 1 never blocks */
	if (big && write(e->fd, &m->count, sizeof(m->count)) != sizeof(m->count))
		return log_fail(&ctx->log, -errno,
				"eventfd %u: cannot set its count to %" PRIu64 ": %s", m->id,
				m->count, strerror(errno));
	return 0;
}

static int eventfd_prepare(struct rst_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_eventfd, o));) {
		int r = make(ctx, o->ptr);
		if (r < 0)
			return r;
	}
	return 0;
}

static int eventfd_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct eventfd_robj *p = robj;
	return fdobj_fd(ctx, p->fd, "eventfd", p->e->id, ret_fd);
}

static void eventfd_free_robj(void *ptr)
{
	struct eventfd_robj *e = ptr;
	if (!e)
		return;
	if (e->fd >= 0)
		close(e->fd);
	if (e->e)
		eventfd_entry__free_unpacked(e->e, NULL);
	free(e);
}

static const ProtobufCMessageDescriptor *eventfd_descriptor(uint32_t sub)
{
	return sub == REC_SUB(EVENTFD_ENTRY) ? &eventfd_entry__descriptor : NULL;
}

const struct kind_ops eventfd_ops = {
    .fd_claim = eventfd_fd_claim,
    .fd_collect = eventfd_fd_collect,
    .fd_get = eventfd_fd_get,
    .dump = eventfd_dump,
    .load = eventfd_load,
    .prepare = eventfd_prepare,
    .free_obj = free,
    .free_robj = eventfd_free_robj,
    .descriptor = eventfd_descriptor,
};
