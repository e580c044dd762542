/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench/ workload: touches SIZE MiB of random memory (xorshift, seeded),
 * writes "ready" to its stdout, then waits in pause(). On SIGUSR1 it checks
 * the memory against the seed and exits 0 if it is intact, 1 if not.
 * `memhog SIZE text`: the memory holds text-like records instead
 * ("id=1234 user=beta status=ok score=56\n" ...), as a heap of strings
 * or a log buffer would: what checkpoint --compress is for.
 * `memhog SIZE incr`: random memory; on SIGUSR2 it rewrites one page in
 * a hundred (another seed) and writes "dirtied", for checkpoint --parent;
 * the check on SIGUSR1 expects those pages.
 * `memhog SIZE ping`: on SIGUSR2 it writes one byte to fd 3 (a pipe the
 * benchmark holds): the restored process runs (bench/run --lazy).
 * `memhog SIZE ... thp`: the memory is 2 MiB-aligned and
 * madvise(MADV_HUGEPAGE)'d before it is touched, so that transparent huge
 * pages back it where THP is "madvise" or "always" (bench/run --lazy --thp).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile sig_atomic_t go, dirty;
static int ping; /* `memhog SIZE ping`: SIGUSR2 answers on fd 3 */

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static void on_usr2(int sig)
{
	(void)sig;
	if (ping)
		(void)!write(3, "p", 1);
	else
		dirty = 1;
}

static uint64_t fill(uint64_t *p, size_t n, uint64_t x, int check)
{
	uint64_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (check)
			bad += p[i] != x;
		else
			p[i] = x;
	}
	return bad;
}

/* text lines from xorshift; with check, the count of bytes that differ */
static uint64_t fill_text(char *p, size_t len, uint64_t x, int check)
{
	static const char *names[] = { "alpha", "beta", "gamma", "delta", "omicron", "sigma" };
	static const char *status[] = { "ok", "failed", "pending", "retry" };
	char line[96];
	uint64_t bad = 0;
	size_t at = 0;
	while (at < len) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int n = snprintf(line, sizeof(line), "id=%llu user=%s status=%s score=%u\n",
				 (unsigned long long)(x % 1000000), names[(x >> 20) % 6],
				 status[(x >> 30) % 4], (unsigned)((x >> 40) % 100));
		size_t k = (size_t)n < len - at ? (size_t)n : len - at;
		if (check)
			bad += memcmp(p + at, line, k) != 0;
		else
			memcpy(p + at, line, k);
		at += k;
	}
	return bad;
}

int main(int argc, char **argv)
{
	int text = argc > 2 && !strcmp(argv[2], "text");
	int incr = argc > 2 && !strcmp(argv[2], "incr");
	int thp = 0;
	for (int i = 2; i < argc; i++) {
		ping |= !strcmp(argv[i], "ping");
		thp |= !strcmp(argv[i], "thp");
	}
	size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 64;
	size_t n = mib << 17; /* u64 words */
	size_t huge = thp ? 2u << 20 : 0; /* room to align the area to a huge page */
	uint8_t *m = mmap(NULL, (mib << 20) + huge, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	uint64_t *p = (uint64_t *)m;
	if (thp) {
		size_t head = (huge - (uintptr_t)m % huge) % huge;
		if (head)
			munmap(m, head);
		if (huge - head)
			munmap(m + head + (mib << 20), huge - head);
		p = (uint64_t *)(m + head);
		if (madvise(p, mib << 20, MADV_HUGEPAGE) < 0)
			return 2;
	}
	if (text)
		fill_text((char *)p, mib << 20, 0x9e3779b97f4a7c15ull, 0);
	else
		fill(p, n, 0x9e3779b97f4a7c15ull, 0);
	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	printf("ready\n");
	fflush(stdout);
	int dirtied = 0;
	while (!go) {
		pause();
		if (incr && dirty && !dirtied) {
			for (size_t i = 0; i < n; i += 100 * 512)
				fill(p + i, 512, 0x51ed270b27u + i, 0);
			dirtied = 1;
			printf("dirtied\n");
			fflush(stdout);
		}
	}
	uint64_t bad = dirtied ? 0
		       : text	? fill_text((char *)p, mib << 20, 0x9e3779b97f4a7c15ull, 1)
				: fill(p, n, 0x9e3779b97f4a7c15ull, 1);
	if (dirtied) { /* one page in a hundred has the second seed */
		uint64_t x = 0x9e3779b97f4a7c15ull;
		for (size_t i = 0; i < n; i += 512) {
			uint64_t want[512];
			for (size_t k = 0; k < 512; k++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				want[k] = x;
			}
			if (i % (100 * 512) == 0)
				bad += fill(p + i, 512, 0x51ed270b27u + i, 1);
			else
				bad += memcmp(p + i, want, sizeof(want)) != 0;
		}
	}
	printf("%s\n", bad ? "CORRUPT" : "intact");
	return bad != 0;
}
