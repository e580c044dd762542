/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Scheduling and the other attributes of a task that a puppet would
 * otherwise get from ckpt: per thread the policy with its flags (reset on
 * fork), nice value, real-time priority, deadline parameters and utilisation
 * clamps (sched_getattr), the CPU affinity, the I/O priority and the audit
 * loginuid; per process oom_score_adj, coredump_filter and the membarrier
 * registrations.
 *
 * Policy, affinity and I/O priority are read and set from ckpt's side
 * (sched_getattr, sched_setattr and ioprio_get/set take a tid);
 * coredump_filter is written in /proc/PID; loginuid can only be written by the task
 * itself (/proc/thread-self/loginuid, by injected open and write, while the
 * puppet still has ckpt's CAP_AUDIT_CONTROL: the kind comes before creds);
 * oom_score_adj is written by ckpt in /proc/PID; membarrier registrations are
 * read by an injected MEMBARRIER_CMD_GET_REGISTRATIONS (Linux 6.3) and made
 * again by injected MEMBARRIER_CMD_REGISTER_* calls.
 *
 * What the caller may not do fails the restart, naming the task: a
 * real-time or deadline policy, or a nice value, needs CAP_SYS_NICE as it
 * would for the caller itself. Two things are kept as close as this machine
 * allows, with a warning: an affinity naming CPUs this machine does not
 * have (the CPUs it has of them, or all), and an oom_score_adj below ckpt's
 * own, which needs CAP_SYS_RESOURCE (kept at ckpt's).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <linux/ioprio.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/checks.h"
#include "sched.pb-c.h"
#include "util/cleanup.h"
#include "util/par.h"

enum { SCHED_ENTRY = REC_TYPE(KID_sched, 1) };

#ifndef MEMBARRIER_CMD_GET_REGISTRATIONS
#define MEMBARRIER_CMD_GET_REGISTRATIONS (1 << 9)
#endif

/* the registrations ckpt knows how to make again */
static const uint32_t membarrier_regs[] = {
	MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
	MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
	MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
	MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
};

/* struct sched_attr of <linux/sched/types.h>, which clashes with <sched.h> */
struct sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
	uint32_t sched_util_min, sched_util_max;
};

#define UCLAMP_MAX 1024u
#define AFFINITY_MAX 1024 /* bytes: 8192 CPUs */

struct sched_ckpt {
	SchedEntry e;
	uint8_t affinity[AFFINITY_MAX];
	int membarrier_call; /* the probe (a process's) */
	bool read;           /* a thread's, read with its siblings' */
};

static int sched_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct sched_ckpt *k = task_state(t, KIND_sched, sizeof(*k));
	(void)ctx;
	if (!k)
		return -ENOMEM;
	if (!t->leader)
		k->membarrier_call = task_probe_call(
			t, PUPPET_CALL(SYS_membarrier, MEMBARRIER_CMD_GET_REGISTRATIONS, 0, 0));
	return 0;
}

static int read_u32_file(pid_t pid, const char *name, long long *ret)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read_one(pid, name, &text);
	if (r < 0)
		return r;
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int collect_process(struct ckpt_ctx *ctx, struct task *t, struct sched_ckpt *k)
{
	long long v;
	if (read_u32_file(t->pid, "oom_score_adj", &v) == 0) {
		k->e.has_oom_score_adj = true;
		k->e.oom_score_adj = (int32_t)v;
	}
	_cleanup_free_ char *text = NULL;
	if (proc_read(t->pid, "coredump_filter", &text, NULL) >= 0) {
		k->e.has_coredump_filter = true;
		k->e.coredump_filter = (uint32_t)strtoul(text, NULL, 16);
	}
	long regs = task_probe_ret(t, k->membarrier_call);
	if (regs == -EINVAL || regs == -ENOSYS)
		return 0; /* an older kernel: registrations cannot be read */
	if (regs < 0)
		return log_fail(&ctx->log, (int)regs, "pid %d: cannot read membarrier registrations: %s",
				t->pid, strerror((int)-regs));
	uint32_t known = 0;
	for (size_t i = 0; i < ARRAY_SIZE(membarrier_regs); i++)
		known |= membarrier_regs[i];
	if ((uint32_t)regs & ~known)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: membarrier registrations 0x%lx include ones ckpt cannot make again",
				t->pid, (unsigned long)regs & ~known);
	k->e.has_membarrier = true;
	k->e.membarrier = (uint32_t)regs;
	return 0;
}

