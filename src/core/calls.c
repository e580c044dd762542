/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The injected calls of a process's threads at step "task state", run
 * side by side. Up to PUPPET_MANY_MAX threads are restored together
 * (sequence.c, rst_calls_begin/rst_calls_end): the kinds' restore ops run
 * for each of them as for any task, but the calls they give rst_calls()
 * are queued, and the data the calls point to (rst_put()) goes into a
 * slice of the leader's scratch area of the thread's own; at the end the
 * threads run their queues at once (puppet_syscalls_many: every thread
 * started before any is waited for, on both cores, their stops
 * overlapping), one stop each, and the results are checked then. A
 * thread took a stop for each kind's batch, one thread after another.
 *
 * The slices are at [CALLS_SLICES_OFF, CALLS_SLICES_END) of the scratch
 * area, which the per-thread kinds' own direct uses (offsets below 4 KiB
 * and from its middle on) never touch: a kind may still inject a call of
 * its own meanwhile (a sigaltstack, a pending signal, the loginuid),
 * which runs before the thread's queue; one whose call must come after
 * what it queued asks rst_calls_flush() first. A thread whose data does
 * not fit its slice leaves the queue: what it queued runs at once, and
 * its kinds go on alone, as for any task (its slice left as it is, for
 * calls still to come that point into it).
 *
 * Processes without threads are queued the same way, up to
 * PUPPET_MANY_MAX of them (rst_calls_begin_procs): each queue's slice is
 * the first slice of the process's own scratch area, its data written
 * there by one write of its own, and the batches run side by side by
 * puppet_syscalls_many.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/ctx.h"
#include "util/cleanup.h"

#define CALLS_SLICES_OFF 4096
#define CALLS_SLICES_END (32 * 1024)
#define CALLS_SLICE \
	(((CALLS_SLICES_END - CALLS_SLICES_OFF) / PUPPET_MANY_MAX) & ~(size_t)(PUPPET_STUB_ENTRY - 1))

struct calls_q {
	struct rst_task *t; /* NULL: left the queue */
	uint64_t slice;     /* its slice, in the task */
	size_t used;        /* bytes of the slice taken by rst_put */
	size_t written;     /* of them, written into the task (all by one write) */
	uint8_t data[CALLS_SLICE];
	size_t n;
	struct puppet_call c[PUPPET_BATCH_MAX];
	const char *what[PUPPET_BATCH_MAX];
	const char *hint[PUPPET_BATCH_MAX];
};

struct rst_calls_group {
	size_t n;
	bool procs; /* processes, each with its own memory (not threads of one) */
	struct calls_q q[PUPPET_MANY_MAX];
};

static struct calls_q *queue_of(struct rst_ctx *ctx, const struct rst_task *t)
{
	struct rst_calls_group *g = ctx->calls;
	for (size_t i = 0; g && i < g->n; i++)
		if (g->q[i].t == t)
			return &g->q[i];
	return NULL;
}

bool rst_calls_queued(const struct rst_ctx *ctx, const struct rst_task *t)
{
	const struct rst_calls_group *g = ctx->calls;
	for (size_t i = 0; g && i < g->n; i++)
		if (g->q[i].t == t)
			return true;
	return false;
}

/* The results of calls c[0..n): the first that failed and must not fails. */
static int check(struct rst_ctx *ctx, struct rst_task *t, const struct puppet_call *c,
		 const char *const *what, const char *const *hint, size_t n, int r)
{
	for (size_t i = 0; i < n; i++) {
		long e = r < 0 ? r : c[i].ret;
		if (what[i] && e < 0 && e > -4096)
			return log_fail(&ctx->log, (int)e, "pid %d: %s failed: %s%s%s", t->pid,
					what[i], strerror((int)-e), hint && hint[i] ? " " : "",
					hint && hint[i] ? hint[i] : "");
	}
	return 0;
}

