/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Signals: every disposition that is not SIG_DFL (handler, flags, restorer,
 * mask, read by injected rt_sigaction), the blocked mask (the one the task
 * had before the puppet engine blocked everything), pending signals of the
 * thread and of the process with their siginfo (PTRACE_PEEKSIGINFO), and
 * sigaltstack. Pending signals are queued again from inside the puppet,
 * which may send itself any si_code (SI_TKILL with the original sender
 * included, by rt_tgsigqueueinfo), while everything is still blocked.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "core/ctx.h"
#include "kinds/checks.h"
#include "signals.pb-c.h"
#include "util/cleanup.h"
#include "util/kernel.h"

enum { SIGNALS_ENTRY = REC_TYPE(KID_signals, 1) };
#define NSIG_K 64
#define MAX_PENDING 4096
#ifndef PTRACE_PEEKSIGINFO_SHARED
#define PTRACE_PEEKSIGINFO_SHARED 1
#endif

struct signals_ckpt {
	SignalsEntry e;
	SiginfoEntry *pend;
	SiginfoEntry **ppend;
	uint8_t (*info)[128];
	/* the probes: rt_sigaction of each signal caught or ignored (a
	 * process's), then sigaltstack, outputs at act_at and ss_at */
	int sigs[NSIG_K];
	size_t nsigs;
	int first_call;
	uint64_t act_at, ss_at;
	/* a process's actions; a thread has none, and no room for them (5 KiB
	 * less for each of 1,000 threads: pages not faulted in) */
	SigactionEntry *pact[NSIG_K];
	SigactionEntry act[NSIG_K];
};

static struct signals_ckpt *state_of(struct task *t)
{
	return task_state(t, KIND_signals,
			  t->leader ? offsetof(struct signals_ckpt, pact) : sizeof(struct signals_ckpt));
}

static int collect_pending(struct ckpt_ctx *ctx, struct task *t, struct signals_ckpt *k)
{
	/* /proc/PID/status, read before any injection, lists no pending signal
	 * (the thread's, and for a process the process's): no queue to read, and
	 * no request to the guardian. One sent after that instant is not in the
	 * image, as one sent after the queue was read would not be. */
	uint64_t pnd = t->status.sig_pnd | (t->leader ? 0 : t->status.shd_pnd);
	if (!pnd && !t->pup.ntraps)
		return 0;
	uint8_t(*buf)[128] = calloc(MAX_PENDING, 128);
	bool *shared_of = calloc(MAX_PENDING, sizeof(bool));
	size_t n = 0;
	int r = 0;

	if (!buf || !shared_of) {
		r = -ENOMEM;
		goto fail;
	}
	/* a thread has its own queue; the process's is saved with the leader */
	for (int shared = 0; shared < (t->leader ? 1 : 2); shared++) {
		for (uint64_t off = 0;;) {
			if (n + 32 > MAX_PENDING) {
				r = log_fail(&ctx->log, -E2BIG, "pid %d: more than %d pending signals",
					     t->pid, MAX_PENDING);
				goto fail;
			}
			long got = puppet_peek_siginfo(&t->pup, off, shared, 32, buf[n]);
			if (got < 0) {
				r = log_fail(&ctx->log, (int)got, "pid %d: PTRACE_PEEKSIGINFO: %s",
					     t->pid, strerror((int)-got));
				goto fail;
			}
			for (long i = 0; i < got; i++)
				shared_of[n + i] = shared;
			n += got;
			off += got;
			if (got < 32)
				break;
		}
	}
	k->info = buf;
	k->pend = calloc(n ? n : 1, sizeof(*k->pend));
	k->ppend = calloc(n ? n : 1, sizeof(*k->ppend));
	if (!k->pend || !k->ppend) {
		free(shared_of);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		siginfo_entry__init(&k->pend[i]);
		k->pend[i].siginfo.data = buf[i];
		k->pend[i].siginfo.len = 128;
		k->pend[i].shared = shared_of[i];
		k->ppend[i] = &k->pend[i];
	}
	k->e.pending = k->ppend;
	k->e.n_pending = n;
	free(shared_of);
	return 0;
fail:
	free(buf);
	free(shared_of);
	return r;
}

