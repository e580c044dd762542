/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The heap: many malloc'd blocks (brk arena) and a few large ones (mmap'd by
 * malloc), with some freed. After restore the program break and the [heap]
 * mapping are unchanged, the blocks hold their data, malloc and free still
 * work and the break can grow and shrink again.
 */
#include "lib.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSMALL 3000
#define NLARGE 4
#define LARGE (1ul << 20)

static unsigned char *small[NSMALL];
static size_t small_len[NSMALL];
static uint64_t small_hash[NSMALL];
static unsigned char *large[NLARGE];
static uint64_t large_hash[NLARGE];

int main(void)
{
	mallopt(M_TRIM_THRESHOLD, 64 << 20); /* frees must not move the break */
	uint64_t st = 42;
	for (int i = 0; i < NSMALL; i++) {
		small_len[i] = 16 + test_splitmix(&st) % 4000;
		small[i] = malloc(small_len[i]);
		if (!small[i])
			fail("malloc");
		test_fill_random(small[i], small_len[i], (uint64_t)i);
		small_hash[i] = test_hash(small[i], small_len[i], 0);
	}
	for (int i = 0; i < NSMALL; i += 3) {
		free(small[i]);
		small[i] = NULL;
	}
	for (int i = 0; i < NLARGE; i++) {
		large[i] = malloc(LARGE);
		if (!large[i])
			fail("malloc large");
		test_fill_random(large[i], LARGE, 0x1000 + (uint64_t)i);
		large_hash[i] = test_hash(large[i], LARGE, 0);
	}
	void *const brk_before = sbrk(0);
	struct test_map heap_before;
	if (test_find_map_named("[heap]", &heap_before))
		fail("no [heap] mapping before checkpoint");
	const unsigned long long start_brk_before = test_stat_field(47);

	test_ready();
	test_wait();

	void *brk_after = sbrk(0);
	expect(brk_after == brk_before, "sbrk(0) is %p, was %p", brk_after, brk_before);
	struct test_map heap;
	if (test_find_map_named("[heap]", &heap))
		test_failf("no [heap] mapping after restore");
	else
		expect(heap.start == heap_before.start && heap.end == heap_before.end,
		       "[heap] is %lx-%lx, was %lx-%lx", (unsigned long)heap.start,
		       (unsigned long)heap.end, (unsigned long)heap_before.start,
		       (unsigned long)heap_before.end);
	unsigned long long sb = test_stat_field(47);
	expect(sb == start_brk_before, "start_brk is %llx, was %llx", sb, start_brk_before);

	int bad = 0;
	for (int i = 0; i < NSMALL; i++)
		if (small[i] && test_hash(small[i], small_len[i], 0) != small_hash[i])
			bad++;
	expect(!bad, "%d small heap blocks differ", bad);
	for (int i = 0; i < NLARGE; i++)
		expect(test_hash(large[i], LARGE, 0) == large_hash[i], "large block %d differs", i);

	/* the allocator still works */
	for (int i = 0; i < NSMALL; i++)
		free(small[i]);
	for (int i = 0; i < NLARGE; i++)
		free(large[i]);
	for (int i = 0; i < 1000; i++) {
		char *p = malloc(100 + (size_t)i);
		if (!p)
			fail("malloc after restore");
		memset(p, i, 100 + (size_t)i);
		free(p);
	}
	/* and the break moves */
	void *old = sbrk(1 << 20);
	if (old == (void *)-1) {
		test_failf("sbrk(+1 MiB) after restore: %m");
	} else {
		void *now = sbrk(0);
		expect((char *)now == (char *)old + (1 << 20), "break did not grow by 1 MiB");
		memset(old, 0x77, 1 << 20);
		expect(sbrk(-(1 << 20)) != (void *)-1, "sbrk(-1 MiB): %m");
	}
	pass();
}
