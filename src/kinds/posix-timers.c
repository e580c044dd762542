/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POSIX timers (timer_create). /proc/PID/timers gives each timer's id,
 * clock, notification (SIGEV_SIGNAL, SIGEV_NONE, the kernel's SIGEV_THREAD,
 * or SIGEV_THREAD_ID and the thread), signal and sigev_value; an injected
 * timer_gettime the time left and the interval (for a periodic timer whose
 * signal waits for delivery, the kernel moves the expiry past now first),
 * an injected timer_getoverrun the overruns of the last delivery.
 *
 * Restore, in the puppet: timer_create with PR_TIMER_CREATE_RESTORE_IDS on
 * (Linux 6.16), so that each timer gets its id back; without it the ids are
 * handed out in order from 0, which is enough only if they have no holes.
 * Then the timers are armed:
 * - most with the time left, relative (timer_gettime cannot tell whether
 *   a CLOCK_REALTIME timer was armed with TIMER_ABSTIME, so an absolute
 *   expiry is not kept: the time spent between checkpoint and restart
 *   does not count, as for every other timer);
 * - one whose own signal was queued and not yet delivered is armed, with
 *   TIMER_ABSTIME, in the past: the kernel queues its signal itself, and
 *   re-arms the timer at delivery to the expiry it had. The copy of that
 *   signal the signals kind queued (a plain one: the kernel would not
 *   re-arm anything at its delivery) is taken off first;
 * - one with an overrun count N is armed (TIMER_ABSTIME) N + 1 intervals
 *   and the time left in the past, and its signal taken with an injected
 *   rt_sigtimedwait: the kernel counts the N overruns and re-arms it to
 *   expire when it should. Both ways need the timer's signal to have no
 *   other instance queued (refused at checkpoint), and on a CPU-time clock
 *   that much CPU time used by the new process (refused at restart).
 *   A timer whose signal is queued loses its overrun count (the next
 *   delivery sets a new one); that of a CLOCK_REALTIME timer restored
 *   either way is then absolute.
 * CPU-time clocks of the process and of its threads are restored as the
 * kernel holds them (pid 0 = the caller, or the pid or tid, which is kept:
 * haproxy's watchdog arms one on each thread's pthread_getcpuclockid()).
 * SIGEV_THREAD_ID may name any thread of the process (glibc's SIGEV_THREAD
 * is one to its helper thread). Refused: CPU clocks of other processes,
 * dynamic clocks, and CLOCK_THREAD_CPUTIME_ID (pid 0: the thread that
 * made the timer, which nothing shows) in a process with other threads.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <time.h>

#include "core/ctx.h"
#include "posix_timers.pb-c.h"
#include "util/cleanup.h"
#include "util/kernel.h"

enum { PTIMERS_ENTRY = REC_TYPE(KID_posix_timers, 1) };

#define MAX_TIMERS  65536
#define MAX_PENDING 4096
#define NSIG_K	    64
#define NS_PER_S    1000000000LL
#ifndef PTRACE_PEEKSIGINFO_SHARED
#define PTRACE_PEEKSIGINFO_SHARED 1
#endif
/* the kernel's encoding of CPU-time clocks (include/linux/posix-timers.h) */
#define CPUCLOCK_PID(c)	      ((pid_t) ~((c) >> 3))
#define CPUCLOCK_PERTHREAD(c) (((c)&4) != 0)
#define CPUCLOCK_WHICH(c)     ((c)&3)
#define CLOCKFD		      3

/* one timer as /proc/PID/timers shows it */
struct proc_timer {
	int id, signo, clock, notify;
	uint64_t sigval;
	pid_t target;
};

struct ptimers_ckpt {
	PosixTimersEntry e;
	PosixTimerEntry *t;
	PosixTimerEntry **pt;
	int ids_call; /* the probe: PR_TIMER_CREATE_RESTORE_IDS_GET */
};

static uint64_t bit(int sig)
{
	return sig >= 1 && sig <= NSIG_K ? 1ull << (sig - 1) : 0;
}

