/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Resource limits. Read from /proc/PID/limits (prlimit on another process
 * needs CAP_SYS_RESOURCE when its credentials differ); set by an injected
 * prlimit64 on the puppet itself. A hard limit above ckpt's own cannot be
 * raised without CAP_SYS_RESOURCE: it is kept at ckpt's, with a warning.
 * A limit the puppet has already (ckpt's, limits_start) is not set again.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "kinds/checks.h"
#include "util/cleanup.h"

enum { RLIMITS_ENTRY = REC_TYPE(KID_rlimits, 1) };

struct rlimits_ckpt {
	RlimitsEntry e;
	RlimitEntry lim[PROC_NLIMITS];
	RlimitEntry *plim[PROC_NLIMITS];
};

static int rlimits_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct rlimits_ckpt *k = task_state(t, KIND_rlimits, sizeof(*k));
	struct proc_limits pl;
	char *text = NULL;

	if (!k)
		return -ENOMEM;
	int r = proc_read(t->pid, "limits", &text, NULL);
	if (r >= 0)
		r = proc_parse_limits(text, &pl);
	free(text);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its limits", t->pid);
	rlimits_entry__init(&k->e);
	for (int i = 0; i < PROC_NLIMITS; i++) {
		rlimit_entry__init(&k->lim[i]);
		k->lim[i].resource = i;
		k->lim[i].cur = pl.soft[i];
		k->lim[i].max = pl.hard[i];
		k->plim[i] = &k->lim[i];
	}
	k->e.limits = k->plim;
	k->e.n_limits = PROC_NLIMITS;
	return 0;
}

static int rlimits_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct rlimits_ckpt *k = t->kstate[KIND_rlimits];
	return ctx_write_msg(ctx, RLIMITS_ENTRY, &k->e.base);
}

const char *rlimits_entry_invalid(const RlimitsEntry *e)
{
	for (size_t i = 0; i < e->n_limits; i++) {
		if (e->limits[i]->resource >= RLIM_NLIMITS)
			return "a limit of no resource";
		if (e->limits[i]->cur > e->limits[i]->max)
			return "a soft limit above its hard limit";
	}
	return NULL;
}

static int rlimits_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	RlimitsEntry *e = rctx_load_one(ctx, t, rec, KIND_rlimits, RLIMITS_ENTRY, &rlimits_entry__descriptor);
	const char *why = e ? rlimits_entry_invalid(e) : NULL;
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: rlimits of pid %d: %s", rec->index,
				t->pid, why);
	return e ? 0 : -EINVAL;
}

/* A hard limit above ckpt's: raised if the task may (CAP_SYS_RESOURCE),
 * else kept at ckpt's; 1 if it is set already. */
static int raise_limit(struct rst_ctx *ctx, struct rst_task *t, const RlimitEntry *l,
		       struct rlimit *want)
{
	struct rlimit mine;
	if (getrlimit((int)l->resource, &mine) < 0 || want->rlim_max <= mine.rlim_max)
		return 0;
	long r = puppet_syscall(&t->pup, SYS_prlimit64, 0, l->resource,
				puppet_scratch_put(&t->pup, 0, want, sizeof(*want)), 0);
	if (r == 0)
		return 1;
	log_warn(&ctx->log,
		 "pid %d: hard limit %u (%llu) is above ckpt's (%llu) and cannot be raised; kept "
		 "at ckpt's",
		 t->pid, l->resource, (unsigned long long)want->rlim_max,
		 (unsigned long long)mine.rlim_max);
	want->rlim_max = mine.rlim_max;
	want->rlim_cur = MIN(want->rlim_cur, want->rlim_max);
	return 0;
}

#define RLIMITS_BATCH 16

/*
 * What every puppet has until its own restore here: ckpt's limits,
 * inherited by the root and through it by every task, all forked before
 * step "task state" (nothing but this op sets a puppet's limits). Read
 * once a restart (ctx->limits_start), where each process's were read
 * from its /proc/PID/limits; NULL if they cannot be read.
 */
static const struct proc_limits *limits_start(struct rst_ctx *ctx)
{
	if (ctx->limits_start)
		return ctx->limits_start;
	_cleanup_free_ char *text = NULL;
	struct proc_limits *l = malloc(sizeof(*l));
	if (!l || proc_read(getpid(), "limits", &text, NULL) < 0 ||
	    proc_parse_limits(text, l) < 0) {
		free(l);
		return NULL;
	}
	return ctx->limits_start = l;
}

/* The limits set by batches of injected calls, each limit at its own place
 * in scratch. */
static int rlimits_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	RlimitsEntry *e = t->kstate[KIND_rlimits];
	/* what the puppet has already (ckpt's, most often the program's too)
	 * is not set again: no call, and no stop if none is left */
	const struct proc_limits *start = e ? limits_start(ctx) : NULL;
	bool have = start != NULL;
	struct proc_limits now = have ? *start : (struct proc_limits){ 0 };
	for (size_t i = 0; e && i < e->n_limits; i += RLIMITS_BATCH) {
		struct rlimit want[RLIMITS_BATCH];
		struct puppet_call c[RLIMITS_BATCH];
		const RlimitEntry *ls[RLIMITS_BATCH];
		size_t n = 0;
		for (size_t j = i; j < e->n_limits && j < i + RLIMITS_BATCH; j++) {
			const RlimitEntry *l = e->limits[j];
			if (have && l->resource < PROC_NLIMITS && now.soft[l->resource] == l->cur &&
			    now.hard[l->resource] == l->max)
				continue;
			want[n] = (struct rlimit){ .rlim_cur = l->cur, .rlim_max = l->max };
			if (raise_limit(ctx, t, l, &want[n]) == 0)
				ls[n++] = l;
		}
		uint64_t addr = n ? puppet_scratch_put(&t->pup, 0, want, n * sizeof(want[0])) : 0;
		if (n && !addr)
			return log_fail(&ctx->log, -EFAULT, "pid %d: cannot write rlimits to it",
					t->pid);
		for (size_t j = 0; j < n; j++)
			c[j] = PUPPET_CALL(SYS_prlimit64, 0, ls[j]->resource,
					   addr + j * sizeof(want[0]), 0);
		int r = n ? puppet_syscalls(&t->pup, c, n) : 0;
		for (size_t j = 0; j < n; j++) {
			long ret = r < 0 ? r : c[j].ret;
			if (ret < 0)
				return log_fail(&ctx->log, (int)ret, "pid %d: cannot set rlimit %u: %s",
						t->pid, ls[j]->resource, strerror((int)-ret));
		}
	}
	return 0;
}

static const ProtobufCMessageDescriptor *rlimits_descriptor(uint32_t sub)
{
	return sub == REC_SUB(RLIMITS_ENTRY) ? &rlimits_entry__descriptor : NULL;
}

const struct kind_ops rlimits_ops = {
	.collect = rlimits_collect,
	.dump = rlimits_dump,
	.load = rlimits_load,
	.restore = rlimits_restore,
	.free_state = free,
	.descriptor = rlimits_descriptor,
};
