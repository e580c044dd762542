/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpointed inside poll(NULL, 0, timeout). The program waits until a
 * deadline 4 s away, calling poll with the time left. After restore poll
 * may be restarted or return EINTR, but it never fails otherwise, never
 * returns > 0, and never returns 0 (timed out) before its timeout has passed.
 */
#include "lib.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#define TOTAL_MS 4000

int main(void)
{
	test_ready();
	const int64_t deadline = test_now_ns(CLOCK_MONOTONIC) + TOTAL_MS * 1000000ll;
	for (;;) {
		int64_t c0 = test_now_ns(CLOCK_MONOTONIC);
		if (c0 >= deadline)
			break;
		int ms = (int)((deadline - c0 + 999999) / 1000000);
		int r = poll(NULL, 0, ms);
		int e = errno;
		int64_t waited = test_now_ns(CLOCK_MONOTONIC) - c0;
		if (r == 0) {
			if (waited < ms * 1000000ll - 1000000)
				fail("poll(%d ms) timed out after %lld ns", ms, (long long)waited);
			continue;
		}
		if (r > 0)
			fail("poll with no fds returned %d", r);
		if (e != EINTR)
			fail("poll: errno %d (%s)", e, strerror(e));
	}
	test_wait();
	pass();
}