/* What sched_collect reads of a task, into k (k->e initialized): 0, or
 * -errno with *what the call that failed (nothing logged). */
static int read_sched(pid_t pid, struct sched_ckpt *k, const char **what)
{
	struct sched_attr attr = { 0 };

	*what = "scheduling policy";
	if (syscall(SYS_sched_getattr, pid, &attr, sizeof(attr), 0) < 0)
		return -errno;
	k->e.policy = attr.sched_policy;
	k->e.flags = attr.sched_flags;
	k->e.nice = attr.sched_nice;
	k->e.priority = attr.sched_priority;
	if (attr.sched_policy == SCHED_DEADLINE) {
		k->e.has_dl_runtime = k->e.has_dl_deadline = k->e.has_dl_period = true;
		k->e.dl_runtime = attr.sched_runtime;
		k->e.dl_deadline = attr.sched_deadline;
		k->e.dl_period = attr.sched_period;
	}
	/* defaults 0 and 1024; a kernel without uclamp reads 0 and 0 */
	if (attr.sched_util_max != 0 && (attr.sched_util_min != 0 || attr.sched_util_max != UCLAMP_MAX)) {
		k->e.has_util_min = k->e.has_util_max = true;
		k->e.util_min = attr.sched_util_min;
		k->e.util_max = attr.sched_util_max;
	}
	*what = "CPU affinity";
	long n = syscall(SYS_sched_getaffinity, pid, sizeof(k->affinity), k->affinity);
	if (n < 0)
		return -errno;
	k->e.affinity.data = k->affinity;
	k->e.affinity.len = (size_t)n;
	long prio = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, pid);
	if (prio > 0) {
		k->e.has_ioprio = true;
		k->e.ioprio = (uint32_t)prio;
	}
	long long uid;
	if (read_u32_file(pid, "loginuid", &uid) == 0) {
		k->e.has_loginuid = true;
		k->e.loginuid = (uint32_t)uid;
	}
	return 0;
}

/* A thread's, read ahead by its process's collect (read_threads) */
static void read_thread(void *arg, size_t i, unsigned slot)
{
	struct task *th = &((struct task *)arg)->threads[i];
	struct sched_ckpt *k = th->kstate[KIND_sched];
	const char *what;
	(void)slot;
	if (!k)
		return;
	sched_entry__init(&k->e);
	k->read = read_sched(th->pid, k, &what) == 0;
}

static int sched_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct sched_ckpt *k = task_state(t, KIND_sched, sizeof(*k));
	const char *what;

	if (!k)
		return -ENOMEM;
	/* many threads: read on every CPU, each one's state its own; one
	 * that failed is read again below, which tells why */
	if (!t->leader && t->nthreads >= 32)
		par_for(t->nthreads, par_cpus(), read_thread, t);
	if (k->read)
		return 0;
	sched_entry__init(&k->e);
	int r = read_sched(t->pid, k, &what);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its %s: %s", t->pid, what,
				strerror(-r));
	return t->leader ? 0 : collect_process(ctx, t, k);
}

static int sched_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct sched_ckpt *k = t->kstate[KIND_sched];
	return ctx_write_msg(ctx, SCHED_ENTRY, &k->e.base);
}

const char *sched_entry_invalid(const SchedEntry *e)
{
	if (e->affinity.len > AFFINITY_MAX)
		return "an affinity mask of more than 8192 cpus";
	if (e->nice < -20 || e->nice > 19)
		return "nice is out of range";
	if (e->has_util_max && (e->util_max > UCLAMP_MAX || e->util_min > e->util_max))
		return "utilization clamps are out of range";
	if (e->has_oom_score_adj && (e->oom_score_adj < -1000 || e->oom_score_adj > 1000))
		return "oom_score_adj is out of range";
	return NULL;
}

