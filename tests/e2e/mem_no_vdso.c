/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A process that unmapped its vDSO (and [vvar]): after restart there is
 * still no [vdso] nor [vvar] in /proc/self/maps (ckpt's puppet had one:
 * it must be gone again), and time calls still work (through the system
 * call: glibc's own time calls would jump into the vDSO it remembers).
 * With "code", only [vdso] is unmapped and the [vvar] mappings stay, as
 * valgrind leaves them: after restart [vdso] is still gone and the [vvar]
 * mappings are there, at the same addresses.
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

/* Is this line of maps (up to its newline) the vDSO or vvar (code: [vdso]
 * only)? */
static bool special(const char *l, bool code)
{
	const char *end = strchrnul(l, '\n'), *b = memchr(l, '[', (size_t)(end - l));
	return b && (!strncmp(b, "[vdso]", 6) || (!code && !strncmp(b, "[vvar", 5)));
}

/* Counts the vDSO's mappings (code: [vdso] only), unmapping them if asked;
 * the sum of their start addresses in *sum. */
static int specials(bool unmap, bool code, unsigned long *sum)
{
	static char maps[1 << 16];
	if (test_read_file("/proc/self/maps", maps, sizeof(maps)) < 0)
		fail("maps: %m");
	int n = 0;
	*sum = 0;
	for (char *l = maps; *l; l = strchrnul(l, '\n'), l += *l == '\n') {
		unsigned long s, e;
		if (!special(l, code))
			continue;
		n++;
		if (sscanf(l, "%lx-%lx", &s, &e) != 2)
			fail("maps: cannot read '%.40s'", l);
		*sum += s;
		if (unmap && syscall(SYS_munmap, s, e - s))
			fail("munmap: %m");
	}
	return n;
}

int main(int argc, char **argv)
{
	bool code = argc > 1 && !strcmp(argv[1], "code");
	unsigned long sum, vvar_before, vvar_after;
	if (!specials(true, code, &sum))
		skip("no vDSO mapped here");
	if (specials(false, code, &sum))
		fail("the vDSO is still mapped");
	int vvars = specials(false, false, &vvar_before);
	if (code && !vvars)
		skip("no [vvar] mapped here");
	test_ready();
	test_wait();

	expect(specials(false, code, &sum) == 0,
	       "after restart /proc/self/maps shows a vDSO or vvar again");
	expect(specials(false, false, &vvar_after) == vvars && vvar_after == vvar_before,
	       "after restart the [vvar] mappings are not the %d at the same places as before",
	       vvars);
	struct timespec ts;
	expect(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) == 0, "clock_gettime: %m");
	pass();
}
