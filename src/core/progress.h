/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The caller's progress callback (struct ckpt_opts' progress), throttled:
 * progress_set() and progress_add() may be called as often as the work
 * goes (after each write, each chunk of pages), from several threads; the
 * callback runs at most once per interval, never from two threads at once.
 */
#ifndef CKPT_PROGRESS_H
#define CKPT_PROGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ckpt.h"

struct progress {
	void (*fn)(void *arg, const struct ckpt_progress *p); /* NULL: none */
	void *arg;
	int phase;
	uint64_t start_us, interval_us;
	uint64_t total;         /* 0: unknown */
	_Atomic uint64_t done;
	_Atomic uint64_t next_us; /* the earliest time of the next call */
	atomic_flag busy;       /* a call runs */
	bool called;            /* fn was called: progress_end() calls it once more */
};

static inline uint64_t progress_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* No callback unless o's size covers the progress fields and one is set. */
static inline void progress_init(struct progress *p, const struct ckpt_opts *o, int phase,
				 uint64_t start_us)
{
	p->fn = NULL;
	p->phase = phase;
	p->start_us = start_us;
	p->total = 0;
	p->called = false;
	atomic_init(&p->done, 0);
	atomic_flag_clear(&p->busy);
	if (!o || o->size < offsetof(struct ckpt_opts, progress_interval_ms) +
				    sizeof(o->progress_interval_ms) || !o->progress)
		return;
	p->fn = o->progress;
	p->arg = o->progress_arg;
	p->interval_us = (uint64_t)(o->progress_interval_ms ? o->progress_interval_ms : 100) * 1000u;
	atomic_init(&p->next_us, start_us + p->interval_us);
}

static inline void progress_tick(struct progress *p, uint64_t done)
{
	uint64_t now = progress_now_us(), next = atomic_load(&p->next_us);
	if (now < next || !atomic_compare_exchange_strong(&p->next_us, &next, now + p->interval_us))
		return;
	if (atomic_flag_test_and_set(&p->busy))
		return;
	struct ckpt_progress cp = { .phase = p->phase, .done = done, .total = p->total,
				    .elapsed_us = now - p->start_us };
	p->fn(p->arg, &cp);
	p->called = true;
	atomic_flag_clear(&p->busy);
}

/* The work is over: CKPT_PHASE_END, if the callback was called before. */
static inline void progress_end(struct progress *p)
{
	if (!p->fn || !p->called)
		return;
	struct ckpt_progress cp = { .phase = CKPT_PHASE_END, .done = atomic_load(&p->done),
				    .total = p->total,
				    .elapsed_us = progress_now_us() - p->start_us };
	p->fn(p->arg, &cp);
	p->called = false;
}

/* done is now n bytes */
static inline void progress_set(struct progress *p, uint64_t n)
{
	if (!p->fn)
		return;
	atomic_store(&p->done, n);
	progress_tick(p, n);
}

/* n more bytes done */
static inline void progress_add(struct progress *p, uint64_t n)
{
	if (!p->fn)
		return;
	progress_tick(p, atomic_fetch_add(&p->done, n) + n);
}

#endif
