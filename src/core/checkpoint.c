/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpoint: collect, then dump.
 *
 * Collect seizes every task of the tree, snapshots what /proc says about it
 * and lets each kind look at its objects. Anything that cannot be saved is
 * found here, before a byte is written, and reported with the pid, fd or
 * address and the reason; the tasks are then released unharmed. Dump writes
 * the image; it is complete and fsync'd before a task is killed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "util/par.h"
#include "core/netlock.h"
#include "util/fault.h"
#include "core/sequence.h"
#include "net/lock.h"
#include "puppet/guard.h"
#include "util/cleanup.h"
#include "img/pages.h"
#include "kinds/fdobj.h"
#include "kinds/mm.h"
#include "util/features.h"
#include "util/rtprio.h"
#include "util/par.h"

#define COPY_BUF (8u << 20)
#define ZSTD_LEVEL 1 /* --compress: fast; most of a heap's gain is had at 1 */

static void release_task(struct task *t)
{
	for (size_t i = 0; i < t->nthreads; i++)
		release_task(&t->threads[i]);
	free(t->threads);
	t->threads = NULL;
	t->nthreads = 0;
	for (int k = 0; k < KIND_MAX; k++) {
		if (kinds[k].ops->free_state && t->kstate[k])
			kinds[k].ops->free_state(t->kstate[k]);
		t->kstate[k] = NULL;
	}
	proc_vmas_free(&t->vmas);
	free(t->status_text);
	t->status_text = NULL;
	free(t->numa_text);
	t->numa_text = NULL;
	task_probes_free(t);
}

static void free_obj(int kind, void *ptr)
{
	if (kind >= 0 && kind < KIND_MAX && kinds[kind].ops->free_obj)
		kinds[kind].ops->free_obj(ptr);
}

/* Why pid cannot be seized, as precisely as /proc tells. */
/* A task that took no stop when seized (GUARD_STOP_TIMEOUT_MS): where the
 * kernel holds it. */
static int explain_no_stop(struct ckpt_ctx *ctx, pid_t pid)
{
	_cleanup_free_ char *stat = NULL, *wchan = NULL;
	struct proc_stat st = { 0 };
	bool known = proc_read(pid, "stat", &stat, NULL) == 0 && proc_parse_stat(stat, &st) == 0;
	if (proc_read(pid, "wchan", &wchan, NULL) < 0 || !wchan[0] || !strcmp(wchan, "0")) {
		free(wchan);
		wchan = NULL;
	}
	/* wait_for_vfork_done, inlined in kernel_clone on some kernels */
	bool vfork = wchan && (strstr(wchan, "vfork") || !strcmp(wchan, "kernel_clone"));
	return log_fail(&ctx->log, -ETIMEDOUT,
			"pid %d: did not stop within %d s of being seized (state %c%s%s): %s; "
			"nothing was changed, try again later", pid, GUARD_STOP_TIMEOUT_MS / 1000,
			known ? st.state : '?', wchan ? ", in the kernel at " : "", wchan ? wchan : "",
			vfork ? "a parent that called vfork() waits so until its child calls exec or "
				"exits"
			      : "a task in uninterruptible sleep (a file system or device that does "
				"not answer, a vfork parent) cannot be stopped");
}

static int explain_seize(struct ckpt_ctx *ctx, pid_t pid, int r)
{
	struct proc_status st;
	char *text = NULL;

	if (r == -ESRCH && proc_read(pid, "status", &text, NULL) < 0)
		return log_fail(&ctx->log, -ESRCH, "pid %d: no such process", pid);
	if (r == -ETIMEDOUT)
		return explain_no_stop(ctx, pid);
	if (text || proc_read(pid, "status", &text, NULL) == 0) {
		int pr = proc_parse_status(text, &st);
		free(text);
		if (pr == 0 && st.tracer_pid)
			return log_fail(&ctx->log, -EBUSY,
					"pid %d: already traced by pid %d (a debugger?); ptrace "
					"allows one tracer",
					pid, st.tracer_pid);
		if (pr == 0 && st.state == 'Z')
			return log_fail(&ctx->log, -ESRCH, "pid %d: is a zombie", pid);
	}
	if (r == -EPERM)
		return log_fail(&ctx->log, -EPERM,
				"pid %d: not permitted to ptrace it (other user, or "
				"kernel.yama.ptrace_scope); checkpoint needs ptrace rights",
				pid);
	return log_fail(&ctx->log, r, "pid %d: cannot seize it: %s", pid, strerror(-r));
}

/*
 * A process's status, stat and smaps read and parsed into t, by any thread
 * (nothing logged, nothing but t touched): 0, -errno of a read, or
 * SNAP_UNPARSED. collect_ahead reads the next processes' side by side, and
 * their numa_maps (for task's collect) apart, at the same time: smaps and
 * numa_maps each walk the page tables of the whole process (12-15 ms each
 * for 1 GiB), which for one process were one after the other.
 */
#define SNAP_UNPARSED 1
static int snapshot_read(struct task *t)
{
	_cleanup_free_ char *status = NULL, *stat = NULL, *smaps = NULL;
	int r;

	if ((r = proc_read_one(t->pid, "status", &status)) < 0 ||
	    (r = proc_read_one(t->pid, "stat", &stat)) < 0 ||
	    (r = proc_read(t->pid, "smaps", &smaps, NULL)) < 0)
		return r;
	proc_vmas_free(&t->vmas);
	if (proc_parse_status(status, &t->status) < 0 || proc_parse_stat(stat, &t->stat) < 0 ||
	    proc_parse_smaps(smaps, &t->vmas) < 0)
		return SNAP_UNPARSED;
	free(t->status_text);
	t->status_text = TAKE_PTR(status);
	return 0;
}

/* snapshot_read's result r for t, logged if a failure */
static int snapshot_proc(struct ckpt_ctx *ctx, struct task *t, int r)
{
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read /proc: %s", t->pid, strerror(-r));
	if (r == SNAP_UNPARSED)
		return log_fail(&ctx->log, -EINVAL, "pid %d: cannot parse /proc", t->pid);
	return 0;
}

/* The root must be a process, alive, and a namespace init or CKPT_SUBTREE. */
static int check_root(struct ckpt_ctx *ctx, pid_t pid)
{
	_cleanup_free_ char *status = NULL;
	struct proc_status st;
	int r;

	r = proc_read(pid, "status", &status, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r == -ENOENT ? -ESRCH : r, "pid %d: no such process",
				pid);
	if (proc_parse_status(status, &st) < 0)
		return log_fail(&ctx->log, -EINVAL, "pid %d: cannot parse its status", pid);
	if (st.pid != st.tgid)
		return log_fail(&ctx->log, -EINVAL,
				"pid %d: is a thread of process %d; checkpoint the process", pid,
				st.tgid);
	if (st.state == 'Z')
		return log_fail(&ctx->log, -ESRCH, "pid %d: is a zombie", pid);
	ctx->container = st.nspid_n > 1 && st.nspid[st.nspid_n - 1] == 1;
	if (!(ctx->flags & CKPT_SUBTREE) && !ctx->container)
		return log_fail(&ctx->log, -EINVAL,
				"pid %d: is not the init of a pid namespace; checkpointing a plain "
				"process tree needs CKPT_SUBTREE",
				pid);
	return 0;
}

/*
 * Appends pid to ctx->tasks. The array may move: the threads already
 * seized point to their process in it (leader), and are pointed again.
 */
static int add_task(struct ckpt_ctx *ctx, size_t *cap, pid_t pid)
{
	if (ctx->ntasks == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct task *nt = realloc(ctx->tasks, ncap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		ctx->tasks = nt;
		*cap = ncap;
		for (size_t i = 0; i < ctx->ntasks; i++)
			for (size_t j = 0; j < nt[i].nthreads; j++)
				nt[i].threads[j].leader = &nt[i];
	}
	ctx->tasks[ctx->ntasks++] = (struct task){ .pid = pid, .pup = { .memfd = -1 } };
	return 0;
}

/* /proc/PID/stat of a task, 'X' in state if it is gone. */
static int read_stat(pid_t pid, struct proc_stat *st)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read_one(pid, "stat", &text);
	if (r == -ENOENT || r == -ESRCH) {
		*st = (struct proc_stat){ .state = 'X' };
		return 0;
	}
	return r < 0 ? r : proc_parse_stat(text, st);
}

/*
 * Seizes t, or finds it dead: a zombie is kept (its parent will reap it);
 * a task gone entirely (reaped already) returns 1 and is dropped.
 */
static int seize_one(struct ckpt_ctx *ctx, struct task *t)
{
	int r, err = -ESRCH;

	for (int attempt = 0; attempt < 2; attempt++) {
		r = read_stat(t->pid, &t->stat);
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot read /proc: %s", t->pid,
					strerror(-r));
		if (t->stat.state == 'X')
			return 1;
		if (t->stat.state == 'Z') {
			t->zombie = true;
			return 0;
		}
		if (attempt)
			break;
		err = puppet_seize_guarded(&t->pup, t->pid, ctx->guard);
		if (err == 0) {
			log_debug(&ctx->log, "pid %d: seized", t->pid);
			return 0;
		}
		if (err != -ESRCH && err != -EPERM)
			break;
	}
	return explain_seize(ctx, t->pid, err);
}

