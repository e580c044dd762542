/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a POSIX timer (id 0) on the CPU-time clock of another process
 * (init, pid 1), which a restarted process could not count on. The runner
 * expects the checkpoint to fail naming the pid, the timer and the clock;
 * the process lives on with its timers as they were: timer 0 and a
 * CLOCK_MONOTONIC timer 1, still running.
 */
#include "lib.h"

#include <string.h>
#include <time.h>

int main(void)
{
	clockid_t init_cpu;
	timer_t t0, t1;
	struct sigevent se;
	memset(&se, 0, sizeof(se));
	se.sigev_notify = SIGEV_NONE;
	if (clock_getcpuclockid(1, &init_cpu) || timer_create(init_cpu, &se, &t0))
		skip("no timer on the CPU-time clock of pid 1: %m");
	if (timer_create(CLOCK_MONOTONIC, &se, &t1))
		fail("timer_create: %m");
	struct itimerspec its = {.it_value = {1000, 0}}, a, b;
	if (timer_settime(t1, 0, &its, NULL))
		fail("timer_settime: %m");
	char before[1024], after[1024];
	if (test_read_file("/proc/self/timers", before, sizeof(before)) < 0)
		fail("/proc/self/timers: %m");

	test_ready();
	test_wait();

	if (test_read_file("/proc/self/timers", after, sizeof(after)) < 0)
		fail("/proc/self/timers: %m");
	expect(!strcmp(before, after), "/proc/self/timers was\n%s\nand is\n%s", before, after);
	timer_gettime(t1, &a);
	nanosleep(&(struct timespec){0, 20000000}, NULL);
	timer_gettime(t1, &b);
	expect(b.it_value.tv_sec * 1000000000LL + b.it_value.tv_nsec <
		   a.it_value.tv_sec * 1000000000LL + a.it_value.tv_nsec,
	       "timer 1 does not run");
	pass();
}
