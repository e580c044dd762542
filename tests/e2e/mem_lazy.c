/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memory for `ckpt restart --lazy` (tests mem_lazy, mem_lazy_tree): a big
 * region of known patterns, and small ones that the program, once woken
 * and before it reads them, drops (MADV_DONTNEED: zeros), unmaps and maps
 * again (zeros), moves (mremap: the pattern, at the new place), hands to
 * the kernel (write(2) from memory not yet touched) and leaves to a child
 * it forks (the child sees the pattern; the parent's later writes are not
 * the child's). The small regions are mapped first, at the highest
 * addresses, which the server's background fill reaches last.
 *
 * Two tiny regions (64 and 192 KiB, the second half untouched: zeros),
 * which ckpt writes itself (MM_LAZY_SMALL), and a 512 KiB array on the
 * stack right above where the program waits for the restart: the stack is
 * then too large for that and the server's, but ckpt puts in the pages
 * around the stack pointer itself (mm_lazy_warm): all checked.
 *
 * argv[1]: MiB of the big region (default 128); then "tree": a child
 * made before the checkpoint does the same with its own patterns, woken by
 * the root, which reports both; "text": the patterns are compressible
 * (checkpoint --compress: mem_lazy_compressed and its neighbours).
 */
#include "lib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SMALL (4ul << 20)
#define TINY (64ul << 10)
#define DEEP (512ul << 10)

static bool text; /* set once in main, before anything reads it */

static uint64_t word(uint64_t seed, size_t i)
{
	uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;
	if (text) /* digits and a few letters: zstd keeps a quarter of it */
		return 0x2020303030303030ull | ((x >> 40) & 0x0f0f0f0f0f0full) | (i & 0xff) << 56;
	return x ^ (x >> 29);
}

static void fill(uint64_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len / 8; i++)
		p[i] = word(seed, i);
}

/* The first word that differs, or -1. */
static long check(const uint64_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len / 8; i++)
		if (p[i] != word(seed, i))
			return (long)i;
	return -1;
}

static bool all_zero(const uint64_t *p, size_t len)
{
	for (size_t i = 0; i < len / 8; i++)
		if (p[i])
			return false;
	return true;
}

struct mem {
	uint64_t *drop, *unmap, *move, *kern, *forked, *big, *tiny, *tiny3;
	size_t big_len;
	uint64_t seed;
};

static uint64_t *map(size_t len)
{
	return test_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void setup(struct mem *m, size_t big, uint64_t seed)
{
	m->seed = seed;
	m->drop = map(SMALL);
	m->unmap = map(SMALL);
	m->move = map(SMALL);
	m->kern = map(SMALL);
	m->forked = map(4 * SMALL);
	m->tiny = map(TINY);
	m->tiny3 = map(3 * TINY);
	m->big_len = big;
	m->big = map(big);
	fill(m->drop, SMALL, seed + 1);
	fill(m->unmap, SMALL, seed + 2);
	fill(m->move, SMALL, seed + 3);
	fill(m->kern, SMALL, seed + 4);
	fill(m->forked, 4 * SMALL, seed + 5);
	fill(m->big, big, seed + 6);
	fill(m->tiny, TINY, seed + 7);
	fill(m->tiny3, 3 * TINY / 2, seed + 8);
}

/* A child forked now sees the pattern of m->forked, not the parent's later writes. */
static void forked(struct mem *m)
{
	int go[2], res[2];
	expect(pipe(go) == 0 && pipe(res) == 0, "pipe failed");
	pid_t c = fork();
	if (c == 0) {
		char b;
		(void)!read(go[0], &b, 1); /* the parent has written by now */
		long bad = check(m->forked, 4 * SMALL, m->seed + 5);
		(void)!write(res[1], &bad, sizeof(bad));
		_exit(0);
	}
	expect(c > 0, "fork failed");
	memset(m->forked, 0xab, SMALL); /* the parent's own */
	(void)!write(go[1], "g", 1);
	long bad = -2;
	expect(read(res[0], &bad, sizeof(bad)) == sizeof(bad), "no answer from the forked child");
	expect(bad == -1, "forked child: word %ld of its memory differs", bad);
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st), "forked child did not exit");
	for (size_t i = 0; i < SMALL / 8; i++)
		if (m->forked[i] != 0xababababababababull) {
			test_failf("the parent's own write is lost at word %zu", i);
			break;
		}
	long b2 = check(m->forked + SMALL / 8, 3 * SMALL, m->seed + 5 + SMALL / 8);
	expect(b2 == -1, "parent: word %ld of its forked region differs", b2);
	close(go[0]);
	close(go[1]);
	close(res[0]);
	close(res[1]);
}

