/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The demo's sample program: counts, keeps a running checksum of the
 * numbers in memory, and writes a line to its output every 200 ms. After a
 * restart it carries on from the number it had reached.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long limit = argc > 1 ? atol(argv[1]) : 50;
	uint64_t sum = 0;
	struct timespec tick = { 0, 200 * 1000 * 1000 };

	for (long i = 1; i <= limit; i++) {
		sum = sum * 31 + (uint64_t)i;
		printf("count %ld checksum %016llx\n", i, (unsigned long long)sum);
		fflush(stdout);
		nanosleep(&tick, NULL);
	}
	return 0;
}