/*
 * Seizes tasks [i, i + n) by one request to the guardian (their stops
 * overlap), or finds them dead, as seize_one; the tasks gone are dropped.
 * Returns how many of the n are left, or -errno.
 */
static int seize_some(struct ckpt_ctx *ctx, size_t i, size_t n)
{
	struct puppet *ps[PUPPET_MANY_MAX];
	pid_t pids[PUPPET_MANY_MAX];
	size_t at[PUPPET_MANY_MAX], k = 0;
	int err[PUPPET_MANY_MAX], r;
	bool gone[PUPPET_MANY_MAX] = { false };

	for (size_t j = 0; j < n; j++) {
		struct task *t = &ctx->tasks[i + j];
		if ((r = read_stat(t->pid, &t->stat)) < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot read /proc: %s", t->pid,
					strerror(-r));
		gone[j] = t->stat.state == 'X';
		t->zombie = t->stat.state == 'Z';
		if (gone[j] || t->zombie)
			continue;
		ps[k] = &t->pup;
		pids[k] = t->pid;
		at[k++] = j;
	}
	puppet_seize_many(ps, pids, k, ctx->guard, false, err); /* processes */
	for (size_t m = 0; m < k; m++) {
		struct task *t = &ctx->tasks[i + at[m]];
		if (err[m] == 0) {
			log_debug(&ctx->log, "pid %d: seized", t->pid);
			continue;
		}
		/* died meanwhile (a zombie kept, gone dropped), or refused */
		if ((err[m] == -ESRCH || err[m] == -EPERM) && (r = read_stat(t->pid, &t->stat)) < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot read /proc: %s", t->pid,
					strerror(-r));
		if ((err[m] == -ESRCH || err[m] == -EPERM) && t->stat.state == 'X')
			gone[at[m]] = true;
		else if ((err[m] == -ESRCH || err[m] == -EPERM) && t->stat.state == 'Z')
			t->zombie = true;
		else
			return explain_seize(ctx, t->pid, err[m]);
	}
	size_t left = n;
	for (size_t j = n; j-- > 0;) {
		if (!gone[j])
			continue;
		memmove(&ctx->tasks[i + j], &ctx->tasks[i + j + 1],
			(ctx->ntasks - i - j - 1) * sizeof(*ctx->tasks));
		ctx->ntasks--;
		left--;
	}
	return (int)left;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* Is tid one of held, the sorted tids of the threads held (n of them)? A
 * scan of t->threads for every tid listed made a pass over 1,000 threads
 * half a million comparisons, each a cache miss. */
static bool has_thread(const pid_t *held, size_t n, pid_t tid)
{
	return n && bsearch(&tid, held, n, sizeof(*held), cmp_pid);
}

/* Seizes the threads listed in t->threads[t->nthreads, +n) at once (one
 * request to the guardian per few), keeping those held. */
static int seize_listed(struct ckpt_ctx *ctx, struct task *t, size_t n)
{
	_cleanup_free_ struct puppet **ps = calloc(n ? n : 1, sizeof(*ps));
	_cleanup_free_ pid_t *tids = calloc(n ? n : 1, sizeof(*tids));
	_cleanup_free_ int *err = calloc(n ? n : 1, sizeof(*err));
	struct task *th = &t->threads[t->nthreads];
	int r = 0;

	if (!ps || !tids || !err)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		ps[i] = &th[i].pup;
		tids[i] = th[i].pid;
	}
	puppet_seize_many(ps, tids, n, ctx->guard, true, err); /* one process's threads */
	for (size_t i = 0; i < n; i++) {
		if (err[i] == -ESRCH) /* it exited meanwhile */
			continue;
		if (err[i] < 0 && r >= 0)
			r = explain_seize(ctx, th[i].pid, err[i]);
		else if (err[i] == 0)
			t->threads[t->nthreads++] = th[i];
	}
	return r;
}

/*
 * Is tid a thread the kernel runs for an io_uring of the process (an
 * SQPOLL thread "iou-sqp-N", an io-wq worker "iou-wrk-N": PF_IO_WORKER in
 * the flags of its stat, which the program cannot set, unlike its name)?
 * Such a thread is not the program's: it takes no ptrace stop (a seize
 * would wait for it for ever, the program held stopped), and the io_uring
 * that owns it is refused by its fd.
 */
static bool io_worker_stat(int taskdir, pid_t tid, struct proc_stat *st)
{
	char name[64];
	_cleanup_free_ char *text = NULL;
	snprintf(name, sizeof(name), "%d/stat", tid);
	return proc_read_single(taskdir, name, &text) == 0 && proc_parse_stat(text, st) == 0 &&
	       (st->flags & 0x10 /* PF_IO_WORKER */);
}

/* How many of pid's threads are io_uring threads (io_worker()). */
static unsigned io_workers(pid_t pid)
{
	char path[64];
	unsigned n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	for (struct dirent *de; d && (de = readdir(d));) {
		pid_t tid = (pid_t)atoi(de->d_name);
		struct proc_stat st;
		n += tid > 0 && tid != pid && io_worker_stat(dirfd(d), tid, &st);
	}
	return n;
}

/* Many threads' /proc files are read on every CPU (par_for) */
#define PAR_THREADS_MIN 32

struct io_check {
	int taskdir; /* /proc/PID/task */
	struct task *th; /* the threads listed, n of them */
	bool *io;
};

static void io_check_one(void *arg, size_t i, unsigned slot)
{
	struct io_check *c = arg;
	(void)slot;
	c->io[i] = io_worker_stat(c->taskdir, c->th[i].pid, &c->th[i].stat);
}

/* One pass over /proc/PID/task: seizes the threads not held yet; 1 if any. */
static int seize_new_threads(struct ckpt_ctx *ctx, struct task *t, size_t *cap)
{
	char path[64];
	size_t n = 0;
	int r = 0;

	_cleanup_free_ pid_t *held = malloc((t->nthreads ? t->nthreads : 1) * sizeof(*held));
	if (!held)
		return -ENOMEM;
	for (size_t i = 0; i < t->nthreads; i++)
		held[i] = t->threads[i].pid;
	qsort(held, t->nthreads, sizeof(*held), cmp_pid);
	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return log_fail(&ctx->log, -errno, "pid %d: cannot list its threads: %s", t->pid,
				strerror(errno));
	for (struct dirent *de; (de = readdir(d));) {
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid <= 0 || tid == t->pid || has_thread(held, t->nthreads, tid))
			continue;
		if (t->nthreads + n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 8;
			struct task *nt = realloc(t->threads, ncap * sizeof(*nt));
			if (!nt) {
				r = -ENOMEM;
				break;
			}
			t->threads = nt;
			*cap = ncap;
		}
		t->threads[t->nthreads + n++] = (struct task){ .pid = tid, .pup = { .memfd = -1 } };
	}
	/* each one's stat, kept (thread_proc does not read it again), says
	 * whether it is an io_uring thread: read on every CPU for many */
	struct task *th = &t->threads[t->nthreads];
	_cleanup_free_ bool *io = calloc(n ? n : 1, sizeof(*io));
	if (r >= 0 && !io)
		r = -ENOMEM;
	struct io_check c = { .taskdir = dirfd(d), .th = th, .io = io };
	if (r >= 0)
		par_for(n, n >= PAR_THREADS_MIN ? par_cpus() : 1, io_check_one, &c);
	size_t kept = 0;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (io[i]) {
			log_info(&ctx->log, "pid %d thread %d: an io_uring thread of the kernel's, "
				 "left alone", t->pid, th[i].pid);
			continue;
		}
		th[kept++] = th[i];
	}
	size_t before = t->nthreads;
	if (r >= 0 && kept)
		r = seize_listed(ctx, t, kept);
	return r < 0 ? r : t->nthreads > before;
}

/*
 * Seizes every thread of the process. A running thread may start another
 * before it is stopped, so the list is read again until a pass finds no
 * new thread: then every thread is held and none can appear.
 */
static int seize_threads(struct ckpt_ctx *ctx, struct task *t)
{
	size_t cap = 0;
	for (int pass = 0; pass < 1000; pass++) {
		int r = seize_new_threads(ctx, t, &cap);
		if (r <= 0) {
			for (size_t i = 0; i < t->nthreads; i++)
				t->threads[i].leader = t;
			return r;
		}
	}
	return log_fail(&ctx->log, -EAGAIN, "pid %d: keeps starting threads faster than they are "
			"stopped", t->pid);
}

struct kids_read {
	int dir; /* /proc/PID/task */
	char (*names)[24];
	char **text;
};

/* TID/children, relative to the task directory, by one read() for a
 * thread without many children (a path from /proc and a read to its end
 * were a walk and a system call more a thread) */
static void kids_one(void *arg, size_t i, unsigned slot)
{
	struct kids_read *k = arg;
	char name[64];
	(void)slot;
	snprintf(name, sizeof(name), "%s/children", k->names[i]);
	if (proc_read_records(k->dir, name, &k->text[i]) < 0)
		k->text[i] = NULL;
}

/* The children of every thread of pid, as /proc lists them (read on every
 * CPU for many threads). */