static int sched_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	SchedEntry *e = rctx_load_one(ctx, t, rec, KIND_sched, SCHED_ENTRY, &sched_entry__descriptor);
	const char *why = e ? sched_entry_invalid(e) : NULL;
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: scheduling of pid %d: %s",
				rec->index, t->pid, why);
	return e ? 0 : -EINVAL;
}

/* The saved CPUs this machine has; all of them if it has none of them. */
/*
 * What every puppet has until its own restore here: ckpt's, inherited by
 * the root and, through it, by every task forked or cloned before step
 * "task state" (all of them). Read once a restart (ctx->sched_start), so
 * that a task whose image has the same makes no call: a thread of 1,000
 * read its loginuid and set its policy and affinity, each a call.
 */
struct sched_start {
	bool have_loginuid;
	bool have_attr;
	bool have_cpus;
	bool have_oom;
	bool have_coredump;
	long long loginuid;
	long long oom;          /* oom_score_adj (per process, kept by fork) */
	uint32_t coredump;      /* coredump_filter (per mm, kept by fork) */
	struct sched_attr attr;
	cpu_set_t cpus; /* ckpt's own; from before the pin if pinned */
};

static const struct sched_start *sched_start(struct rst_ctx *ctx)
{
	if (ctx->sched_start)
		return ctx->sched_start;
	struct sched_start *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->have_loginuid = read_u32_file(getpid(), "loginuid", &b->loginuid) == 0;
	b->have_oom = read_u32_file(getpid(), "oom_score_adj", &b->oom) == 0;
	_cleanup_free_ char *text = NULL;
	char *end = NULL;
	if (proc_read_one(getpid(), "coredump_filter", &text) >= 0) {
		b->coredump = (uint32_t)strtoul(text, &end, 16);
		b->have_coredump = end != text;
	}
	b->have_attr = syscall(SYS_sched_getattr, 0, &b->attr, sizeof(b->attr), 0) == 0;
	if (ctx->affinity)
		b->cpus = *ctx->affinity;
	else
		b->have_cpus = sched_getaffinity(0, sizeof(b->cpus), &b->cpus) == 0;
	ctx->sched_start = b;
	return b;
}

