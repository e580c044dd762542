/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * prctl state a fresh process does not have: the TSC mode (rdtsc raises
 * SIGSEGV), the machine-check kill policy (early), KSM merging for the
 * whole process, memory-deny-write-execute, and the speculation controls
 * where this CPU lets a prctl set them, and the NUMA memory policy
 * (MPOL_PREFERRED, node 0). After restart each reads the same
 * (PR_GET_*), and memory-deny-write-execute still refuses to make a page
 * executable.
 */
#include "lib.h"

#include <errno.h>
#include <sys/mman.h>
#include <linux/mempolicy.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_GET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif
#ifndef PR_GET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#define PR_GET_MEMORY_MERGE 68
#endif

struct state {
	int tsc, mce, merge, mdwe, ssb, ib, mpol;
	unsigned long nodes;
};

static void read_state(struct state *s)
{
	s->tsc = 0;
	prctl(PR_GET_TSC, &s->tsc);
	s->mce = prctl(PR_MCE_KILL_GET, 0, 0, 0, 0);
	s->merge = prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0);
	s->mdwe = prctl(PR_GET_MDWE, 0, 0, 0, 0);
	s->ssb = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0);
	s->ib = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_INDIRECT_BRANCH, 0, 0, 0);
	s->nodes = 0;
	if (syscall(SYS_get_mempolicy, &s->mpol, &s->nodes, 64, NULL, 0) < 0)
		s->mpol = -1;
}

int main(void)
{
	if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV) < 0 ||
	    prctl(PR_MCE_KILL, PR_MCE_KILL_SET, PR_MCE_KILL_EARLY, 0, 0) < 0)
		fail("prctl TSC/MCE: %m");
	if (prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0) < 0)
		test_log("PR_SET_MEMORY_MERGE: %m (not checked)\n");
	if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) < 0)
		fail("PR_SET_MDWE: %m");
	/* where the CPU is affected and lets a prctl decide */
	prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, PR_SPEC_DISABLE, 0, 0);
	prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_INDIRECT_BRANCH, PR_SPEC_DISABLE, 0, 0);
	unsigned long node0 = 1;
	if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, &node0, 64) < 0)
		fail("set_mempolicy: %m");
	struct state before, after;
	read_state(&before);
	if (before.tsc != PR_TSC_SIGSEGV || before.mce != PR_MCE_KILL_EARLY ||
	    before.mdwe != PR_MDWE_REFUSE_EXEC_GAIN)
		fail("prctl state not as set: tsc %d mce %d mdwe %d", before.tsc, before.mce,
		     before.mdwe);

	test_ready();
	test_wait();

	read_state(&after);
	expect(after.tsc == before.tsc, "TSC mode %d, was %d", after.tsc, before.tsc);
	expect(after.mce == before.mce, "MCE kill policy %d, was %d", after.mce, before.mce);
	expect(after.merge == before.merge, "memory merge %d, was %d", after.merge, before.merge);
	expect(after.mdwe == before.mdwe, "MDWE %d, was %d", after.mdwe, before.mdwe);
	expect(after.ssb == before.ssb, "store bypass control %#x, was %#x", after.ssb, before.ssb);
	expect(after.ib == before.ib, "indirect branch control %#x, was %#x", after.ib, before.ib);
	expect(after.mpol == before.mpol && after.nodes == before.nodes,
	       "memory policy %d (nodes %#lx), was %d (%#lx)", after.mpol, after.nodes, before.mpol,
	       before.nodes);
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	expect(m != MAP_FAILED && mprotect(m, 4096, PROT_READ | PROT_EXEC) < 0 && errno == EACCES,
	       "memory-deny-write-execute no longer refuses PROT_EXEC");
	pass();
}
