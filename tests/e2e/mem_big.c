/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* 256 MiB of random memory, checksummed in 16 MiB pieces. */
#include "lib.h"

#include <sys/mman.h>

#define LEN (256ul << 20)
#define PIECE (16ul << 20)
#define NPIECES (LEN / PIECE)

int main(void)
{
	unsigned char *p = test_mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t h[NPIECES];
	for (size_t i = 0; i < NPIECES; i++) {
		test_fill_random(p + i * PIECE, PIECE, 0xb16b16 + i);
		h[i] = test_hash(p + i * PIECE, PIECE, 0);
	}

	test_ready();
	test_wait();

	for (size_t i = 0; i < NPIECES; i++)
		expect(test_hash(p + i * PIECE, PIECE, 0) == h[i],
		       "piece %zu (at +%zu MiB) differs", i, i * (PIECE >> 20));
	pass();
}