static int restore_affinity(struct rst_ctx *ctx, struct rst_task *t, const SchedEntry *e)
{
	cpu_set_t want, here;
	CPU_ZERO(&want);
	memcpy(&want, e->affinity.data, MIN(e->affinity.len, sizeof(want)));
	/* ckpt's own: from before it pinned its thread (restart.c) */
	const struct sched_start *b = sched_start(ctx);
	if (ctx->affinity)
		here = *ctx->affinity;
	else if (b && b->have_cpus)
		here = b->cpus;
	else if (sched_getaffinity(0, sizeof(here), &here) < 0)
		return log_fail(&ctx->log, -errno, "cannot read ckpt's CPU affinity: %m");
	cpu_set_t both;
	CPU_AND(&both, &want, &here);
	if (!CPU_EQUAL(&both, &want)) {
		log_warn(&ctx->log, "pid %d: its CPU affinity names CPUs this machine does not "
			 "let ckpt use; it gets %s", t->pid, CPU_COUNT(&both) ? "the others" : "them all");
		if (!CPU_COUNT(&both))
			both = here;
	}
	/* not pinned, the task has ckpt's already */
	if (!ctx->affinity && b && b->have_cpus && CPU_EQUAL(&both, &b->cpus))
		return 0;
	if (sched_setaffinity(t->pup.pid, sizeof(both), &both) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot set its CPU affinity: %m", t->pid);
	return 0;
}

static const char *policy_name(uint32_t policy)
{
	static const char *const names[] = { "SCHED_OTHER", "SCHED_FIFO", "SCHED_RR",
					     "SCHED_BATCH", "SCHED_ISO",  "SCHED_IDLE",
					     "SCHED_DEADLINE" };
	return policy < ARRAY_SIZE(names) ? names[policy] : "an unknown policy";
}

static int restore_policy(struct rst_ctx *ctx, struct rst_task *t, const SchedEntry *e)
{
	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = e->policy,
		.sched_flags = e->flags & (SCHED_FLAG_RESET_ON_FORK | SCHED_FLAG_RECLAIM |
					   SCHED_FLAG_DL_OVERRUN),
		.sched_nice = e->nice,
		.sched_priority = e->priority,
		.sched_runtime = e->dl_runtime,
		.sched_deadline = e->dl_deadline,
		.sched_period = e->dl_period,
	};
	if (e->has_util_max) {
		attr.sched_flags |= SCHED_FLAG_UTIL_CLAMP;
		attr.sched_util_min = e->util_min;
		attr.sched_util_max = e->util_max;
	}
	/* the nice value stays under a policy that ignores it (idle,
	 * real-time) and reads back: set it first, as a normal policy (a
	 * normal policy takes it with the rest: one call) */
	struct sched_attr nice = { .size = sizeof(nice), .sched_nice = e->nice };
	bool normal = e->policy == SCHED_OTHER || e->policy == SCHED_BATCH;
	/* a normal policy the task has already, as ckpt's (a clone keeps its
	 * creator's policy, nice and clamps unless reset on fork) */
	const struct sched_start *b = sched_start(ctx);
	if (normal && !ctx->prio.raised && b && b->have_attr && !b->attr.sched_flags &&
	    !attr.sched_flags && b->attr.sched_policy == attr.sched_policy &&
	    b->attr.sched_nice == attr.sched_nice && b->attr.sched_priority == attr.sched_priority)
		return 0;
	if ((normal || syscall(SYS_sched_setattr, t->pup.pid, &nice, 0) == 0) &&
	    syscall(SYS_sched_setattr, t->pup.pid, &attr, 0) == 0)
		return 0;
	/* a normal policy whose nice is below ckpt's own: kept at ckpt's */
	int err = errno, now = getpriority(PRIO_PROCESS, (id_t)t->pup.pid);
	if (err == EPERM && (e->policy == SCHED_OTHER || e->policy == SCHED_BATCH ||
			       e->policy == SCHED_IDLE) && e->nice < now) {
		attr.sched_nice = now;
		if (syscall(SYS_sched_setattr, t->pup.pid, &attr, 0) == 0) {
			log_warn(&ctx->log, "pid %d: nice %d is below ckpt's and cannot be set; "
				 "kept at %d", t->pid, e->nice, now);
			return 0;
		}
	}
	return log_fail(&ctx->log, -err, "pid %d: cannot set %s (priority %u, nice %d): %s",
			t->pid, policy_name(e->policy), e->priority, e->nice, strerror(err));
	return 0;
}

/* Written by the task itself, the only one the kernel lets write it. */
static int restore_loginuid(struct rst_ctx *ctx, struct rst_task *t, uint32_t uid)
{
	struct puppet *p = &t->pup;
	/* it has ckpt's (sched_start): no read of its own */
	const struct sched_start *b = sched_start(ctx);
	long long now;
	if (b && b->have_loginuid)
		now = b->loginuid;
	else if (read_u32_file(p->pid, "loginuid", &now) < 0)
		return 0;
	if ((uint32_t)now == uid)
		return 0;
	static const char path[] = "/proc/thread-self/loginuid";
	char text[16];
	int len = snprintf(text, sizeof(text), "%u", uid);
	uint64_t rpath = puppet_scratch_put(p, 0, path, sizeof(path));
	uint64_t rtext = puppet_scratch_put(p, 64, text, (size_t)len);
	if (!rpath || !rtext)
		return -EFAULT;
	long fd = puppet_syscall(p, SYS_openat, AT_FDCWD, rpath, O_WRONLY | O_CLOEXEC);
	long r = fd < 0 ? fd : puppet_syscall(p, SYS_write, fd, rtext, len);
	if (fd >= 0)
		puppet_syscall(p, SYS_close, fd);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d: cannot set its audit loginuid to %u: %s",
				t->pid, uid, strerror((int)-r));
	return 0;
}

