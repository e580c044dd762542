/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A process that unmapped its vDSO (and [vvar]): after restart there is
 * still no [vdso] nor [vvar] in /proc/self/maps (ckpt's puppet had one:
 * it must be gone again), and time calls still work (through the system
 * call: glibc's own time calls would jump into the vDSO it remembers).
 */
#include "lib.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Is this line of maps (up to its newline) the vDSO or vvar? */
static bool special(const char *l)
{
	const char *end = strchrnul(l, '\n'), *b = memchr(l, '[', (size_t)(end - l));
	return b && (!strncmp(b, "[vdso]", 6) || !strncmp(b, "[vvar", 5));
}

/* Counts the vDSO's mappings, unmapping them if asked. */
static int specials(bool unmap)
{
	static char maps[1 << 16];
	if (test_read_file("/proc/self/maps", maps, sizeof(maps)) < 0)
		fail("maps: %m");
	int n = 0;
	for (char *l = maps; *l; l = strchrnul(l, '\n'), l += *l == '\n') {
		unsigned long s, e;
		if (!special(l))
			continue;
		n++;
		if (unmap && (sscanf(l, "%lx-%lx", &s, &e) != 2 || syscall(SYS_munmap, s, e - s)))
			fail("munmap: %m");
	}
	return n;
}

int main(void)
{
	if (!specials(true))
		skip("no vDSO mapped here");
	if (specials(false))
		fail("the vDSO is still mapped");
	test_ready();
	test_wait();

	expect(specials(false) == 0, "after restart /proc/self/maps shows a vDSO or vvar again");
	struct timespec ts;
	expect(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) == 0, "clock_gettime: %m");
	pass();
}
