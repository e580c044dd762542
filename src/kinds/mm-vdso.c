/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A process that unmapped its vDSO ([vdso], [vvar], [vvar_vclock]), or a
 * part of the group (valgrind unmaps [vdso] and keeps the two [vvar]s):
 * its image lacks them, and the restored process must lack them too. The
 * puppet's are unmapped instead of moved; without its [vdso], injected
 * calls then run from the syscall instruction in the scratch area's stub,
 * and once the process's memory is written, from one found in its own
 * code (which outlives the scratch area).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>

#include "core/ctx.h"
#include "kinds/mm.h"

int mm_drop_vdso(struct rst_ctx *ctx, struct rst_task *t, const struct proc_vma *const *from,
		 int n)
{
	struct puppet *p = &t->pup;
	bool code = false; /* [vdso] itself goes: calls from the stub */
	for (int i = 0; i < n; i++)
		code = code || (from[i] && !strcmp(from[i]->path, "[vdso]"));
	int r = code ? puppet_syscall_from_stub(p) : 0;
	if (r < 0)
		return log_fail(&ctx->log, r,
				"pid %d: had unmapped its vDSO, and the puppet has no stub to run "
				"system calls from without one",
				t->pid);
	for (int i = 0; i < n; i++) {
		if (!from[i])
			continue;
		long e = puppet_syscall(p, SYS_munmap, from[i]->start, from[i]->end - from[i]->start);
		if (e < 0)
			return log_fail(&ctx->log, (int)e, "pid %d: cannot unmap the puppet's %s: %s",
					t->pid, from[i]->path, strerror((int)-e));
	}
	for (int i = 0; i < n; i++)
		if (from[i])
			log_debug(&ctx->log, "pid %d: restored without %s, as it was", t->pid,
				  from[i]->path);
	return 0;
}

int mm_vdso_refind(struct rst_ctx *ctx, struct rst_task *t)
{
	struct puppet *p = &t->pup;
	uint64_t s = p->scratch, e = p->scratch + p->scratch_len + p->scratch_extra;
	if (!p->scratch || p->syscall_ip < s || p->syscall_ip >= e)
		return 0; /* still in the vDSO */
	int r = puppet_find_syscall(p);
	if (r < 0)
		return log_fail(&ctx->log, r,
				"pid %d: had unmapped its vDSO and has no syscall instruction in "
				"its own code to run system calls from: %s",
				t->pid, strerror(-r));
	return 0;
}
