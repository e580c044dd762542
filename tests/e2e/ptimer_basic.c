/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POSIX timers, ids 0..5 with 2 deleted (a hole):
 *   0  CLOCK_REALTIME            SIGEV_THREAD_ID (itself) SIGRTMIN+1  ptr  1000 s
 *   1  CLOCK_MONOTONIC           SIGEV_SIGNAL SIGRTMIN+2  int 4242   150 ms / 150 ms
 *   3  CLOCK_PROCESS_CPUTIME_ID  SIGEV_SIGNAL SIGRTMIN+3  int 7      500 s / 30 s
 *   4  CLOCK_BOOTTIME            SIGEV_NONE               disarmed
 *   5  CLOCK_MONOTONIC           SIGEV_NONE               700 s / 10 s
 * Timer 1's signal has a handler (it may be queued at the checkpoint).
 * After restore /proc/self/timers is the same text (ids, signals, values,
 * notification, clocks), timer_gettime() shows the same intervals and no
 * more time left than before (timer 4 still disarmed, timer 1 at most its
 * interval), timer 0 still runs, and timer 1's signal keeps coming with
 * si_code SI_TIMER, si_timerid 1 and si_value 4242.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 6

static volatile sig_atomic_t ticks, bad_code, bad_id, bad_value;

static void on_tick(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	ticks++;
	if (si->si_code != SI_TIMER)
		bad_code = si->si_code ? si->si_code : -1000;
	if (si->si_timerid != 1)
		bad_id = si->si_timerid + 1000;
	if (si->si_value.sival_int != 4242)
		bad_value = si->si_value.sival_int ? si->si_value.sival_int : -1;
}

static long long ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000 + t->tv_nsec;
}

static timer_t make(clockid_t clock, int notify, int sig, union sigval v)
{
	struct sigevent se;
	timer_t t;
	memset(&se, 0, sizeof(se));
	se.sigev_notify = notify;
	se.sigev_signo = sig;
	se.sigev_value = v;
	if (notify == SIGEV_THREAD_ID)
		se._sigev_un._tid = gettid();
	if (timer_create(clock, &se, &t))
		fail("timer_create(clock %d): %m", clock);
	return t;
}

static void arm(timer_t t, long long value_ns, long long interval_ns)
{
	struct itimerspec its = {
	    .it_interval = {interval_ns / 1000000000, interval_ns % 1000000000},
	    .it_value = {value_ns / 1000000000, value_ns % 1000000000},
	};
	if (timer_settime(t, 0, &its, NULL))
		fail("timer_settime: %m");
}

int main(void)
{
	const int rt = SIGRTMIN;
	struct sigaction sa = {.sa_sigaction = on_tick, .sa_flags = SA_SIGINFO};
	sigaction(rt + 2, &sa, NULL);
	signal(rt + 1, SIG_IGN);
	signal(rt + 3, SIG_IGN);
	timer_t t[N];
	t[0] = make(CLOCK_REALTIME, SIGEV_THREAD_ID, rt + 1,
		    (union sigval){.sival_ptr = (void *)0x7eadbeefcafeULL});
	t[1] = make(CLOCK_MONOTONIC, SIGEV_SIGNAL, rt + 2, (union sigval){.sival_int = 4242});
	t[2] = make(CLOCK_MONOTONIC, SIGEV_NONE, 0, (union sigval){0});
	t[3] = make(CLOCK_PROCESS_CPUTIME_ID, SIGEV_SIGNAL, rt + 3, (union sigval){.sival_int = 7});
	t[4] = make(CLOCK_BOOTTIME, SIGEV_NONE, rt + 4, (union sigval){.sival_int = 99});
	t[5] = make(CLOCK_MONOTONIC, SIGEV_NONE, 0, (union sigval){0});
	for (int i = 0; i < N; i++)
		if ((intptr_t)t[i] != i)
			skip("timer %d got id %ld: ids are not handed out in order", i,
			     (long)(intptr_t)t[i]);
	timer_delete(t[2]);
	arm(t[0], 1000000000000LL, 0);
	arm(t[1], 150000000, 150000000);
	arm(t[3], 500000000000LL, 30000000000LL);
	arm(t[5], 700000000000LL, 10000000000LL);

	char before[2048], after[2048];
	struct itimerspec was[N], now;
	if (test_read_file("/proc/self/timers", before, sizeof(before)) < 0)
		fail("/proc/self/timers: %m");
	for (int i = 0; i < N; i++)
		if (i != 2)
			timer_gettime(t[i], &was[i]);

	test_ready();
	test_wait();

	if (test_read_file("/proc/self/timers", after, sizeof(after)) < 0)
		fail("/proc/self/timers after restore: %m");
	expect(!strcmp(before, after), "/proc/self/timers was\n%s\nand is\n%s", before, after);
	for (int i = 0; i < N; i++) {
		if (i == 2)
			continue;
		if (timer_gettime(t[i], &now)) {
			test_failf("timer %d: timer_gettime: %m", i);
			continue;
		}
		long long left = ns(&now.it_value), iv = ns(&now.it_interval);
		expect(iv == ns(&was[i].it_interval), "timer %d: interval %lld ns, was %lld ns", i,
		       iv, ns(&was[i].it_interval));
		if (i == 4)
			expect(left == 0, "timer 4: armed (%lld ns left), was disarmed", left);
		else if (i == 1)
			expect(left > 0 && left <= iv, "timer 1: %lld ns left of %lld ns", left,
			       iv);
		else
			expect(left > 0 && left <= ns(&was[i].it_value),
			       "timer %d: %lld ns left, was %lld ns", i, left,
			       ns(&was[i].it_value));
	}
	struct itimerspec a, b;
	timer_gettime(t[0], &a);
	nanosleep(&(struct timespec){0, 20000000}, NULL);
	timer_gettime(t[0], &b);
	expect(ns(&b.it_value) < ns(&a.it_value), "timer 0 does not run: %lld then %lld ns",
	       ns(&a.it_value), ns(&b.it_value));

	int start = ticks;
	int64_t end = test_now_ns(CLOCK_MONOTONIC) + 3000000000LL;
	while (ticks < start + 3 && test_now_ns(CLOCK_MONOTONIC) < end)
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	expect(ticks >= start + 3, "timer 1: %d signals in 3 s, want 3", ticks - start);
	expect(!bad_code, "timer 1: signal with si_code %d", bad_code);
	expect(!bad_id, "timer 1: signal with si_timerid %d", bad_id - 1000);
	expect(!bad_value, "timer 1: signal with si_value %d", bad_value);
	pass();
}