/* What rst_put gave, written into the slice by one write. */
static int write_data(struct calls_q *q)
{
	int r = q->used > q->written ? puppet_write(&q->t->pup, q->slice + q->written,
						    q->data + q->written, q->used - q->written)
				     : 0;
	q->written = q->used;
	return r;
}

/* Runs q's calls now, alone (the stub's own table), and empties it; its
 * slice stays taken (data of calls still to come may be there). */
static int run_alone(struct rst_ctx *ctx, struct calls_q *q)
{
	int r = write_data(q);
	if (r == 0 && q->n)
		r = puppet_syscalls(&q->t->pup, q->c, q->n);
	r = check(ctx, q->t, q->c, q->what, q->hint, q->n, r);
	q->n = 0;
	return r;
}

int rst_calls(struct rst_ctx *ctx, struct rst_task *t, struct puppet_call *c,
	      const char *const *what, const char *hint, size_t n)
{
	struct calls_q *q = queue_of(ctx, t);
	bool plain = n <= PUPPET_BATCH_MAX;
	for (size_t i = 0; i < n; i++)
		plain = plain && !c[i].arg_prev && !c[i].stop;
	if (q && plain && q->n + n > PUPPET_BATCH_MAX) {
		int r = run_alone(ctx, q);
		if (r < 0)
			return r;
	}
	if (!q || !plain) {
		int r = q ? rst_calls_flush(ctx, t) : 0;
		for (size_t i = 0; r >= 0 && i < n; i += PUPPET_BATCH_MAX) {
			size_t m = n - i < PUPPET_BATCH_MAX ? n - i : PUPPET_BATCH_MAX;
			const char *hints[PUPPET_BATCH_MAX];
			for (size_t j = 0; j < m; j++)
				hints[j] = hint;
			r = puppet_syscalls(&t->pup, c + i, m);
			r = check(ctx, t, c + i, what + i, hints, m, r);
		}
		return r;
	}
	for (size_t i = 0; i < n; i++) {
		q->c[q->n] = c[i];
		q->what[q->n] = what[i];
		q->hint[q->n++] = hint;
	}
	return 0;
}

uint64_t rst_put(struct rst_ctx *ctx, struct rst_task *t, size_t off, const void *buf, size_t len)
{
	struct calls_q *q = queue_of(ctx, t);
	size_t need = (len + 15) & ~(size_t)15;
	if (q && q->used + need > CALLS_SLICE) {
		/* its slice is full: what it queued runs now, and it goes on
		 * alone (its data in the slice stays, for calls to come) */
		int r = run_alone(ctx, q);
		q->t = NULL;
		if (r < 0)
			return 0;
		q = NULL;
	}
	if (!q)
		return puppet_scratch_put(&t->pup, off, buf, len);
	uint64_t at = q->slice + q->used;
	memcpy(q->data + q->used, buf, len);
	q->used += need;
	return at;
}

int rst_calls_flush(struct rst_ctx *ctx, struct rst_task *t)
{
	struct calls_q *q = queue_of(ctx, t);
	return q ? run_alone(ctx, q) : 0;
}

static bool can_queue(const struct puppet *p)
{
	return p->stub_ip && p->scratch && p->scratch_len >= CALLS_SLICES_END && !p->trap_ignored;
}

/* procs: ts are processes, each queue's slice in its own scratch area
 * (the first slice: the process kinds' own direct uses of the area keep
 * below 4 KiB, as the per-thread ones, or at its middle, seccomp's) */
static bool calls_begin(struct rst_ctx *ctx, struct rst_task *const *ts, size_t n, bool procs)
{
	const struct puppet *p = n ? &ts[0]->pup : NULL;
	if (n < (procs ? 1 : 2) || n > PUPPET_MANY_MAX)
		return false;
	for (size_t i = 0; i < (procs ? n : 1); i++)
		if (!can_queue(&ts[i]->pup))
			return false;
	struct rst_calls_group *g = malloc(sizeof(*g));
	if (!g)
		return false;
	g->n = n;
	g->procs = procs;
	for (size_t i = 0; i < n; i++) {
		g->q[i].t = ts[i];
		g->q[i].slice = procs ? ts[i]->pup.scratch + CALLS_SLICES_OFF
				      : p->scratch + CALLS_SLICES_OFF + i * CALLS_SLICE;
		g->q[i].used = g->q[i].written = 0;
		g->q[i].n = 0;
	}
	ctx->calls = g;
	return true;
}

