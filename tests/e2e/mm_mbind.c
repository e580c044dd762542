/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mappings with a memory policy of their own: one bound to node 0 (mbind
 * MPOL_BIND), one "local" (MPOL_PREFERRED without nodes, as OpenBLAS
 * mbinds its buffers), between two without: after restart each has its
 * policy again (the unbound ones none) and its memory. argv[1] "large":
 * 48 MiB more memory touched, so that ckpt asks each vma's policy by
 * injected get_mempolicy rather than read numa_maps ahead (task.c).
 */
#include "lib.h"

#include <linux/mempolicy.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const size_t len = 16 * 4096, big = 48ul << 20;
	if (argc > 1 && !strcmp(argv[1], "large")) {
		char *b = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b == MAP_FAILED)
			fail("mmap: %m");
		memset(b, 1, big);
	}
	/* four pages' vmas: none, bind, local, none (split by mbind) */
	char *a = mmap(NULL, 4 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long node0 = 1;
	if (a == MAP_FAILED || syscall(SYS_mbind, a + len, len, MPOL_BIND, &node0, 64, 0) < 0 ||
	    syscall(SYS_mbind, a + 2 * len, len, MPOL_PREFERRED, NULL, 0, 0) < 0)
		fail("mmap/mbind: %m");
	test_fill_random(a, 4 * len, 3);
	uint64_t h = test_hash(a, 4 * len, 0);
	const int want[] = { MPOL_DEFAULT, MPOL_BIND, MPOL_LOCAL, MPOL_DEFAULT };
	const unsigned long want_nodes[] = { 0, 1, 0, 0 };

	test_ready();
	test_wait();

	for (int i = 0; i < 4; i++) {
		int mode = -1;
		unsigned long nodes = 0;
		expect(syscall(SYS_get_mempolicy, &mode, &nodes, 64, a + i * len, MPOL_F_ADDR) == 0 &&
			       mode == want[i] && nodes == want_nodes[i],
		       "vma %d's policy is %d (nodes %#lx), was %d (%#lx)", i, mode, nodes, want[i],
		       want_nodes[i]);
	}
	expect(test_hash(a, 4 * len, 0) == h, "memory changed");
	pass();
}