static int parse_notify(const char *how, const char *whom, int *ret)
{
	int n;
	if (!strcmp(how, "signal"))
		n = SIGEV_SIGNAL;
	else if (!strcmp(how, "none"))
		n = SIGEV_NONE;
	else if (!strcmp(how, "thread"))
		n = SIGEV_THREAD;
	else
		return -EINVAL;
	if (!strcmp(whom, "tid"))
		n |= SIGEV_THREAD_ID;
	else if (strcmp(whom, "pid"))
		return -EINVAL;
	*ret = n;
	return 0;
}

static int cmp_id(const void *a, const void *b)
{
	const struct proc_timer *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

/* /proc/PID/timers: four lines a timer, newest first; sorted by id here */
static int parse_timers(const char *text, struct proc_timer **ret, size_t *ret_n)
{
	_cleanup_free_ struct proc_timer *v = NULL;
	size_t n = 0, cap = 0;

	for (const char *p = text; *p;) {
		struct proc_timer pt;
		char how[8], whom[4];
		int used = 0;
		if (sscanf(p,
			   "ID: %d signal: %d/%" SCNx64 " notify: %7[a-z]/%3[a-z].%d ClockID: %d%n",
			   &pt.id, &pt.signo, &pt.sigval, how, whom, &pt.target, &pt.clock,
			   &used) != 7 ||
		    !used || parse_notify(how, whom, &pt.notify) < 0)
			return -EINVAL;
		p += used;
		while (*p == '\n')
			p++;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			struct proc_timer *nv = reallocarray(v, cap, sizeof(*v));
			if (!nv)
				return -ENOMEM;
			v = nv;
		}
		v[n++] = pt;
		if (n > MAX_TIMERS)
			return -E2BIG;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_id);
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

/*
 * Why a timer on clock cannot be saved, or NULL. pid is the process as it
 * sees itself; a CPU-time clock names it, one of its other threads
 * (thread: the caller found that it does) by that number, which is kept
 * at restart, or 0 for the caller's own.
 */
static const char *clock_refusal(int clock, pid_t pid, bool thread, char *buf, size_t len)
{
	if (clock >= 0) {
		switch (clock) {
		case CLOCK_REALTIME:
		case CLOCK_MONOTONIC:
		case CLOCK_BOOTTIME:
		case CLOCK_REALTIME_ALARM:
		case CLOCK_BOOTTIME_ALARM:
		case CLOCK_TAI:
			return NULL;
		}
		snprintf(buf, len, "clock %d carries no timers", clock);
		return buf;
	}
	if ((clock & 7) == CLOCKFD)
		return "a dynamic clock (of a clock device fd) is not supported";
	if (CPUCLOCK_WHICH(clock) == 3) {
		snprintf(buf, len, "clock %d is not a valid CPU-time clock", clock);
		return buf;
	}
	pid_t owner = CPUCLOCK_PID(clock);
	if (owner && owner != pid && !thread) {
		snprintf(buf, len, "on the CPU-time clock of %s %d, not supported",
			 CPUCLOCK_PERTHREAD(clock) ? "thread" : "process", owner);
		return buf;
	}
	return NULL;
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * NS_PER_S + (uint64_t)ts->tv_nsec;
}

static struct timespec ns_ts(int64_t ns)
{
	return (struct timespec){.tv_sec = ns / NS_PER_S, .tv_nsec = ns % NS_PER_S};
}

static int collect_one(struct ckpt_ctx *ctx, struct task *t, const struct proc_timer *pt,
		       PosixTimerEntry *e)
{
	struct puppet *p = &t->pup;
	struct itimerspec its;
	char buf[96];
	const char *why;

	bool own_thread = false;
	for (size_t i = 0; i < t->nthreads; i++)
		own_thread |= t->threads[i].pid == pt->target;
	if ((pt->notify & SIGEV_THREAD_ID) && pt->target != t->pid && !own_thread)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d timer %d: signals thread %d, which is not one of its threads",
				t->pid, pt->id, pt->target);
	if (pt->notify != SIGEV_NONE && !bit(pt->signo))
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d timer %d (posix timer): signal %d",
				t->pid, pt->id, pt->signo);
	bool clock_thread = false; /* the clock of another thread of t's */
	for (size_t i = 0; pt->clock < 0 && CPUCLOCK_PERTHREAD(pt->clock) && i < t->nthreads; i++)
		clock_thread |= CPUCLOCK_PID(pt->clock) == t->threads[i].vpid;
	if ((why = clock_refusal(pt->clock, t->vpid, clock_thread, buf, sizeof(buf))))
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d timer %d (posix timer): %s", t->pid,
				pt->id, why);
	/* CLOCK_THREAD_CPUTIME_ID (glibc's thread clock of pid 0) counts the
	 * thread that made the timer, which nothing shows; a restart makes it
	 * in the leader: only right when the process has no other thread */
	if (pt->clock < 0 && CPUCLOCK_PERTHREAD(pt->clock) && !CPUCLOCK_PID(pt->clock) &&
	    t->nthreads)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d timer %d (posix timer): on CLOCK_THREAD_CPUTIME_ID of the "
				"thread that made it, in a process of %zu threads: which thread "
				"that is cannot be read (a timer on pthread_getcpuclockid()'s clock "
				"names it, and is saved)",
				t->pid, pt->id, t->nthreads + 1);
	long r = puppet_syscall(p, SYS_timer_gettime, pt->id, p->scratch);
	if (r == 0)
		r = puppet_read(p, p->scratch, &its, sizeof(its));
	long ov = r == 0 ? puppet_syscall(p, SYS_timer_getoverrun, pt->id) : r;
	if (r < 0 || ov < 0)
		return log_fail(&ctx->log, (int)(r < 0 ? r : ov),
				"pid %d timer %d (posix timer): cannot read it: %s", t->pid, pt->id,
				strerror((int)-(r < 0 ? r : ov)));
	posix_timer_entry__init(e);
	e->id = pt->id;
	e->clock = pt->clock;
	e->notify = (uint32_t)pt->notify;
	if ((pt->notify & SIGEV_THREAD_ID) && pt->target != t->pid) {
		e->has_thread = true;
		for (size_t i = 0; i < t->nthreads; i++)
			if (t->threads[i].pid == pt->target)
				e->thread = (uint32_t)t->threads[i].vpid;
	}
	e->signo = pt->signo;
	e->sigval = pt->sigval;
	e->value_ns = ts_ns(&its.it_value);
	e->interval_ns = ts_ns(&its.it_interval);
	e->overrun = (uint32_t)ov;
	return 0;
}