static int read_children(pid_t pid, char **ret)
{
	char name[64], *all = NULL;
	size_t len = 0, n = 0, cap = 0;
	_cleanup_closedir_ DIR *d = NULL;
	struct kids_read k = { 0 };
	int r = 0;

	snprintf(name, sizeof(name), "/proc/%d/task", pid);
	d = opendir(name);
	if (!d)
		return -errno;
	k.dir = dirfd(d);
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(*k.names))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char(*nn)[24] = realloc(k.names, cap * sizeof(*nn));
			if (!nn) {
				free(k.names);
				return -ENOMEM;
			}
			k.names = nn;
		}
		snprintf(k.names[n++], sizeof(*k.names), "%s", de->d_name);
	}
	k.text = calloc(n ? n : 1, sizeof(*k.text));
	if (!k.text) {
		free(k.names);
		return -ENOMEM;
	}
	par_for(n, n >= PAR_THREADS_MIN ? par_cpus() : 1, kids_one, &k);
	for (size_t i = 0; i < n; i++) {
		size_t m = k.text[i] ? strlen(k.text[i]) : 0;
		char *na = r < 0 || !k.text[i] ? NULL : realloc(all, len + m + 2);
		if (k.text[i] && r >= 0 && !na)
			r = -ENOMEM;
		if (na) {
			all = na;
			memcpy(all + len, k.text[i], m);
			len += m;
			all[len++] = ' ';
			all[len] = '\0';
		}
		free(k.text[i]);
	}
	free(k.text);
	free(k.names);
	if (r < 0) {
		free(all);
		return r;
	}
	*ret = all;
	return 0;
}

/*
 * Seizes the whole tree, parents before children. A task's children are
 * listed once it is stopped, so it cannot add any afterwards: when every
 * listed task is held, the tree is complete. A child that died meanwhile
 * is a zombie (kept) or gone (dropped).
 */
static int seize_tree(struct ckpt_ctx *ctx, pid_t root)
{
	size_t cap = 0;
	int r;

	if ((r = add_task(ctx, &cap, root)) < 0)
		return r;
	/* the root alone (it is checked first), then up to PUPPET_MANY_MAX
	 * listed tasks at a time: one request and overlapped stops */
	for (size_t i = 0, seized = 0; i < ctx->ntasks; i++) {
		if (i == seized) {
			size_t n = i ? MIN(ctx->ntasks - i, (size_t)PUPPET_MANY_MAX) : 1;
			r = i ? seize_some(ctx, i, n) : seize_one(ctx, &ctx->tasks[i]);
			if (r < 0)
				return r;
			if (!i && r == 1) { /* the root is gone */
				ctx->ntasks--;
				break;
			}
			seized = i + (i ? (size_t)r : 1);
			if (i == seized) {
				i--;
				continue;
			}
		}
		if (ctx->tasks[i].zombie)
			continue;
		if ((r = seize_threads(ctx, &ctx->tasks[i])) < 0)
			return r;
		_cleanup_free_ char *kids = NULL;
		if ((r = read_children(ctx->tasks[i].pid, &kids)) < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot list its children: %s",
					ctx->tasks[i].pid, strerror(-r));
		for (char *p = kids, *end; p && *p; p = end) {
			long c = strtol(p, &end, 10);
			if (end == p)
				break;
			/* ckpt's own ancestor as the root (`sh -c 'ckpt checkpoint
			 * $$'`): seizing ckpt would stop it for good */
			if (c == getpid())
				return log_fail(
				    &ctx->log, -EINVAL,
				    "pid %d: its child %ld is this ckpt: a tree that holds "
				    "its checkpointer cannot be checkpointed (run ckpt "
				    "from outside the tree)",
				    ctx->tasks[i].pid, c);
			if (c > 0 && !ctx_find_task(ctx, (pid_t)c) && (r = add_task(ctx, &cap, (pid_t)c)) < 0)
				return r;
		}
	}
	return 0;
}

/* The last (innermost) of a /proc NS* list, or fallback if it is empty. */
static pid_t inner(const pid_t *list, uint32_t n, pid_t fallback)
{
	return n ? list[n - 1] : fallback;
}

/*
 * The ids the image holds. A container's tasks are saved with their pids
 * inside its pid namespace, which a fresh namespace gives back whatever
 * is in use outside; every task must be in that namespace itself.
 */
static int assign_vpid(struct ckpt_ctx *ctx, struct task *t, uint32_t depth)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status st;

	t->vpid = t->pid;
	t->vpgid = t->stat.pgrp;
	t->vsid = t->stat.session;
	if (!ctx->container)
		return 0;
	if (proc_read(t->pid, "status", &text, NULL) < 0 || proc_parse_status(text, &st) < 0)
		return log_fail(&ctx->log, -ESRCH, "pid %d: cannot read its status", t->pid);
	if (st.nspid_n != depth)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: is in a nested pid namespace; not supported yet", t->pid);
	t->vpid = inner(st.nspid, st.nspid_n, t->pid);
	/* a group or session from outside the container has no id inside: 0 */
	t->vpgid = st.nspgid_n == depth ? inner(st.nspgid, st.nspgid_n, 0) : 0;
	t->vsid = st.nssid_n == depth ? inner(st.nssid, st.nssid_n, 0) : 0;
	return 0;
}

static int assign_vpids(struct ckpt_ctx *ctx)
{
	struct task *root = &ctx->tasks[0];
	uint32_t depth = 0;
	if (ctx->container) {
		_cleanup_free_ char *text = NULL;
		struct proc_status st;
		if (proc_read(root->pid, "status", &text, NULL) < 0 ||
		    proc_parse_status(text, &st) < 0)
			return log_fail(&ctx->log, -ESRCH, "pid %d: cannot read its status",
					root->pid);
		depth = st.nspid_n;
	}
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		int r = assign_vpid(ctx, t, depth);
		for (size_t j = 0; r >= 0 && j < t->nthreads; j++) {
			/* its own if read when it was found (its group and
			 * session are the process's all the same) */
			if (t->threads[j].stat.pid != t->threads[j].pid)
				t->threads[j].stat = t->stat;
			r = assign_vpid(ctx, &t->threads[j], depth);
		}
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i], *p = ctx_find_task(ctx, t->stat.ppid);
		t->vppid = i == 0 && ctx->container ? 0 : p ? p->vpid : t->stat.ppid;
		for (size_t j = 0; j < t->nthreads; j++)
			t->threads[j].vppid = t->vppid;
	}
	return 0;
}

/*
 * A task that shares its fd table or fs with a sibling (CLONE_FILES from
 * one of them with CLONE_PARENT): that sibling forks it at restart, so
 * whatever else it shares must be the sibling's too.
 */
static int share_with_sibling(struct ckpt_ctx *ctx, struct task *t, struct task *s)
{
	static const struct {
		int kcmp;
		const char *what;
	} kinds[2] = { { KCMP_FILES, "fd table" }, { KCMP_FS, "cwd and root" } };
	pid_t *with[2] = { &t->files_with, &t->fs_with };

	for (int k = 0; k < 2; k++) {
		if (!*with[k])
			continue;
		if (syscall(SYS_kcmp, s->pid, t->pid, kinds[k].kcmp, 0, 0) != 0)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: shares its %s with pid %d and other things with "
					"its sibling %d, which does not; not supported yet",
					t->pid, kinds[k].what, *with[k], s->pid);
		*with[k] = s->pid;
	}
	if (t->stat.session != s->stat.session && t->stat.session != t->pid)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: shares with its sibling %d, which is in another session; "
				"not supported yet",
				t->pid, s->pid);
	return 0;
}

static const int share_kcmp[3] = { KCMP_VM, KCMP_FILES, KCMP_FS };

struct share_sort {
	int type;
	bool failed;
};

/* kcmp orders the kernel objects: 0 equal, 1 less, 2 greater (3: cannot
 * tell, an error: the sort is then not used) */
static int share_cmp(const void *a, const void *b, void *arg)
{
	struct share_sort *ss = arg;
	pid_t pa = (*(struct task *const *)a)->pid, pb = (*(struct task *const *)b)->pid;
	long r = syscall(SYS_kcmp, pa, pb, ss->type, 0, 0);
	if (r < 0 || r > 2) {
		ss->failed = true;
		return pa < pb ? -1 : pa > pb;
	}
	return r == 0 ? 0 : r == 1 ? -1 : 1;
}

/* Sort k of share_classes: its own copy of the processes, its own field
 * (share_class[k]) of each written */
struct share_group {
	struct task **v[3];
	size_t n;
};

static void share_sort_one(void *arg, size_t k, unsigned slot)
{
	(void)slot;
	struct share_group *g = arg;
	struct task **v = g->v[k];
	struct share_sort ss = { .type = share_kcmp[k] };
	qsort_r(v, g->n, sizeof(*v), share_cmp, &ss);
	for (size_t i = 0, c = 0; !ss.failed && i < g->n; i++) {
		if (i > 0 && share_cmp(&v[i - 1], &v[i], &ss) != 0)
			c++;
		v[i]->share_class[k] = (int)c;
	}
	for (size_t i = 0; ss.failed && i < g->n; i++)
		v[i]->share_class[k] = -1;
}

/*
 * Which processes share their memory, fd table, fs: the processes sorted
 * by kcmp's order of each object, n log n calls where comparing every
 * pair was n^2 (500,000 of each for 1,000 processes); the tasks of a run
 * of equal ones get the same class. If kcmp cannot order them, the classes
 * stay unknown (-1) and find_shares compares pairs as before. The three
 * sorts run side by side (par_for), on every CPU: 2,400 kcmp calls for
 * 100 processes, each taking both tasks' locks, while the guardian waits.
 */
