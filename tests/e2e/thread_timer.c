/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A glibc SIGEV_THREAD timer: the C library makes a helper thread and a
 * kernel timer that signals that thread (SIGEV_THREAD_ID). After restart
 * the timer still fires every 20 ms and its callback still runs.
 */
#include "lib.h"

#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static atomic_long fired;

static void tick(union sigval v)
{
	if (v.sival_int == 42)
		fired++;
}

int main(void)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD, .sigev_notify_function = tick,
				.sigev_value.sival_int = 42 };
	timer_t tm;
	if (timer_create(CLOCK_MONOTONIC, &sev, &tm))
		fail("timer_create: %m");
	struct itimerspec its = { .it_value = { 0, 20000000 }, .it_interval = { 0, 20000000 } };
	if (timer_settime(tm, 0, &its, NULL))
		fail("timer_settime: %m");
	for (int i = 0; i < 500 && fired < 3; i++)
		usleep(10000);
	if (fired < 3)
		fail("the timer does not fire");

	test_ready();
	test_wait();

	long before = fired;
	for (int i = 0; i < 300 && fired < before + 5; i++)
		usleep(10000);
	expect(fired >= before + 5, "the timer fired %ld times in 3 s after restart", fired - before);
	pass();
}