/* The actions (of a process) and the sigaltstack, in the task's probes. */
static int signals_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct signals_ckpt *k = state_of(t);
	uint64_t set = t->status.sig_cgt | t->status.sig_ign;
	(void)ctx;

	if (!k)
		return -ENOMEM;
	k->nsigs = 0;
	for (int sig = 1; sig <= NSIG_K && !t->leader; sig++)
		if (set & (1ull << (sig - 1)))
			k->sigs[k->nsigs++] = sig;
	k->act_at = task_probe_area(t, k->nsigs * sizeof(struct kernel_sigaction));
	k->ss_at = task_probe_area(t, sizeof(stack_t));
	k->first_call = -ENOSPC;
	if ((k->nsigs && !k->act_at) || !k->ss_at)
		return 0;
	for (size_t i = 0; i < k->nsigs; i++) {
		int c = task_probe_call(t, PUPPET_CALL(SYS_rt_sigaction, k->sigs[i], 0,
						       k->act_at + i * sizeof(struct kernel_sigaction),
						       8));
		if (i == 0 || c < 0)
			k->first_call = c;
		if (c < 0)
			return 0;
	}
	int c = task_probe_call(t, PUPPET_CALL(SYS_sigaltstack, 0, k->ss_at));
	if (!k->nsigs || c < 0)
		k->first_call = c;
	return 0;
}

/* Result of the i-th probe (the sigaltstack's is nsigs). */
static long probe_ret_at(const struct task *t, const struct signals_ckpt *k, size_t i)
{
	return k->first_call < 0 ? k->first_call : task_probe_ret(t, k->first_call + (int)i);
}

static int signals_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct signals_ckpt *k = state_of(t);
	struct puppet *p = &t->pup;

	if (!k)
		return -ENOMEM;
	signals_entry__init(&k->e);
	const struct kernel_sigaction *kas =
		k->nsigs ? task_probe_out(t, k->act_at, k->nsigs * sizeof(*kas)) : NULL;
	for (size_t i = 0; i < k->nsigs; i++) {
		long e = probe_ret_at(t, k, i);
		if (e >= 0 && !kas)
			e = -EIO;
		if (e < 0)
			return log_fail(&ctx->log, (int)e,
					"pid %d: cannot read the action of signal %d", t->pid,
					k->sigs[i]);
		const struct kernel_sigaction ka = kas[i];
		SigactionEntry *a = &k->act[k->e.n_actions];
		sigaction_entry__init(a);
		a->sig = k->sigs[i];
		a->handler = ka.handler;
		a->flags = ka.flags;
		a->restorer = ka.restorer;
		a->mask = ka.mask;
		k->pact[k->e.n_actions++] = a;
	}
	k->e.actions = k->e.n_actions ? k->pact : NULL;
	k->e.blocked = p->sigmask0;
	/* the actions are the process's (its threads' status says the same) */
	p->no_handler = ~(t->leader ? t->leader->status.sig_cgt : t->status.sig_cgt);

	stack_t ss;
	const void *sso = task_probe_out(t, k->ss_at, sizeof(ss));
	if (probe_ret_at(t, k, k->nsigs) < 0 || !sso)
		return log_fail(&ctx->log, -EIO, "pid %d: cannot read its sigaltstack", t->pid);
	memcpy(&ss, sso, sizeof(ss));
	if (!(ss.ss_flags & SS_DISABLE)) {
		k->e.has_altstack_sp = k->e.has_altstack_size = k->e.has_altstack_flags = true;
		k->e.altstack_sp = (uint64_t)(uintptr_t)ss.ss_sp;
		k->e.altstack_size = ss.ss_size;
		k->e.altstack_flags = ss.ss_flags & ~SS_ONSTACK;
	}
	return collect_pending(ctx, t, k);
}

static int signals_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct signals_ckpt *k = t->kstate[KIND_signals];
	return ctx_write_msg(ctx, SIGNALS_ENTRY, &k->e.base);
}

const char *signals_entry_invalid(const SignalsEntry *e)
{
	for (size_t i = 0; i < e->n_actions; i++) {
		uint32_t s = e->actions[i]->sig;
		if (!s || s > NSIG_K || s == SIGKILL || s == SIGSTOP)
			return "an action for no signal, SIGKILL or SIGSTOP";
	}
	if (e->n_pending > MAX_PENDING)
		return "too many pending signals";
	for (size_t i = 0; i < e->n_pending; i++)
		if (e->pending[i]->siginfo.len != 128)
			return "a pending siginfo that is not 128 bytes";
	return NULL;
}

static int signals_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	SignalsEntry *e = rctx_load_one(ctx, t, rec, KIND_signals, SIGNALS_ENTRY, &signals_entry__descriptor);
	const char *why = e ? signals_entry_invalid(e) : NULL;
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: signals of pid %d: %s", rec->index,
				t->pid, why);
	return e ? 0 : -EINVAL;
}

/* rt_sigtimedwait calls in the batch (more are made one by one if needed) */
#define SIGWAIT_BATCH 4

