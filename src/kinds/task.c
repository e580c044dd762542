/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Identity and prctl state of a task: comm, personality,
 * clear_child_tid, the robust futex list, rseq, subreaper, THP, timer slack.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "util/cleanup.h"
#include "util/kernel.h"

enum { TASK_ENTRY = REC_TYPE(KID_task, 1) };

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
struct rseq_config {
	uint64_t ptr;
	uint32_t size, sig, flags, pad;
};

struct task_ckpt {
	TaskEntry e;
	RseqEntry rseq;
	char comm[32];
};

/* An injected prctl/syscall that writes a u64 into scratch; reads it back. */
static int remote_u64(struct task *t, long nr, long a1, long a2, uint64_t *ret)
{
	struct puppet *p = &t->pup;
	uint64_t zero = 0, addr = puppet_scratch_put(p, 512, &zero, sizeof(zero));
	if (!addr)
		return -EFAULT;
	long r = a2 < 0 ? puppet_syscall(p, nr, a1, addr) : puppet_syscall(p, nr, a1, a2, addr);
	if (r < 0)
		return (int)r;
	return puppet_read(p, addr, ret, sizeof(*ret));
}

static int task_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct task_ckpt *k = task_state(t, KIND_task, sizeof(*k));
	char *text = NULL;
	int r;

	if (!k)
		return -ENOMEM;
	task_entry__init(&k->e);
	k->e.pid = t->vpid;
	k->e.ppid = t->vppid;
	k->e.pgid = t->vpgid;
	k->e.sid = t->vsid;
	snprintf(k->comm, sizeof(k->comm), "%s", t->stat.comm);
	k->e.comm = k->comm;
	/* a SIGSTOP not acted on yet stops it as soon as it runs */
	uint64_t stop = 1ull << (SIGSTOP - 1);
	if (t->pup.group_stopped || t->stat.state == 'T' ||
	    ((t->status.shd_pnd | t->status.sig_pnd) & stop)) {
		k->e.has_stopped = true;
		k->e.stopped = true;
	}

	r = proc_read(t->pid, "personality", &text, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read personality", t->pid);
	k->e.has_personality = true;
	k->e.personality = (uint32_t)strtoul(text, NULL, 16);
	free(text);

	uint64_t v, len;
	if (remote_u64(t, SYS_prctl, PR_GET_TID_ADDRESS, -1, &v) == 0) {
		k->e.has_tid_address = true;
		k->e.tid_address = v;
	}
	/* get_robust_list(0, &head, &len): two outputs */
	long rr = puppet_syscall(&t->pup, SYS_get_robust_list, 0, t->pup.scratch + 512,
				 t->pup.scratch + 520);
	if (rr == 0 && puppet_read(&t->pup, t->pup.scratch + 512, &v, 8) == 0 &&
	    puppet_read(&t->pup, t->pup.scratch + 520, &len, 8) == 0) {
		k->e.has_robust_list = k->e.has_robust_list_len = true;
		k->e.robust_list = v;
		k->e.robust_list_len = len;
	}
	if (remote_u64(t, SYS_prctl, PR_GET_CHILD_SUBREAPER, -1, &v) == 0) {
		k->e.has_child_subreaper = true;
		k->e.child_subreaper = (int)v != 0;
	}
	long thp = puppet_syscall(&t->pup, SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0);
	if (thp >= 0) {
		k->e.has_thp_disable = true;
		k->e.thp_disable = (uint32_t)thp;
	}
	long slack = puppet_syscall(&t->pup, SYS_prctl, PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (slack >= 0) {
		k->e.has_timer_slack_ns = true;
		k->e.timer_slack_ns = (uint64_t)slack;
	}

	struct rseq_config rc = { 0 };
	if (puppet_get_rseq(&t->pup, &rc, sizeof(rc)) > 0 && rc.ptr) {
		rseq_entry__init(&k->rseq);
		k->rseq.ptr = rc.ptr;
		k->rseq.len = rc.size;
		k->rseq.sig = rc.sig;
		k->rseq.has_flags = true;
		k->rseq.flags = rc.flags;
		k->e.rseq = &k->rseq;
	}
	return 0;
}

static int task_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct task_ckpt *k = t->kstate[KIND_task];
	return ctx_write_msg(ctx, TASK_ENTRY, &k->e.base);
}

static int task_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	TaskEntry *e = rctx_load_one(ctx, t, rec, KIND_task, TASK_ENTRY, &task_entry__descriptor);
	if (!e)
		return -EINVAL;
	if ((pid_t)e->pid != t->pid)
		return log_fail(&ctx->log, -EINVAL, "record %u: task entry of pid %u inside pid %d",
				rec->index, e->pid, t->pid);
	return 0;
}

bool task_stopped(struct rst_task *t)
{
	TaskEntry *e = t->kstate[KIND_task];
	return e && e->has_stopped && e->stopped;
}

int task_rseq_unregister(struct puppet *p)
{
	struct rseq_config rc = { 0 };
	if (puppet_get_rseq(p, &rc, sizeof(rc)) <= 0 || !rc.ptr)
		return 0;
	long r = puppet_syscall(p, SYS_rseq, rc.ptr, rc.size, RSEQ_FLAG_UNREGISTER, rc.sig);
	return r < 0 ? (int)r : 0;
}

static int task_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	TaskEntry *e = t->kstate[KIND_task];
	struct puppet *p = &t->pup;
	long r;

	uint64_t comm = puppet_scratch_put(p, 0, e->comm, strnlen(e->comm, 15) + 1);
	if (!comm)
		return -EFAULT;
	puppet_syscall(p, SYS_prctl, PR_SET_NAME, comm);
	if (e->has_personality) {
		r = puppet_syscall(p, SYS_personality, e->personality);
		if (rst_check(ctx, t, r, "personality") < 0)
			return (int)r;
	}
	if (e->has_tid_address)
		puppet_syscall(p, SYS_set_tid_address, e->tid_address);
	if (e->has_robust_list) {
		r = puppet_syscall(p, SYS_set_robust_list, e->robust_list, e->robust_list_len);
		if (rst_check(ctx, t, r, "set_robust_list") < 0)
			return (int)r;
	}
	if (e->rseq) {
		r = puppet_syscall(p, SYS_rseq, e->rseq->ptr, e->rseq->len, 0, e->rseq->sig);
		if (rst_check(ctx, t, r, "rseq registration") < 0)
			return (int)r;
	}
	if (e->has_child_subreaper && e->child_subreaper)
		puppet_syscall(p, SYS_prctl, PR_SET_CHILD_SUBREAPER, 1);
	if (e->has_thp_disable && e->thp_disable)
		puppet_syscall(p, SYS_prctl, PR_SET_THP_DISABLE, 1, 0, 0, 0);
	if (e->has_timer_slack_ns)
		puppet_syscall(p, SYS_prctl, PR_SET_TIMERSLACK, e->timer_slack_ns, 0, 0, 0);
	return 0;
}

static const ProtobufCMessageDescriptor *task_descriptor(uint32_t sub)
{
	return sub == REC_SUB(TASK_ENTRY) ? &task_entry__descriptor : NULL;
}

const struct kind_ops task_ops = {
	.per_thread = true,
	.collect = task_collect,
	.dump = task_dump,
	.load = task_load,
	.restore = task_restore,
	.free_state = free,
	.free_rstate = rst_free_msg,
	.descriptor = task_descriptor,
};
