/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Interval timers, armed long enough not to fire (their signals ignored in
 * case they do): ITIMER_REAL 1000 s / interval 1001 s, ITIMER_VIRTUAL
 * 500 s / 30 s, ITIMER_PROF 700 s / 40 s. After restore getitimer() shows
 * the same intervals and a remaining time that is > 0 and no more than
 * before (strictly less for ITIMER_REAL), and ITIMER_REAL is still running
 * (two readings 20 ms apart decrease).
 */
#include "lib.h"

#include <sys/time.h>
#include <time.h>

static long long us(const struct timeval *tv)
{
	return (long long)tv->tv_sec * 1000000 + tv->tv_usec;
}

static const char *const names[] = {"ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"};

int main(void)
{
	signal(SIGALRM, SIG_IGN);
	signal(SIGVTALRM, SIG_IGN);
	signal(SIGPROF, SIG_IGN);
	const struct itimerval set[3] = {
		{.it_interval = {1001, 0}, .it_value = {1000, 0}},
		{.it_interval = {30, 0}, .it_value = {500, 0}},
		{.it_interval = {40, 0}, .it_value = {700, 0}},
	};
	const int which[3] = {ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF};
	struct itimerval before[3];
	for (int i = 0; i < 3; i++)
		if (setitimer(which[i], &set[i], NULL))
			fail("setitimer(%s): %m", names[i]);
	for (int i = 0; i < 3; i++)
		getitimer(which[i], &before[i]);

	test_ready();
	test_wait();

	for (int i = 0; i < 3; i++) {
		struct itimerval now;
		if (getitimer(which[i], &now)) {
			test_failf("getitimer(%s): %m", names[i]);
			continue;
		}
		expect(us(&now.it_interval) == us(&before[i].it_interval),
		       "%s: interval %lld us, was %lld us", names[i], us(&now.it_interval),
		       us(&before[i].it_interval));
		expect(us(&now.it_value) > 0, "%s: disarmed", names[i]);
		if (i == 0)
			expect(us(&now.it_value) < us(&before[i].it_value),
			       "%s: %lld us left, was %lld us: not running", names[i],
			       us(&now.it_value), us(&before[i].it_value));
		else
			expect(us(&now.it_value) <= us(&before[i].it_value),
			       "%s: %lld us left, was %lld us", names[i], us(&now.it_value),
			       us(&before[i].it_value));
	}
	struct itimerval a, b;
	getitimer(ITIMER_REAL, &a);
	nanosleep(&(struct timespec){0, 20000000}, NULL);
	getitimer(ITIMER_REAL, &b);
	expect(us(&b.it_value) < us(&a.it_value) && us(&b.it_value) > 0,
	       "ITIMER_REAL does not run after restore: %lld then %lld us", us(&a.it_value),
	       us(&b.it_value));
	pass();
}
