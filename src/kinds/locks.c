/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * File locks: flock() locks and OFD locks (F_OFD_SETLK), owned by an open
 * file, and POSIX record locks (F_SETLK), owned by a process (its fd
 * table) and taken through one of its open files.
 *
 * Checkpoint (collect_end, once every task's fd table is known):
 * - Each fd's /proc/PID/fdinfo lists, as "lock:" lines, the locks of that
 *   open file: its flock and OFD locks, and the POSIX locks the task took
 *   through it (the lines fdtable kept when it read the fdinfo, with the
 *   inode of the fd: fdtable_seen; a table fdtable did not walk is read
 *   from /proc). A lock is saved once, with the fd it is taken through
 *   again: an open file's lock (seen at every fd of that file, in every
 *   task) by the task whose pid the kernel recorded when it was taken, if
 *   that task holds the file, else by the first holder; a POSIX lock by
 *   the process that took it (it may share the fd table).
 * - /proc/locks lists every lock of the system. Each of its lines on an
 *   inode some fd of the image has open must be one of the image's locks;
 *   any other is held by a process outside the image (or by an open file
 *   no fd of the image holds, such as a mapping) and the checkpoint is
 *   refused, naming an fd of that file. So is a blocked request ("->")
 *   on such an inode, a task of the image stopped while waiting in
 *   F_SETLKW, F_OFD_SETLKW or a blocking flock() (the kernel dropped its
 *   request when ckpt stopped it; it would wait again), a lease being
 *   broken, and a delegation. An active read or write lease (F_SETLEASE)
 *   is the open file's, like a flock lock.
 *   Inodes are compared as /proc/locks prints them (major:minor:inode of
 *   the superblock) with each fd's stat; a file system whose stat reports
 *   another device (btrfs subvolumes) is matched only by the image's own
 *   locks.
 *
 * Restart: the kind comes after fdtable in kinds.def, so each task takes
 * its locks again once its fds are in place, by an injected flock(LOCK_NB)
 * or fcntl(F_SETLK / F_OFD_SETLK) with the same type and byte range, or
 * fcntl(F_SETLEASE), which makes the caller the file's signal owner: the
 * owner the fdtable kind restored is read before and set again after. An
 * open file's lock is taken once, through the fd of the task that holds
 * it; a POSIX lock by its owner, so F_GETLK reports the same pid. A lock
 * that conflicts with one held meanwhile (the original still running, or
 * another process) fails the restart, naming the task, the fd and the
 * range.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "locks.pb-c.h"
#include "util/cleanup.h"

enum { LOCKS_ENTRY = REC_TYPE(KID_locks, 1) };
enum { LK_FLOCK = 1, LK_POSIX = 2, LK_OFD = 3, LK_LEASE = 4 };
#define LOCKS_MAX    (1u << 16) /* per task */
#define LOCKS_MAX_FD (1u << 20)
#define OFFSET_MAX_K INT64_MAX

/* the kernel's restart codes, as a task stopped inside a call shows them */
#define ERESTARTSYS_K		512
#define ERESTARTNOINTR_K	513
#define ERESTARTNOHAND_K	514
#define ERESTART_RESTARTBLOCK_K 516
#ifndef F_OFD_SETLK
#define F_OFD_GETLK  36
#define F_OFD_SETLK  37
#define F_OFD_SETLKW 38
#endif

/* One line of /proc/locks or one "lock:" of an fdinfo. */
struct lock_line {
	bool blocked;	      /* "->": a request waiting for the lock above it */
	char cls[16];	      /* FLOCK, POSIX, OFDLCK; LEASE, DELEG, ACCESS... */
	char mode[16];	      /* ADVISORY; MANDATORY; for leases ACTIVE, BREAKING... */
	char type[8];	      /* READ, WRITE, UNLCK */
	long pid;	      /* who took it (-1 for OFD locks), in ckpt's pid namespace */
	char dev[48];	      /* major:minor:inode, in hex:hex:decimal */
	long long start, end; /* end -1: EOF */
};