static void share_classes(struct ckpt_ctx *ctx)
{
	for (size_t i = 0; i < ctx->ntasks; i++)
		for (int k = 0; k < 3; k++)
			ctx->tasks[i].share_class[k] = -1;
	size_t cap = ctx->ntasks ? ctx->ntasks : 1;
	_cleanup_free_ struct task **v = calloc(3 * cap, sizeof(*v));
	struct share_group g = { { v, v + cap, v + 2 * cap }, 0 };
	if (!v)
		return;
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (!ctx->tasks[i].zombie)
			v[g.n++] = &ctx->tasks[i];
	memcpy(g.v[1], v, g.n * sizeof(*v));
	memcpy(g.v[2], v, g.n * sizeof(*v));
	/* a thread each for a tree worth it; a few compares are not */
	unsigned th = par_cpus();
	par_for_each(3, g.n >= 32 ? (th < 3 ? th : 3) : 1, share_sort_one, &g);
}

/* Do o and t share object k (0 memory, 1 fd table, 2 fs)? */
static bool shares(const struct task *o, const struct task *t, int k)
{
	if (o->share_class[k] >= 0 && t->share_class[k] >= 0)
		return o->share_class[k] == t->share_class[k];
	return syscall(SYS_kcmp, o->pid, t->pid, share_kcmp[k], 0, 0) == 0;
}

/* What one task shares with another of the tree (kcmp), and what it may not:
 * its parent's or a sibling's fd table and fs; another's is refused. */
static int find_shares(struct ckpt_ctx *ctx, struct task *t)
{
	struct task *parent = ctx_find_task(ctx, t->stat.ppid), *sibling = NULL;

	for (struct task *o = ctx->tasks; o < t; o++) {
		if (o->zombie)
			continue;
		if (shares(o, t, 0))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: shares its memory with pid %d (CLONE_VM or vfork); "
					"not supported",
					t->pid, o->pid);
		bool files = shares(o, t, 1);
		bool fs = shares(o, t, 2);
		bool sib = o != parent && o->stat.ppid == t->stat.ppid && parent;
		if ((files || fs) && o != parent && !sib &&
		    !(files ? t->files_with : t->fs_with))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: shares its %s with pid %d, which is neither its "
					"parent nor a sibling; not supported yet",
					t->pid, files ? "fd table" : "cwd and root", o->pid);
		if (files && !t->files_with)
			t->files_with = o->pid;
		if (fs && !t->fs_with)
			t->fs_with = o->pid;
		if ((files || fs) && sib && !sibling)
			sibling = o;
	}
	/* shared with the parent too: the parent forks it, as without siblings */
	if (sibling && (t->files_with == sibling->pid || t->fs_with == sibling->pid))
		return share_with_sibling(ctx, t, sibling);
	return 0;
}

/*
 * Can ckpt suspend a task's seccomp filters while it injects calls
 * (PTRACE_O_SUSPEND_SECCOMP)? The kernel lets a tracer do it with
 * CAP_SYS_ADMIN in the initial user namespace, and under no seccomp mode
 * of its own: the guardian, which seizes, is ckpt's fork and has ckpt's.
 * Without it a filter sees every injected call, and one that kills on a
 * call the program never makes (keyctl in a sandbox) would kill it.
 */
static bool seccomp_suspended(struct ckpt_ctx *ctx)
{
	if (ctx->seccomp_suspend)
		return ctx->seccomp_suspend > 0;
	_cleanup_free_ char *status = NULL, *map = NULL;
	struct proc_status st;
	unsigned long long inside, outside, count;
	bool can = proc_read_one(getpid(), "status", &status) == 0 &&
		   proc_parse_status(status, &st) == 0 && st.seccomp == 0 &&
		   (st.cap_eff & (1ull << CAP_SYS_ADMIN)) &&
		   proc_read_one(getpid(), "uid_map", &map) == 0 &&
		   sscanf(map, "%llu %llu %llu", &inside, &outside, &count) == 3 && inside == 0 &&
		   outside == 0 && count == 4294967295ull;
	ctx->seccomp_suspend = can ? 1 : -1;
	return can;
}

/* Refused before any call is injected in t: seccomp on, not suspended */
static int check_seccomp(struct ckpt_ctx *ctx, const struct task *t)
{
	if (!t->status.seccomp || seccomp_suspended(ctx))
		return 0;
	return log_fail(&ctx->log, -EPERM,
			"%s %d: runs under seccomp (%s), which ckpt can suspend only with "
			"CAP_SYS_ADMIN: a filter could forbid the calls ckpt injects, or kill "
			"it for one; nothing was injected",
			t->leader ? "thread" : "pid", t->pid,
			t->status.seccomp == 1 ? "strict mode" : "filters");
}

/*
 * A thread's /proc files, and the leader's scratch area and stub for it.
 * Its stat is the one read when it was found (seize_new_threads), or read
 * now as /proc/PID/task/TID/stat: /proc/TID/stat is the whole process's
 * (CPU times and faults summed over every thread), which made reading
 * 1,000 threads' cost grow with the square of their number.
 */
static int thread_proc(struct ckpt_ctx *ctx, struct task *th)
{
	_cleanup_free_ char *status = NULL, *stat = NULL;
	char name[64];
	int r;

	if (th->status_text) /* read already (thread_proc_quiet) */
		goto scratch;
	snprintf(name, sizeof(name), "task/%d/stat", th->pid);
	if ((r = proc_read_one(th->pid, "status", &status)) < 0 ||
	    (th->stat.pid != th->pid && (r = proc_read_one(th->leader->pid, name, &stat)) < 0))
		return log_fail(&ctx->log, r, "thread %d: cannot read /proc: %s", th->pid,
				strerror(-r));
	if (proc_parse_status(status, &th->status) < 0 ||
	    (stat && proc_parse_stat(stat, &th->stat) < 0))
		return log_fail(&ctx->log, -EINVAL, "thread %d: cannot parse /proc", th->pid);
	free(th->status_text);
	th->status_text = TAKE_PTR(status);
scratch:
	th->pup.syscall_ip = th->leader->pup.syscall_ip;
	th->pup.scratch = th->leader->pup.scratch;
	th->pup.scratch_len = th->leader->pup.scratch_len;
	th->pup.stub_ip = th->leader->pup.stub_ip;
	return 0;
}

/*
 * thread_proc for ckpt_probe_threads, which may run it on another thread of
 * ckpt: its reads, nothing logged (a thread they fail for is collected
 * alone, and thread_proc then tells why).
 */
static int thread_proc_quiet(struct ckpt_ctx *ctx, struct task *th)
{
	_cleanup_free_ char *status = NULL, *stat = NULL;
	char name[64];

	snprintf(name, sizeof(name), "task/%d/stat", th->pid);
	if (th->status_text || proc_read_one(th->pid, "status", &status) < 0 ||
	    (th->stat.pid != th->pid && proc_read_one(th->leader->pid, name, &stat) < 0))
		return th->status_text ? thread_proc(ctx, th) : -EAGAIN;
	struct proc_stat st = th->stat;
	if (proc_parse_status(status, &th->status) < 0 || (stat && proc_parse_stat(stat, &st) < 0))
		return -EAGAIN;
	/* collected alone, where check_seccomp tells why */
	if (th->status.seccomp && !seccomp_suspended(ctx))
		return -EAGAIN;
	th->stat = st;
	th->status_text = TAKE_PTR(status);
	return thread_proc(ctx, th);
}

/* A thread: what it has of its own, injected through the leader's scratch
 * (its probes already run, with its siblings', by ckpt_probe_threads). */
static int collect_thread(struct ckpt_ctx *ctx, struct task *th)
{
	if (th->probes && th->probes->ran)
		return 0;
	int r = thread_proc(ctx, th);
	if (r >= 0)
		r = check_seccomp(ctx, th);
	return r < 0 ? r : seq_ckpt_probe(ctx, th);
}

/* ckpt's part for one process up to its scratch area, mapped with the
 * group's (scratch_len: its size); snap: its snapshot_read() */
static int prepare_proc(struct ckpt_ctx *ctx, struct task *t, int snap, size_t *scratch_len)
{
	int r = snapshot_proc(ctx, t, snap);
	if (r >= 0)
		r = check_seccomp(ctx, t);
	if (r < 0)
		return r;
	if (t->status.threads != t->nthreads + 1 + (t->status.threads > t->nthreads + 1
							   ? io_workers(t->pid)
							   : 0))
		return log_fail(&ctx->log, -EAGAIN,
				"pid %d (%s): has %u threads, %zu were seized; it changed meanwhile",
				t->pid, t->status.name, t->status.threads, t->nthreads + 1);
	r = find_shares(ctx, t);
	if (r < 0)
		return r;
	r = puppet_find_syscall_in(&t->pup, &t->vmas);
	if (r < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: has no vDSO to run system calls from; not supported", t->pid);
	/* twice the room for many threads' probes (probe.c) */
	*scratch_len = (t->nthreads >= 32 ? 2 : 1) * PUPPET_SCRATCH_SIZE;
	return 0;
}

/* The rest, up to its probes, which are asked but not run; r: its scratch
 * area's mapping */
static int prepare_probes(struct ckpt_ctx *ctx, struct task *t, int r)
{
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot map a scratch area in it: %s", t->pid,
				strerror(-r));
	return seq_ckpt_probe_ops(ctx, t);
}

