/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * MAP_DROPPABLE memory (what the vDSO getrandom state lives in; glibc
 * 2.41+ maps it, this Debian's glibc does not, so the test maps its own):
 * after restore the vma is still droppable ("dp" in smaps VmFlags), at the
 * same place, with its contents (the kernel may drop such pages only under
 * memory pressure, which a test machine does not have).
 */
#include "lib.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08
#endif
#define LEN (256u << 10)

static int vmflags_of(uintptr_t addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, found = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && strchr(line, ' ') > strchr(line, '-'))
			in = s == addr;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			snprintf(out, len, "%.200s", line + 8);
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

int main(void)
{
	unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_DROPPABLE | MAP_ANONYMOUS,
				-1, 0);
	if (p == MAP_FAILED)
		skip("MAP_DROPPABLE: %m");
	test_fill_random(p, LEN, 0xd0);
	const uint64_t h = test_hash(p, LEN, 0);
	char flags[256];
	if (vmflags_of((uintptr_t)p, flags, sizeof(flags)) || !strstr(flags, " dp"))
		fail("no dp flag before the checkpoint: %s", flags);

	test_ready();
	test_wait();

	expect(vmflags_of((uintptr_t)p, flags, sizeof(flags)) == 0, "no vma at %p", (void *)p);
	expect(strstr(flags, " dp") != NULL, "the vma is no longer droppable: %s", flags);
	expect(test_hash(p, LEN, 0) == h, "droppable memory contents differ");
	pass();
}
