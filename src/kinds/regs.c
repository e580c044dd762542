/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Registers: the general ones with fs/gs base, and the whole xstate
 * (FPU, SSE, AVX...) as NT_X86_XSTATE gives it.
 *
 * A task stopped inside a system call has rax = -ERESTART... and orig_rax
 * = the call. The image keeps them raw; restore applies what the kernel
 * would do on return from a signal without a handler: ERESTARTSYS,
 * ERESTARTNOINTR and ERESTARTNOHAND restart the call (rip -= 2, rax =
 * orig_rax); ERESTART_RESTARTBLOCK (nanosleep, poll, futex wait with a
 * timeout) cannot be resumed in a new process, whose restart_block is
 * empty, so the call is re-issued (restart_fixup).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "kinds/checks.h"
#include "util/features.h"
#include "util/kernel.h"

enum { REGS_ENTRY = REC_TYPE(KID_regs, 1) };
#define XSTATE_MAX 16384
#define XSTATE_BV_OFF 512            /* xsave header: xstate_bv */

struct regs_ckpt {
	RegsEntry e;
	size_t cap;       /* of xstate */
	uint8_t xstate[]; /* as much as the task's needs (read with the seize) */
};

#define REGS_FIELDS(X) \
	X(r15) X(r14) X(r13) X(r12) X(rbp) X(rbx) X(r11) X(r10) X(r9) X(r8) X(rax) X(rcx) \
	X(rdx) X(rsi) X(rdi) X(orig_rax) X(rip) X(cs) X(eflags) X(rsp) X(ss) X(fs_base)   \
	X(gs_base) X(ds) X(es) X(fs) X(gs)

static uint64_t xstate_u64(const uint8_t *x, size_t len, size_t off)
{
	uint64_t v = 0;
	if (off + 8 <= len)
		memcpy(&v, x + off, 8);
	return v;
}

static int regs_collect(struct ckpt_ctx *ctx, struct task *t)
{
	/* room for the size read with the seize (not 16 KiB zeroed for
	 * each thread) */
	size_t len = t->pup.have_seized_state && t->pup.xstate && t->pup.xstate_len
			     ? t->pup.xstate_len
			     : XSTATE_MAX;
	struct regs_ckpt *k = t->kstate[KIND_regs];
	if (!k && (k = task_state(t, KIND_regs, sizeof(*k) + len)))
		k->cap = len;
	if (k)
		len = k->cap;
	const struct user_regs_struct *r = &t->pup.regs0;

	if (!k)
		return -ENOMEM;
	regs_entry__init(&k->e);
#define X(f) k->e.f = r->f;
	REGS_FIELDS(X)
#undef X
	if (r->cs != 0x33)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: runs 32-bit code (cs %#llx); only x86_64 tasks are supported",
				t->pid, (unsigned long long)r->cs);
	int e = puppet_get_xstate(&t->pup, k->xstate, &len);
	if (e < 0)
		return log_fail(&ctx->log, e, "pid %d: cannot read its FPU state: %s", t->pid,
				strerror(-e));
	k->e.has_xstate = k->e.has_xfeatures = true;
	k->e.xstate.data = k->xstate;
	k->e.xstate.len = len;
	k->e.xfeatures = xstate_u64(k->xstate, len, XSTATE_BV_OFF);
	return 0;
}

static int regs_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct regs_ckpt *k = t->kstate[KIND_regs];
	return ctx_write_msg(ctx, REGS_ENTRY, &k->e.base);
}

const char *regs_entry_invalid(const RegsEntry *e)
{
	if (e->cs != 0x33 || e->ss != 0x2b)
		return "segments of other than a 64-bit user task";
	if (e->rip >= 0x800000000000ull || e->fs_base >= 0x800000000000ull ||
	    e->gs_base >= 0x800000000000ull)
		return "an instruction pointer or fs/gs base outside user space";
	if (e->has_xstate && (e->xstate.len < 576 || e->xstate.len > XSTATE_MAX))
		return "an xstate of a bad size";
	return NULL;
}

static int regs_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	RegsEntry *e = rctx_load_one(ctx, t, rec, KIND_regs, REGS_ENTRY, &regs_entry__descriptor);
	const char *why = e ? regs_entry_invalid(e) : NULL;
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: registers of pid %d: %s",
				rec->index, t->pid, why);
	return e ? 0 : -EINVAL;
}

