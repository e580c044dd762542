/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fault-injection hook of the test binary ckpt-fault (src/cli/fault.c):
 * called at every ptrace request (to the guardian, or local) and at every
 * image record written, once the tree's death is decided (commit), after
 * each process's pre-copy (mm-dirty.c), once the tree is seized (seize),
 * and in the lazy server as a task's memory comes to it (mm-lazy.c). Also
 * once a restarted tree runs, before ckpt hands over and frees what it
 * made (running). The normal binary does not define it: the weak
 * reference is NULL and the hook costs one test. ckpt_fault_asked() says
 * whether the test asks for a fault to be made here (CKPT_FAULT_BAD_IP: an
 * injection run at an unmapped address; CKPT_FAULT_BARE: the exec of a
 * bare puppet fails, so that puppet_spawn forks instead).
 */
#ifndef CKPT_FAULT_H
#define CKPT_FAULT_H

enum ckpt_fault {
	CKPT_FAULT_REQUEST,
	CKPT_FAULT_WRITE,
	CKPT_FAULT_COMMIT,
	CKPT_FAULT_PRECOPY,
	CKPT_FAULT_BAD_IP,
	CKPT_FAULT_LAZY_TASK,
	CKPT_FAULT_BARE,
	CKPT_FAULT_RUNNING,
	CKPT_FAULT_SEIZED,
	CKPT_FAULT_N,
};
void ckpt_fault_point(enum ckpt_fault what) __attribute__((weak));
_Bool ckpt_fault_asked(enum ckpt_fault what) __attribute__((weak));
#define CKPT_FAULT_ASKED(what) (ckpt_fault_asked && ckpt_fault_asked(what))
#define CKPT_FAULT(what)                        \
	do {                                    \
		if (ckpt_fault_point)           \
			ckpt_fault_point(what); \
	} while (0)

#endif