/* A lock of the image: where it was seen, where it is taken again. */
struct held {
	struct task *t; /* the task it is restored in */
	int fd;
	uint32_t file_id;
	struct lock_line l;
	bool matched; /* found in /proc/locks */
};

/* An inode an fd of the image has open. */
struct used {
	char dev[48];
	pid_t pid;
	int fd;
};

struct scan {
	struct held *h;
	size_t nh, caph;
	struct used *u;
	size_t nu, capu;
};

struct locks_ckpt {
	LocksEntry e;
	LockEntry *l;
	LockEntry **pl;
	size_t cap;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *np = realloc(*p, ncap * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* "ID: [->] CLASS MODE TYPE PID MAJ:MIN:INO START END" */
static int parse_line(const char *s, struct lock_line *l)
{
	char end[32], *e;

	memset(l, 0, sizeof(*l));
	const char *p = strchr(s, ':');
	if (!p)
		return -EINVAL;
	for (p++; *p == ' ' || *p == '\t'; p++)
		;
	if (!strncmp(p, "->", 2)) {
		l->blocked = true;
		p += 2;
	}
	if (sscanf(p, "%15s %15s %7s %ld %47s %lld %31s", l->cls, l->mode, l->type, &l->pid, l->dev,
		   &l->start, end) != 7)
		return -EINVAL;
	if (!strcmp(end, "EOF")) {
		l->end = -1;
		return 0;
	}
	errno = 0;
	l->end = strtoll(end, &e, 10);
	return errno || *e || l->end < l->start ? -EINVAL : 0;
}

static bool same_lock(const struct lock_line *a, const struct lock_line *b)
{
	return !strcmp(a->cls, b->cls) && !strcmp(a->mode, b->mode) && !strcmp(a->type, b->type) &&
	       a->pid == b->pid && !strcmp(a->dev, b->dev) && a->start == b->start &&
	       a->end == b->end;
}

static int lock_class(const struct lock_line *l)
{
	if (!strcmp(l->cls, "FLOCK"))
		return LK_FLOCK;
	if (!strcmp(l->cls, "POSIX"))
		return LK_POSIX;
	if (!strcmp(l->cls, "LEASE"))
		return LK_LEASE;
	return !strcmp(l->cls, "OFDLCK") ? LK_OFD : 0;
}

/* "bytes 10-14", "bytes 0-EOF" or "the whole file" (flock), for messages */
static const char *range(const struct lock_line *l, char *buf, size_t len)
{
	if (lock_class(l) == LK_FLOCK)
		return "the whole file";
	if (l->end < 0)
		snprintf(buf, len, "bytes %lld-EOF", l->start);
	else
		snprintf(buf, len, "bytes %lld-%lld", l->start, l->end);
	return buf;
}

static struct task *find_task(struct ckpt_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (ctx->tasks[i].pid == pid)
			return &ctx->tasks[i];
	return NULL;
}

/* The task that holds t's fd table (t itself unless CLONE_FILES). */
static struct task *table_of(struct ckpt_ctx *ctx, struct task *t)
{
	for (int depth = 0; t && t->files_with && depth < 64; depth++)
		t = find_task(ctx, t->files_with);
	return t;
}

/* The fd of a blocking lock call the task was stopped in, or -1. */
static int blocked_in_lock(const struct task *t, const char **ret_call)
{
	const struct user_regs_struct *r = &t->pup.regs0;
	long rax = (long)r->rax;
	if (rax != -ERESTARTSYS_K && rax != -ERESTARTNOINTR_K && rax != -ERESTARTNOHAND_K &&
	    rax != -ERESTART_RESTARTBLOCK_K)
		return -1;
	if ((long)r->orig_rax == SYS_fcntl && (r->rsi == F_SETLKW || r->rsi == F_OFD_SETLKW)) {
		*ret_call = r->rsi == F_SETLKW ? "fcntl(F_SETLKW)" : "fcntl(F_OFD_SETLKW)";
		return (int)r->rdi;
	}
	if ((long)r->orig_rax == SYS_flock && !(r->rsi & LOCK_NB)) {
		*ret_call = "flock()";
		return (int)r->rdi;
	}
	return -1;
}

static int check_blocked(struct ckpt_ctx *ctx, struct task *t)
{
	const char *call = NULL;
	for (size_t i = 0; i <= t->nthreads; i++) {
		struct task *th = i ? &t->threads[i - 1] : t;
		int fd = th->pup.held ? blocked_in_lock(th, &call) : -1;
		if (fd >= 0)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (lock): %s %d is waiting in %s for a lock on "
					"it; a blocked lock request is not supported",
					t->pid, fd, th->leader ? "thread" : "pid", th->pid, call);
	}
	return 0;
}

/* One lock seen at fd of t (the task whose fd table it is). */
static int add_held(struct ckpt_ctx *ctx, struct scan *s, struct task *t, int fd,
		    const struct lock_line *l)
{
	uint32_t file_id;
	if (fdtable_file_id(t, fd, &file_id) < 0)
		return log_fail(&ctx->log, -EAGAIN,
				"pid %d fd %d (lock): the fd is not in its fd "
				"table; it changed meanwhile",
				t->pid, fd);
	struct held *h = NULL;
	for (size_t i = 0; i < s->nh && !h; i++)
		if (s->h[i].file_id == file_id && same_lock(&s->h[i].l, l))
			h = &s->h[i];
	if (!h) {
		if (grow((void **)&s->h, &s->caph, s->nh, sizeof(*s->h)) < 0)
			return -ENOMEM;
		h = &s->h[s->nh++];
		*h = (struct held){.t = t, .fd = fd, .file_id = file_id, .l = *l};
	}
	/* taken again by the task the kernel says took it, when it can */
	struct task *by = l->pid > 0 ? find_task(ctx, (pid_t)l->pid) : NULL;
	if (by && !by->zombie && h->t->pid != by->pid && table_of(ctx, by) == t) {
		h->t = by;
		h->fd = fd;
	}
	return 0;
}

static int check_line(struct ckpt_ctx *ctx, struct task *t, int fd, const struct lock_line *l)
{
	if (!lock_class(l))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (lock): holds a %s (a delegation?); not supported",
				t->pid, fd, l->cls);
	if (lock_class(l) == LK_LEASE && strcmp(l->mode, "ACTIVE"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (lock): a %s lease (%s): a lease being broken or "
				"given up is not supported; retry once its break is over",
				t->pid, fd, l->type, l->mode);
	if (lock_class(l) == LK_LEASE && strcmp(l->type, "READ") && strcmp(l->type, "WRITE"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (lock): a %s lease; only read and write leases are "
				"supported",
				t->pid, fd, l->type);
	if (lock_class(l) != LK_LEASE &&
	    (strcmp(l->mode, "ADVISORY") || (strcmp(l->type, "READ") && strcmp(l->type, "WRITE"))))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (lock): a %s %s %s lock; only advisory read and "
				"write locks are supported",
				t->pid, fd, l->mode, l->cls, l->type);
	return 0;
}

/* fd of t, whose open file is inode st_ino of st_dev: recorded, and the
 * locks of text (its fdinfo, or only its "lock:" lines; NULL: none). */
static int scan_text(struct ckpt_ctx *ctx, struct scan *s, struct task *t, int fd, dev_t st_dev,
		     ino_t st_ino, char *text)
{
	int r;
	if (grow((void **)&s->u, &s->capu, s->nu, sizeof(*s->u)) < 0)
		return -ENOMEM;
	struct used *u = &s->u[s->nu++];
	snprintf(u->dev, sizeof(u->dev), "%02x:%02x:%llu", major(st_dev), minor(st_dev),
		 (unsigned long long)st_ino);
	u->pid = t->pid;
	u->fd = fd;
	for (char *line = text, *next; line && *line; line = next) {
		struct lock_line l;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "lock:", 5))
			continue;
		if (parse_line(line + 5, &l) < 0)
			return log_fail(&ctx->log, -EINVAL,
					"pid %d fd %d (lock): cannot parse '%s'", t->pid, fd, line);
		if (l.blocked)
			continue;
		if ((r = check_line(ctx, t, fd, &l)) < 0 || (r = add_held(ctx, s, t, fd, &l)) < 0)
			return r;
		/* the inode as the kernel names it, whatever stat says */
		if (grow((void **)&s->u, &s->capu, s->nu, sizeof(*s->u)) < 0)
			return -ENOMEM;
		s->u[s->nu] = (struct used){.pid = t->pid, .fd = fd};
		snprintf(s->u[s->nu++].dev, sizeof(u->dev), "%s", l.dev);
	}
	return 0;
}

