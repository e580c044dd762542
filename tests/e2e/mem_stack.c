/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The stack: 2000 nested frames each holding values derived from its depth,
 * and 1 MiB of random data in the deepest frame. The checkpoint happens at
 * the bottom; after restore every frame is checked while unwinding, and the
 * [stack] mapping is unchanged.
 */
#include "lib.h"

#include <alloca.h>
#include <string.h>

#define DEPTH 2000
#define WORDS 24
#define BOTTOM (1ul << 20)

static uintptr_t frame_addr[DEPTH];
static struct test_map stack_before;
static int bad_frames;

static uint64_t val(int depth, int i)
{
	return ((uint64_t)depth << 32 | (uint64_t)i) * 0x9E3779B97F4A7C15ull;
}

/*
 * Grows the stack mapping 256 KiB below here, so that the calls made after
 * [stack] is recorded (test_ready(), the checks) do not grow it further.
 */
static void __attribute__((noinline)) pretouch(void)
{
	volatile unsigned char *p = alloca(256 << 10);
	for (size_t i = 0; i < (256 << 10); i += 4096)
		p[i] = 1;
}

static void bottom(void)
{
	unsigned char *buf = alloca(BOTTOM);
	pretouch();
	test_fill_random(buf, BOTTOM, 0xb0770);
	uint64_t h = test_hash(buf, BOTTOM, 0);
	if (test_find_map_named("[stack]", &stack_before))
		fail("no [stack] mapping");

	test_ready();
	test_wait();

	expect(test_hash(buf, BOTTOM, 0) == h, "deepest frame's 1 MiB buffer differs");
	struct test_map s;
	if (test_find_map_named("[stack]", &s)) {
		test_failf("no [stack] mapping after restore");
		return;
	}
	expect(s.start == stack_before.start && s.end == stack_before.end,
	       "[stack] is %lx-%lx, was %lx-%lx", (unsigned long)s.start, (unsigned long)s.end,
	       (unsigned long)stack_before.start, (unsigned long)stack_before.end);
	expect((uintptr_t)buf >= s.start && (uintptr_t)buf < s.end, "buffer outside [stack]");
}

static int recurse(int depth)
{
	volatile uint64_t local[WORDS];
	for (int i = 0; i < WORDS; i++)
		local[i] = val(depth, i);
	frame_addr[depth] = (uintptr_t)local;
	if (depth + 1 < DEPTH)
		recurse(depth + 1);
	else
		bottom();
	for (int i = 0; i < WORDS; i++)
		if (local[i] != val(depth, i)) {
			bad_frames++;
			break;
		}
	/* using local after the call keeps the frame (no tail call) */
	return (int)(local[0] & 1) + (frame_addr[depth] == (uintptr_t)local ? 0 : 1000);
}

int main(void)
{
	int r = recurse(0);
	expect(bad_frames == 0, "%d of %d stack frames differ", bad_frames, DEPTH);
	expect(r < 1000, "a frame moved");
	pass();
}
