/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memory shared copy-on-write since fork: 64 MiB of random data written by
 * the root, then 3 children, each of which changes 16 pages of its own
 * (and has 1 MiB only it maps). The runner checks the image holds the
 * 64 MiB about once, not four times. After restart: the root's pages are
 * still shared with the children (Shared_Dirty of the area, and Pss about
 * a quarter of Rss); then the root changes a page, and each child checks
 * its copy: the root's data with its own 16 pages changed, not the root's
 * new change. argv[1] "text": the data is compressible (letters), for
 * checkpoint --compress (tree_cow_lazy_compressed).
 */
#include "lib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN (64u << 20)
#define PG 4096u
#define KIDS 3

/* "Name: N kB" of the smaps entry of the mapping at addr, in kB */
static long smaps_kb(void *addr, const char *name)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	unsigned long lo, hi, a = (unsigned long)addr;
	bool in = false;
	long v = -1;
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = lo <= a && a < hi;
		else if (in && !strncmp(line, name, strlen(name)))
			v = strtol(line + strlen(name) + 1, NULL, 10);
	}
	if (f)
		fclose(f);
	return v;
}

static uint64_t expected_hash(const uint8_t *base, int kid)
{
	/* the root's data, with pages kid*100 .. +15 filled with kid+1 */
	uint64_t h = 0;
	static uint8_t page[PG];
	for (size_t off = 0; off < LEN; off += PG) {
		size_t pg = off / PG;
		const uint8_t *p = base + off;
		if (kid >= 0 && pg >= (size_t)kid * 100 + 1000 && pg < (size_t)kid * 100 + 1016) {
			memset(page, kid + 1, PG);
			p = page;
		}
		h = test_hash(p, PG, h);
	}
	return h;
}

/* random bytes, or with `text` letters of them: compressible by a half */
static void fill(uint8_t *p, size_t len, uint64_t seed, bool text)
{
	test_fill_random(p, len, seed);
	for (size_t i = 0; text && i < len; i++)
		p[i] = (uint8_t)('a' + (p[i] & 15));
}

int main(int argc, char **argv)
{
	bool text = argc > 1 && !strcmp(argv[1], "text");
	int go[2];
	if (pipe(go))
		fail("pipe: %m");
	uint8_t *mem = test_mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(mem, LEN, 7, text);
	/* the children's expectations, computed before anyone changes a page */
	uint64_t want[KIDS];
	for (int k = 0; k < KIDS; k++)
		want[k] = expected_hash(mem, k);
	const uint64_t root_hash = expected_hash(mem, -1);
	pid_t kids[KIDS];
	for (int k = 0; k < KIDS; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			memset(mem + (size_t)(k * 100 + 1000) * PG, k + 1, 16 * PG);
			uint8_t *own = test_mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			fill(own, 1 << 20, 100 + k, text);
			const uint64_t own_hash = test_hash(own, 1 << 20, 0);
			char c;
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
			int bad = (expected_hash(mem, k) != want[k]) | (test_hash(own, 1 << 20, 0) != own_hash) << 1;
			_exit(bad);
		}
	}
	usleep(200000);

	test_ready();
	test_wait();

	long rss = smaps_kb(mem, "Rss:"), pss = smaps_kb(mem, "Pss:");
	long shared = smaps_kb(mem, "Shared_Dirty:");
	expect(expected_hash(mem, -1) == root_hash, "the root's 64 MiB changed");
	expect(shared >= 60 * 1024, "only %ld kB of the root's 64 MiB are shared with the children "
	       "(Rss %ld kB, Pss %ld kB)", shared, rss, pss);
	expect(pss > 0 && pss < rss / 2, "Pss %ld kB of Rss %ld kB: the memory is not shared", pss,
	       rss);
	test_log("root: Rss %ld kB, Pss %ld kB, Shared_Dirty %ld kB\n", rss, pss, shared);
	memset(mem + 1000 * PG, 0xee, PG); /* must not reach the children */
	if (write(go[1], "ggg", KIDS) != KIDS)
		fail("write: %m");
	for (int k = 0; k < KIDS; k++) {
		int st;
		expect(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		       "child %d: status %#x (1: shared memory wrong, 2: its own)", k, st);
	}
	pass();
}
