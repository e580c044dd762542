/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a mapping with a memory policy of its own (mbind MPOL_BIND to
 * node 0), which ckpt does not restore yet. The runner expects the
 * checkpoint to fail naming the pid, the vma and mbind; afterwards the
 * process lives on with the policy and memory as they were. argv[1]
 * "large": 48 MiB more memory touched, so that ckpt asks each vma's policy
 * by injected get_mempolicy rather than read numa_maps ahead (task.c).
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
	char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long node0 = 1;
	if (a == MAP_FAILED || syscall(SYS_mbind, a, len, MPOL_BIND, &node0, 64, 0) < 0)
		fail("mmap/mbind: %m");
	test_fill_random(a, len, 3);
	uint64_t h = test_hash(a, len, 0);

	test_ready();
	test_wait();

	int mode = -1;
	unsigned long nodes = 0;
	expect(syscall(SYS_get_mempolicy, &mode, &nodes, 64, a, MPOL_F_ADDR) == 0 &&
	       mode == MPOL_BIND, "the vma's policy is %d, was MPOL_BIND", mode);
	expect(test_hash(a, len, 0) == h, "memory changed");
	pass();
}