/* fd of t: its inode, and the locks its fdinfo lists. */
static int scan_fd(struct ckpt_ctx *ctx, struct scan *s, struct task *t, int fd)
{
	_cleanup_free_ char *text = NULL;
	char name[64];
	struct stat st;

	snprintf(name, sizeof(name), "/proc/%d/fd/%d", t->pid, fd);
	if (stat(name, &st) < 0)
		return log_fail(&ctx->log, -errno, "pid %d fd %d (lock): cannot stat it: %s",
				t->pid, fd, strerror(errno));
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	int r = proc_read(t->pid, name, &text, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (lock): cannot read its fdinfo: %s",
				t->pid, fd, strerror(-r));
	return scan_text(ctx, s, t, fd, st.st_dev, st.st_ino, text);
}

static int scan_task(struct ckpt_ctx *ctx, struct scan *s, struct task *t)
{
	char path[64];
	int r = 0;
	const struct fdtable_seen *seen;
	size_t nseen;

	/* what fdtable read of each fd (its inode, its fdinfo's locks) */
	if (fdtable_seen(t, &seen, &nseen) == 0) {
		for (size_t i = 0; r >= 0 && i < nseen; i++) {
			_cleanup_free_ char *text = seen[i].locks ? strdup(seen[i].locks) : NULL;
			r = seen[i].locks && !text ? -ENOMEM
						   : scan_text(ctx, s, t, seen[i].fd, seen[i].dev,
							       seen[i].ino, text);
		}
		return r;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", t->pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return log_fail(&ctx->log, -errno, "pid %d: cannot list fds: %s", t->pid,
				strerror(errno));
	for (struct dirent *de; r >= 0 && (de = readdir(d));)
		if (de->d_name[0] != '.')
			r = scan_fd(ctx, s, t, atoi(de->d_name));
	return r;
}

