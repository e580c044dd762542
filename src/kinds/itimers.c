/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Interval timers (real, virtual, prof) with the time left: read by an
 * injected getitimer, armed again by setitimer once the puppet is built.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>

#include "core/ctx.h"
#include "signals.pb-c.h"

enum { ITIMERS_ENTRY = REC_TYPE(KID_itimers, 1) };

struct itimers_ckpt {
	ItimersEntry e;
	ItimerEntry it[3];
	int call[3];   /* the probes: getitimer of each */
	uint64_t area; /* their three struct itimerval, in the task */
};

static uint64_t tv_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000 + (uint64_t)tv->tv_usec;
}

/* The three getitimer calls, into the probes' area one after another. */
static int itimers_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct itimers_ckpt *k = task_state(t, KIND_itimers, sizeof(*k));
	(void)ctx;
	if (!k)
		return -ENOMEM;
	k->area = task_probe_area(t, 3 * sizeof(struct itimerval));
	for (int w = 0; w < 3; w++)
		k->call[w] = k->area ? task_probe_call(t, PUPPET_CALL(SYS_getitimer, w,
					k->area + w * sizeof(struct itimerval))) : -ENOSPC;
	return 0;
}

static int itimers_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct itimers_ckpt *k = task_state(t, KIND_itimers, sizeof(*k));
	ItimerEntry **slot[3];

	if (!k)
		return -ENOMEM;
	itimers_entry__init(&k->e);
	slot[ITIMER_REAL] = &k->e.real;
	slot[ITIMER_VIRTUAL] = &k->e.virt;
	slot[ITIMER_PROF] = &k->e.prof;
	const struct itimerval *vs = task_probe_out(t, k->area, 3 * sizeof(*vs));
	for (int w = 0; w < 3; w++) {
		long r = task_probe_ret(t, k->call[w]);
		if (r >= 0 && !vs)
			r = -EIO;
		if (r < 0)
			return log_fail(&ctx->log, (int)r,
					"pid %d: cannot read interval timer %d", t->pid, w);
		itimer_entry__init(&k->it[w]);
		k->it[w].interval_us = tv_us(&vs[w].it_interval);
		k->it[w].value_us = tv_us(&vs[w].it_value);
		*slot[w] = &k->it[w];
	}
	return 0;
}

static int itimers_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct itimers_ckpt *k = t->kstate[KIND_itimers];
	return ctx_write_msg(ctx, ITIMERS_ENTRY, &k->e.base);
}

static int itimers_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	return rctx_load_one(ctx, t, rec, KIND_itimers, ITIMERS_ENTRY, &itimers_entry__descriptor)
		       ? 0
		       : -EINVAL;
}

static int arm(struct rst_ctx *ctx, struct rst_task *t, int which, const struct itimerval *v)
{
	uint64_t addr = puppet_scratch_put(&t->pup, 0, v, sizeof(*v));
	long r = puppet_syscall(&t->pup, SYS_setitimer, which, addr, 0);
	return (int)rst_check(ctx, t, r, "setitimer");
}

static int itimers_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	ItimersEntry *e = t->kstate[KIND_itimers];
	const ItimerEntry *it[3];

	if (!e)
		return 0;
	it[ITIMER_REAL] = e->real;
	it[ITIMER_VIRTUAL] = e->virt;
	it[ITIMER_PROF] = e->prof;
	for (int w = 0; w < 3; w++) {
		if (!it[w]->value_us)
			continue;
		struct itimerval v = {
			.it_interval = { (time_t)(it[w]->interval_us / 1000000),
					 (suseconds_t)(it[w]->interval_us % 1000000) },
			.it_value = { (time_t)(it[w]->value_us / 1000000),
				      (suseconds_t)(it[w]->value_us % 1000000) },
		};
		int r = arm(ctx, t, w, &v);
		if (r < 0)
			return r;
		/* the kernel adds a tick to CPU-time timers as they are armed;
		 * read back and take it off again, so the time left stays */
		if (w != ITIMER_REAL) {
			struct itimerval got;
			long g = puppet_syscall(&t->pup, SYS_getitimer, w, t->pup.scratch);
			if (g == 0 && puppet_read(&t->pup, t->pup.scratch, &got, sizeof(got)) == 0 &&
			    tv_us(&got.it_value) > it[w]->value_us) {
				uint64_t extra = tv_us(&got.it_value) - it[w]->value_us;
				if (extra < it[w]->value_us) {
					uint64_t want = it[w]->value_us - extra;
					v.it_value.tv_sec = (time_t)(want / 1000000);
					v.it_value.tv_usec = (suseconds_t)(want % 1000000);
					r = arm(ctx, t, w, &v);
					if (r < 0)
						return r;
				}
			}
		}
	}
	return 0;
}

static const ProtobufCMessageDescriptor *itimers_descriptor(uint32_t sub)
{
	return sub == REC_SUB(ITIMERS_ENTRY) ? &itimers_entry__descriptor : NULL;
}

const struct kind_ops itimers_ops = {
	.probe = itimers_probe,
	.collect = itimers_collect,
	.dump = itimers_dump,
	.load = itimers_load,
	.restore = itimers_restore,
	.free_state = free,
	.descriptor = itimers_descriptor,
};
