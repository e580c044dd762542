/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * epoll instances. An epoll instance is an open file description (shared
 * between fds as kcmp says) holding watches; the kernel keys each watch by
 * (open file, fd number) and lists it in the epoll fd's fdinfo as
 * "tfd: N events: X data: Y". A watch is saved as that fd number, its
 * events (EPOLLET, EPOLLONESHOT, EPOLLEXCLUSIVE, EPOLLWAKEUP included) and
 * data, and the objref of the open file the task holds at fd N, which
 * kcmp(KCMP_EPOLL_TFD) shows to be the watched file. A watch whose file
 * has left fd N (closed there, or another file opened there since) is
 * *stale*: its file is found at another fd of a task of the image (kcmp
 * again) and saved by that objref; a file open only outside the image (or
 * only through a mapping) is refused. The instance
 * names the task whose fds it watches by its pid in the image (in a
 * container, the pid inside: vpid), as every record does.
 *
 * Restart: the instance is made on ckpt's side (epoll_create1, in prepare)
 * and put in place by fdtable like any file. The watches cannot be added
 * there: they must be keyed by the fd numbers the task uses (it will
 * EPOLL_CTL_MOD and DEL by them), so they are added by an epoll_ctl
 * injected in the task, in the restore step, which kinds.def runs after
 * fdtable's. An epoll watched by another gets its own watches first. A
 * stale watch's file is put at fd N for the time of its add (what holds N
 * now moved aside and back, with its close-on-exec flag), then N is as it
 * was: the kernel keys the watch by (file, N) whatever N holds later.
 *
 * What is exact and what is not:
 * - Level-triggered readiness comes from the restored target (a pipe with
 *   data is readable again). An edge-triggered watch whose target is ready
 *   reports one edge after restart even if the task had taken it already:
 *   epoll's ready list cannot be read without consuming it.
 * - A fired EPOLLONESHOT watch (disarmed: no event bits left) is added
 *   armed for what its target is ready for and fired once by an epoll_wait
 *   on ckpt's side, before the instance's other watches, so it ends
 *   disarmed as it was. Its target must be ready for something; if it is
 *   not at checkpoint, the checkpoint is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/kcmp.h> /* KCMP_EPOLL_TFD */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "epoll.pb-c.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "util/cleanup.h"

enum { EPOLL_ENTRY = REC_TYPE(KID_epoll, 1) };

#define EPOLL_MAX_WATCHES (1u << 20)
#define EPOLL_MAX_FD	  (1u << 20)
#define EPOLL_MAX_DEPTH	  8 /* the kernel allows 4 levels of nesting */
/* the bits epoll keeps for itself: all that is left of a fired ONESHOT watch */
#define EP_PRIVATE (EPOLLWAKEUP | EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE)
#define EP_POLL                                                                                    \
	(EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDNORM | EPOLLRDBAND |         \
	 EPOLLWRNORM | EPOLLWRBAND | EPOLLMSG | EPOLLRDHUP)
#define EP_KNOWN (EP_POLL | EP_PRIVATE)

static bool disarmed(uint32_t events)
{
	return !(events & ~(uint32_t)EP_PRIVATE);
}

/* checkpoint: one instance */
struct epoll_obj {
	struct fdobj f; /* the task it was found in, and its fd there */
	EpollEntry e;
	EpollWatch *w;
	EpollWatch **pw;
	size_t cap;
};

/* restart: one instance */
struct epoll_robj {
	struct fdobj_r r;	/* r.fd: ckpt's instance */
	int efd;		/* its fd number in the owner */
	struct rst_task *owner; /* the task whose fds the watches name */
	bool done;		/* watches added */
	int mark;		/* prepare: loop check */
};

static const EpollEntry *ent(const struct epoll_robj *p)
{
	return p->r.msg;
}

static bool epoll_claim(const struct fd_info *fi)
{
	return !strcmp(fi->path, "anon_inode:[eventpoll]");
}

static int add_watch_line(struct epoll_obj *p, const char *line)
{
	int tfd;
	uint32_t events;
	uint64_t data;

	if (sscanf(line, "tfd: %d events: %" SCNx32 " data: %" SCNx64, &tfd, &events, &data) != 3 ||
	    tfd < 0)
		return -EINVAL;
	if (p->e.n_watches == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 8;
		EpollWatch *nw = realloc(p->w, cap * sizeof(*nw));
		if (!nw)
			return -ENOMEM;
		p->w = nw;
		p->cap = cap;
	}
	EpollWatch *w = &p->w[p->e.n_watches++];
	epoll_watch__init(w);
	w->tfd = (uint32_t)tfd;
	w->events = events;
	w->data = data;
	return 0;
}

