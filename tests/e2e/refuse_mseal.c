/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an area sealed with mseal() (VmFlags "sl"), which ckpt does
 * not restore. The runner expects the checkpoint to fail naming the pid,
 * the area and the seal; the process lives on with its memory intact and
 * the seal still in force (munmap fails with EPERM). Skipped where mseal
 * does not exist (before Linux 6.10).
 */
#include "lib.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_mseal
#define SYS_mseal 462
#endif
#define LEN (4 * 4096)

int main(void)
{
	char *a = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		fail("mmap: %m");
	test_fill_random(a, LEN, 5);
	uint64_t h = test_hash(a, LEN, 0);
	if (syscall(SYS_mseal, a, LEN, 0) < 0)
		skip("mseal: %m");

	test_ready();
	test_wait();

	expect(test_hash(a, LEN, 0) == h, "sealed memory changed");
	expect(munmap(a, LEN) < 0 && errno == EPERM, "the seal is gone: munmap did not fail");
	pass();
}
