/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memory whose image records take every way of the image writer's direct
 * path (img_writer_direct): 40 MiB of random private memory (several
 * full 8 MiB records: the writer thread, O_DIRECT writes of whole
 * records) with every 7th page left untouched and every 11th written
 * zero (records of many extents), and a memfd of 3 MiB + 1234 bytes of
 * random data (a record whose bytes end inside a page: the tail written
 * the ordinary way after the direct pages). All checked after restart.
 */
#include "lib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LEN (40ul << 20)
#define PG 4096ul
#define MEMFD_LEN ((3ul << 20) + 1234)

int main(void)
{
	unsigned char *p = test_mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < LEN / PG; i++) {
		if (i % 7 == 3)
			continue; /* never touched: not in the image */
		if (i % 11 == 5)
			memset(p + i * PG, 0, PG); /* present, zero: dropped */
		else
			test_fill_random(p + i * PG, PG, 0xd1ec7 + i);
	}
	uint64_t h = test_hash(p, LEN, 0);

	int fd = memfd_create("direct", MFD_CLOEXEC);
	expect(fd >= 0, "memfd_create: %m");
	unsigned char *m = malloc(MEMFD_LEN);
	expect(m != NULL, "malloc");
	test_fill_random(m, MEMFD_LEN, 0x3e3fd);
	for (size_t done = 0; done < MEMFD_LEN;) {
		ssize_t k = write(fd, m + done, MEMFD_LEN - done);
		expect(k > 0, "write to the memfd: %m");
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	uint64_t hm = test_hash(m, MEMFD_LEN, 0);
	free(m);

	test_ready();
	test_wait();

	expect(test_hash(p, LEN, 0) == h, "the private memory differs");
	for (size_t i = 3; i < LEN / PG; i += 7)
		expect(p[i * PG] == 0, "untouched page %zu is not zero", i);
	unsigned char *b = malloc(MEMFD_LEN + 1);
	expect(b != NULL, "malloc");
	ssize_t got = pread(fd, b, MEMFD_LEN + 1, 0);
	expect(got == (ssize_t)MEMFD_LEN, "the memfd holds %zd bytes, not %lu", got, MEMFD_LEN);
	expect(test_hash(b, MEMFD_LEN, 0) == hm, "the memfd's data differs");
	pass();
}