/* Is the file the task holds at fd ready for anything? (poll on a copy) */
static int ready_now(struct task *t, int fd)
{
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fd);
	if (copy < 0)
		return copy;
	struct pollfd pfd = {.fd = copy, .events = EP_POLL & ~(EPOLLERR | EPOLLHUP)};
	return poll(&pfd, 1, 0) < 0 ? -errno : (pfd.revents & ~POLLNVAL) != 0;
}

/* The watch at index i is of the file the task still holds at its fd. */
static int check_watch(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		       struct epoll_obj *p, size_t i)
{
	EpollWatch *w = &p->w[i];
	struct kcmp_epoll_slot slot = {.efd = (uint32_t)fi->fd, .tfd = w->tfd};
	for (size_t j = 0; j < i; j++)
		slot.toff += p->w[j].tfd == w->tfd;
	long r = syscall(SYS_kcmp, t->pid, t->pid, KCMP_EPOLL_TFD, (int)w->tfd, &slot);
	if (r < 0 && errno != EBADF)
		return log_fail(&ctx->log, errno == ENOSYS ? -EOPNOTSUPP : -errno,
				"pid %d fd %d (epoll): kcmp(KCMP_EPOLL_TFD) of fd %u: %s", t->pid,
				fi->fd, w->tfd, strerror(errno));
	/* closed at tfd, or another file there: found elsewhere in collect_end */
	p->w[i].has_stale = true;
	p->w[i].stale = r != 0;
	if (w->events & ~(uint32_t)EP_KNOWN)
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d fd %d (epoll): the watch of fd %u has unknown event bits %#x", t->pid,
		    fi->fd, w->tfd, w->events & ~(uint32_t)EP_KNOWN);
	if (disarmed(w->events) && w->stale)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (epoll): the fired EPOLLONESHOT watch of fd %u, whose "
				"file has left that fd; not supported",
				t->pid, fi->fd, w->tfd);
	if (disarmed(w->events)) {
		int ready = ready_now(t, (int)w->tfd);
		if (ready <= 0)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d fd %d (epoll): the fired EPOLLONESHOT watch of fd "
			    "%u: that file is not ready for any event, so restart could "
			    "not leave the watch disarmed; not supported",
			    t->pid, fi->fd, w->tfd);
	}
	return 0;
}

static int read_watches(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			struct epoll_obj *p)
{
	_cleanup_free_ char *text = NULL;
	char name[32];
	int r;

	snprintf(name, sizeof(name), "fdinfo/%d", fi->fd);
	r = proc_read(t->pid, name, &text, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (epoll): cannot read its fdinfo: %s",
				t->pid, fi->fd, strerror(-r));
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "tfd:", 4))
			continue;
		r = add_watch_line(p, line);
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d fd %d (epoll): cannot parse '%s'",
					t->pid, fi->fd, line);
		if (p->e.n_watches > EPOLL_MAX_WATCHES)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (epoll): more than %u watches", t->pid,
					fi->fd, EPOLL_MAX_WATCHES);
	}
	for (size_t i = 0; i < p->e.n_watches; i++) {
		r = check_watch(ctx, t, fi, p, i);
		if (r < 0)
			return r;
	}
	return 0;
}

static void epoll_free(void *ptr)
{
	struct epoll_obj *p = ptr;
	free(p->w);
	free(p->pw);
}

static int epoll_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			 void *obj)
{
	struct epoll_obj *p = obj;
	/* the image names tasks by their pids in the container (vpid) */
	p->e.pid = (uint32_t)t->vpid;
	p->e.flags = fi->fi.flags & O_NONBLOCK;
	int r = read_watches(ctx, t, fi, p);
	if (r >= 0 && p->e.n_watches && !(p->pw = calloc(p->e.n_watches, sizeof(*p->pw))))
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < p->e.n_watches; i++)
		p->pw[i] = &p->w[i];
	p->e.watches = p->pw;
	return r;
}

struct stale_key {
	pid_t pid;
	struct kcmp_epoll_slot slot;
};

static bool is_watched(pid_t pid, int fd, void *arg)
{
	struct stale_key *k = arg;
	return syscall(SYS_kcmp, pid, k->pid, KCMP_EPOLL_TFD, fd, &k->slot) == 0;
}