/*
 * ckpt's part of step "collect" for t and the next processes, up to
 * PUPPET_MANY_MAX of them: each one's /proc read, scratch area mapped and
 * probes asked, then all their probes run side by side (one request to the
 * guardian, their stops overlapping, where each process was a request and
 * a stop after the other); then each one's threads' probes. Each keeps its
 * result for its turn. Nothing of it depends on another process's collect
 * (the shares are found with the processes before it, from seize).
 */
struct snap_group {
	struct task **t;
	int *r;
	char **numa;
};

/* A process this large (resident) has its vmas' NUMA policies asked in
 * its probes (task.c), not read from numa_maps, which walks every page
 * (12 ms a GiB, as smaps) */
#define NUMA_MAPS_MAX (32ull << 20)

/* Is pid's resident memory under NUMA_MAPS_MAX (statm: no page walk)? */
static bool small_rss(pid_t pid)
{
	_cleanup_free_ char *statm = NULL;
	unsigned long long size, rss;
	return proc_read_one(pid, "statm", &statm) < 0 ||
	       sscanf(statm, "%llu %llu", &size, &rss) != 2 ||
	       rss * (uint64_t)sysconf(_SC_PAGESIZE) < NUMA_MAPS_MAX;
}

/* index 2k: process k's snapshot_read; 2k + 1: its numa_maps, if small */
static void snap_one(void *arg, size_t i, unsigned slot)
{
	(void)slot;
	struct snap_group *g = arg;
	if (i % 2 == 0)
		g->r[i / 2] = snapshot_read(g->t[i / 2]);
	else if (!small_rss(g->t[i / 2]->pid) ||
		 proc_read(g->t[i / 2]->pid, "numa_maps", &g->numa[i / 2], NULL) < 0)
		g->numa[i / 2] = NULL;
}

static void collect_ahead(struct ckpt_ctx *ctx, struct task *t)
{
	struct task *g[PUPPET_MANY_MAX] = { NULL }, *c[PUPPET_MANY_MAX];
	int snap[PUPPET_MANY_MAX];
	char *numa[PUPPET_MANY_MAX] = {NULL};
	size_t n = 0, nc = 0;
	for (struct task *u = t; u < ctx->tasks + ctx->ntasks && nc < PUPPET_MANY_MAX; u++)
		if (!u->zombie && !u->ahead)
			c[nc++] = u;
	/* their /proc read on every CPU ckpt has (most of ckpt's time for a
	 * tree of small processes, and all of it the kernel's), 4 at most */
	unsigned th = par_cpus();
	par_for_each(2 * nc, th < 4 ? th : 4, snap_one, &(struct snap_group){c, snap, numa});
	for (size_t i = 0; i < nc; i++) {
		/* for task's collect (what it checks needs no scratch area) */
		free(c[i]->numa_text);
		c[i]->numa_text = snap[i] == 0 ? numa[i] : NULL;
		if (snap[i] != 0)
			free(numa[i]);
	}
	/* their scratch areas mapped by one request (one each was a round
	 * trip to the guardian, 100 of the 127 of a tree of 100) */
	struct puppet *ps[PUPPET_MANY_MAX];
	size_t len[PUPPET_MANY_MAX], np = 0;
	int mapped[PUPPET_MANY_MAX];
	for (size_t i = 0; i < nc; i++) {
		struct task *u = c[i];
		u->ahead = true;
		u->ahead_r = prepare_proc(ctx, u, snap[i], &len[np]);
		if (u->ahead_r >= 0) {
			ps[np++] = &u->pup;
		} else if (u == t || !log_gathers(&ctx->log, u->ahead_r)) {
			nc = i + 1; /* as if one after the other: nothing after a failure */
			break;
		}
	}
	puppet_scratch_map_many(ps, len, np, mapped);
	for (size_t i = 0, k = 0; i < nc; i++) {
		struct task *u = c[i];
		if (u->ahead_r < 0)
			continue;
		u->ahead_r = prepare_probes(ctx, u, mapped[k++]);
		if (u->ahead_r >= 0)
			g[n++] = u;
		else if (u == t || !log_gathers(&ctx->log, u->ahead_r)) {
			while (++i < nc) /* nothing after a failure */
				c[i]->ahead = false;
		}
	}
	ckpt_probe_procs(ctx, g, n);
	for (size_t i = 0; i < n; i++) {
		if (g[i]->nthreads)
			ckpt_probe_threads(ctx, g[i], thread_proc_quiet);
	}
}

/* Step "collect", ckpt's part for one seized task, before the kinds look. */
int ckpt_collect_task(struct ckpt_ctx *ctx, struct task *t)
{
	if (t->leader)
		return collect_thread(ctx, t);
	if (!t->ahead)
		collect_ahead(ctx, t);
	return t->ahead_r;
}

/* Step "seize": the whole tree held, its ids as the image keeps them. */
int ckpt_seize(struct ckpt_ctx *ctx)
{
	pid_t pid = ctx->pid;
	int r = check_root(ctx, pid);
	if (r < 0)
		return r;
	r = seize_tree(ctx, pid);
	if (r >= 0)
		r = assign_vpids(ctx);
	if (r >= 0)
		r = ctx_look_outside(ctx);
	if (r < 0)
		return r;
	if (!ctx->ntasks) /* an image of nothing is never made, let alone a kill */
		return log_fail(&ctx->log, -ESRCH, "pid %d: no process could be seized", pid);
	share_classes(ctx);
	log_info(&ctx->log, "pid %d: %zu process(es) seized", pid, ctx->ntasks);
	CKPT_FAULT(CKPT_FAULT_SEIZED);
	/* a pre-copy round touches no socket: the tree's peers go on */
	if (ctx->flags & CKPT_PRECOPY)
		return 0;
	/* frozen: no peer of a connection hears from it until it runs again;
	 * the lock drops what new clients send too: the hold is done */
	r = ckpt_netlock_lock(ctx);
	ckpt_netlock_unhold(ctx);
	return r;
}

static void fill_header(struct img_header *h)
{
	struct utsname u;
	struct timespec ts;

	*h = (struct img_header){ .arch = 62, .page_size = 4096 };
	h->xfeatures = features_xcr0();
	h->xsave_size = features_xsave_size();
	if (uname(&u) == 0)
		snprintf(h->kernel_release, sizeof(h->kernel_release), "%s", u.release);
	clock_gettime(CLOCK_REALTIME, &ts);
	h->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int dump_tree(struct ckpt_ctx *ctx)
{
	TreeEntry tree = TREE_ENTRY__INIT;
	_cleanup_free_ TreeTask *tt = calloc(ctx->ntasks, sizeof(*tt));
	_cleanup_free_ TreeTask **ptt = calloc(ctx->ntasks, sizeof(*ptt));
	size_t ntids = 0;

	for (size_t i = 0; i < ctx->ntasks; i++)
		ntids += ctx->tasks[i].nthreads;
	_cleanup_free_ uint32_t *tids = calloc(ntids + 1, sizeof(*tids));
	if (!tt || !ptt || !tids)
		return -ENOMEM;
	ntids = 0;

	for (size_t i = 0; i < ctx->ntasks; i++) {
		const struct task *t = &ctx->tasks[i];
		tree_task__init(&tt[i]);
		tt[i].pid = t->vpid;
		tt[i].ppid = t->vppid;
		tt[i].pgid = t->vpgid;
		tt[i].sid = t->vsid;
		tt[i].has_exit_signal = true;
		tt[i].exit_signal = (uint32_t)t->stat.exit_signal;
		if (t->zombie) {
			tt[i].has_zombie = tt[i].has_exit_code = true;
			tt[i].zombie = true;
			tt[i].exit_code = (uint32_t)t->stat.exit_code;
		} else {
			tt[i].has_nthreads = true;
			tt[i].nthreads = (uint32_t)t->nthreads + 1;
			tt[i].n_tids = t->nthreads;
			tt[i].tids = tids + ntids;
			for (size_t j = 0; j < t->nthreads; j++)
				tids[ntids++] = (uint32_t)t->threads[j].vpid;
		}
		/* the parent's or a sibling's vpid (CLONE_PARENT) */
		const struct task *fw = t->files_with ? ctx_find_task(ctx, t->files_with) : NULL;
		const struct task *sw = t->fs_with ? ctx_find_task(ctx, t->fs_with) : NULL;
		tt[i].has_files_with = fw != NULL;
		tt[i].files_with = fw ? (uint32_t)fw->vpid : 0;
		tt[i].has_fs_with = sw != NULL;
		tt[i].fs_with = sw ? (uint32_t)sw->vpid : 0;
		ptt[i] = &tt[i];
	}
	tree.tasks = ptt;
	tree.n_tasks = ctx->ntasks;
	/* the lock left in ckpt's namespace: the root's, or its copy there
	 * (the same name), which may hold only connections of other
	 * namespaces to peers of ckpt's (netlock.c) */
	if ((ctx->flags & CKPT_KILL) && netlock_installed(ctx->netlock))
		tree.netlock = (char *)netlock_name_of(ctx->netlock);
	else if ((ctx->flags & CKPT_KILL) && netlock_installed(ctx->netlock_host))
		tree.netlock = (char *)netlock_name_of(ctx->netlock_host);
	return ctx_write_msg(ctx, REC_CORE_TREE, &tree.base);
}

/* Step "dump", for each task and thread: its begin record, before its kinds' records. */
int ckpt_task_begin(struct ckpt_ctx *ctx, struct task *t)
{
	TaskBegin tb = TASK_BEGIN__INIT;
	task_probes_free(t); /* collect has read them */
	tb.pid = t->vpid;
	return ctx_write_msg(ctx, REC_CORE_TASK, &tb.base);
}

/*
 * The progress line's total: the tree's resident anonymous and shared memory
 * as the kernel counts it (/proc/PID/status), an estimate of what the image
 * will hold; 0 (unknown) when it cannot be read.
 */
static uint64_t estimate_memory(struct ckpt_ctx *ctx)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		_cleanup_free_ char *text = NULL;
		size_t len;
		if (ctx->tasks[i].zombie || proc_read(ctx->tasks[i].pid, "status", &text, &len) < 0)
			continue;
		static const char *const keys[] = { "\nRssAnon:", "\nRssShmem:" };
		for (size_t k = 0; k < 2; k++) {
			const char *at = strstr(text, keys[k]);
			unsigned long long kib;
			if (at && sscanf(at + strlen(keys[k]), "%llu", &kib) == 1)
				sum += kib * 1024;
		}
	}
	return sum;
}

