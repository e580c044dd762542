/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The probes of a task at checkpoint: the injected calls that every kind
 * asks of it at step "probe" are run by ckpt as one batch at the start of
 * step "collect" (one stop of the task, one request to the guardian, where
 * each kind's own batch or single call was one each), and what they wrote
 * into the scratch area is read back by one read. The kinds' collect ops
 * then take their results from here.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/ctx.h"
#include "core/sequence.h"
#include "kinds/kinds.h"
#include "util/cleanup.h"

static struct probe_batch *probes_of(struct task *t)
{
	if (!t->probes)
		t->probes = calloc(1, sizeof(*t->probes));
	return t->probes;
}

int task_probe_call(struct task *t, struct puppet_call c)
{
	struct probe_batch *b = probes_of(t);
	if (!b)
		return -ENOMEM;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 32;
		struct puppet_call *nc = realloc(b->c, cap * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		b->c = nc;
		b->cap = cap;
	}
	b->c[b->n] = c;
	return (int)b->n++;
}

uint64_t task_probe_area(struct task *t, size_t len)
{
	struct probe_batch *b = probes_of(t);
	len = (len + 15) & ~(size_t)15;
	size_t limit = b && b->limit ? b->limit : t->pup.scratch_len;
	if (!b || !t->pup.scratch || b->base + b->used + len > limit)
		return 0;
	uint64_t at = t->pup.scratch + b->base + b->used;
	b->used += len;
	return at;
}

/* The most task_probe_zero clears later, with a thread's siblings'. */
#define ZERO_LATER_MAX 4096

int task_probe_zero(struct task *t, uint64_t area, size_t len)
{
	struct probe_batch *b = t->probes;
	if (b && b->with_siblings && !b->zero_len && len <= ZERO_LATER_MAX) {
		b->zero_at = area;
		b->zero_len = len;
		return 0;
	}
	_cleanup_free_ void *zeros = calloc(1, len ? len : 1);
	return zeros ? puppet_write(&t->pup, area, zeros, len) : -ENOMEM;
}

/*
 * The areas the threads ths[0, n) asked cleared (task_probe_zero), by one
 * process_vm_writev into their process's memory; a thread whose area
 * could not be cleared so is cleared alone, and if that fails too, it
 * leaves the batch: its ok is cleared and its probes freed (collected
 * alone, from scratch).
 */
static void zero_outputs(struct task *t, struct task *const *ths, bool *const *ok, size_t n)
{
	static const char zeros[ZERO_LATER_MAX];
	struct iovec lv[PUPPET_MANY_MAX], rv[PUPPET_MANY_MAX];
	size_t nv = 0, want = 0;
	for (size_t j = 0; j < n && nv < PUPPET_MANY_MAX; j++) {
		const struct probe_batch *b = ths[j]->probes;
		if (!b || !b->zero_len)
			continue;
		lv[nv] = (struct iovec){ (void *)zeros, b->zero_len };
		rv[nv++] = (struct iovec){ (void *)(uintptr_t)b->zero_at, b->zero_len };
		want += b->zero_len;
	}
	if (!nv || process_vm_writev(t->pid, lv, nv, rv, nv, 0) == (ssize_t)want)
		return;
	for (size_t j = 0; j < n; j++) {
		const struct probe_batch *b = ths[j]->probes;
		if (b && b->zero_len && puppet_write(&ths[j]->pup, b->zero_at, zeros, b->zero_len) < 0) {
			task_probes_free(ths[j]);
			*ok[j] = false;
		}
	}
}

long task_probe_ret(const struct task *t, int i)
{
	if (i < 0)
		return i;
	const struct probe_batch *b = t->probes;
	return b && b->ran && (size_t)i < b->n ? b->c[i].ret : -ENOENT;
}

const void *task_probe_out(const struct task *t, uint64_t addr, size_t len)
{
	const struct probe_batch *b = t->probes;
	uint64_t from = t->pup.scratch + (b ? b->base : 0);
	if (!b || !b->out || !addr || addr < from || addr - from + len > b->used)
		return NULL;
	return (const char *)b->out + (addr - from);
}

void task_probes_free(struct task *t)
{
	if (!t->probes)
		return;
	free(t->probes->c);
	free(t->probes->out);
	free(t->probes);
	t->probes = NULL;
}

/* Step "collect", ckpt's part: the probes run, before the kinds' collect. A
 * call that could not run has its error as result; the kinds judge it. */
int ckpt_run_probes(struct ckpt_ctx *ctx, struct task *t)
{
	struct probe_batch *b = t->probes;
	(void)ctx;
	if (!b)
		return 0;
	int r = 0;
	for (size_t i = 0; i < b->n; i += PUPPET_BATCH_MAX) {
		size_t m = b->n - i < PUPPET_BATCH_MAX ? b->n - i : PUPPET_BATCH_MAX;
		if (r >= 0)
			r = puppet_syscalls(&t->pup, b->c + i, m);
		else
			for (size_t j = i; j < i + m; j++)
				b->c[j].ret = r;
	}
	b->ran = true;
	if (r >= 0 && b->used) {
		b->out = malloc(b->used);
		if (b->out && puppet_read(&t->pup, t->pup.scratch + b->base, b->out, b->used) < 0) {
			free(b->out);
			b->out = NULL;
		}
	}
	return 0;
}

/*
 * The probes of a process's threads, side by side: up to PUPPET_MANY_MAX
 * threads at a time, each with a slice of the leader's scratch area (after
 * what the leader's own probes use) for its outputs and, at the slice's
 * end, its stub table; their batches run together (puppet_syscalls_many,
 * one request to the guardian, their stops overlapping) and their outputs
 * are read back by one read. prepare(ctx, th) does a thread's part before
 * its probes (its /proc files); a thread it fails for, or whose probes do
 * not fit, is left to collect alone (its probes not marked as run).
 *
 * For many threads, a thread of ckpt prepares them (prepare, then the
 * per_thread kinds' probe ops) in order while this one runs the batches
 * of those ready: the preparing overlaps the guardian's work, where each
 * waited for the other. prepare and those probe ops then run on that
 * thread: they touch only the thread given and log nothing. A probe op
 * may write its slice (task.c's initial outputs): the slices are twice
 * as many then, one set for the batch that runs and one for the batch
 * being prepared, which is at most one ahead (the leader's scratch area
 * is larger for it: checkpoint.c's prepare_proc).
 */
#define SLICE_MIN 2048
#define BG_THREADS_MIN 32

struct probe_prep {
	struct ckpt_ctx *ctx;
	struct task *t;
	int (*prepare)(struct ckpt_ctx *ctx, struct task *th);
	size_t first, slice, nslices;
	bool *ok; /* the thread's probes are asked and fit its slice */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t done;     /* threads [0, done) prepared, under lock */
	size_t finished; /* batches run and read back, under lock */
};

static void prepare_one(struct probe_prep *a, size_t j)
{
	struct task *th = &a->t->threads[j];
	a->ok[j] = false;
	if (a->prepare(a->ctx, th) < 0)
		return;
	struct probe_batch *b = probes_of(th);
	if (!b || b->n || b->used)
		return;
	b->base = a->first + (j % a->nslices) * a->slice;
	b->limit = b->base + a->slice;
	b->with_siblings = true;
	bool ok = true;
	for (int k = 0; ok && k < KIND_MAX; k++) {
		int (*fn)(struct ckpt_ctx *, struct task *) = kinds[k].ops->probe;
		if (fn && kinds[k].ops->per_thread)
			ok = fn(a->ctx, th) >= 0;
	}
	/* the table after the outputs, inside the slice */
	size_t tab = (b->base + b->used + 63) & ~(size_t)63;
	if (!ok || b->n > PUPPET_BATCH_MAX || tab + b->n * PUPPET_STUB_ENTRY > b->limit) {
		task_probes_free(th); /* collected alone, from scratch */
		return;
	}
	a->ok[j] = true;
}

static void *prepare_main(void *arg)
{
	struct probe_prep *a = arg;
	for (size_t j = 0; j < a->t->nthreads; j++) {
		if (j % PUPPET_MANY_MAX == 0) { /* its slices free: the batch before is done */
			pthread_mutex_lock(&a->lock);
			while (j / PUPPET_MANY_MAX >= a->finished + 2)
				pthread_cond_wait(&a->cond, &a->lock);
			pthread_mutex_unlock(&a->lock);
		}
		prepare_one(a, j);
		if ((j + 1) % PUPPET_MANY_MAX && j + 1 < a->t->nthreads)
			continue;
		pthread_mutex_lock(&a->lock);
		a->done = j + 1;
		pthread_cond_broadcast(&a->cond);
		pthread_mutex_unlock(&a->lock);
	}
	return NULL;
}

/* Waits until threads [0, n) are prepared. */
static void prepared(struct probe_prep *a, size_t n)
{
	pthread_mutex_lock(&a->lock);
	while (a->done < n)
		pthread_cond_wait(&a->cond, &a->lock);
	pthread_mutex_unlock(&a->lock);
}

/* A batch is run and read back: its slices are free again. */
static void finished(struct probe_prep *a)
{
	pthread_mutex_lock(&a->lock);
	a->finished++;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

void ckpt_probe_threads(struct ckpt_ctx *ctx, struct task *t,
			int (*prepare)(struct ckpt_ctx *ctx, struct task *th))
{
	size_t first = t->probes ? (t->probes->used + 63) & ~(size_t)63 : 0;
	if (!t->pup.scratch || !t->pup.stub_ip || first >= t->pup.scratch_len)
		return;
	size_t nslices = 2 * PUPPET_MANY_MAX;
	size_t slice = ((t->pup.scratch_len - first) / nslices) & ~(size_t)63;
	bool bg_ok = t->nthreads >= BG_THREADS_MIN && slice >= SLICE_MIN;
	if (!bg_ok) {
		nslices = PUPPET_MANY_MAX;
		slice = ((t->pup.scratch_len - first) / nslices) & ~(size_t)63;
	}
	if (slice < SLICE_MIN)
		return;
	_cleanup_free_ bool *ok = calloc(t->nthreads ? t->nthreads : 1, sizeof(*ok));
	if (!ok)
		return;
	struct probe_prep a = { .ctx = ctx, .t = t, .prepare = prepare, .first = first,
				.slice = slice, .nslices = nslices, .ok = ok,
				.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	pthread_t bg;
	bool started = false;
	if (bg_ok) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		started = pthread_create(&bg, NULL, prepare_main, &a) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	for (size_t i = 0; i < t->nthreads; i += PUPPET_MANY_MAX) {
		struct task *ths[PUPPET_MANY_MAX];
		struct puppet *ps[PUPPET_MANY_MAX];
		struct puppet_call *calls[PUPPET_MANY_MAX];
		size_t ns[PUPPET_MANY_MAX], np = 0;
		uint64_t tables[PUPPET_MANY_MAX];
		int err[PUPPET_MANY_MAX];
		size_t end = t->nthreads - i < PUPPET_MANY_MAX ? t->nthreads : i + PUPPET_MANY_MAX;
		if (started)
			prepared(&a, end);
		struct task *ready[PUPPET_MANY_MAX];
		bool *ready_ok[PUPPET_MANY_MAX];
		size_t nr = 0;
		for (size_t j = i; j < end; j++) {
			if (!started)
				prepare_one(&a, j);
			if (ok[j]) {
				ready[nr] = &t->threads[j];
				ready_ok[nr++] = &ok[j];
			}
		}
		zero_outputs(t, ready, ready_ok, nr);
		for (size_t j = i; j < end; j++) {
			struct task *th = &t->threads[j];
			if (!ok[j])
				continue;
			struct probe_batch *b = th->probes;
			ths[np] = th;
			ps[np] = &th->pup;
			calls[np] = b->c;
			ns[np] = b->n;
			tables[np++] = th->pup.scratch + ((b->base + b->used + 63) & ~(size_t)63);
		}
		if (!np) {
			if (started)
				finished(&a);
			continue;
		}
		puppet_syscalls_many_vm(ps, calls, ns, tables, np, err);
		/* each one's outputs, and only them, by one read */
		struct iovec lv[PUPPET_MANY_MAX], rv[PUPPET_MANY_MAX];
		size_t nv = 0, want = 0;
		for (size_t j = 0; j < np; j++) {
			struct probe_batch *b = ths[j]->probes;
			b->ran = true;
			if (err[j] < 0 || !b->used || !(b->out = malloc(b->used)))
				continue;
			lv[nv] = (struct iovec){ b->out, b->used };
			rv[nv++] = (struct iovec){ (void *)(uintptr_t)(t->pup.scratch + b->base),
						   b->used };
			want += b->used;
		}
		if (nv && process_vm_readv(t->pid, lv, nv, rv, nv, 0) != (ssize_t)want)
			for (size_t j = 0; j < np; j++) {
				free(ths[j]->probes->out);
				ths[j]->probes->out = NULL;
			}
		if (started)
			finished(&a);
	}
	if (started)
		pthread_join(bg, NULL);
	pthread_mutex_destroy(&a.lock);
	pthread_cond_destroy(&a.cond);
}

/*
 * The probes of processes prepared together (checkpoint.c's
 * ckpt_collect_task, up to PUPPET_MANY_MAX at a time), side by side: each
 * has its own scratch area and stub, with its table right after the
 * scratch area (where a batch of its own puts it); one request to the
 * guardian for all their batches, their stops overlapping. A process with
 * more probes than its share of the request (PROBES_MANY_CALLS), or none,
 * runs them alone (ckpt_run_probes).
 */
#define PROBES_MANY_CALLS 32
void ckpt_probe_procs(struct ckpt_ctx *ctx, struct task *const *ts, size_t n)
{
	struct task *in[PUPPET_MANY_MAX];
	struct puppet *ps[PUPPET_MANY_MAX];
	struct puppet_call *calls[PUPPET_MANY_MAX];
	size_t ns[PUPPET_MANY_MAX], np = 0;
	uint64_t tables[PUPPET_MANY_MAX];
	int err[PUPPET_MANY_MAX];

	for (size_t i = 0; i < n; i++) {
		struct task *t = ts[i];
		struct probe_batch *b = t->probes;
		if (np == PUPPET_MANY_MAX || !b || !b->n || b->n > PROBES_MANY_CALLS ||
		    !t->pup.scratch || !t->pup.stub_ip || b->base) {
			/* alone; its results say how it went */
			if (ckpt_run_probes(ctx, t) < 0 && b)
				b->ran = true;
			continue;
		}
		in[np] = t;
		ps[np] = &t->pup;
		calls[np] = b->c;
		ns[np] = b->n;
		tables[np++] = t->pup.scratch + t->pup.scratch_len;
	}
	if (!np)
		return;
	puppet_syscalls_many(ps, calls, ns, tables, np, err);
	for (size_t j = 0; j < np; j++) {
		struct probe_batch *b = in[j]->probes;
		b->ran = true;
		for (size_t k = 0; err[j] < 0 && k < b->n; k++)
			b->c[k].ret = err[j];
		if (err[j] < 0 || !b->used || !(b->out = malloc(b->used)))
			continue;
		if (puppet_read(&in[j]->pup, in[j]->pup.scratch, b->out, b->used) < 0) {
			free(b->out);
			b->out = NULL;
		}
	}
}