static PosixTimerEntry *find_timer(struct ptimers_ckpt *k, int id)
{
	for (size_t i = 0; i < k->e.n_timers; i++)
		if (k->t[i].id == id)
			return &k->t[i];
	return NULL;
}

/*
 * Marks the timers whose own signal is queued (PTRACE_PEEKSIGINFO, thread
 * queue then process queue); *ret_other gets the signals also queued
 * otherwise.
 */
static int scan_pending(struct ckpt_ctx *ctx, struct task *t, struct ptimers_ckpt *k,
			uint64_t *ret_other)
{
	siginfo_t buf[32];
	uint32_t pos = 0;

	*ret_other = 0;
	for (int shared = 0; shared < 2; shared++) {
		for (uint64_t off = 0; pos < MAX_PENDING;) {
			long got = puppet_peek_siginfo(&t->pup, off, shared, 32, buf);
			if (got < 0)
				return log_fail(&ctx->log, (int)got, "pid %d: PTRACE_PEEKSIGINFO: %s",
						t->pid, strerror((int)-got));
			for (long i = 0; i < got; i++) {
				PosixTimerEntry *e = buf[i].si_code == SI_TIMER
							 ? find_timer(k, buf[i].si_timerid)
							 : NULL;
				pos++;
				if (e && e->signo == buf[i].si_signo && !e->has_pending_pos) {
					e->has_pending_pos = true;
					e->pending_pos = pos;
				} else {
					*ret_other |= bit(buf[i].si_signo);
				}
			}
			off += got;
			if (got < 32)
				break;
		}
	}
	return 0;
}

/* what restore needs of a timer whose signal is queued or that overran */
static int check_signal_state(struct ckpt_ctx *ctx, struct task *t, struct ptimers_ckpt *k)
{
	uint64_t other;
	int r = scan_pending(ctx, t, k, &other);
	if (r < 0)
		return r;
	for (size_t i = 0; i < k->e.n_timers; i++) {
		PosixTimerEntry *e = &k->t[i];
		if (!e->has_pending_pos && !e->overrun)
			continue;
		if (other & bit(e->signo))
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d timer %d (posix timer): %s, and signal %d is queued "
			    "from elsewhere too: not supported",
			    t->pid, e->id,
			    e->has_pending_pos ? "its signal is queued" : "overrun count",
			    e->signo);
		if (!e->has_pending_pos &&
		    (!e->interval_ns || !e->value_ns || e->value_ns > e->interval_ns))
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d timer %d (posix timer): overrun count %u with %" PRIu64
			    " ns left of a %" PRIu64 " ns interval: cannot restore it",
			    t->pid, e->id, e->overrun, e->value_ns, e->interval_ns);
	}
	return 0;
}