/*
 * The two page-copy buffers the page store fills in turn (pages_writer_async;
 * one, buf2 NULL, when ckpt may run on one CPU only), made before the seize: their pages are faulted in here, in bulk, and not
 * page by page at 1-2 GB/s in the first records while the tree is frozen.
 * MADV_DONTFORK: a child ckpt forks later neither gets them nor makes
 * their pages copy-on-write.
 */
/* The thread's: faults in only (a page in use keeps what it holds), a
 * huge page at a time: the populate holds ckpt's mmap lock, which an mmap
 * of ckpt's own (a thread's stack, a large malloc) waits for, 5 to 70 ms
 * for the whole 16 MiB here */
static void *fill_bufs(void *arg)
{
	struct ckpt_ctx *ctx = arg;
	/* at ckpt's real-time priority, which it inherits: at the normal one
	 * the tree's tasks took its CPU and it finished late (1,000 threads:
	 * 0.312 s against 0.285 at the bench median) */
	const size_t step = 2u << 20, len = (ctx->buf2 ? 2 : 1) * ctx->bufsize;
	for (size_t off = 0; off < len; off += step)
		(void)madvise((char *)ctx->buf + off, MIN(step, len - off), MADV_POPULATE_WRITE);
	return NULL;
}

static int alloc_copy_bufs(struct ckpt_ctx *ctx)
{
	/* one CPU to run on: a writer thread would only take turns with us */
	cpu_set_t cpus;
	bool two = sched_getaffinity(0, sizeof(cpus), &cpus) < 0 || CPU_COUNT(&cpus) > 1;
	size_t len = (two ? 2 : 1) * (size_t)COPY_BUF, huge = 2u << 20;
	uint8_t *p = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* on 2 MiB boundaries, in huge pages where the kernel has them */
	uint8_t *a = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + len < p + len + huge)
		munmap(a + len, (size_t)(p + len + huge - (a + len)));
	(void)madvise(a, len, MADV_HUGEPAGE);
	(void)madvise(a, len, MADV_DONTFORK);
	ctx->bufsize = COPY_BUF;
	ctx->buf = a;
	ctx->buf2 = two ? a + COPY_BUF : NULL;
	/* faulted in by a thread of its own on the other CPU while the tree
	 * is seized and collected (16 MiB zeroed: 20 ms, all before the seize,
	 * for a tree of small processes); the buffers may be used meanwhile
	 * (a page not in yet is faulted by its user), joined before the unmap */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* no signal for it: ckpt's thread takes them */
	if (two && pthread_create(&ctx->buf_filler, NULL, fill_bufs, ctx) == 0)
		ctx->buf_filling = true;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ctx->buf_filling && madvise(a, len, MADV_POPULATE_WRITE) < 0)
		memset(a, 0, len);
	return 0;
}

static void join_buf_filler(struct ckpt_ctx *ctx)
{
	if (ctx->buf_filling)
		pthread_join(ctx->buf_filler, NULL);
	ctx->buf_filling = false;
}

static void image_wrote(void *arg, uint64_t offset)
{
	progress_set(arg, offset);
}

/* Step "dump": the header and the tree record. */
int ckpt_dump_begin(struct ckpt_ctx *ctx)
{
	struct img_header h;
	int r, fd = ctx->image_fd;

	fill_header(&h);
	/* the image's id: a child image (incremental, mm-dirty.c) names it;
	 * drawn already if a pre-copy wrote it in the tracked processes */
	static const uint8_t none[16];
	if (!memcmp(ctx->image_id, none, sizeof(none)) &&
	    getrandom(ctx->image_id, sizeof(ctx->image_id), 0) != (ssize_t)sizeof(ctx->image_id))
		return log_fail(&ctx->log, -EIO, "cannot draw the image's id: %s", strerror(errno));
	memcpy(h.image_id, ctx->image_id, sizeof(h.image_id));
	if (!ctx->buf && (r = alloc_copy_bufs(ctx)) < 0)
		return log_fail(&ctx->log, r, "cannot allocate the copy buffers: %s", strerror(-r));
	if (ctx->flags & CKPT_COMPRESS) {
		/* compressed before the seal: ciphertext does not compress */
		h.flags |= IMG_HDR_ZSTD;
		/* two records compressed at once by the writer's threads where
		 * ckpt may use two CPUs (buf2), while the next is read */
		r = pages_z_new(&ctx->pz, ZSTD_LEVEL, ctx->buf2 ? 2 : 1, COPY_BUF);
		if (r < 0)
			return log_fail(&ctx->log, r, "cannot compress the image: %s", strerror(-r));
	}
	/* --key: every byte goes through the seal (encrypted, authenticated) */
	if (ctx->key && (r = img_seal_new(&ctx->seal, fd, ctx->key, IMG_KEY_BYTES)) < 0)
		return log_fail(&ctx->log, r, "cannot write the image: %s", strerror(-r));
	r = img_writer_init_sealed(&ctx->w, fd, ctx->seal, &h);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot write the image: %s", strerror(-r));
	/* to a file on a disk: page bytes by O_DIRECT, not through the page
	 * cache (img.h; DESIGN.md "Writing to a disk"); elsewhere as before.
	 * The page records indexed for a lazy restart (a sealed image is read
	 * whole: none) */
	if (!ctx->seal && (r = img_writer_index(&ctx->w, MM_REC_PAGES)) < 0)
		return log_fail(&ctx->log, r, "cannot write the image: %s", strerror(-r));
	if (!ctx->seal) {
		r = img_writer_direct(&ctx->w);
		if (r < 0 && r != -EINVAL)
			log_debug(&ctx->log, "image: pages written through the page cache (no "
				  "direct I/O: %s)", strerror(-r));
		else if (r == 0)
			log_debug(&ctx->log, "image: pages written with O_DIRECT");
	}
	if (ctx->progress.fn) {
		ctx->progress.total = estimate_memory(ctx);
		ctx->w.wrote = image_wrote;
		ctx->w.wrote_arg = &ctx->progress;
	}
	return dump_tree(ctx);
}

/* Step "image end": the trailer. */
int ckpt_dump_end(struct ckpt_ctx *ctx)
{
	int r = img_writer_finish(&ctx->w);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot complete the image: %s", strerror(-r));
	if (ctx->pz) {
		struct pages_z_stats st;
		pages_z_stats(ctx->pz, &st);
		log_info(&ctx->log, "pages: %llu bytes stored as %llu (zstd: %llu of %llu records "
			 "compressed)", (unsigned long long)st.raw, (unsigned long long)st.stored,
			 (unsigned long long)st.compressed, (unsigned long long)st.records);
	}
	log_info(&ctx->log, "image complete: %llu records, %llu bytes (%llu by direct I/O)",
		 (unsigned long long)ctx->w.records, (unsigned long long)ctx->w.offset,
		 (unsigned long long)ctx->w.direct_bytes);
	return 0;
}

/*
 * Waits until pid is gone (reaped by its parent), up to timeout_ms. A
 * parent outside the tree usually reaps within a few milliseconds: it is
 * looked for every millisecond at first (a 10 ms step made every
 * checkpoint --kill up to 10 ms longer than the reaping), every 10 ms after.
 */
static bool wait_gone(pid_t pid, int timeout_ms)
{
	char path[32];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	for (int waited_us = 0; waited_us < timeout_ms * 1000;) {
		if (stat(path, &st) < 0)
			return true;
		int step = waited_us < 100000 ? 1000 : 10000;
		usleep(step);
		waited_us += step;
	}
	return stat(path, &st) < 0;
}

/* Waits until pid is dead (a zombie or gone), up to timeout_ms. */
static bool wait_dead(pid_t pid, int timeout_ms)
{
	for (int waited = 0;; waited += 2) {
		_cleanup_free_ char *text = NULL;
		struct proc_stat st;
		if (proc_read(pid, "stat", &text, NULL) < 0 || proc_parse_stat(text, &st) < 0 ||
		    st.state == 'Z' || st.state == 'X')
			return true;
		if (waited >= timeout_ms)
			return false;
		usleep(2000);
	}
}

