/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The overrun count of a POSIX timer's last delivery (timer_getoverrun):
 *   A  CLOCK_REALTIME   SIGRTMIN+7  interval 1000 s, armed 3500 s in the past
 *   B  CLOCK_MONOTONIC  SIGRTMIN+8  interval 100 s, armed 250 s in the past
 * Each fires at once; its signal, taken with sigtimedwait(), counts 3 and
 * 2 overruns and re-arms it 500 s and 50 s ahead. After restore
 * timer_getoverrun() still says 3 and 2, the intervals are the same and the
 * time left is > 0 and no more than before.
 */
#include "lib.h"

#include <string.h>
#include <time.h>

static long long ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000 + t->tv_nsec;
}

struct want {
	const char *name;
	clockid_t clock;
	int sig, overrun;
	long long interval_s;
	timer_t t;
	struct itimerspec was;
};

static void setup(struct want *w)
{
	struct sigevent se;
	memset(&se, 0, sizeof(se));
	se.sigev_notify = SIGEV_SIGNAL;
	se.sigev_signo = w->sig;
	se.sigev_value.sival_int = w->sig;
	if (timer_create(w->clock, &se, &w->t))
		fail("%s: timer_create: %m", w->name);
	struct timespec now;
	clock_gettime(w->clock, &now);
	struct itimerspec its = {
	    .it_interval = {w->interval_s, 0},
	    .it_value = {now.tv_sec - (w->overrun + 1) * w->interval_s + w->interval_s / 2,
			 now.tv_nsec},
	};
	if (timer_settime(w->t, TIMER_ABSTIME, &its, NULL))
		fail("%s: timer_settime: %m", w->name);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, w->sig);
	siginfo_t si;
	if (sigtimedwait(&set, &si, &(struct timespec){5, 0}) != w->sig)
		fail("%s: no signal: %m", w->name);
	if (si.si_overrun != w->overrun || timer_getoverrun(w->t) != w->overrun)
		fail("%s: overrun %d, timer_getoverrun %d, want %d", w->name, si.si_overrun,
		     timer_getoverrun(w->t), w->overrun);
	timer_gettime(w->t, &w->was);
}

int main(void)
{
	if (test_now_ns(CLOCK_MONOTONIC) < 300000000000LL)
		skip("CLOCK_MONOTONIC is under 300 s");
	struct want w[] = {
	    {"A", CLOCK_REALTIME, SIGRTMIN + 7, 3, 1000},
	    {"B", CLOCK_MONOTONIC, SIGRTMIN + 8, 2, 100},
	};
	const int n = sizeof(w) / sizeof(w[0]);
	sigset_t set;
	sigemptyset(&set);
	for (int i = 0; i < n; i++)
		sigaddset(&set, w[i].sig);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (int i = 0; i < n; i++)
		setup(&w[i]);

	test_ready();
	test_wait();

	for (int i = 0; i < n; i++) {
		struct itimerspec now;
		int ov = timer_getoverrun(w[i].t);
		expect(ov == w[i].overrun, "%s: timer_getoverrun %d, want %d", w[i].name, ov,
		       w[i].overrun);
		if (timer_gettime(w[i].t, &now)) {
			test_failf("%s: timer_gettime: %m", w[i].name);
			continue;
		}
		expect(ns(&now.it_interval) == ns(&w[i].was.it_interval), "%s: interval %lld ns",
		       w[i].name, ns(&now.it_interval));
		expect(ns(&now.it_value) > 0 && ns(&now.it_value) <= ns(&w[i].was.it_value),
		       "%s: %lld ns left, was %lld ns", w[i].name, ns(&now.it_value),
		       ns(&w[i].was.it_value));
	}
	pass();
}
