/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: the process is traced (the runner starts it under strace -f).
 * The checkpoint must fail saying so; the process lives on: memory intact,
 * still traced by the same tracer (test_check_common compares TracerPid).
 */
#include "lib.h"

#define LEN (1ul << 20)
static unsigned char mem[LEN];

int main(void)
{
	if (test_tracer_pid() <= 0)
		fail("not traced: run me under strace -f");
	test_fill_random(mem, LEN, 9);
	const uint64_t h = test_hash(mem, LEN, 0);

	test_ready();
	test_wait();

	expect(test_hash(mem, LEN, 0) == h, "memory changed");
	pass();
}
