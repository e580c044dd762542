/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * 256 MiB of random contents in a memfd held only by an fd (not mapped):
 * the memory of the program is small, its image big. Checksummed in
 * 16 MiB pieces read back with pread after the restart.
 */
#include "lib.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define LEN (256ul << 20)
#define PIECE (16ul << 20)
#define NPIECES (LEN / PIECE)

int main(void)
{
	unsigned char *buf = malloc(PIECE);
	uint64_t h[NPIECES];
	int fd = memfd_create("big", 0);
	if (!buf || fd < 0)
		fail("memfd_create: %m");
	for (size_t i = 0; i < NPIECES; i++) {
		test_fill_random(buf, PIECE, 0x3e3fd + i);
		h[i] = test_hash(buf, PIECE, 0);
		if (pwrite(fd, buf, PIECE, (off_t)(i * PIECE)) != (ssize_t)PIECE)
			fail("pwrite: %m");
	}
	free(buf); /* the program's own memory stays small */

	test_ready();
	test_wait();

	buf = malloc(PIECE);
	if (!buf)
		fail("malloc");
	for (size_t i = 0; i < NPIECES; i++) {
		ssize_t n = pread(fd, buf, PIECE, (off_t)(i * PIECE));
		expect(n == (ssize_t)PIECE && test_hash(buf, PIECE, 0) == h[i],
		       "piece %zu (at +%zu MiB) differs (read %zd)", i, i * (PIECE >> 20), n);
	}
	pass();
}