static const struct used *used_inode(const struct scan *s, const char *dev)
{
	for (size_t i = 0; i < s->nu; i++)
		if (!strcmp(s->u[i].dev, dev))
			return &s->u[i];
	return NULL;
}

/* A line of /proc/locks that is not one of the image's own locks. */
static int refuse_other(struct ckpt_ctx *ctx, const struct used *u, const struct lock_line *l)
{
	char buf[64], who[64];
	const char *what = range(l, buf, sizeof(buf));
	bool inside = l->pid > 0 && find_task(ctx, (pid_t)l->pid);

	if (l->pid > 0)
		snprintf(who, sizeof(who), "pid %ld%s", l->pid,
			 inside ? "" : ", outside the image,");
	else
		snprintf(who, sizeof(who), "an open file outside the image");
	if (l->blocked)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (lock): a %s %s lock request of %s waits for a lock "
				"on this file; a blocked lock request is not supported",
				u->pid, u->fd, l->cls, l->type, who);
	if (inside)
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d fd %d (lock): pid %ld holds a %s %s lock on %s of this file "
		    "through an open file no fd of the image holds (a mapping, an fd in "
		    "flight?); not supported",
		    u->pid, u->fd, l->pid, l->cls, l->type, what);
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d fd %d (lock): %s holds a %s %s lock on %s of this file; a lock "
			"held outside the image on a file it uses is not supported",
			u->pid, u->fd, who, l->cls, l->type, what);
}

