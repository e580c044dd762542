/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mlockall(MCL_FUTURE) ("mem_mlockall onfault": with MCL_ONFAULT) in force
 * at the checkpoint: after restart a new mapping is locked ("lo" in its
 * VmFlags, and "lf" with MCL_ONFAULT), while a mapping made before the
 * call, never locked, is still not locked (MCL_CURRENT was not asked).
 */
#include "lib.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif
#define LEN (4 * 4096)

/* the VmFlags line of the vma that holds addr */
static void vmflags(void *addr, char *out, size_t size)
{
	static char smaps[1 << 20];
	unsigned long x = (unsigned long)addr;
	if (test_read_file("/proc/self/smaps", smaps, sizeof(smaps)) <= 0)
		fail("read smaps: %m");
	for (char *p = smaps; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long lo, hi;
		if (sscanf(p, "%lx-%lx ", &lo, &hi) != 2 || x < lo || x >= hi)
			continue;
		char *f = strstr(p, "VmFlags:");
		if (!f)
			break;
		snprintf(out, size, "%.*s", (int)strcspn(f, "\n"), f);
		return;
	}
	fail("no vma holds %p", addr);
}

static bool has(const char *flags, const char *f)
{
	char w[8];
	snprintf(w, sizeof(w), " %s", f);
	return strstr(flags, w) != NULL;
}

int main(int argc, char **argv)
{
	bool onfault = argc > 1 && !strcmp(argv[1], "onfault");
	char before[256], after[256];
	char *old = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (old == MAP_FAILED || mlockall(MCL_FUTURE | (onfault ? MCL_ONFAULT : 0)) < 0)
		fail("mlockall: %m");
	memset(old, 1, LEN);

	test_ready();
	test_wait();

	vmflags(old, before, sizeof(before));
	expect(!has(before, "lo"), "a mapping made before mlockall is locked now: %s", before);
	char *fresh = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fresh == MAP_FAILED)
		fail("mmap: %m");
	vmflags(fresh, after, sizeof(after));
	expect(has(after, "lo"), "a new mapping is not locked (MCL_FUTURE lost): %s", after);
	expect(has(after, "lf") == onfault, "a new mapping's lock-on-fault is %d, want %d: %s",
	       has(after, "lf"), onfault, after);
	pass();
}