struct sig_had {
	uint64_t set[2]; /* SigIgn, SigCgt */
	bool have;
};

/*
 * The signals process t has caught or ignored now, before its restore:
 * those of the process that forked it, as that one had them before its
 * own restore (every task is forked before "task state", and only this
 * op changes a puppet's actions), else its /proc/PID/status; all of
 * them if neither can be had. Kept for the tasks t forked: a child of
 * the tree takes its parent's, where each read its status.
 */
static void handled_before(struct rst_ctx *ctx, struct rst_task *t, uint64_t ret[2])
{
	size_t i = (size_t)(t - ctx->tasks);
	if (!ctx->sig_had && !(ctx->sig_had = calloc(ctx->ntasks, sizeof(*ctx->sig_had)))) {
		if (puppet_sig_handled(t->pup.pid, ret) < 0)
			ret[0] = ret[1] = ~0ull;
		return;
	}
	const struct sig_had *from =
	    t->creator >= 0 && (size_t)t->creator < ctx->ntasks ? &ctx->sig_had[t->creator] : NULL;
	if (from && from->have) {
		ret[0] = from->set[0];
		ret[1] = from->set[1];
	} else if (puppet_sig_handled(t->pup.pid, ret) < 0) {
		ret[0] = ret[1] = ~0ull;
		return;
	}
	if (i < ctx->ntasks)
		ctx->sig_had[i] = (struct sig_had){ { ret[0], ret[1] }, true };
}

/* The signals an image's actions have a handler for (a thread's record
 * has none: its process's are the leader's). */
static uint64_t caught(const SignalsEntry *e)
{
	uint64_t set = 0;
	for (size_t i = 0; e && i < e->n_actions; i++)
		if (e->actions[i]->handler != (uint64_t)(uintptr_t)SIG_DFL &&
		    e->actions[i]->handler != (uint64_t)(uintptr_t)SIG_IGN)
			set |= 1ull << (e->actions[i]->sig - 1);
	return set;
}