/*
 * /proc/locks on a thread of its own. The kernel starts each read of it
 * with a write lock on the file locks' per-CPU semaphore, which waits for
 * an RCU grace period (6 to 30 ms here, asleep, whether a lock is held or
 * not) unless another write lock was let go less than a grace period ago.
 * So the thread reads it every WARM_MS from step "before seize" on (a
 * read of an empty /proc/locks: 50 us of CPU; one that takes more than
 * WARM_CPU_NS stops that), and once the tree is frozen
 * ("frozen scan") reads it once more, at once: that read, whose text is
 * used, is after the freeze (an earlier one could match a lock the tree
 * took or dropped meanwhile against an outsider's line). Its text is
 * checked at "dump end", the wait for it beside collect and dump. A lock
 * an outsider takes or drops during it is seen or not, as with a read at
 * collect end.
 */
#define WARM_MS	    2
#define WARM_CPU_NS 1000000l

struct locks_ahead {
	pthread_t thread;
	int efd;                /* written once: the tree is frozen (or the end) */
	_Atomic bool cancel;    /* the checkpoint ended first: no last read */
	char *text;
	int r;
	struct scan s;          /* from collect end to dump end */
};

static void scan_free(struct scan *s)
{
	free(s->h);
	free(s->u);
	*s = (struct scan){ 0 };
}

static void *read_ahead(void *arg)
{
	struct locks_ahead *a = arg;
	struct pollfd pfd = { .fd = a->efd, .events = POLLIN };
	int woken, wait_ms = WARM_MS;
	do {
		_cleanup_free_ char *warm = NULL;
		struct timespec a, b;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
		(void)!proc_read(0, "../locks", &warm, NULL);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
		/* a machine with many locks: the walk of them costs more CPU
		 * than the grace period saves (20,000 locks: 120 ms a read
		 * here); the one read after the freeze only */
		if ((b.tv_sec - a.tv_sec) * 1000000000l + (b.tv_nsec - a.tv_nsec) > WARM_CPU_NS)
			wait_ms = -1;
	} while ((woken = poll(&pfd, 1, wait_ms)) == 0);
	if (atomic_load(&a->cancel))
		a->r = -ECANCELED;
	else /* a poll that failed is no word of the freeze: read at dump end */
		a->r = woken < 0 ? -EAGAIN : proc_read(0, "../locks", &a->text, NULL);
	return NULL;
}