/* Writes text to /proc/PID/name of the puppet: 0 or -errno. */
static int write_proc(struct rst_task *t, const char *name, const char *text)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", t->pup.pid, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		return -errno;
	return 0;
}

static void restore_oom(struct rst_ctx *ctx, struct rst_task *t, int adj)
{
	char text[16];
	snprintf(text, sizeof(text), "%d", adj);
	int r = write_proc(t, "oom_score_adj", text);
	if (r < 0)
		log_warn(&ctx->log, "pid %d: cannot set oom_score_adj %d (%s): kept at ckpt's",
			 t->pid, adj, strerror(-r));
}

static int restore_membarrier(struct rst_ctx *ctx, struct rst_task *t, uint32_t regs)
{
	for (size_t i = 0; i < ARRAY_SIZE(membarrier_regs); i++) {
		if (!(regs & membarrier_regs[i]))
			continue;
		long r = puppet_syscall(&t->pup, SYS_membarrier, membarrier_regs[i], 0, 0);
		if (r < 0)
			return log_fail(&ctx->log, (int)r,
					"pid %d: cannot register membarrier command 0x%x: %s", t->pid,
					membarrier_regs[i], strerror((int)-r));
	}
	return 0;
}

static int sched_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	SchedEntry *e = t->kstate[KIND_sched];
	int r;

	if (!e) /* not pinned with ckpt's thread: its affinity from before */
		return ctx->affinity && sched_setaffinity(t->pup.pid, sizeof(*ctx->affinity),
							 ctx->affinity) < 0
			       ? log_fail(&ctx->log, -errno,
					  "pid %d: cannot set its CPU affinity: %m", t->pid)
			       : 0;
	if (e->has_loginuid && (r = restore_loginuid(ctx, t, e->loginuid)) < 0)
		return r;
	if (e->has_membarrier && (r = restore_membarrier(ctx, t, e->membarrier)) < 0)
		return r;
	/* both ckpt's already (sched_start: only sched_restore writes them,
	 * and every task was forked before it ran): no open, no write */
	const struct sched_start *b = sched_start(ctx);
	if (e->has_oom_score_adj && !(b && b->have_oom && b->oom == e->oom_score_adj))
		restore_oom(ctx, t, e->oom_score_adj);
	if (e->has_coredump_filter && !(b && b->have_coredump && b->coredump == e->coredump_filter)) {
		char text[16];
		snprintf(text, sizeof(text), "%#x", e->coredump_filter);
		if ((r = write_proc(t, "coredump_filter", text)) < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot set coredump_filter %s: %s",
					t->pid, text, strerror(-r));
	}
	if (e->has_ioprio && syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, t->pup.pid, e->ioprio) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot set its I/O priority %#x: %m",
				t->pid, e->ioprio);
	if ((r = restore_affinity(ctx, t, e)) < 0)
		return r;
	/* raised: at the end (sched_restore_end) */
	return ctx->prio.raised ? 0 : restore_policy(ctx, t, e);
}

/*
 * The tree made (every fork and clone done, the puppets still at ckpt's
 * own policy: a task forked by a real-time one would have no default
 * timer slack), ckpt and every puppet go to real time (rtprio.h) for the
 * tasks' own state: each step is round trips between ckpt and a puppet,
 * and under the fair scheduler each wakeup of either could wait behind a
 * busy machine's threads (a tree of 100 processes beside 8 programs that
 * spin: 0.47 to 0.92 s so, against 0.59 to 2.23 s). Without the right to
 * it, nothing changes. sched_restore_end gives each task its own.
 */