bool rst_calls_begin(struct rst_ctx *ctx, struct rst_task *const *ts, size_t n)
{
	return calls_begin(ctx, ts, n, false);
}

bool rst_calls_begin_procs(struct rst_ctx *ctx, struct rst_task *const *ts, size_t n)
{
	return calls_begin(ctx, ts, n, true);
}

int rst_calls_end(struct rst_ctx *ctx, bool run)
{
	_cleanup_free_ struct rst_calls_group *g = ctx->calls;
	struct puppet *ps[PUPPET_MANY_MAX];
	struct puppet_call *calls[PUPPET_MANY_MAX];
	size_t ns[PUPPET_MANY_MAX], np = 0;
	uint64_t tables[PUPPET_MANY_MAX];
	int err[PUPPET_MANY_MAX], r = 0;
	struct calls_q *qs[PUPPET_MANY_MAX];

	ctx->calls = NULL;
	for (size_t i = 0; run && g && i < g->n; i++) {
		struct calls_q *q = &g->q[i];
		if (!q->t || !q->n)
			continue;
		/* its table at the end of its slice, after its data */
		uint64_t table = (q->slice + CALLS_SLICE - q->n * PUPPET_STUB_ENTRY) &
				 ~(uint64_t)(PUPPET_STUB_ENTRY - 1);
		if (table < q->slice + q->used) {
			int e = run_alone(ctx, q);
			r = r < 0 ? r : e;
			continue;
		}
		qs[np] = q;
		ps[np] = &q->t->pup;
		calls[np] = q->c;
		ns[np] = q->n;
		tables[np++] = table;
	}
	/* the threads' data, all in their leader's memory: one write
	 * (processes': each its own, by write_data below) */
	struct iovec l[PUPPET_MANY_MAX] = { 0 }, rm[PUPPET_MANY_MAX] = { 0 };
	size_t nd = 0, len = 0;
	for (size_t i = 0; g && !g->procs && i < np; i++) {
		struct calls_q *q = qs[i];
		if (q->used <= q->written)
			continue;
		l[nd] = (struct iovec){ q->data + q->written, q->used - q->written };
		rm[nd++] = (struct iovec){ (void *)(uintptr_t)(q->slice + q->written),
					   q->used - q->written };
		len += q->used - q->written;
	}
	if (nd && process_vm_writev(ps[0]->pid, l, nd, rm, nd, 0) == (ssize_t)len)
		for (size_t i = 0; i < np; i++)
			qs[i]->written = qs[i]->used;
	size_t nrun = 0;
	for (size_t i = 0; i < np; i++) {
		int e = write_data(qs[i]); /* what the one write did not */
		if (e < 0) {
			log_fail(&ctx->log, e, "thread %d: cannot write to ckpt's scratch area: %s",
				 qs[i]->t->pid, strerror(-e));
			r = r < 0 ? r : e;
			continue;
		}
		qs[nrun] = qs[i];
		ps[nrun] = ps[i];
		calls[nrun] = calls[i];
		ns[nrun] = ns[i];
		tables[nrun++] = tables[i];
	}
	np = nrun;
	if (np && g->procs)
		puppet_syscalls_many(ps, calls, ns, tables, np, err);
	else if (np)
		puppet_syscalls_many_vm(ps, calls, ns, tables, np, err);
	for (size_t i = 0; i < np; i++) {
		int e = check(ctx, qs[i]->t, qs[i]->c, qs[i]->what, qs[i]->hint, qs[i]->n, err[i]);
		r = r < 0 ? r : e;
	}
	return r;
}