/* A stale watch's file, at whichever fd of the image holds it. */
static int find_stale(struct ckpt_ctx *ctx, struct epoll_obj *p, size_t i)
{
	EpollWatch *w = &p->w[i];
	struct stale_key k = { .pid = p->f.pid, .slot = { .efd = (uint32_t)p->f.fd, .tfd = w->tfd } };
	for (size_t j = 0; j < i; j++)
		k.slot.toff += p->w[j].tfd == w->tfd;
	if (fdtable_find_file(ctx, is_watched, &k, &w->target_id) == 0)
		return 0;
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d fd %d (epoll): the file watched as fd %u has left that fd and is "
			"open at no fd of the image (only outside it, or through a mapping); "
			"not supported",
			p->f.pid, p->f.fd, w->tfd);
}

/* Every task's fds are known now: name each watch's file by its objref. */
static int epoll_collect_end(struct ckpt_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_epoll, o));) {
		struct epoll_obj *p = o->ptr;
		struct task *t = NULL;
		for (size_t i = 0; i < ctx->ntasks; i++)
			if (ctx->tasks[i].pid == p->f.pid)
				t = &ctx->tasks[i];
		for (size_t i = 0; t && i < p->e.n_watches; i++) {
			EpollWatch *w = &p->w[i];
			if (w->stale) {
				int r = find_stale(ctx, p, i);
				if (r < 0)
					return r;
				continue;
			}
			if (fdtable_file_id(t, (int)w->tfd, &w->target_id) < 0)
				return log_fail(&ctx->log, -EOPNOTSUPP,
						"pid %d fd %d (epoll): watches fd %u, which is not "
						"in its fd table",
						p->f.pid, p->f.fd, w->tfd);
		}
		if (!t)
			return -ESRCH;
	}
	return 0;
}

/* Writes p, after the epoll instances it watches. */
static int dump_one(struct ckpt_ctx *ctx, struct obj *o, int depth)
{
	struct epoll_obj *p = o->ptr;
	if (o->dumped)
		return 0;
	if (depth > EPOLL_MAX_DEPTH)
		return log_fail(&ctx->log, -ELOOP, "pid %d fd %d (epoll): nested too deep", p->f.pid,
				p->f.fd);
	for (size_t i = 0; i < p->e.n_watches; i++) {
		struct obj *to;
		if (objhash_get(&ctx->objs, p->w[i].target_id, KIND_epoll, &to) == 0) {
			int r = dump_one(ctx, to, depth + 1);
			if (r < 0)
				return r;
		}
	}
	int r = ctx_write_msg(ctx, EPOLL_ENTRY, &p->e.base);
	if (r < 0)
		return r;
	o->dumped = true;
	return 0;
}

