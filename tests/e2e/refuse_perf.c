/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a perf_event fd (task-clock of this process) at fd 5. The
 * runner expects the checkpoint to fail naming the pid, fd 5 and perf;
 * the process lives on: memory intact, not left traced, and the counter
 * still counts. Skipped if perf_event_open is not allowed here.
 */
#include "lib.h"

#include <linux/perf_event.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LEN (1ul << 20)
static unsigned char mem[LEN];

static uint64_t count(void)
{
	uint64_t v = 0;
	if (read(5, &v, sizeof(v)) != (ssize_t)sizeof(v))
		test_failf("read perf counter: %m");
	return v;
}

int main(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd < 0)
		skip("perf_event_open: %m");
	test_move_fd(fd, 5);
	test_fill_random(mem, LEN, 7);
	const uint64_t h = test_hash(mem, LEN, 0);
	const uint64_t c0 = count();

	test_ready();
	test_wait();

	expect(test_hash(mem, LEN, 0) == h, "memory changed");
	uint64_t c1 = count();
	test_fill_random(mem, LEN, 8); /* burn a little cpu */
	uint64_t c2 = count();
	expect(c1 >= c0 && c2 > c1, "perf counter does not count: %llu, %llu, %llu",
	       (unsigned long long)c0, (unsigned long long)c1, (unsigned long long)c2);
	pass();
}