static void ptimers_free_state(void *state);

/* The state is made here for the probe's index, and dropped by collect
 * again when the process has no timer to save. */
static int ptimers_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct ptimers_ckpt *k = task_state(t, KIND_posix_timers, sizeof(*k));
	(void)ctx;
	if (!k)
		return -ENOMEM;
	k->ids_call = task_probe_call(t, PUPPET_CALL(SYS_prctl, PR_TIMER_CREATE_RESTORE_IDS,
						    PR_TIMER_CREATE_RESTORE_IDS_GET, 0, 0, 0));
	return 0;
}

static int ptimers_collect(struct ckpt_ctx *ctx, struct task *t)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ struct proc_timer *pt = NULL;
	size_t n = 0;

	int r = proc_read(t->pid, "timers", &text, NULL);
	if (r >= 0)
		r = parse_timers(text, &pt, &n);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read /proc/%d/timers: %s", t->pid,
				t->pid, strerror(-r));
	struct ptimers_ckpt *k = t->kstate[KIND_posix_timers];
	long ids = k ? task_probe_ret(t, k->ids_call) : -ENOENT;
	if (!n && ids <= 0) {
		ptimers_free_state(TAKE_PTR(t->kstate[KIND_posix_timers]));
		return 0;
	}
	if (!k || !(k->t = calloc(n ? n : 1, sizeof(*k->t))) ||
	    !(k->pt = calloc(n ? n : 1, sizeof(*k->pt))))
		return -ENOMEM;
	posix_timers_entry__init(&k->e);
	k->e.restore_ids = ids > 0;
	for (size_t i = 0; i < n; i++) {
		r = collect_one(ctx, t, &pt[i], &k->t[i]);
		if (r < 0)
			return r;
		k->pt[i] = &k->t[i];
	}
	k->e.timers = k->pt;
	k->e.n_timers = n;
	return check_signal_state(ctx, t, k);
}

static int ptimers_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct ptimers_ckpt *k = t->kstate[KIND_posix_timers];
	return k ? ctx_write_msg(ctx, PTIMERS_ENTRY, &k->e.base) : 0;
}

/* Is tid one of t's other threads? */
static bool own_thread(const struct rst_task *t, pid_t tid)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].pid == tid)
			return true;
	return false;
}

static const char *entry_invalid(const PosixTimerEntry *x, const struct rst_task *t)
{
	char buf[96];

	if (x->notify != SIGEV_SIGNAL && x->notify != SIGEV_NONE && x->notify != SIGEV_THREAD &&
	    x->notify != (SIGEV_SIGNAL | SIGEV_THREAD_ID))
		return "notification";
	if (x->notify != SIGEV_NONE && !bit(x->signo))
		return "signal";
	bool clock_thread = x->clock < 0 && CPUCLOCK_PERTHREAD(x->clock) &&
			    own_thread(t, CPUCLOCK_PID(x->clock));
	if (clock_refusal(x->clock, t->pid, clock_thread, buf, sizeof(buf)))
		return "clock";
	if (x->value_ns > INT64_MAX || x->interval_ns > INT64_MAX)
		return "time";
	if (x->has_pending_pos && (!x->pending_pos || x->notify == SIGEV_NONE))
		return "pending signal";
	if (!x->has_pending_pos && x->overrun &&
	    (x->overrun > INT32_MAX || x->notify == SIGEV_NONE || !x->interval_ns || !x->value_ns ||
	     x->value_ns > x->interval_ns))
		return "overrun count";
	return NULL;
}

