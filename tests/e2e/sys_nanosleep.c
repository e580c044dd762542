/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpointed inside nanosleep(). The program sleeps 4 s in total the way a
 * careful program does: nanosleep(req, &rem), and on EINTR again with rem.
 * The checkpoint comes right after "ready", in the first call. After
 * restore nanosleep may have been restarted or may return EINTR; either is
 * fine, but:
 * - it never fails with another errno (a leaked -ERESTART_RESTARTBLOCK
 *   shows up as errno 516),
 * - on EINTR rem has been written and is within [0, req],
 * - a call that returns 0 has slept at least what it was asked (measured on
 *   CLOCK_MONOTONIC, which also runs while the process is in the image),
 * - the whole loop took at least 4 s.
 * SIGUSR1 may come during the loop: it is just one more EINTR.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#define TOTAL_NS 4000000000ll
#define SLACK_NS 1000000ll

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int main(void)
{
	struct timespec req = {TOTAL_NS / 1000000000, 0}, rem;
	int eintr = 0;
	test_ready();
	const int64_t t0 = test_now_ns(CLOCK_MONOTONIC);
	for (;;) {
		rem.tv_sec = -1;
		rem.tv_nsec = -1;
		int64_t c0 = test_now_ns(CLOCK_MONOTONIC);
		int r = nanosleep(&req, &rem);
		int e = errno;
		int64_t slept = test_now_ns(CLOCK_MONOTONIC) - c0;
		if (r == 0) {
			if (slept < ts_ns(&req) - SLACK_NS)
				fail("nanosleep(%lld ns) returned 0 after %lld ns",
				     (long long)ts_ns(&req), (long long)slept);
			break;
		}
		if (e != EINTR)
			fail("nanosleep: errno %d (%s)", e, strerror(e));
		eintr++;
		if (rem.tv_sec < 0 || rem.tv_nsec < 0 || rem.tv_nsec >= 1000000000 ||
		    ts_ns(&rem) > ts_ns(&req))
			fail("EINTR with rem = {%lld, %ld} for req = {%lld, %ld}",
			     (long long)rem.tv_sec, rem.tv_nsec, (long long)req.tv_sec,
			     req.tv_nsec);
		req = rem;
	}
	const int64_t total = test_now_ns(CLOCK_MONOTONIC) - t0;
	test_wait();
	expect(total >= TOTAL_NS - SLACK_NS, "slept %lld ns in all, want %lld", (long long)total,
	       (long long)TOTAL_NS);
	pass();
}