/* After fdtable's record: the instances whose watches name t's fds. */
static int epoll_dump(struct ckpt_ctx *ctx, struct task *t)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_epoll, o));) {
		if (((struct epoll_obj *)o->ptr)->f.pid != t->pid)
			continue;
		int r = dump_one(ctx, o, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- restart --------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static struct rst_task *task_of(struct rst_ctx *ctx, uint32_t pid)
{
	for (size_t i = 0; i < ctx->ntasks; i++)
		if ((uint32_t)ctx->tasks[i].pid == pid)
			return &ctx->tasks[i];
	return NULL;
}

/* Why the entry is not valid, or NULL. */
static const char *epoll_invalid(struct rst_ctx *ctx, const void *msg)
{
	const EpollEntry *e = msg;
	if (e->flags & ~(uint32_t)O_NONBLOCK)
		return "unknown flags";
	if (!task_of(ctx, e->pid))
		return "its pid is not in the tree";
	if (e->n_watches > EPOLL_MAX_WATCHES)
		return "too many watches";
	for (size_t i = 0; i < e->n_watches; i++) {
		const EpollWatch *w = e->watches[i];
		if (w->tfd >= EPOLL_MAX_FD)
			return "a watched fd is out of range";
		if (w->events & ~(uint32_t)EP_KNOWN)
			return "a watch has unknown event bits";
		if (disarmed(w->events) && !(w->events & EPOLLONESHOT))
			return "a watch has no events and is not EPOLLONESHOT";
		if ((w->events & EPOLLEXCLUSIVE) && (w->events & EPOLLONESHOT))
			return "a watch is both EPOLLEXCLUSIVE and EPOLLONESHOT";
		if (!w->target_id || w->target_id == e->id)
			return "a watch names no file or the instance itself";
	}
	/* a watch is keyed by (file, fd): one fd may key a live watch and
	 * stale ones of other files, never one file twice */
	_cleanup_free_ uint64_t *keys = malloc((e->n_watches + 1) * sizeof(*keys));
	if (!keys)
		return "out of memory";
	for (size_t i = 0; i < e->n_watches; i++)
		keys[i] = (uint64_t)e->watches[i]->tfd << 32 | e->watches[i]->target_id;
	qsort(keys, e->n_watches, sizeof(*keys), cmp_u64);
	for (size_t i = 1; i < e->n_watches; i++)
		if (keys[i] == keys[i - 1])
			return "two watches of one file at one fd";
	return NULL;
}

/* The epoll instances p watches do not watch p back, at any depth (a
 * depth-first walk: 1 on the path, 2 checked). */
static int check_nesting(struct rst_ctx *ctx, struct epoll_robj *p, int depth)
{
	if (p->mark == 2)
		return 0;
	if (p->mark == 1 || depth > EPOLL_MAX_DEPTH)
		return log_fail(&ctx->log, -EINVAL,
				"image: epoll %u: watches nest too deep or in a loop", ent(p)->id);
	p->mark = 1;
	for (size_t i = 0; i < ent(p)->n_watches; i++) {
		struct obj *to;
		if (objhash_get(&ctx->objs, ent(p)->watches[i]->target_id, KIND_epoll, &to) < 0)
			continue;
		int r = check_nesting(ctx, to->ptr, depth + 1);
		if (r < 0)
			return r;
	}
	p->mark = 2;
	return 0;
}

/* Each watch's fd holds its file in the owner's fd table, as saved. */
static int check_owner(struct rst_ctx *ctx, struct epoll_robj *p)
{
	const EpollEntry *e = ent(p);
	p->owner = task_of(ctx, e->pid);
	if (!p->owner || fdtable_rst_fd_of(p->owner, e->id, &p->efd) < 0)
		return log_fail(&ctx->log, -EINVAL, "image: epoll %u is not in pid %u's fd table",
				e->id, e->pid);
	for (size_t i = 0; i < e->n_watches; i++) {
		const EpollWatch *w = e->watches[i];
		uint32_t id;
		if (w->stale)
			continue;
		if (fdtable_rst_file_id(p->owner, (int)w->tfd, &id) < 0 || id != w->target_id)
			return log_fail(&ctx->log, -EINVAL,
					"image: epoll %u watches fd %u of pid %u as open file %u, "
					"which its fd table does not hold there",
					e->id, w->tfd, e->pid, w->target_id);
	}
	return check_nesting(ctx, p, 0);
}

static int epoll_open(struct rst_ctx *ctx, void *obj)
{
	struct epoll_robj *p = obj;
	int r = check_owner(ctx, p);
	if (r < 0)
		return r;
	p->r.fd = epoll_create1(EPOLL_CLOEXEC);
	if (p->r.fd < 0)
		return log_fail(&ctx->log, -errno, "cannot make an epoll instance: %s",
				strerror(errno));
	if ((ent(p)->flags & O_NONBLOCK) && fcntl(p->r.fd, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static const struct fdobj_ops epoll_file = {
	.kind = KIND_epoll,
	.name = "epoll",
	.type = EPOLL_ENTRY,
	.msg = &epoll_entry__descriptor,
	.size = sizeof(struct epoll_obj),
	.msg_off = offsetof(struct epoll_obj, e),
	.id_off = offsetof(EpollEntry, id),
	.rsize = sizeof(struct epoll_robj),
	.claim = epoll_claim,
	.collect = epoll_collect,
	.free = epoll_free,
	.invalid = epoll_invalid,
	.open = epoll_open,
};

static int epoll_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &epoll_file);
}

static int add_watch(struct rst_ctx *ctx, struct rst_task *t, struct epoll_robj *p,
		     const EpollWatch *w, uint32_t events);

/*
 * A stale watch: its file is passed in and put at fd tfd for the add;
 * whatever tfd holds now is moved aside first and put back after (with
 * its close-on-exec flag), or tfd is closed again.
 */
static int add_stale(struct rst_ctx *ctx, struct rst_task *t, struct epoll_robj *p,
		     const EpollWatch *w)
{
	struct puppet *pp = &t->pup;
	int lfd, r = fdtable_local_fd(ctx, w->target_id, &lfd);
	if (r < 0)
		return r;
	long held = puppet_syscall(pp, SYS_fcntl, w->tfd, F_GETFD);
	long aside = held < 0 ? -1 : puppet_syscall(pp, SYS_fcntl, w->tfd, F_DUPFD_CLOEXEC, 0);
	int rfd = aside >= -1 ? puppet_send_fd(pp, ctx->ctl[0], ctx->ctl_remote, lfd) : -EBADF;
	long e = rfd < 0 ? rfd : puppet_syscall(pp, SYS_dup3, rfd, w->tfd, 0);
	if (rfd >= 0)
		puppet_syscall(pp, SYS_close, rfd);
	r = e < 0 ? (int)e : add_watch(ctx, t, p, w, w->events);
	/* tfd as it was */
	if (aside >= 0) {
		e = puppet_syscall(pp, SYS_dup3, aside, w->tfd, (held & FD_CLOEXEC) ? O_CLOEXEC : 0);
		puppet_syscall(pp, SYS_close, aside);
	} else
		e = puppet_syscall(pp, SYS_close, w->tfd);
	if (r >= 0 && e < 0)
		r = (int)e;
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (epoll): cannot add the watch of fd %u "
				"(its file has left that fd): %s", t->pid, p->efd, w->tfd,
				strerror(-r));
	return 0;
}

static int add_watch(struct rst_ctx *ctx, struct rst_task *t, struct epoll_robj *p,
		     const EpollWatch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = w->data};
	uint64_t addr = puppet_scratch_put(&t->pup, 0, &ev, sizeof(ev));
	long r = addr ? puppet_syscall(&t->pup, SYS_epoll_ctl, p->efd, EPOLL_CTL_ADD, w->tfd, addr)
		      : -EFAULT;
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"pid %d fd %d (epoll): cannot add the watch of fd %u: %s", t->pid,
				p->efd, w->tfd, strerror((int)-r));
	return 0;
}