/* fn for every task of the image that runs, each thread too; its first error. */
static int each_live_task(struct rst_ctx *ctx, int (*fn)(struct rst_ctx *, struct rst_task *))
{
	for (size_t i = 0; i < ctx->nimage; i++) {
		struct rst_task *t = &ctx->tasks[i];
		int r = t->zombie ? 0 : fn(ctx, t);
		for (size_t j = 0; r >= 0 && !t->zombie && j < t->nthreads; j++)
			r = fn(ctx, &t->threads[j]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ckpt's real-time priority, best effort: a task left out only waits more */
static int raise_task(struct rst_ctx *ctx, struct rst_task *t)
{
	(void)ctx;
	struct sched_param p = {.sched_priority = 1};
	(void)sched_setscheduler(t->pup.pid, SCHED_FIFO, &p);
	return 0;
}

static int sched_tree_ready(struct rst_ctx *ctx)
{
	if (!rtprio_raise(&ctx->prio))
		return 0;
	(void)each_live_task(ctx, raise_task);
	log_debug(&ctx->log, "ckpt and the puppets at real-time priority 1 for the tasks' state");
	return 0;
}

/*
 * The timer slack the task kind set while the task was real-time, which
 * the kernel ignores (a real-time task has none): once it has its own
 * policy back, where that is not real-time. Leaving real time gave it its
 * default one, ckpt's from before (the tree was made at ckpt's policy).
 */
static int restore_slack(struct rst_ctx *ctx, struct rst_task *t, const SchedEntry *e)
{
	const TaskEntry *te = t->kstate[KIND_task];
	if (!te || !te->has_timer_slack_ns || te->timer_slack_ns == ctx->prio.slack_ns ||
	    (e && e->policy != SCHED_OTHER && e->policy != SCHED_BATCH && e->policy != SCHED_IDLE))
		return 0;
	char text[24];
	snprintf(text, sizeof(text), "%llu", (unsigned long long)te->timer_slack_ns);
	/* from here with CAP_SYS_NICE; else (RLIMIT_RTPRIO) by the task itself */
	if (write_proc(t, "timerslack_ns", text) == 0)
		return 0;
	long r = puppet_syscall(&t->pup, SYS_prctl, PR_SET_TIMERSLACK, te->timer_slack_ns, 0, 0, 0);
	return r < 0 ? log_fail(&ctx->log, (int)r, "pid %d: cannot set its timer slack %s: %s",
				t->pid, text, strerror((int)-r))
		     : 0;
}

/* The image's policy (or the caller's where the image has none), then
 * what leaving real time changed. */
static int restore_policy_of(struct rst_ctx *ctx, struct rst_task *t)
{
	const SchedEntry *e = t->kstate[KIND_sched];
	int r = e ? restore_policy(ctx, t, e) : rtprio_give_back(&ctx->prio, t->pup.pid);
	if (r < 0)
		return e ? r
			 : log_fail(&ctx->log, r, "pid %d: cannot leave real time: %s", t->pid,
				    strerror(-r));
	return restore_slack(ctx, t, e);
}

/* Every task's policy, once nothing more is done in the tasks; then
 * ckpt's own back: the release is at the policies it had before. */
static int sched_restore_end(struct rst_ctx *ctx)
{
	if (!ctx->prio.raised)
		return 0;
	int r = each_live_task(ctx, restore_policy_of);
	if (r < 0)
		return r;
	rtprio_restore(&ctx->prio);
	ctx->prio.raised = false;
	return 0;
}

static const ProtobufCMessageDescriptor *sched_descriptor(uint32_t sub)
{
	return sub == REC_SUB(SCHED_ENTRY) ? &sched_entry__descriptor : NULL;
}

const struct kind_ops sched_ops = {
    .per_thread = true,
    .probe = sched_probe,
    .collect = sched_collect,
    .dump = sched_dump,
    .load = sched_load,
    .restore = sched_restore,
    .tree_ready = sched_tree_ready,
    .restore_end = sched_restore_end,
    .free_state = free,
    .descriptor = sched_descriptor,
};
