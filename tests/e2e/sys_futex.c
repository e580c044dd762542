/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpointed inside FUTEX_WAIT (private, relative timeout) on a word that
 * stays 0. The program waits until a deadline 4 s away. After restore the
 * wait may be restarted, time out, return EINTR or wake spuriously (0), but
 * never fails otherwise (EAGAIN would mean the word changed), never times
 * out early, and the word is still 0.
 */
#include "lib.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TOTAL_NS 4000000000ll

static uint32_t word;

int main(void)
{
	int spurious = 0;
	test_ready();
	const int64_t deadline = test_now_ns(CLOCK_MONOTONIC) + TOTAL_NS;
	for (;;) {
		int64_t c0 = test_now_ns(CLOCK_MONOTONIC);
		if (c0 >= deadline)
			break;
		int64_t left = deadline - c0;
		struct timespec ts = {left / 1000000000, left % 1000000000};
		long r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
		int e = errno;
		int64_t waited = test_now_ns(CLOCK_MONOTONIC) - c0;
		if (r == 0) {
			spurious++;
			continue;
		}
		if (e == ETIMEDOUT) {
			if (waited < left - 1000000)
				fail("FUTEX_WAIT(%lld ns) timed out after %lld ns", (long long)left,
				     (long long)waited);
			continue;
		}
		if (e != EINTR)
			fail("FUTEX_WAIT: errno %d (%s)", e, strerror(e));
	}
	test_wait();
	expect(word == 0, "futex word is %u", word);
	expect(spurious < 100, "%d spurious wake-ups", spurious);
	pass();
}