static int ptimers_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	PosixTimersEntry *e = rctx_load_one(ctx, t, rec, KIND_posix_timers, PTIMERS_ENTRY,
					    &posix_timers_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (e->n_timers > MAX_TIMERS)
		return log_fail(&ctx->log, -EINVAL, "record %u: %zu posix timers", rec->index,
				e->n_timers);
	for (size_t i = 0; i < e->n_timers; i++) {
		const PosixTimerEntry *x = e->timers[i];
		const char *bad = entry_invalid(x, t);
		if (x->id < 0 || (i && x->id <= e->timers[i - 1]->id))
			bad = "id out of order";
		bool own = false;
		for (size_t j = 0; x->has_thread && j < t->nthreads; j++)
			own |= t->threads[j].pid == (pid_t)x->thread;
		if (x->has_thread && (!own || !(x->notify & SIGEV_THREAD_ID)))
			bad = "target thread";
		if (bad)
			return log_fail(&ctx->log, -EINVAL,
					"record %u: posix timer %zu (id %d): %s", rec->index, i,
					x->id, bad);
	}
	return 0;
}

/* ---- restore ---------------------------------------------------------- */

static int create_one(struct rst_ctx *ctx, struct rst_task *t, const PosixTimerEntry *x)
{
	struct puppet *p = &t->pup;
	struct sigevent sev;
	int id = x->id;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_value.sival_ptr = (void *)(uintptr_t)x->sigval;
	sev.sigev_signo = x->signo;
	sev.sigev_notify = (int)x->notify;
	if (x->notify & SIGEV_THREAD_ID)
		sev._sigev_un._tid = x->has_thread ? (pid_t)x->thread : t->pid;
	uint64_t sev_at = puppet_scratch_put(p, 0, &sev, sizeof(sev));
	uint64_t id_at = puppet_scratch_put(p, 128, &id, sizeof(id));
	long r = puppet_syscall(p, SYS_timer_create, x->clock, sev_at, id_at);
	if (r == 0)
		r = puppet_read(p, id_at, &id, sizeof(id));
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d timer %d: timer_create: %s", t->pid,
				x->id, strerror((int)-r));
	if (id != x->id)
		return log_fail(&ctx->log, -EEXIST, "pid %d timer %d: timer_create gave id %d",
				t->pid, x->id, id);
	return 0;
}

/* Creates every timer with its id; leaves PR_TIMER_CREATE_RESTORE_IDS as it was. */
static int create_all(struct rst_ctx *ctx, struct rst_task *t, const PosixTimersEntry *e)
{
	struct puppet *p = &t->pup;
	long on = puppet_syscall(p, SYS_prctl, PR_TIMER_CREATE_RESTORE_IDS,
				 PR_TIMER_CREATE_RESTORE_IDS_ON, 0, 0, 0);
	if (on < 0 && on != -EINVAL)
		return (int)rst_check(ctx, t, on, "prctl(PR_TIMER_CREATE_RESTORE_IDS)");
	if (on < 0 && e->restore_ids)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: PR_TIMER_CREATE_RESTORE_IDS was on, and this kernel has "
				"no such prctl (Linux 6.16)",
				t->pid);
	for (size_t i = 0; on < 0 && i < e->n_timers; i++)
		if (e->timers[i]->id != (int)i)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d timer %d: timer ids have holes, and this kernel has "
			    "no PR_TIMER_CREATE_RESTORE_IDS (Linux 6.16) to restore them",
			    t->pid, e->timers[i]->id);
	for (size_t i = 0; i < e->n_timers; i++) {
		int r = create_one(ctx, t, e->timers[i]);
		if (r < 0)
			return r;
	}
	if (on == 0 && !e->restore_ids) {
		long r = puppet_syscall(p, SYS_prctl, PR_TIMER_CREATE_RESTORE_IDS,
					PR_TIMER_CREATE_RESTORE_IDS_OFF, 0, 0, 0);
		if (r < 0)
			return (int)rst_check(ctx, t, r, "prctl(PR_TIMER_CREATE_RESTORE_IDS_OFF)");
	}
	return 0;
}

/* Dequeues one signal of sig in the puppet, waiting up to wait_ns: the signal, or -EAGAIN. */
static long take_signal(struct rst_task *t, int sig, int64_t wait_ns, siginfo_t *ret)
{
	struct puppet *p = &t->pup;
	uint64_t set = bit(sig);
	struct timespec to = ns_ts(wait_ns);
	uint64_t set_at = puppet_scratch_put(p, 0, &set, sizeof(set));
	uint64_t to_at = puppet_scratch_put(p, 64, &to, sizeof(to));
	uint64_t info_at = p->scratch + 256;
	long r = puppet_syscall(p, SYS_rt_sigtimedwait, set_at, info_at, to_at, 8);
	if (r > 0 && puppet_read(p, info_at, ret, sizeof(*ret)) < 0)
		return -EIO;
	return r;
}