static void verify(struct mem *m)
{
	/* first what matters most while the server still owes pages: a move
	 * (mremap: the pattern at the new place) and a fork */
	uint64_t *spot = map(2 * SMALL);
	uint64_t *moved = mremap(m->move, SMALL, SMALL, MREMAP_MAYMOVE | MREMAP_FIXED,
				 spot + SMALL / 8 / 2);
	expect(moved != MAP_FAILED, "mremap failed");
	forked(m);
	if (moved != MAP_FAILED) {
		long b = check(moved, SMALL, m->seed + 3);
		expect(b == -1, "moved memory: word %ld differs", b);
	}
	/* read by the kernel first (write to a pipe), then compared */
	int p[2];
	expect(pipe(p) == 0, "pipe failed");
	uint64_t buf[512];
	for (size_t off = 0; off < SMALL; off += 64 << 10) {
		expect(write(p[1], (char *)m->kern + off, sizeof(buf)) == sizeof(buf) &&
		       read(p[0], buf, sizeof(buf)) == sizeof(buf), "pipe i/o failed");
		if (memcmp(buf, (char *)m->kern + off, sizeof(buf)) ||
		    check(buf, sizeof(buf), m->seed + 4 + off / 8) != -1) {
			test_failf("memory written to a pipe differs at +%zu", off);
			break;
		}
	}
	close(p[0]);
	close(p[1]);
	/* dropped before it was read: zeros, as without ckpt */
	expect(madvise(m->drop, SMALL, MADV_DONTNEED) == 0, "madvise failed");
	expect(all_zero(m->drop, SMALL), "memory dropped with MADV_DONTNEED is not zero");
	/* unmapped and mapped again: fresh zeros */
	expect(munmap(m->unmap, SMALL) == 0, "munmap failed");
	uint64_t *again = test_mmap(m->unmap, SMALL, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	expect(all_zero(again, SMALL), "memory unmapped and mapped again is not zero");
	long b = check(m->big, m->big_len, m->seed + 6);
	expect(b == -1, "big region: word %ld (at +%ld MiB) differs", b, b * 8 >> 20);
	b = check(m->tiny, TINY, m->seed + 7);
	expect(b == -1, "64 KiB region: word %ld differs", b);
	b = check(m->tiny3, 3 * TINY / 2, m->seed + 8);
	expect(b == -1, "192 KiB region: word %ld differs", b);
	expect(all_zero(m->tiny3 + 3 * TINY / 2 / 8, 3 * TINY / 2),
	       "192 KiB region: its untouched half is not zero");
}

/* Waits for the restart below a 512 KiB array of the stack's, then
 * checks it. */
static __attribute__((noinline)) void deep_wait(uint64_t seed)
{
	uint64_t deep[DEEP / 8];
	fill(deep, DEEP, seed);
	__asm__ volatile("" : : "r"(deep) : "memory");
	test_ready();
	test_wait();
	long b = check(deep, DEEP, seed);
	expect(b == -1, "the stack: word %ld of an array on it differs", b);
}

int main(int argc, char **argv)
{
	size_t big = (argc > 1 ? strtoul(argv[1], NULL, 0) : 128) << 20;
	bool tree = false;
	for (int i = 2; i < argc; i++) {
		tree |= !strcmp(argv[i], "tree");
		text |= !strcmp(argv[i], "text");
	}
	struct mem m;
	pid_t child = 0;
	int res[2] = { -1, -1 };

	if (tree) {
		expect(pipe(res) == 0, "pipe failed");
		child = fork();
		if (child == 0) {
			close(res[0]);
			test_setup_wake();
			setup(&m, big / 2, 1000);
			int up = 1;
			(void)!write(res[1], &up, sizeof(up));
			while (!test_woken)
				pause();
			verify(&m);
			int f = test_failures();
			(void)!write(res[1], &f, sizeof(f));
			_exit(0);
		}
		close(res[1]);
	}
	setup(&m, big, 0);
	int up = 0;
	if (tree && (read(res[0], &up, sizeof(up)) != sizeof(up) || up != 1))
		fail("the child did not set up its memory");
	deep_wait(9);
	if (tree)
		kill(child, SIGUSR1);
	verify(&m);
	if (tree) {
		int f = -1;
		expect(read(res[0], &f, sizeof(f)) == sizeof(f) && f == 0,
		       "the child's memory was not right (%d failures)", f);
		int st;
		expect(waitpid(child, &st, 0) == child, "child not reaped");
	}
	pass();
}
