/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mlockall(MCL_FUTURE): every mapping the process makes from then on is
 * locked (mm->def_flags). /proc shows it nowhere but in what it does, and
 * ckpt makes a mapping in every process it checkpoints, its scratch area,
 * after it read the process's smaps: under MCL_FUTURE that area is locked,
 * so /proc/PID/status's VmLck (the size of the locked vmas) is then the
 * locked vmas of the smaps read before plus the scratch area. When it is,
 * MmEntry.mlockall says MCL_FUTURE, with MCL_ONFAULT if the scratch area's
 * VmFlags have "lf" (smaps read once more, only then). At restart the task
 * calls mlockall with those flags once its memory is in place and its own
 * locked vmas are locked again: MCL_FUTURE without MCL_CURRENT changes no
 * existing mapping. (Not inherited by fork: the children's own records
 * say what they had.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "core/ctx.h"
#include "kinds/mm.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"

#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

static int vmlck_kb(pid_t pid, uint64_t *ret)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read(pid, "status", &text, NULL);
	if (r < 0)
		return r;
	const char *p = strstr(text, "\nVmLck:");
	if (!p)
		return -ENODATA; /* a kernel thread, or no mm */
	*ret = strtoull(p + 7, NULL, 10);
	return 0;
}

/* Has the vma at addr (ckpt's scratch area) "lf" in its VmFlags? */
static int scratch_onfault(pid_t pid, uint64_t addr, bool *ret)
{
	_cleanup_free_ char *text = NULL;
	struct proc_vmas v = { 0 };
	int r = proc_read(pid, "smaps", &text, NULL);
	if (r >= 0)
		r = proc_parse_smaps(text, &v);
	for (size_t i = 0; r >= 0 && i < v.n; i++)
		if (v.v[i].start == addr)
			*ret = strstr(v.v[i].unknown_flags, "lf") != NULL;
	proc_vmas_free(&v);
	return r;
}

int mm_lockall_read(struct ckpt_ctx *ctx, struct task *t, MmEntry *e)
{
	uint64_t locked = 0, now_kb;
	for (size_t i = 0; i < t->vmas.n; i++)
		if (t->vmas.v[i].vmflags & VMF_LO)
			locked += t->vmas.v[i].end - t->vmas.v[i].start;
	int r = vmlck_kb(t->pid, &now_kb);
	if (r == -ENODATA)
		return 0;
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read VmLck of its status: %s", t->pid,
				strerror(-r));
	uint64_t scratch = t->pup.scratch_len + t->pup.scratch_extra;
	if (!t->pup.scratch || now_kb * 1024 < locked + scratch)
		return 0;
	bool onfault = false;
	r = scratch_onfault(t->pid, t->pup.scratch, &onfault);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its smaps: %s", t->pid,
				strerror(-r));
	e->has_mlockall = true;
	e->mlockall = MCL_FUTURE | (onfault ? MCL_ONFAULT : 0);
	log_debug(&ctx->log, "pid %d: mlockall(MCL_FUTURE%s) in force", t->pid,
		  onfault ? " | MCL_ONFAULT" : "");
	return 0;
}

bool mm_lockall_ok(const MmEntry *e)
{
	return !e->has_mlockall || (e->mlockall & ~(uint32_t)MCL_ONFAULT) == MCL_FUTURE;
}

int mm_lockall_restore(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
{
	if (!e->has_mlockall)
		return 0;
	long r = puppet_syscall(&t->pup, SYS_mlockall, e->mlockall);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d: cannot call mlockall(MCL_FUTURE%s) again: "
				"%s", t->pid, e->mlockall & MCL_ONFAULT ? " | MCL_ONFAULT" : "",
				strerror((int)-r));
	return 0;
}