/* Step "before seize": the thread started (none: read at collect end). */
static int locks_seizing(struct ckpt_ctx *ctx)
{
	struct locks_ahead *a = calloc(1, sizeof(*a));
	sigset_t all, old;
	if (!a || (a->efd = eventfd(0, EFD_CLOEXEC)) < 0) {
		free(a);
		return 0;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* ckpt's own thread takes signals */
	if (pthread_create(&a->thread, NULL, read_ahead, a) == 0)
		ctx->locks_ahead = a;
	else {
		close(a->efd);
		free(a);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

static void ahead_wake(struct locks_ahead *a)
{
	uint64_t one = 1;
	(void)!write(a->efd, &one, sizeof(one));
}

/* Step "frozen scan": the last read, now. */
static int locks_frozen(struct ckpt_ctx *ctx)
{
	if (ctx->locks_ahead)
		ahead_wake(ctx->locks_ahead);
	return 0;
}

/* Its text (the caller frees it), or read now when none was begun or
 * the thread's read failed. */
static int ahead_take(struct ckpt_ctx *ctx, char **ret_text)
{
	struct locks_ahead *a = ctx->locks_ahead;
	if (!a)
		return proc_read(0, "../locks", ret_text, NULL);
	ahead_wake(a); /* told already; never a join of a thread that waits */
	pthread_join(a->thread, NULL);
	ctx->locks_ahead = NULL;
	int r = a->r;
	char *text = a->text;
	close(a->efd);
	scan_free(&a->s);
	free(a);
	if (r < 0 && r != -ECANCELED) {
		free(text);
		return proc_read(0, "../locks", ret_text, NULL);
	}
	*ret_text = text;
	return r;
}

/* A checkpoint refused before dump end (or before the freeze): the
 * thread stopped. */
static void locks_finish(struct ckpt_ctx *ctx)
{
	if (ctx->locks_ahead) {
		_cleanup_free_ char *text = NULL;
		atomic_store(&ctx->locks_ahead->cancel, true);
		(void)ahead_take(ctx, &text); /* which wakes it */
	}
}

/* Every lock of the system on an inode the image uses must be the image's. */
static int match_system(struct ckpt_ctx *ctx, struct scan *s)
{
	_cleanup_free_ char *text = NULL;
	int r = ahead_take(ctx, &text);
	if (r == -ECANCELED)
		return 0; /* the checkpoint failed first: nothing to check */
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot read /proc/locks: %s", strerror(-r));
	for (char *line = text, *next; line && *line; line = next) {
		struct lock_line l;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (parse_line(line, &l) < 0)
			return log_fail(&ctx->log, -EINVAL, "cannot parse /proc/locks line '%s'",
					line);
		const struct used *u = used_inode(s, l.dev);
		bool ours = false;
		for (size_t i = 0; !l.blocked && !ours && i < s->nh; i++)
			if (!s->h[i].matched && same_lock(&s->h[i].l, &l))
				ours = s->h[i].matched = true;
		if (!ours && u)
			return refuse_other(ctx, u, &l);
	}
	for (size_t i = 0; i < s->nh; i++)
		if (!s->h[i].matched)
			return log_fail(&ctx->log, -EAGAIN,
					"pid %d fd %d (lock): a %s lock its fdinfo lists is not in "
					"/proc/locks; it changed meanwhile",
					s->h[i].t->pid, s->h[i].fd, s->h[i].l.cls);
	return 0;
}

/* The held lock into its task's record. */
static int save_held(struct ckpt_ctx *ctx, const struct held *h)
{
	int cls = lock_class(&h->l);
	if (cls == LK_POSIX && h->t->pid != h->l.pid)
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d fd %d (lock): a POSIX lock taken by pid %ld, which does not "
		    "share this fd table in the image; not supported",
		    h->t->pid, h->fd, h->l.pid);
	struct locks_ckpt *k = task_state(h->t, KIND_locks, sizeof(*k));
	if (!k)
		return -ENOMEM;
	if (!k->e.base.descriptor)
		locks_entry__init(&k->e);
	if (k->e.n_locks >= LOCKS_MAX)
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: holds more than %u locks",
				h->t->pid, LOCKS_MAX);
	if (grow((void **)&k->l, &k->cap, k->e.n_locks, sizeof(*k->l)) < 0)
		return -ENOMEM;
	LockEntry *e = &k->l[k->e.n_locks++];
	lock_entry__init(e);
	e->fd = (uint32_t)h->fd;
	e->type = (uint32_t)cls;
	e->write = !strcmp(h->l.type, "WRITE");
	e->start = (uint64_t)h->l.start;
	e->has_end = h->l.end >= 0 && h->l.end != OFFSET_MAX_K;
	e->end = e->has_end ? (uint64_t)h->l.end : 0;
	return 0;
}

static int locks_collect_end(struct ckpt_ctx *ctx)
{
	struct scan s = {0};
	int r = 0;

	for (size_t i = 0; r >= 0 && i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (t->zombie)
			continue;
		r = check_blocked(ctx, t);
		if (r >= 0 && !t->files_with)
			r = scan_task(ctx, &s, t);
	}
	/* with the read on its thread: checked at "dump end", so that its
	 * wait is beside the dump too (a refusal then still leaves the tree
	 * as it was; the image is not named yet) */
	if (r >= 0 && !ctx->locks_ahead)
		r = match_system(ctx, &s);
	for (size_t i = 0; r >= 0 && i < s.nh; i++)
		r = save_held(ctx, &s.h[i]);
	for (size_t i = 0; r >= 0 && i < ctx->ntasks; i++) {
		struct locks_ckpt *k = ctx->tasks[i].kstate[KIND_locks];
		if (!k)
			continue;
		k->pl = calloc(k->e.n_locks, sizeof(*k->pl));
		if (!k->pl)
			r = -ENOMEM;
		for (size_t j = 0; r >= 0 && j < k->e.n_locks; j++)
			k->pl[j] = &k->l[j];
		k->e.locks = k->pl;
	}
	if (r >= 0 && ctx->locks_ahead) {
		ctx->locks_ahead->s = s;
		return 0;
	}
	scan_free(&s);
	return r;
}

/* Step "dump end": the image's locks and the inodes it uses against
 * /proc/locks, read after the freeze on the thread. */
static int locks_dump_end(struct ckpt_ctx *ctx)
{
	if (!ctx->locks_ahead)
		return 0;
	struct scan s = ctx->locks_ahead->s;
	ctx->locks_ahead->s = (struct scan){ 0 };
	int r = match_system(ctx, &s);
	scan_free(&s);
	return r;
}

static int locks_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct locks_ckpt *k = t->kstate[KIND_locks];
	return k && k->e.n_locks ? ctx_write_msg(ctx, LOCKS_ENTRY, &k->e.base) : 0;
}