static int signals_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	SignalsEntry *e = t->kstate[KIND_signals];
	struct puppet *p = &t->pup;
	struct kernel_sigaction acts[NSIG_K + 1] = { 0 };
	long r;

	for (size_t i = 0; i < e->n_actions; i++) {
		const SigactionEntry *a = e->actions[i];
		acts[a->sig] = (struct kernel_sigaction){ a->handler, a->flags, a->restorer,
							  a->mask };
	}
	/* every signal: the puppet had ckpt's dispositions (shared by threads,
	 * set by the leader); each action at its own place in scratch; then
	 * the alternate stack and the first waits for what the tree's making
	 * left pending (a zombie's or ghost's SIGCHLD), all in one batch */
	struct puppet_call c[NSIG_K + 1 + SIGWAIT_BATCH];
	int sigs[NSIG_K];
	size_t n = 0;
	uint64_t base = t->leader ? 0 : puppet_scratch_put(p, 0, acts, sizeof(acts));
	if (!t->leader && !base)
		return log_fail(&ctx->log, -EFAULT, "pid %d: cannot write signal actions to it",
				t->pid);
	/* but a signal the puppet has at the plain default action, as the
	 * image has it: no call. Processes forked from ckpt's puppets have
	 * ckpt's actions, mostly the default: 62 calls, 0.1 ms a process.
	 * The puppet's status says neither caught nor ignored; its flags
	 * and mask are ckpt's own (a library caller's may have left some
	 * with SIG_DFL), read here once a restart. */
	static const struct kernel_sigaction dfl = {0};
	uint64_t had[2] = { ~0ull, ~0ull };
	if (!t->leader)
		handled_before(ctx, t, had);
	if (!ctx->sig_own_read) {
		for (int sig = 1; sig <= NSIG_K; sig++) {
			struct kernel_sigaction own;
			if (syscall(SYS_rt_sigaction, sig, NULL, &own, 8) < 0 ||
			    memcmp(&own, &dfl, sizeof(dfl)))
				ctx->sig_own_set |= 1ull << (sig - 1);
		}
		ctx->sig_own_read = true;
	}
	for (int sig = 1; sig <= NSIG_K && !t->leader; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (!((had[0] | had[1] | ctx->sig_own_set) & (1ull << (sig - 1))) &&
		    !memcmp(&acts[sig], &dfl, sizeof(dfl)))
			continue;
		sigs[n] = sig;
		c[n++] = PUPPET_CALL(SYS_rt_sigaction, sig, base + sig * sizeof(acts[0]), 0, 8);
	}
	stack_t ss = { .ss_flags = SS_DISABLE };
	if (e->has_altstack_sp) {
		ss.ss_sp = (void *)(uintptr_t)e->altstack_sp;
		ss.ss_size = e->altstack_size;
		ss.ss_flags = (int)e->altstack_flags;
	}
	/* a thread made by clone(CLONE_VM) has none (the kernel's
	 * copy_process resets it): no call for one that had none; and a
	 * thread has no waits (nothing is written for them either) */
	bool call_alt = !t->leader || e->has_altstack_sp;
	const size_t ss_off = (sizeof(acts) + 63) & ~63ul, set_off = ss_off + 64,
		     ts_off = set_off + 64;
	uint64_t all = ~0ull, zero[2] = { 0, 0 };
	uint64_t ssa = call_alt ? puppet_scratch_put(p, ss_off, &ss, sizeof(ss)) : 1;
	uint64_t set = t->leader ? 1 : puppet_scratch_put(p, set_off, &all, sizeof(all));
	uint64_t ts = t->leader ? 1 : puppet_scratch_put(p, ts_off, zero, sizeof(zero));
	if (!ssa || !set || !ts)
		return log_fail(&ctx->log, -EFAULT, "pid %d: cannot write its signal stack to it",
				t->pid);
	size_t alt = n;
	if (call_alt)
		c[n++] = PUPPET_CALL(SYS_sigaltstack, ssa, 0);
	size_t waits = n;
	for (int i = 0; i < SIGWAIT_BATCH && !t->leader; i++)
		c[n++] = PUPPET_CALL(SYS_rt_sigtimedwait, set, 0, ts, 8);
	r = n ? puppet_syscalls(p, c, n) : 0;
	for (size_t i = 0; i < alt; i++) {
		long e = r < 0 ? r : c[i].ret;
		if (e < 0)
			return log_fail(&ctx->log, (int)e, "pid %d: cannot set the action of signal %d: %s",
					t->pid, sigs[i], strerror((int)-e));
	}
	/* SIGTRAP ignored: the threads' puppets must not step from now on
	 * either (a forced SIGTRAP would reset the shared action) */
	for (size_t i = 0; !t->leader && i < t->nthreads; i++)
		t->threads[i].pup.trap_ignored = acts[SIGTRAP].handler == (uintptr_t)SIG_IGN;
	long ra = r < 0 ? r : waits > alt ? c[alt].ret : 0;
	if (rst_check(ctx, t, ra, "sigaltstack") < 0)
		return (int)ra;

	/* more pending than the batch took: one by one */
	bool more = n > waits && c[n - 1].ret >= 0;
	for (int k = 0; more && k < 128; k++)
		if (puppet_syscall(p, SYS_rt_sigtimedwait, set, 0, ts, 8) < 0)
			break;

	for (size_t i = 0; i < e->n_pending; i++) {
		const SiginfoEntry *s = e->pending[i];
		siginfo_t si;
		memcpy(&si, s->siginfo.data, sizeof(si));
		uint64_t addr = puppet_scratch_put(p, 0, &si, sizeof(si));
		if (s->shared)
			r = puppet_syscall(p, SYS_rt_sigqueueinfo, t->pid, si.si_signo, addr);
		else
			r = puppet_syscall(p, SYS_rt_tgsigqueueinfo,
					   t->leader ? t->leader->pid : t->pid, t->pid, si.si_signo,
					   addr);
		if (r < 0)
			return log_fail(&ctx->log, (int)r, "pid %d: cannot queue signal %d: %s",
					t->pid, si.si_signo, strerror((int)-r));
	}
	/* the mask goes back when the puppet is released */
	p->sigmask0 = e->blocked & ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
	p->no_handler = ~caught(t->leader ? t->leader->kstate[KIND_signals] : e);
	return 0;
}

static void signals_free_state(void *state)
{
	struct signals_ckpt *k = state;
	if (k) {
		free(k->pend);
		free(k->ppend);
		free(k->info);
		free(k);
	}
}

static const ProtobufCMessageDescriptor *signals_descriptor(uint32_t sub)
{
	return sub == REC_SUB(SIGNALS_ENTRY) ? &signals_entry__descriptor : NULL;
}

static int signals_loaded(struct rst_ctx *ctx, struct rst_task *t)
{
	return rst_require(ctx, t, KIND_signals);
}

const struct kind_ops signals_ops = {
	.per_thread = true,
	.probe = signals_probe,
	.collect = signals_collect,
	.dump = signals_dump,
	.load = signals_load,
	.loaded = signals_loaded,
	.restore = signals_restore,
	.free_state = signals_free_state,
	.descriptor = signals_descriptor,
};