/* The threads of t released together (one request to the guardian per few). */
static void finish_threads(struct ckpt_ctx *ctx, struct task *t, bool ok,
			   struct puppet_asleep *asleep)
{
	size_t n = t->nthreads;
	_cleanup_free_ struct puppet **ps = calloc(n ? n : 1, sizeof(*ps));
	_cleanup_free_ int *sigs = calloc(n ? n : 1, 2 * sizeof(*sigs));
	int sig = ok && (ctx->flags & CKPT_LEAVE_FROZEN) ? SIGSTOP : t->pup.group_stopped;

	for (size_t i = 0; i < n; i++) {
		struct puppet *p = &t->threads[i].pup;
		p->scratch = 0; /* the leader's, unmapped by it */
		if (!ps || !sigs) {
			int e = puppet_release(p, sig);
			if (e < 0)
				log_warn(&ctx->log, "thread %d: releasing it failed: %s", p->pid,
					 strerror(-e));
			continue;
		}
		ps[i] = p;
		sigs[i] = sig;
	}
	if (!ps || !sigs)
		return;
	puppet_release_many(ps, sigs, n, sigs + n);
	for (size_t i = 0; i < n; i++)
		if (sigs[n + i] < 0)
			log_warn(&ctx->log, "thread %d: releasing it failed: %s", ps[i]->pid,
				 strerror(-sigs[n + i]));
	for (size_t i = 0; !sig && i < n; i++)
		puppet_asleep_add(asleep, &t->threads[i].pup);
}

/* Kills the held tasks of ctx->tasks whose depth is d, and their threads,
 * together (one request to the guardian per few: their deaths overlap).
 * A process is killed once, by its first held task: the others of its
 * thread group die of that kill and are only waited for. */
static void kill_level(struct ckpt_ctx *ctx, const int *depth, int d)
{
	size_t n = 0;
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (depth[i] == d)
			n += 1 + ctx->tasks[i].nthreads;
	_cleanup_free_ struct puppet **ps = calloc(n ? n : 1, sizeof(*ps));
	_cleanup_free_ bool *killed = calloc(n ? n : 1, sizeof(*killed));
	n = 0;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (depth[i] != d)
			continue;
		bool group = false;
		for (size_t j = 0; j <= t->nthreads; j++) {
			struct puppet *p = j < t->nthreads ? &t->threads[j].pup : &t->pup;
			if (ps && killed) {
				killed[n] = group && p->held;
				group = group || p->held;
				ps[n++] = p;
			} else if (p->held) {
				puppet_kill(p);
			}
		}
	}
	if (ps && killed)
		puppet_kill_many(ps, killed, n);
}

/* The parent p reaps its children of depth d that were killed (an injected
 * wait4 each, in batches). */
static void reap_children(struct ckpt_ctx *ctx, struct task *p, const int *depth, int d)
{
	struct puppet_call c[PUPPET_BATCH_MAX];
	size_t n = 0;
	for (size_t i = 0; i <= ctx->ntasks; i++) {
		if (n == PUPPET_BATCH_MAX || (i == ctx->ntasks && n)) {
			if (puppet_syscalls(&p->pup, c, n) < 0)
				return;
			n = 0;
		}
		if (i < ctx->ntasks && depth[i] == d && ctx->tasks[i].stat.ppid == p->pid)
			c[n++] = PUPPET_CALL(SYS_wait4, ctx->tasks[i].pid, 0, __WALL, 0);
	}
}

/*
 * CKPT_KILL: children first, each reaped by its parent while that is still
 * held (an injected wait4), so that no zombie waits for init to reap it
 * late; the root is reaped by its own parent. The tasks of one depth die
 * together, and each parent reaps its children by one batch.
 */
static void kill_tree(struct ckpt_ctx *ctx)
{
	_cleanup_free_ int *depth = calloc(ctx->ntasks ? ctx->ntasks : 1, sizeof(*depth));
	int max = 0;
	for (size_t i = 0; depth && i < ctx->ntasks; i++) {
		/* its ancestors in the tree (bounded: a cycle cannot be, but) */
		struct task *p = &ctx->tasks[i];
		while ((p = ctx_find_task(ctx, p->stat.ppid)) && depth[i] < (int)ctx->ntasks)
			depth[i]++;
		max = depth[i] > max ? depth[i] : max;
	}
	for (int d = max; depth && d >= 0; d--) {
		kill_level(ctx, depth, d);
		for (size_t i = 0; d > 0 && i < ctx->ntasks; i++)
			if (depth[i] == d - 1 && ctx->tasks[i].pup.held)
				reap_children(ctx, &ctx->tasks[i], depth, d);
	}
	for (size_t i = ctx->ntasks; !depth && i-- > 0;) { /* no memory: one by one */
		struct task *t = &ctx->tasks[i];
		for (size_t j = 0; j < t->nthreads; j++)
			if (t->threads[j].pup.held)
				puppet_kill(&t->threads[j].pup);
		if (t->pup.held)
			puppet_kill(&t->pup);
		struct task *p = ctx_find_task(ctx, t->stat.ppid);
		if (p && p->pup.held)
			puppet_syscall(&p->pup, SYS_wait4, t->pid, 0, __WALL, 0);
	}
	for (size_t i = 0; i < ctx->ntasks; i++) {
		pid_t pid = ctx->tasks[i].pid;
		/* a container's init: its pid here is not one a restart takes
		 * (a new pid namespace is made), and whoever reaps it outside
		 * may take its time (seconds for some inits) */
		if (i == 0 && ctx->container && wait_dead(pid, 10000))
			continue;
		/* a child of ckpt's caller (the library's): reaped by it
		 * only once this call returns */
		if (i == 0 && ctx->tasks[0].stat.ppid == getpid() && wait_dead(pid, 10000))
			continue;
		/* a child of the program that ran ckpt: one that waits for ckpt
		 * (python's subprocess.run) reaps it only once ckpt exits, and a
		 * shell reaps it at once (bash's waitpid(-1) while ckpt runs) */
		if (i == 0 && ctx->tasks[0].stat.ppid == getppid() && wait_dead(pid, 10000)) {
			if (!wait_gone(pid, 200))
				log_info(&ctx->log,
					 "pid %d: killed; its parent, the program that ran ckpt, "
					 "reaps it",
					 pid);
			continue;
		}
		if (!wait_gone(pid, 10000))
			log_warn(&ctx->log,
				 "pid %d: killed, but its parent has not reaped it yet; its pid "
				 "stays taken until then",
				 pid);
	}
}

static void finish_tasks(struct ckpt_ctx *ctx, bool ok)
{
	if (ok && (ctx->flags & CKPT_KILL))
		return kill_tree(ctx);
	/* done only once those let go in a call are in it again */
	struct puppet_asleep asleep = {0};
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (!t->pup.held) {
			finish_threads(ctx, t, ok, &asleep);
			continue;
		}
		int e = puppet_scratch_unmap(&t->pup);
		if (e < 0)
			log_warn(&ctx->log, "pid %d: cannot unmap ckpt's scratch area: %s", t->pid,
				 strerror(-e));
		finish_threads(ctx, t, ok, &asleep);
		/* a task that was stopped stays stopped, by the signal it had */
		int sig = ok && (ctx->flags & CKPT_LEAVE_FROZEN) ? SIGSTOP : t->pup.group_stopped;
		e = puppet_release(&t->pup, sig);
		if (e < 0)
			log_warn(&ctx->log, "pid %d: releasing it failed: %s", t->pid, strerror(-e));
		if (!sig)
			puppet_asleep_add(&asleep, &t->pup);
	}
	ctx_wait_asleep(&ctx->log, &asleep);
}

/* Step "let go": every task released as it was, or killed (CKPT_KILL). */
int ckpt_let_go(struct ckpt_ctx *ctx)
{
	finish_tasks(ctx, !ctx->failed);
	log_debug(&ctx->log, "tasks released");
	/* the tasks run again (or, with CKPT_KILL, the lock stays for the restart) */
	ckpt_netlock_unlock(ctx, !ctx->failed);
	log_debug(&ctx->log, "unlocked");
	puppet_guard_end(ctx->guard);
	ctx->guard = NULL;
	return 0;
}

/* The caller's commit message (ckpt_opts.commit_msg), if it has one. */
static bool committed_msg(const struct ckpt_opts *o)
{
	return o->size >= offsetof(struct ckpt_opts, commit_msg_len) + sizeof(size_t) &&
	       o->committed && o->commit_msg && o->commit_msg_len;
}

/* An injected instruction that faulted (a bug of ckpt's, puppet.c): a call
 * whose result nothing looks at did not run, so the image may lack what it
 * read. */
static int check_faulted(struct ckpt_ctx *ctx)
{
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		for (size_t j = 0; j <= t->nthreads; j++) {
			const struct puppet *p = j ? &t->threads[j - 1].pup : &t->pup;
			if (p->faulted)
				return log_fail(
				    &ctx->log, -EFAULT,
				    "%s %d: a call ckpt injected in it faulted (a bug of "
				    "ckpt's): the image may lack some of its state and is "
				    "not kept",
				    j ? "thread" : "pid", p->pid);
		}
	}
	return 0;
}

/* Step "image done": the image under its final name before any task dies
 * (cmd-checkpoint.c); then, with CKPT_KILL, if ckpt dies the guardian
 * finishes the kill rather than resuming the tree. */
