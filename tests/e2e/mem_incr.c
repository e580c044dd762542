/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memory for incremental checkpoints (checkpoint --track, then --parent):
 * 32 MiB of anonymous memory, each page a pattern of its own. The runner
 * checkpoints it with --track (image 0), wakes it: it changes some memory
 * ("step1": a page in 50 rewritten, pages dropped by MADV_DONTNEED, a page
 * zeroed, a new mapping, a mapping replaced at the same address, one moved
 * by mremap); checkpoints --parent image 0 (image 1), wakes it: it changes
 * more ("step2"); checkpoints --parent image 1 --kill (image 2) and
 * restarts that. Every page must then hold what the program last wrote:
 * some from image 2, most from image 1 or image 0, the dropped ones zero.
 * argv[1] "text": the patterns are letters, compressible (--compress).
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1ul << 20)
#define PG 4096ul
#define NPAGES (32 * MiB / PG)

static bool text; /* set once in main, before any page is filled */

static void fill_page(unsigned char *p, uint64_t seed, size_t i)
{
	test_fill_random(p, PG, seed * 1000003u + i);
	for (size_t k = 0; text && k < PG; k++)
		p[k] = (unsigned char)('a' + (p[k] & 15));
}

static bool page_is(const unsigned char *p, uint64_t seed, size_t i)
{
	unsigned char want[PG];
	if (!seed) {
		for (size_t k = 0; k < PG; k++)
			if (p[k])
				return false;
		return true;
	}
	fill_page(want, seed, i);
	return !memcmp(p, want, PG);
}

static void fill(unsigned char *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len / PG; i++)
		fill_page(p + i * PG, seed, i);
}

static void check(const unsigned char *p, size_t len, uint64_t seed, const char *what)
{
	for (size_t i = 0; i < len / PG; i++)
		expect(page_is(p + i * PG, seed, i), "%s: page %zu is not pattern %llu", what, i,
		       (unsigned long long)seed);
}

/* The runner waits for the file name to exist. */
static void step_done(const char *name)
{
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("create %s: %m", name);
	close(fd);
}

static void wait_wake(void)
{
	test_wait();
	test_woken = 0;
}

/* What page i of the big region holds at the end. */
static uint64_t final_seed(size_t i)
{
	if (i == 7 || i == 8 || i == 9 || i == 11 || i == 100)
		return 0;
	if (i == 0)
		return 8;
	if (i % 50 == 25)
		return 7;
	if (i % 50 == 0)
		return 2;
	return 1;
}

int main(int argc, char **argv)
{
	text = argc > 1 && !strcmp(argv[1], "text");
	const int rw = PROT_READ | PROT_WRITE, fl = MAP_PRIVATE | MAP_ANONYMOUS;
	unsigned char *big = test_mmap(NULL, 32 * MiB, rw, fl, -1, 0);
	unsigned char *old = test_mmap(NULL, 256 * 1024, rw, fl, -1, 0);
	unsigned char *mv = test_mmap(NULL, 256 * 1024, rw, fl, -1, 0);

	fill(big, 32 * MiB, 1);
	fill(old, 256 * 1024, 4);
	fill(mv, 256 * 1024, 6);
	test_ready();
	wait_wake(); /* image 0 (--track) is made */

	for (size_t i = 0; i < NPAGES; i += 50)
		fill_page(big + i * PG, 2, i);
	madvise(big + 7 * PG, 3 * PG, MADV_DONTNEED);
	memset(big + 11 * PG, 0, PG);
	unsigned char *fresh = test_mmap(NULL, MiB, rw, fl, -1, 0);
	fill(fresh, MiB, 3);
	/* replaced: the same address, a new mapping, half of it written */
	test_mmap(old, 256 * 1024, rw, fl | MAP_FIXED, -1, 0);
	fill(old, 128 * 1024, 5);
	/* moved: its pages keep their contents at another address */
	unsigned char *to = test_mmap(NULL, 256 * 1024, PROT_NONE, fl, -1, 0);
	unsigned char *moved = mremap(mv, 256 * 1024, 256 * 1024, MREMAP_MAYMOVE | MREMAP_FIXED,
				      to);
	if (moved == MAP_FAILED)
		fail("mremap: %m");
	step_done("step1");
	wait_wake(); /* image 1 (--parent image 0) is made */

	for (size_t i = 25; i < NPAGES; i += 50)
		fill_page(big + i * PG, 7, i);
	fill_page(big, 8, 0);
	madvise(big + 100 * PG, PG, MADV_DONTNEED);
	step_done("step2");
	wait_wake(); /* image 2 (--parent image 1 --kill), restarted */

	test_check_common();
	for (size_t i = 0; i < NPAGES; i++)
		expect(page_is(big + i * PG, final_seed(i), i),
		       "big region: page %zu is not pattern %llu", i,
		       (unsigned long long)final_seed(i));
	check(fresh, MiB, 3, "new mapping");
	check(old, 128 * 1024, 5, "replaced mapping, written half");
	check(old + 128 * 1024, 128 * 1024, 0, "replaced mapping, untouched half");
	check(moved, 256 * 1024, 6, "moved mapping");
	pass();
}