/* A fired ONESHOT watch: added armed for what its file is ready for, then
 * fired by an epoll_wait on ckpt's side (the instance holds nothing else yet). */
static int add_disarmed(struct rst_ctx *ctx, struct rst_task *t, struct epoll_robj *p,
			const EpollWatch *w)
{
	int lfd, r = fdtable_local_fd(ctx, w->target_id, &lfd);
	if (r < 0)
		return r;
	struct pollfd pfd = {.fd = lfd, .events = EP_POLL & ~(EPOLLERR | EPOLLHUP)};
	if (poll(&pfd, 1, 0) < 0)
		return -errno;
	uint32_t ready = (uint32_t)pfd.revents & EP_POLL;
	if (ready) {
		r = add_watch(ctx, t, p, w, w->events | ready);
		if (r < 0)
			return r;
	}
	struct epoll_event got;
	int n = ready ? epoll_wait(p->r.fd, &got, 1, 0) : 0;
	if (n != 1 || got.data.u64 != w->data)
		return log_fail(
		    &ctx->log, -EIO,
		    "pid %d fd %d (epoll): cannot leave the fired EPOLLONESHOT watch of "
		    "fd %u disarmed: that file is not ready for any event",
		    t->pid, p->efd, w->tfd);
	return 0;
}

/* Adds p's watches, after those of the instances of t it watches. */
static int add_all(struct rst_ctx *ctx, struct rst_task *t, struct epoll_robj *p, int depth)
{
	const EpollEntry *e = ent(p);
	int r;

	if (p->done)
		return 0;
	if (depth > EPOLL_MAX_DEPTH)
		return -ELOOP;
	for (size_t i = 0; i < e->n_watches; i++) {
		struct obj *to;
		if (objhash_get(&ctx->objs, e->watches[i]->target_id, KIND_epoll, &to) == 0 &&
		    ((struct epoll_robj *)to->ptr)->owner == t &&
		    (r = add_all(ctx, t, to->ptr, depth + 1)) < 0)
			return r;
	}
	/* fired ONESHOT watches first, while nothing else can be ready */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < e->n_watches; i++) {
			const EpollWatch *w = e->watches[i];
			if (disarmed(w->events) != (pass == 0))
				continue;
			r = pass == 0  ? add_disarmed(ctx, t, p, w)
			    : w->stale ? add_stale(ctx, t, p, w)
				       : add_watch(ctx, t, p, w, w->events);
			if (r < 0)
				return r;
		}
	}
	p->done = true;
	return 0;
}

static int epoll_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_epoll, o));) {
		if (((struct epoll_robj *)o->ptr)->owner != t)
			continue;
		int r = add_all(ctx, t, o->ptr, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

static const ProtobufCMessageDescriptor *epoll_descriptor(uint32_t sub)
{
	return sub == REC_SUB(EPOLL_ENTRY) ? &epoll_entry__descriptor : NULL;
}

const struct kind_ops epoll_ops = {
	.file = &epoll_file,
	.collect_end = epoll_collect_end,
	.dump = epoll_dump,
	.load = fdobj_load,
	.prepare = epoll_prepare,
	.restore = epoll_restore,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = epoll_descriptor,
};