int ckpt_image_done(struct ckpt_ctx *ctx)
{
	const struct ckpt_opts *o = ctx->opts;
	int r = check_faulted(ctx);
	if (r < 0)
		return r;
	if (o->size >= offsetof(struct ckpt_opts, image_done_arg) + sizeof(void *) &&
	    o->image_done) {
		char why[256] = "";
		r = o->image_done(o->image_done_arg, why, sizeof(why));
		if (r < 0)
			return log_fail(&ctx->log, r, "the image is complete, but %s",
					why[0] ? why : strerror(-r));
	}
	/* should ckpt die from the commit on: what a migration does after it */
	if ((ctx->flags & CKPT_KILL) && committed_msg(o) &&
	    (r = puppet_guard_on_death(ctx->guard, GUARD_COMMITTED, o->commit_fd, o->commit_msg,
				       o->commit_msg_len)) < 0)
		return log_fail(&ctx->log, r, "the guardian cannot hold the commit message: %s",
				strerror(-r));
	if ((ctx->flags & CKPT_KILL) && (r = ckpt_netlock_arm_moved(ctx)) < 0)
		return r;
	if ((ctx->flags & CKPT_KILL) && (r = puppet_guard_commit(ctx->guard)) < 0)
		return log_fail(&ctx->log, r, "the guardian process is gone: %s", strerror(-r));
	if (ctx->flags & CKPT_KILL)
		CKPT_FAULT(CKPT_FAULT_COMMIT);
	if ((ctx->flags & CKPT_KILL) &&
	    o->size >= offsetof(struct ckpt_opts, committed) + sizeof(void *) && o->committed)
		o->committed(o->image_done_arg);
	return r;
}

static int check_opts(struct ckpt_ctx *ctx, pid_t pid, const struct ckpt_opts *o)
{
	int r = o ? opts_key(o, &ctx->key) : -EINVAL;
	if (r == -E2BIG)
		return log_fail(&ctx->log, r, "options of a newer ckpt (a struct ckpt_opts of %zu "
				"bytes with options this one lacks)", o->size);
	if (r < 0 || (o->flags & ~CKPT_FLAGS_ALL))
		return log_fail(&ctx->log, -EINVAL, "unknown checkpoint flags or options (or a key "
				"that is not %d bytes)", CKPT_KEY_BYTES);
	if (pid <= 0)
		return log_fail(&ctx->log, -EINVAL, "pid %d: not a valid pid", pid);
	if (pid == getpid())
		return log_fail(&ctx->log, -EINVAL, "pid %d: ckpt cannot checkpoint itself", pid);
	if (committed_msg(o) && o->commit_msg_len > GUARD_UNDO_MAX)
		return log_fail(&ctx->log, -EINVAL, "a commit message of %zu bytes (at most %d)",
				o->commit_msg_len, GUARD_UNDO_MAX);
	if ((o->flags & CKPT_KILL) && (o->flags & CKPT_LEAVE_FROZEN))
		return log_fail(&ctx->log, -EINVAL, "CKPT_KILL and CKPT_LEAVE_FROZEN exclude each other");
	if ((o->flags & CKPT_VERIFY) && !(o->flags & CKPT_KILL))
		return log_fail(&ctx->log, -EINVAL, "CKPT_VERIFY goes with CKPT_KILL");
	if ((o->flags & CKPT_PRECOPY) && (o->flags & (CKPT_KILL | CKPT_LEAVE_FROZEN)))
		return log_fail(&ctx->log, -EINVAL, "CKPT_PRECOPY leaves the tree running: not with "
				"CKPT_KILL or CKPT_LEAVE_FROZEN");
	if ((o->flags & CKPT_COMPRESS) && !pages_have_zstd())
		return log_fail(&ctx->log, -EPROTONOSUPPORT, "cannot compress the image: this ckpt "
				"was built without zstd");
	return 0;
}

static void fill_result(struct ckpt_ctx *ctx, struct ckpt_opts *o, uint64_t t0)
{
	struct ckpt_result *res = opts_result(o);
	if (!res)
		return;
	*res = (struct ckpt_result){ .processes = ctx->ntasks, .memory_bytes = ctx->mem_bytes,
				     .image_bytes = ctx->w.offset, .root = ctx->pid,
				     .elapsed_us = now_us() - t0 };
	for (size_t i = 0; i < ctx->ntasks; i++)
		res->threads += ctx->tasks[i].zombie ? 0 : 1 + ctx->tasks[i].nthreads;
	res->warnings = ctx->log.warnings;
	if (o->size >= offsetof(struct ckpt_opts, image_id) + sizeof(o->image_id))
		memcpy(o->image_id, ctx->image_id, sizeof(o->image_id));
}

int ckpt_checkpoint_opts(pid_t pid, int fd, struct ckpt_opts *o)
{
	struct ckpt_ctx ctx = { .pid = pid, .image_fd = fd, .opts = o };
	uint64_t t0 = now_us();

	log_init(&ctx.log, o ? o->logfd : -1, o && o->log_level ? o->log_level : CKPT_LOG_INFO,
		 o ? o->errbuf : NULL, o ? o->errbuf_len : 0, "checkpoint");
	int r = check_opts(&ctx, pid, o);
	if (r < 0)
		return r;
	ctx.flags = o->flags;
	progress_init(&ctx.progress, o, CKPT_PHASE_CHECKPOINT, t0);
	r = objhash_init(&ctx.objs);
	if (r < 0)
		return r;
	/* ckpt and its guardian ahead of a busy machine's threads (rtprio.h) */
	struct rtprio_was prio;
	if (rtprio_raise(&prio))
		log_debug(&ctx.log, "ckpt at real-time priority 1 while it holds the tree");
	/* the tracer: if ckpt dies, it puts the tree back as it was */
	r = puppet_guard_start(&ctx.guard);
	if (r < 0) {
		rtprio_restore(&prio);
		objhash_free(&ctx.objs, free_obj);
		return log_fail(&ctx.log, r, "cannot start the guardian process: %s", strerror(-r));
	}

	/* failing here is not fatal: ckpt_dump_begin tries again */
	(void)!alloc_copy_bufs(&ctx);
	r = seq_ckpt_run(&ctx);
	mm_pre_end(&ctx, r < 0);
	progress_end(&ctx.progress);
	if (r >= 0) {
		log_info(&ctx.log, "pid %d: checkpoint done%s", pid,
			 (o->flags & CKPT_KILL) ? ", killed" : "");
		fill_result(&ctx, o, t0);
	}
	for (size_t i = 0; i < ctx.ntasks; i++)
		release_task(&ctx.tasks[i]);
	free(ctx.tasks);
	join_buf_filler(&ctx);
	if (ctx.buf)
		munmap(ctx.buf, (ctx.buf2 ? 2 : 1) * ctx.bufsize);
	img_writer_drop(&ctx.w); /* a checkpoint that failed before its trailer */
	img_seal_free(ctx.seal);
	pages_z_free(ctx.pz);
	objhash_free(&ctx.objs, free_obj);
	fdobj_index_free(ctx.fdobj_index);
	free(ctx.tcp_seen);
	free(ctx.cg_self);
	rtprio_restore(&prio);
	return r < 0 ? r : 0;
}

/*
 * The tracking of a pre-copy that failed: the tree held just long enough
 * to close ckpt's userfaultfd and note in each process (mm-dirty.c), then
 * released; nothing else of it is read or changed.
 */
int ckpt_untrack(pid_t pid, int logfd, char *errbuf, size_t errbuf_len)
{
	struct ckpt_opts o = { .size = sizeof(o), .flags = CKPT_SUBTREE | CKPT_PRECOPY,
			       .logfd = logfd, .errbuf = errbuf, .errbuf_len = errbuf_len };
	struct ckpt_ctx ctx = { .pid = pid, .image_fd = -1, .opts = &o };
	int r, n = 0;

	log_init(&ctx.log, logfd, CKPT_LOG_INFO, errbuf, errbuf_len, "untrack");
	if ((r = check_opts(&ctx, pid, &o)) < 0)
		return r;
	ctx.flags = o.flags;
	if ((r = objhash_init(&ctx.objs)) < 0)
		return r;
	r = puppet_guard_start(&ctx.guard);
	if (r < 0)
		log_fail(&ctx.log, r, "cannot start the guardian process: %s", strerror(-r));
	else
		r = ckpt_seize(&ctx);
	for (size_t i = 0; r >= 0 && i < ctx.ntasks; i++) {
		struct task *t = &ctx.tasks[i];
		if (t->zombie || !t->pup.held)
			continue;
		r = puppet_find_syscall(&t->pup);
		if (r < 0)
			r = log_fail(&ctx.log, r, "pid %d: no syscall instruction to close its "
				     "tracking with", t->pid);
		else if ((r = mm_dirty_untrack(&ctx, t)) > 0)
			n++;
	}
	if (r < 0)
		ctx.failed = r;
	if (ctx.guard)
		ckpt_let_go(&ctx);
	for (size_t i = 0; i < ctx.ntasks; i++)
		release_task(&ctx.tasks[i]);
	free(ctx.tasks);
	objhash_free(&ctx.objs, free_obj);
	if (r >= 0)
		log_info(&ctx.log, "pid %d: tracking removed from %d process(es)", pid, n);
	return r < 0 ? r : 0;
}

int ckpt_checkpoint(pid_t pid, int fd, unsigned long flags, int logfd)
{
	struct ckpt_opts o = { .size = sizeof(o), .flags = flags, .logfd = logfd };
	return ckpt_checkpoint_opts(pid, fd, &o);
}
