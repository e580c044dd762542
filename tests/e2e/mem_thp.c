/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Transparent huge pages: 16 MiB of private anonymous memory, 2 MiB-aligned
 * and madvise(MADV_HUGEPAGE)'d before it is written, so that THP backs it
 * (AnonHugePages in its smaps block), and 4 MiB next to it without the
 * advice, written too. After restart: the contents of both, the first
 * still MADV_HUGEPAGE (VmFlags "hg") and backed by huge pages again
 * (AnonHugePages > 0: an eager restart used to write it with UFFDIO_COPY,
 * which allocates 4 KiB pages). Skipped where THP is "never", or where no
 * huge page could be had before the checkpoint (memory fragmented).
 */
#include "lib.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE (2ul << 20)
#define SIZE (16ul << 20)
#define PLAIN (4ul << 20)

/* AnonHugePages (kB) of the vma at addr, -1 if there is none; *hg: "hg"
 * in its VmFlags */
static long anon_huge(void *addr, int *hg)
{
	char *p = test_smaps_vma(addr);
	char *ah = p ? strstr(p, "\nAnonHugePages:") : NULL;
	char *flags = p ? strstr(p, "\nVmFlags:") : NULL;
	if (!ah || !flags)
		return -1;
	*hg = strstr(flags, " hg") != NULL;
	return atol(ah + 15);
}

int main(void)
{
	char mode[128] = "";
	if (test_read_file("/sys/kernel/mm/transparent_hugepage/enabled", mode, sizeof(mode)) < 0)
		skip("no /sys/kernel/mm/transparent_hugepage/enabled: %m");
	if (strstr(mode, "[never]"))
		skip("transparent huge pages are off here (THP \"never\")");

	uint8_t *m = mmap(NULL, SIZE + HUGE + PLAIN, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		fail("mmap: %m");
	uint8_t *thp = m + (HUGE - (uintptr_t)m % HUGE) % HUGE;
	uint8_t *plain = thp + SIZE;
	if (madvise(thp, SIZE, MADV_HUGEPAGE) < 0)
		fail("madvise(MADV_HUGEPAGE): %m");
	if (madvise(plain, PLAIN, MADV_NOHUGEPAGE) < 0) /* a vma of its own */
		fail("madvise(MADV_NOHUGEPAGE): %m");
	test_fill_random(thp, SIZE, 1);
	test_fill_random(plain, PLAIN, 2);
	const uint64_t ht = test_hash(thp, SIZE, 0), hp = test_hash(plain, PLAIN, 0);
	int hg = 0;
	long before = anon_huge(thp, &hg);
	if (before < 0 || !hg)
		fail("the MADV_HUGEPAGE vma at %p is not in smaps as one", (void *)thp);
	if (before == 0)
		skip("no transparent huge page could be had for the memory (fragmented?)");

	test_ready();
	test_wait();

	expect(test_hash(thp, SIZE, 0) == ht, "the MADV_HUGEPAGE memory lost its contents");
	expect(test_hash(plain, PLAIN, 0) == hp, "the plain memory lost its contents");
	long after = anon_huge(thp, &hg);
	expect(after >= 0, "no vma at %p after restart", (void *)thp);
	expect(hg, "the vma at %p lost MADV_HUGEPAGE (VmFlags without hg)", (void *)thp);
	expect(after > 0, "the MADV_HUGEPAGE memory came back without huge pages "
	       "(AnonHugePages 0 kB; %ld kB before)", before);
	pass();
}
