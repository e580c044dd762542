/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POSIX timers whose own signal is queued at the checkpoint (blocked):
 *   A  CLOCK_MONOTONIC          SIGEV_SIGNAL    SIGRTMIN+4  0x55  10 ms / 300 ms
 *   B  CLOCK_REALTIME           SIGEV_SIGNAL    SIGRTMIN+5  0x66  10 ms, one-shot
 *   C  CLOCK_THREAD_CPUTIME_ID  SIGEV_THREAD_ID SIGRTMIN+6  0x77  1 ms, one-shot
 * A periodic timer with its signal queued waits for its delivery to be
 * armed again, counting the periods missed as overruns. After restore,
 * with the signals still blocked for 700 ms, each is queued exactly once
 * (C in the thread's queue), with si_code SI_TIMER, its si_timerid and
 * si_value; A's delivery counts at least one overrun and A goes on
 * (interval 300 ms, its next signal comes); B and C are disarmed.
 */
#include "lib.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BIT(s) (1ull << ((s)-1))

struct want {
	const char *name;
	int sig, value;
	clockid_t clock;
	int notify;
	long long value_ns, interval_ns;
	timer_t t;
};

static long long ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000 + t->tv_nsec;
}

static uint64_t status_mask(const char *field)
{
	char v[64];
	if (test_status_field(field, v, sizeof(v)))
		fail("no %s in /proc/self/status", field);
	return strtoull(v, NULL, 16);
}

static int take(int sig, siginfo_t *si, long long wait_ns)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	struct timespec ts = {wait_ns / 1000000000, wait_ns % 1000000000};
	return (int)syscall(SYS_rt_sigtimedwait, &set, si, &ts, 8);
}

static void setup(struct want *w)
{
	struct sigevent se;
	memset(&se, 0, sizeof(se));
	se.sigev_notify = w->notify;
	se.sigev_signo = w->sig;
	se.sigev_value.sival_int = w->value;
	if (w->notify == SIGEV_THREAD_ID)
		se._sigev_un._tid = gettid();
	if (timer_create(w->clock, &se, &w->t))
		fail("%s: timer_create: %m", w->name);
	struct itimerspec its = {
	    .it_interval = {0, w->interval_ns},
	    .it_value = {0, w->value_ns},
	};
	if (timer_settime(w->t, 0, &its, NULL))
		fail("%s: timer_settime: %m", w->name);
	int64_t end = test_now_ns(CLOCK_MONOTONIC) + 5000000000LL;
	volatile unsigned long spin = 0;
	while (!((status_mask("SigPnd") | status_mask("ShdPnd")) & BIT(w->sig))) {
		if (test_now_ns(CLOCK_MONOTONIC) > end)
			fail("%s: its signal did not come", w->name);
		for (int i = 0; i < 1000000; i++)
			spin += i;
	}
}

static void check(const struct want *w)
{
	siginfo_t si;
	int r = take(w->sig, &si, 0);
	if (r != w->sig) {
		test_failf("%s: its signal is not queued (%d: %m)", w->name, r);
		return;
	}
	expect(si.si_code == SI_TIMER, "%s: si_code %d", w->name, si.si_code);
	expect(si.si_timerid == (int)(intptr_t)w->t, "%s: si_timerid %d, want %d", w->name,
	       si.si_timerid, (int)(intptr_t)w->t);
	expect(si.si_value.sival_int == w->value, "%s: si_value %#x, want %#x", w->name,
	       si.si_value.sival_int, w->value);
	if (w->interval_ns)
		expect(si.si_overrun >= 1, "%s: si_overrun %d after 700 ms blocked", w->name,
		       si.si_overrun);
	r = take(w->sig, &si, 0);
	expect(r < 0, "%s: its signal is queued twice (si_code %d, si_timerid %d)", w->name,
	       si.si_code, si.si_timerid);
	struct itimerspec now;
	timer_gettime(w->t, &now);
	if (w->interval_ns) {
		expect(ns(&now.it_interval) == w->interval_ns, "%s: interval %lld ns", w->name,
		       ns(&now.it_interval));
		expect(ns(&now.it_value) > 0 && ns(&now.it_value) <= w->interval_ns,
		       "%s: %lld ns left", w->name, ns(&now.it_value));
		r = take(w->sig, &si, 1000000000);
		expect(r == w->sig && si.si_timerid == (int)(intptr_t)w->t,
		       "%s: no next signal in 1 s", w->name);
	} else {
		expect(!ns(&now.it_value) && !ns(&now.it_interval), "%s: armed: %lld ns left",
		       w->name, ns(&now.it_value));
	}
}

int main(void)
{
	test_setup_wake();
	const int rt = SIGRTMIN;
	struct want w[] = {
	    {"A", rt + 4, 0x55, CLOCK_MONOTONIC, SIGEV_SIGNAL, 10000000, 300000000},
	    {"B", rt + 5, 0x66, CLOCK_REALTIME, SIGEV_SIGNAL, 10000000, 0},
	    {"C", rt + 6, 0x77, CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID, 1000000, 0},
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

	nanosleep(&(struct timespec){0, 700000000}, NULL);
	expect(status_mask("SigPnd") & BIT(w[2].sig), "C: its signal is not in the thread's queue");
	expect(status_mask("ShdPnd") & BIT(w[0].sig), "A: its signal is not in the process queue");
	for (int i = 0; i < n; i++)
		check(&w[i]);
	pass();
}