static const PosixTimerEntry *find_pending(const PosixTimersEntry *e, int sig, int id)
{
	for (size_t i = 0; i < e->n_timers; i++)
		if (e->timers[i]->id == id && e->timers[i]->signo == sig &&
		    e->timers[i]->has_pending_pos)
			return e->timers[i];
	return NULL;
}

/* The task whose queue x's signal goes to: the thread it names
 * (SIGEV_THREAD_ID, glibc's SIGEV_THREAD helper), else the process. Only
 * that thread's rt_sigtimedwait can take a signal queued to it. The
 * thread's own step comes later (sequence.c run_threads): its puppet is
 * given the leader's syscall address now, the vDSO having moved with the
 * leader's memory. */
static struct rst_task *target_of(struct rst_task *t, const PosixTimerEntry *x)
{
	for (size_t i = 0; x->has_thread && i < t->nthreads; i++) {
		if (t->threads[i].pid != (pid_t)x->thread)
			continue;
		t->threads[i].pup.syscall_ip = t->pup.syscall_ip;
		return &t->threads[i];
	}
	return t;
}

/*
 * Takes off the copies of the timers' own queued signals that the signals
 * kind queued: every instance of a signal of a timer that has its signal
 * queued or an overrun count (checkpoint made sure there are no others),
 * in the task each timer signals.
 */
static int drop_copies(struct rst_ctx *ctx, struct rst_task *t, const PosixTimersEntry *e)
{
	/* the signals to take, per target: [0] the process, [1 + i] thread i */
	_cleanup_free_ uint64_t *sigs = calloc(t->nthreads + 1, sizeof(*sigs));
	if (!sigs)
		return -ENOMEM;
	for (size_t i = 0; i < e->n_timers; i++) {
		const PosixTimerEntry *x = e->timers[i];
		struct rst_task *to = target_of(t, x);
		if (x->has_pending_pos || x->overrun)
			sigs[to == t ? 0 : (size_t)(to - t->threads) + 1] |= bit(x->signo);
	}
	for (size_t k = 0; k <= t->nthreads; k++) {
		struct rst_task *to = k ? &t->threads[k - 1] : t;
		for (int sig = 1; sigs[k] && sig <= NSIG_K; sig++) {
			for (int n = 0; (sigs[k] & bit(sig)) && n <= MAX_PENDING; n++) {
				siginfo_t si;
				long r = take_signal(to, sig, 0, &si);
				if (r == -EAGAIN)
					break;
				if (r < 0)
					return (int)rst_check(ctx, to, r, "rt_sigtimedwait");
				if (si.si_code != SI_TIMER || !find_pending(e, sig, si.si_timerid))
					return log_fail(&ctx->log, -EINVAL,
							"pid %d: signal %d is queued, and not by a "
							"timer", to->pid, sig);
			}
		}
	}
	return 0;
}

static int settime(struct rst_ctx *ctx, struct rst_task *t, const PosixTimerEntry *x, int flags,
		   int64_t value, int64_t interval)
{
	struct itimerspec its = {.it_interval = ns_ts(interval), .it_value = ns_ts(value)};
	uint64_t at = puppet_scratch_put(&t->pup, 0, &its, sizeof(its));
	long r = puppet_syscall(&t->pup, SYS_timer_settime, x->id, flags, at, 0);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d timer %d: timer_settime: %s", t->pid,
				x->id, strerror((int)-r));
	return 0;
}

/* Arms x to have expired `back` ns before the time it has left from now. */
static int arm_past(struct rst_ctx *ctx, struct rst_task *t, const PosixTimerEntry *x, int64_t back)
{
	struct timespec now;
	long r = puppet_syscall(&t->pup, SYS_clock_gettime, x->clock, t->pup.scratch);
	if (r == 0)
		r = puppet_read(&t->pup, t->pup.scratch, &now, sizeof(now));
	if (r < 0)
		return (int)rst_check(ctx, t, r, "clock_gettime");
	int64_t at = (int64_t)ts_ns(&now) + (int64_t)x->value_ns - back;
	if (at <= 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d timer %d: its clock %d is at %" PRIu64 " ns, too early to "
				"restore its %s",
				t->pid, x->id, x->clock, ts_ns(&now),
				x->has_pending_pos ? "queued signal" : "overrun count");
	return settime(ctx, t, x, TIMER_ABSTIME, at, (int64_t)x->interval_ns);
}

