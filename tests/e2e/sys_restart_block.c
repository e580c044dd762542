/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpointed inside a call the kernel restarts through the task's
 * restart_block (-ERESTART_RESTARTBLOCK), which a restored process does
 * not have: the call must be re-issued, never return EINTR, as it would
 * not for the original stopped and continued (coreutils' tail -f exits on
 * a poll that fails with EINTR). One call of 3 s, by argv[1]:
 * - poll: poll(NULL, 0, 3000) returns 0 (it waits its whole timeout again);
 * - nanosleep: nanosleep(req, &rem) returns 0 (re-issued with rem, the
 *   time left, which the kernel wrote at the interruption);
 * - usleep: nanosleep(req, NULL) returns 0 (re-issued with req);
 * - abs: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) returns 0 at or
 *   after its deadline;
 * - futex: FUTEX_WAIT with a 3 s timeout on a word nobody wakes fails with
 *   ETIMEDOUT.
 * Each must also have taken at least its 3 s. SIGUSR1 (the runner's, after
 * the restart) may interrupt it with its handler: EINTR then is right, so
 * EINTR is a failure only before SIGUSR1 came.
 */
#include "lib.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 3000

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "poll";
	struct timespec req = { WAIT_MS / 1000, 0 }, rem = { 0, 0 };
	static uint32_t word;
	int r, want = 0;
	test_ready();
	const int64_t t0 = test_now_ns(CLOCK_MONOTONIC);
	if (!strcmp(how, "poll")) {
		r = poll(NULL, 0, WAIT_MS);
	} else if (!strcmp(how, "nanosleep")) {
		r = nanosleep(&req, &rem);
	} else if (!strcmp(how, "usleep")) {
		r = nanosleep(&req, NULL);
	} else if (!strcmp(how, "abs")) {
		struct timespec at;
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += WAIT_MS / 1000;
		r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
		errno = r; /* it returns the error */
		r = r ? -1 : 0;
	} else if (!strcmp(how, "futex")) {
		r = (int)syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &req, NULL, 0);
		want = ETIMEDOUT;
	} else {
		fail("unknown call %s", how);
	}
	int e = r < 0 ? errno : 0;
	const int64_t took = test_now_ns(CLOCK_MONOTONIC) - t0;
	if (e == EINTR && !test_woken)
		fail("%s: EINTR, with no signal but the restart (restart_block lost)", how);
	if (e != EINTR) {
		expect(e == want, "%s: returned %d, errno %d (%s), want %d", how, r, e, strerror(e),
		       want);
		expect(took >= WAIT_MS * 1000000ll - 1000000, "%s: returned after %lld ms, want %d",
		       how, (long long)(took / 1000000), WAIT_MS);
	}
	test_wait();
	pass();
}
