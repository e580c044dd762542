/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Protections: a read-only region and a PROT_NONE region filled before
 * mprotect, and an r-x region holding a tiny function. After restore the
 * /proc/self/maps perms match, the protection is enforced (a write to the
 * read-only region and a read of the PROT_NONE one fault), the function
 * still runs, and the contents, read after mprotect back, are intact.
 */
#include "lib.h"

#include <setjmp.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096ul

static sigjmp_buf jb;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static int faults(volatile unsigned char *p, int write)
{
	if (sigsetjmp(jb, 1))
		return 1;
	if (write)
		*p = 1;
	else
		(void)*p;
	return 0;
}

static void check_perms(const char *what, void *p, size_t len, const char *perms)
{
	struct test_map m;
	if (test_find_map((uintptr_t)p, &m)) {
		test_failf("%s: no mapping at %p", what, p);
		return;
	}
	expect(m.start == (uintptr_t)p && m.end == (uintptr_t)p + len, "%s: mapping is %lx-%lx",
	       what, (unsigned long)m.start, (unsigned long)m.end);
	expect(!strcmp(m.perms, perms), "%s: perms %s, want %s", what, m.perms, perms);
}

int main(void)
{
	const int rw = PROT_READ | PROT_WRITE, fl = MAP_PRIVATE | MAP_ANONYMOUS;
	/*
	 * One mapping split up: ---, r-- x3, rw-, --- x4, rw- x2, r-x, --- x4,
	 * so that no region merges with a neighbour.
	 */
	unsigned char *base = test_mmap(NULL, 16 * PAGE, PROT_NONE, fl, -1, 0);
	unsigned char *ro = base + PAGE, *none = base + 5 * PAGE, *rx = base + 11 * PAGE;
	const size_t ro_len = 3 * PAGE, none_len = 4 * PAGE, rx_len = PAGE;
	test_mmap(base, 16 * PAGE, rw, fl | MAP_FIXED, -1, 0);
	test_fill_random(ro, ro_len, 0x20);
	test_fill_random(none, none_len, 0x30);
	/* mov $42, %eax; ret */
	static const unsigned char code[] = {0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3};
	memcpy(rx, code, sizeof(code));
	const uint64_t h_ro = test_hash(ro, ro_len, 0), h_none = test_hash(none, none_len, 0);
	if (mprotect(base, PAGE, PROT_NONE) || mprotect(ro, ro_len, PROT_READ) ||
	    mprotect(none, none_len, PROT_NONE) ||
	    mprotect(rx, rx_len, PROT_READ | PROT_EXEC) ||
	    mprotect(rx + rx_len, 4 * PAGE, PROT_NONE))
		fail("mprotect: %m");
	struct sigaction sa = {.sa_handler = on_segv};
	sigaction(SIGSEGV, &sa, NULL);
	if (!faults(ro, 1) || !faults(none, 0))
		fail("protection not enforced before checkpoint");

	test_ready();
	test_wait();

	check_perms("read-only", ro, ro_len, "r--p");
	check_perms("none", none, none_len, "---p");
	check_perms("exec", rx, rx_len, "r-xp");
	expect(faults(ro + PAGE, 1), "write to the read-only region did not fault");
	expect(faults(none + PAGE, 0), "read of the PROT_NONE region did not fault");
	int (*fn)(void) = (int (*)(void))(void *)rx;
	expect(fn() == 42, "code in the r-x region returned the wrong value");
	expect(test_hash(ro, ro_len, 0) == h_ro, "read-only region contents differ");
	if (mprotect(none, none_len, PROT_READ))
		fail("mprotect back: %m");
	expect(test_hash(none, none_len, 0) == h_none, "PROT_NONE region contents differ");
	pass();
}
