/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A plain target of 32 MiB of random memory, checksummed, for the tests
 * that are about ckpt rather than a kind: damaged images (its image is
 * mostly page data), CLI errors, an unprivileged checkpoint.
 */
#include "lib.h"

#include <sys/mman.h>

#define LEN (32ul << 20)

int main(void)
{
	unsigned char *p = test_mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	test_fill_random(p, LEN, 0x32);
	const uint64_t h = test_hash(p, LEN, 0);

	test_ready();
	test_wait();

	expect(test_hash(p, LEN, 0) == h, "memory differs");
	pass();
}