static void locks_free_state(void *state)
{
	struct locks_ckpt *k = state;
	if (k) {
		free(k->l);
		free(k->pl);
	}
	free(k);
}

/* --- restart --------------------------------------------------------- */

static const char *invalid(const LockEntry *l)
{
	if (l->fd >= LOCKS_MAX_FD)
		return "its fd is out of range";
	if (l->type < LK_FLOCK || l->type > LK_LEASE)
		return "unknown lock type";
	if ((l->type == LK_FLOCK || l->type == LK_LEASE) && (l->start || l->has_end))
		return "a flock lock or lease with a byte range";
	if (l->start > (uint64_t)OFFSET_MAX_K - 1 ||
	    (l->has_end && (l->end < l->start || l->end >= (uint64_t)OFFSET_MAX_K)))
		return "its byte range is not valid";
	return NULL;
}

static int locks_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	LocksEntry *e =
	    rctx_load_one(ctx, t, rec, KIND_locks, LOCKS_ENTRY, &locks_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (e->n_locks > LOCKS_MAX)
		return log_fail(&ctx->log, -EINVAL, "record %u: pid %d: more than %u locks",
				rec->index, t->pid, LOCKS_MAX);
	for (size_t i = 0; i < e->n_locks; i++) {
		const char *why = invalid(e->locks[i]);
		if (why)
			return log_fail(&ctx->log, -EINVAL, "record %u: pid %d: lock %zu: %s",
					rec->index, t->pid, i, why);
	}
	return 0;
}

static const char *const type_name[] = {"", "flock", "POSIX", "OFD", "lease"};

/* F_SETLEASE makes the caller the file's owner for signals (F_SETOWN):
 * the owner fdtable restored is put back after it. */