/*
 * ERESTARTSYS, ERESTARTNOINTR and ERESTARTNOHAND stay as they are: the
 * puppet is released from a stop inside the kernel's signal delivery, so
 * the kernel itself restarts the call, or makes it return EINTR if a
 * signal with a handler is delivered first, exactly as for the original.
 * ERESTART_RESTARTBLOCK would run restart_syscall() on the puppet's
 * restart_block, which is not the original's: it would return EINTR, which
 * a program that installed no handler never gets from these calls (tail -f
 * exits on it). The calls known are re-issued instead, as ERESTARTNOHAND
 * (a handler still makes them return EINTR, as restart_syscall would):
 * poll and futex with their arguments (a relative timeout starts again in
 * full: later, never earlier, than asked; a futex word changed meanwhile
 * makes it EAGAIN, which callers take as a wake-up); nanosleep and a
 * relative clock_nanosleep with the time left, which the kernel wrote to
 * their rem at the interruption (without rem, their request again). Any
 * other (restart_syscall itself) returns -EINTR.
 */
static void restart_fixup(struct user_regs_struct *r)
{
	if ((long)r->orig_rax < 0 || (long)r->rax != -KERN_ERESTART_RESTARTBLOCK)
		return;
	switch (r->orig_rax) {
	case SYS_nanosleep: /* (req, rem) */
		if (r->rsi)
			r->rdi = r->rsi;
		break;
	case SYS_clock_nanosleep: /* (clock, flags, req, rem); TIMER_ABSTIME is
				   * ERESTARTNOHAND already */
		if (r->r10)
			r->rdx = r->r10;
		break;
	case SYS_poll:
	case SYS_futex:
		break;
	default:
		r->rax = (uint64_t)-EINTR;
		r->orig_rax = (uint64_t)-1;
		return;
	}
	r->rax = (uint64_t)-KERN_ERESTARTNOHAND;
}

/* Can this CPU take e's xstate? (its features, its size) */
static int check_xstate(struct rst_ctx *ctx, struct rst_task *t, const RegsEntry *e)
{
	/* a thread whose xstate is the size of its leader's, with no feature
	 * the leader's lacks: checked with the leader's, which came first */
	const RegsEntry *le = t->leader ? t->leader->kstate[KIND_regs] : NULL;
	if (le && le->has_xstate && le->xstate.len == e->xstate.len &&
	    !((e->has_xfeatures ? e->xfeatures : 0) & ~(le->has_xfeatures ? le->xfeatures : 0)))
		return 0;
	/* the size ptrace gives is the machine's (the regset's, set at boot),
	 * not the task's: read once a restart (ctx->xstate_len), with the
	 * CPU's features (cpuid and xgetbv, each a trap in a guest) */
	uint64_t need = e->has_xfeatures ? e->xfeatures : 0;
	if (ctx->xstate_len && ctx->xstate_len == e->xstate.len && !(need & ~ctx->xstate_have))
		return 0;
	static const size_t cap = XSTATE_MAX;
	uint8_t *host = malloc(cap);
	size_t len = cap;
	if (!host)
		return -ENOMEM;
	int x = puppet_get_xstate(&t->pup, host, &len);
	uint64_t have = features_xcr0();
	free(host);
	if (x < 0)
		return log_fail(&ctx->log, x, "pid %d: cannot read the FPU state layout", t->pid);
	ctx->xstate_len = len;
	ctx->xstate_have = have;
	if (need & ~have)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: the image uses CPU state features %#llx that this CPU "
				"lacks (it has %#llx)",
				t->pid, (unsigned long long)(need & ~have), (unsigned long long)have);
	if (len != e->xstate.len)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: xstate size %zu differs from this CPU's %zu", t->pid,
				(size_t)e->xstate.len, len);
	return 0;
}

static int regs_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	RegsEntry *e = t->kstate[KIND_regs];
	struct puppet *p = &t->pup;
	struct user_regs_struct r = p->regs0;

	if (e->has_xstate) {
		int x = check_xstate(ctx, t, e);
		if (x < 0)
			return x;
		x = puppet_set_xstate(p, e->xstate.data, e->xstate.len);
		if (x < 0)
			return log_fail(&ctx->log, x, "pid %d: cannot set its FPU state: %s", t->pid,
					strerror(-x));
	}
#define X(f) r.f = e->f;
	REGS_FIELDS(X)
#undef X
	restart_fixup(&r);
	return puppet_set_regs(p, &r);
}

static const ProtobufCMessageDescriptor *regs_descriptor(uint32_t sub)
{
	return sub == REC_SUB(REGS_ENTRY) ? &regs_entry__descriptor : NULL;
}

static int regs_loaded(struct rst_ctx *ctx, struct rst_task *t)
{
	return rst_require(ctx, t, KIND_regs);
}

const struct kind_ops regs_ops = {
	.per_thread = true,
	.collect = regs_collect,
	.dump = regs_dump,
	.load = regs_load,
	.loaded = regs_loaded,
	.restore = regs_restore,
	.free_state = free,
	.descriptor = regs_descriptor,
};
