/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * seccomp filters, read with PTRACE_SECCOMP_GET_FILTER (index 0 is the
 * oldest) and installed again oldest first, each with the flag that
 * PTRACE_SECCOMP_GET_METADATA tells (SECCOMP_FILTER_FLAG_LOG). The order
 * is part of what the filters do: of two that return the same action,
 * the newer one's data (an errno, SECCOMP_RET_TRACE's value) wins. The
 * puppet runs with
 * PTRACE_O_SUSPEND_SECCOMP, so the filters do not stop the injections that
 * follow. Strict mode (SECCOMP_MODE_STRICT, mode 1, which no filter can
 * join) is entered again by the thread itself through an injected
 * seccomp(SECCOMP_SET_MODE_STRICT): suspended like filters while ckpt
 * injects, in force once ckpt lets it go.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "kinds/checks.h"

enum { SECCOMP_ENTRY = REC_TYPE(KID_seccomp, 1) };
#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#define MAX_FILTERS 64
#define MAX_INSNS 4096

struct seccomp_ckpt {
	SeccompEntry e;
	SeccompFilter f[MAX_FILTERS];
	SeccompFilter *pf[MAX_FILTERS];
	struct sock_filter *insns[MAX_FILTERS];
};

static int seccomp_collect(struct ckpt_ctx *ctx, struct task *t)
{
	if (t->status.seccomp == 0)
		return 0;
	struct seccomp_ckpt *k = task_state(t, KIND_seccomp, sizeof(*k));
	if (!k)
		return -ENOMEM;
	seccomp_entry__init(&k->e);
	k->e.mode = t->status.seccomp == 1 ? 1 : 2;
	if (k->e.mode == 1) /* strict: no filters */
		return 0;
	int n = 0;
	for (;; n++) {
		long len = puppet_seccomp_filter(&t->pup, n, NULL, 0);
		if (len == -ENOENT)
			break;
		if (len < 0)
			return log_fail(&ctx->log, (int)len,
					"pid %d: cannot read its seccomp filters: %s%s", t->pid,
					strerror((int)-len),
					len == -EACCES || len == -EPERM ? " (needs CAP_SYS_ADMIN)" : "");
		if (n == MAX_FILTERS || len > MAX_INSNS)
			return log_fail(&ctx->log, -E2BIG, "pid %d: too many seccomp filters",
					t->pid);
		k->insns[n] = calloc(len, sizeof(struct sock_filter));
		if (!k->insns[n])
			return -ENOMEM;
		if (puppet_seccomp_filter(&t->pup, n, k->insns[n], (size_t)len) != len)
			return log_fail(&ctx->log, -EIO, "pid %d: seccomp filter %d changed", t->pid,
					n);
		long flags = puppet_seccomp_flags(&t->pup, n);
		if (flags < 0)
			return log_fail(&ctx->log, (int)flags,
					"pid %d: cannot read the flags of seccomp filter %d: %s",
					t->pid, n, strerror((int)-flags));
		/* oldest first, as the kernel numbers them */
		seccomp_filter__init(&k->f[n]);
		k->f[n].insns.data = (uint8_t *)k->insns[n];
		k->f[n].insns.len = len * sizeof(struct sock_filter);
		k->f[n].has_flags = flags != 0;
		k->f[n].flags = (uint32_t)flags;
		k->pf[n] = &k->f[n];
	}
	k->e.filters = k->pf;
	k->e.n_filters = n;
	k->e.has_oldest_first = k->e.oldest_first = true;
	return 0;
}

static int seccomp_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct seccomp_ckpt *k = t->kstate[KIND_seccomp];
	return k ? ctx_write_msg(ctx, SECCOMP_ENTRY, &k->e.base) : 0;
}

const char *seccomp_entry_invalid(const SeccompEntry *e)
{
	if (e->mode == 1)
		return e->n_filters ? "strict mode with filters" : NULL;
	if (e->mode != 2)
		return "a mode other than strict or filter";
	if (e->n_filters > MAX_FILTERS)
		return "too many filters";
	for (size_t i = 0; i < e->n_filters; i++) {
		size_t len = e->filters[i]->insns.len;
		if (!len || len % sizeof(struct sock_filter) ||
		    len / sizeof(struct sock_filter) > MAX_INSNS)
			return "a filter that is not a whole number of instructions (1 to 4096)";
		if (e->filters[i]->flags & ~(uint32_t)SECCOMP_FILTER_FLAG_LOG)
			return "a filter flag other than SECCOMP_FILTER_FLAG_LOG";
	}
	return NULL;
}

static int seccomp_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	SeccompEntry *e = rctx_load_one(ctx, t, rec, KIND_seccomp, SECCOMP_ENTRY, &seccomp_entry__descriptor);
	const char *why = e ? seccomp_entry_invalid(e) : NULL;
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: seccomp of pid %d: %s", rec->index,
				t->pid, why);
	return e ? 0 : -EINVAL;
}

static int seccomp_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	SeccompEntry *e = t->kstate[KIND_seccomp];
	struct puppet *p = &t->pup;

	/* a filter may forbid what a thread's kinds queued before: run first */
	int q = e && (e->n_filters || e->mode == 1) ? rst_calls_flush(ctx, t) : 0;
	if (q < 0)
		return q;
	for (size_t k = 0; e && k < e->n_filters; k++) {
		/* an image made before oldest_first lists the newest first */
		size_t i = e->oldest_first ? k : e->n_filters - 1 - k;
		const ProtobufCBinaryData *d = &e->filters[i]->insns;
		if (sizeof(struct sock_fprog) + d->len > p->scratch_len / 2)
			return log_fail(&ctx->log, -E2BIG, "pid %d: seccomp filter too large", t->pid);
		uint64_t insns = puppet_scratch_put(p, p->scratch_len / 2, d->data, d->len);
		struct sock_fprog prog = {
			.len = (unsigned short)(d->len / sizeof(struct sock_filter)),
			.filter = (struct sock_filter *)(uintptr_t)insns,
		};
		uint64_t addr = puppet_scratch_put(p, 0, &prog, sizeof(prog));
		long r = puppet_syscall(p, SYS_seccomp, SECCOMP_SET_MODE_FILTER,
					e->filters[i]->flags, addr);
		if (r < 0)
			return log_fail(&ctx->log, (int)r, "pid %d: cannot install seccomp filter %zu: %s",
					t->pid, i, strerror((int)-r));
	}
	if (e && e->mode == 1) {
		long r = puppet_syscall(p, SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, 0);
		if (r < 0)
			return log_fail(&ctx->log, (int)r, "pid %d: cannot enter seccomp strict mode: %s",
					t->pid, strerror((int)-r));
	}
	return 0;
}

static void seccomp_free_state(void *state)
{
	struct seccomp_ckpt *k = state;
	if (!k)
		return;
	for (int i = 0; i < MAX_FILTERS; i++)
		free(k->insns[i]);
	free(k);
}

static const ProtobufCMessageDescriptor *seccomp_descriptor(uint32_t sub)
{
	return sub == REC_SUB(SECCOMP_ENTRY) ? &seccomp_entry__descriptor : NULL;
}

const struct kind_ops seccomp_ops = {
	.per_thread = true,
	.collect = seccomp_collect,
	.dump = seccomp_dump,
	.load = seccomp_load,
	.restore = seccomp_restore,
	.free_state = seccomp_free_state,
	.descriptor = seccomp_descriptor,
};