static long take_lease(struct rst_task *t, const LockEntry *l)
{
	struct f_owner_ex own = { 0 };
	uint64_t addr = puppet_scratch_put(&t->pup, 0, &own, sizeof(own));
	if (!addr)
		return -EFAULT;
	long r = puppet_syscall(&t->pup, SYS_fcntl, l->fd, F_GETOWN_EX, addr);
	if (r >= 0)
		r = puppet_syscall(&t->pup, SYS_fcntl, l->fd, F_SETLEASE,
				   l->write ? F_WRLCK : F_RDLCK);
	if (r >= 0)
		r = puppet_syscall(&t->pup, SYS_fcntl, l->fd, F_SETOWN_EX, addr);
	return r;
}

static int take(struct rst_ctx *ctx, struct rst_task *t, const LockEntry *l)
{
	long r;
	char what[64];

	if (l->type == LK_LEASE) {
		snprintf(what, sizeof(what), "the file");
		r = take_lease(t, l);
	} else if (l->type == LK_FLOCK) {
		snprintf(what, sizeof(what), "the whole file");
		r = puppet_syscall(&t->pup, SYS_flock, l->fd,
				   (l->write ? LOCK_EX : LOCK_SH) | LOCK_NB);
	} else {
		struct flock fl = {
		    .l_type = l->write ? F_WRLCK : F_RDLCK,
		    .l_whence = SEEK_SET,
		    .l_start = (off_t)l->start,
		    .l_len = l->has_end ? (off_t)(l->end - l->start + 1) : 0,
		};
		if (l->has_end)
			snprintf(what, sizeof(what), "bytes %llu-%llu",
				 (unsigned long long)l->start, (unsigned long long)l->end);
		else
			snprintf(what, sizeof(what), "bytes %llu-EOF",
				 (unsigned long long)l->start);
		uint64_t addr = puppet_scratch_put(&t->pup, 0, &fl, sizeof(fl));
		r = addr ? puppet_syscall(&t->pup, SYS_fcntl, l->fd,
					  l->type == LK_OFD ? F_OFD_SETLK : F_SETLK, addr)
			 : -EFAULT;
	}
	if ((r == -EAGAIN || r == -EACCES) && l->type == LK_LEASE)
		return log_fail(&ctx->log, -EBUSY,
				"pid %d fd %u (lock): cannot take its %s lease again: the file is "
				"open %s elsewhere (the original, still running?)",
				t->pid, l->fd, l->write ? "write" : "read",
				l->write ? "" : "for writing");
	if (r == -EAGAIN || r == -EACCES)
		return log_fail(&ctx->log, -EBUSY,
				"pid %d fd %u (lock): cannot take its %s %s lock on %s again: "
				"another process holds a conflicting lock (the original, still "
				"running?)",
				t->pid, l->fd, type_name[l->type], l->write ? "write" : "read",
				what);
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"pid %d fd %u (lock): cannot take its %s %s lock "
				"on %s again: %s",
				t->pid, l->fd, type_name[l->type], l->write ? "write" : "read",
				what, strerror((int)-r));
	return 0;
}

static int locks_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	const LocksEntry *e = t->kstate[KIND_locks];
	/* a dry run beside the live original: its locks are the original's */
	if (ctx->flags & RESTART_VERIFY)
		return 0;
	for (size_t i = 0; e && i < e->n_locks; i++) {
		int r = take(ctx, t, e->locks[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static const ProtobufCMessageDescriptor *locks_descriptor(uint32_t sub)
{
	return sub == REC_SUB(LOCKS_ENTRY) ? &locks_entry__descriptor : NULL;
}

const struct kind_ops locks_ops = {
    .seizing = locks_seizing,
    .frozen = locks_frozen,
    .collect_end = locks_collect_end,
    .dump_end = locks_dump_end,
    .finish = locks_finish,
    .dump = locks_dump,
    .load = locks_load,
    .restore = locks_restore,
    .free_state = locks_free_state,
    .descriptor = locks_descriptor,
};