static int arm_overrun(struct rst_ctx *ctx, struct rst_task *t, const PosixTimerEntry *x)
{
	siginfo_t si;
	int r = arm_past(ctx, t, x, ((int64_t)x->overrun + 1) * (int64_t)x->interval_ns);
	if (r < 0)
		return r;
	long s = take_signal(target_of(t, x), x->signo, NS_PER_S, &si);
	if (s != x->signo || si.si_code != SI_TIMER || si.si_timerid != x->id)
		return log_fail(&ctx->log, s < 0 ? (int)s : -EIO,
				"pid %d timer %d: its signal did not come to set the overrun count",
				t->pid, x->id);
	return 0;
}

/* the kernel queues the signal and re-arms the timer at its delivery */
static int arm_pending(struct rst_ctx *ctx, struct rst_task *t, const PosixTimerEntry *x)
{
	if (!x->interval_ns)
		return settime(ctx, t, x, TIMER_ABSTIME, 1, 0);
	int64_t iv = (int64_t)x->interval_ns;
	int64_t periods = ((int64_t)x->value_ns + iv - 1) / iv;
	return arm_past(ctx, t, x, (periods ? periods : 1) * iv);
}

static int cmp_pending(const void *a, const void *b)
{
	const PosixTimerEntry *x = *(const PosixTimerEntry *const *)a;
	const PosixTimerEntry *y = *(const PosixTimerEntry *const *)b;
	return (x->pending_pos > y->pending_pos) - (x->pending_pos < y->pending_pos);
}

/*
 * Overrun counts first, while no other timer can have queued a signal that
 * rt_sigtimedwait would take instead; then the queued signals, in their
 * order; then the rest.
 */
static int arm_all(struct rst_ctx *ctx, struct rst_task *t, const PosixTimersEntry *e)
{
	_cleanup_free_ const PosixTimerEntry **pend = calloc(e->n_timers + 1, sizeof(*pend));
	size_t np = 0;
	int r = 0;

	if (!pend)
		return -ENOMEM;
	for (size_t i = 0; r >= 0 && i < e->n_timers; i++) {
		const PosixTimerEntry *x = e->timers[i];
		if (x->has_pending_pos)
			pend[np++] = x;
		else if (x->overrun)
			r = arm_overrun(ctx, t, x);
	}
	qsort(pend, np, sizeof(*pend), cmp_pending);
	for (size_t i = 0; r >= 0 && i < np; i++)
		r = arm_pending(ctx, t, pend[i]);
	for (size_t i = 0; r >= 0 && i < e->n_timers; i++) {
		const PosixTimerEntry *x = e->timers[i];
		if (!x->has_pending_pos && !x->overrun && x->value_ns)
			r = settime(ctx, t, x, 0, (int64_t)x->value_ns, (int64_t)x->interval_ns);
	}
	return r;
}

static int ptimers_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	PosixTimersEntry *e = t->kstate[KIND_posix_timers];
	if (!e)
		return 0;
	int r = create_all(ctx, t, e);
	if (r >= 0)
		r = drop_copies(ctx, t, e);
	if (r >= 0)
		r = arm_all(ctx, t, e);
	return r;
}

static void ptimers_free_state(void *state)
{
	struct ptimers_ckpt *k = state;
	if (k) {
		free(k->t);
		free(k->pt);
		free(k);
	}
}

static const ProtobufCMessageDescriptor *ptimers_descriptor(uint32_t sub)
{
	return sub == REC_SUB(PTIMERS_ENTRY) ? &posix_timers_entry__descriptor : NULL;
}

const struct kind_ops posix_timers_ops = {
    .probe = ptimers_probe,
    .collect = ptimers_collect,
    .dump = ptimers_dump,
    .load = ptimers_load,
    .restore = ptimers_restore,
    .free_state = ptimers_free_state,
    .descriptor = ptimers_descriptor,
};
