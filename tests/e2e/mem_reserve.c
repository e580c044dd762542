/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A 16 GiB PROT_NONE reservation with a 64 KiB read-write window in it, as
 * a JIT or a garbage collector makes. After restore the reservation is still
 * there (MAP_FIXED_NOREPLACE inside it fails with EEXIST), with the same
 * bounds, and the window keeps its data. The runner also checks that the
 * image is small: the reservation has no pages to save.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define GiB (1ul << 30)
#define LEN (16 * GiB)
#define WIN_OFF (5 * GiB)
#define WIN_LEN (64ul << 10)

static void check_noreplace(unsigned char *base, size_t off)
{
	void *p = mmap(base + off, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		       MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED) {
		expect(errno == EEXIST, "MAP_FIXED_NOREPLACE at +%#zx: %m, want EEXIST", off);
		return;
	}
	test_failf("MAP_FIXED_NOREPLACE at +%#zx succeeded: the reservation is gone", off);
	munmap(p, 4096);
}

int main(void)
{
	unsigned char *base = test_mmap(NULL, LEN, PROT_NONE,
					MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	unsigned char *win = base + WIN_OFF;
	if (mprotect(win, WIN_LEN, PROT_READ | PROT_WRITE))
		fail("mprotect: %m");
	test_fill_random(win, WIN_LEN, 0x16);
	const uint64_t h = test_hash(win, WIN_LEN, 0);
	check_noreplace(base, 0);
	if (test_failures())
		fail("MAP_FIXED_NOREPLACE does not behave as expected here");

	test_ready();
	test_wait();

	struct test_map lo, mid, hi;
	if (test_find_map((uintptr_t)base, &lo) || test_find_map((uintptr_t)win, &mid) ||
	    test_find_map((uintptr_t)base + LEN - 1, &hi)) {
		test_failf("reservation not in /proc/self/maps");
	} else {
		expect(lo.start == (uintptr_t)base && lo.end == (uintptr_t)win &&
			       !strcmp(lo.perms, "---p"),
		       "low part is %lx-%lx %s", (unsigned long)lo.start, (unsigned long)lo.end,
		       lo.perms);
		expect(mid.start == (uintptr_t)win && mid.end == (uintptr_t)win + WIN_LEN &&
			       !strcmp(mid.perms, "rw-p"),
		       "window is %lx-%lx %s", (unsigned long)mid.start, (unsigned long)mid.end,
		       mid.perms);
		expect(hi.start == (uintptr_t)win + WIN_LEN && hi.end == (uintptr_t)base + LEN &&
			       !strcmp(hi.perms, "---p"),
		       "high part is %lx-%lx %s", (unsigned long)hi.start, (unsigned long)hi.end,
		       hi.perms);
	}
	check_noreplace(base, 0);
	check_noreplace(base, 3 * GiB);
	check_noreplace(base, 12 * GiB);
	check_noreplace(base, LEN - 4096);
	expect(test_hash(win, WIN_LEN, 0) == h, "window contents differ");
	pass();
}
