/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Timerfds, fds 5..9:
 *   5  CLOCK_MONOTONIC, non-blocking, relative 60 s, interval 45.25 s:
 *      after restore the same interval, time left no more than before and no
 *      less than before minus the time since (relative time carried over),
 *      and still running.
 *   6  CLOCK_BOOTTIME, blocking, armed and disarmed again: stays disarmed
 *      (gettime all zero, not readable).
 *   7  CLOCK_MONOTONIC one-shot 1 ms that fired before the checkpoint, not
 *      read: reads 1 tick, then EAGAIN; disarmed.
 *   8  CLOCK_REALTIME absolute, interval 1000 s, first expiry 3500 s in the
 *      past: 4 expirations not read (only counted once the timer is read or
 *      its time asked), next one 500 s after setup; after restore it reads 4
 *      ticks and its expiry is the same absolute time.
 *   9  CLOCK_REALTIME absolute + cancel-on-set, in 100 s: same absolute
 *      expiry; fdinfo "settime flags" are kept (01 for 8, 03 for 9).
 *  10  systemd's watch for clock changes: CLOCK_REALTIME absolute +
 *      cancel-on-set at TIME_T_MAX (the kernel clamps it to KTIME_MAX,
 *      about 235 years away): still that far, its flags 03, not readable.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000ll

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NS + ts->tv_nsec;
}

static struct timespec ts_of(int64_t ns)
{
	return (struct timespec){.tv_sec = ns / NS, .tv_nsec = ns % NS};
}

static int make(int clockid, int flags, int target, int sflags, int64_t value, int64_t interval)
{
	int fd = test_move_fd(timerfd_create(clockid, flags), target);
	struct itimerspec its = {.it_interval = ts_of(interval), .it_value = ts_of(value)};
	if (timerfd_settime(fd, sflags, &its, NULL) < 0)
		fail("timerfd_settime(fd %d): %m", target);
	return fd;
}

static struct itimerspec get(int fd)
{
	struct itimerspec its = {0};
	if (timerfd_gettime(fd, &its) < 0)
		test_failf("timerfd_gettime(fd %d): %m", fd);
	return its;
}

/* a number in fdinfo ("settime flags:" is octal, "clockid:" decimal) */
static int fdinfo_num(int fd, const char *key, int base)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *p = strstr(buf, key);
	return p ? (int)strtol(p + strlen(key), NULL, base) : -1;
}

static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* the absolute expiry of a CLOCK_REALTIME timer, from its time left */
static int64_t expiry(int fd)
{
	struct itimerspec its = get(fd);
	return ns_of(&its.it_value) + test_now_ns(CLOCK_REALTIME);
}

int main(void)
{
	int64_t real = test_now_ns(CLOCK_REALTIME);
	int per = make(CLOCK_MONOTONIC, TFD_NONBLOCK, 5, 0, 60 * NS, 45 * NS + NS / 4);
	int off = make(CLOCK_BOOTTIME, 0, 6, 0, 10 * NS, 0);
	struct itimerspec zero = {0};
	if (timerfd_settime(off, 0, &zero, NULL) < 0)
		fail("disarm: %m");
	int shot = make(CLOCK_MONOTONIC, TFD_NONBLOCK, 7, 0, NS / 1000, 0);
	int64_t abs8 = real - 3500 * NS;
	int past = make(CLOCK_REALTIME, TFD_NONBLOCK, 8, TFD_TIMER_ABSTIME, abs8, 1000 * NS);
	int64_t abs9 = real + 100 * NS;
	int canc = make(CLOCK_REALTIME, TFD_NONBLOCK, 9,
			TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, abs9, 0);
	struct itimerspec never = {.it_value = {.tv_sec = INT64_MAX}};
	int watch = test_move_fd(timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK), 10);
	if (timerfd_settime(watch, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &never, NULL) < 0)
		fail("timerfd_settime(fd 10): %m");
	struct timespec ms30 = {0, 30 * 1000000};
	nanosleep(&ms30, NULL);

	struct itimerspec b5 = get(per);
	int64_t t0 = test_now_ns(CLOCK_MONOTONIC);
	test_ready();
	test_wait();
	int64_t since = test_now_ns(CLOCK_MONOTONIC) - t0;

	/* 5: periodic, relative */
	struct itimerspec a5 = get(per);
	expect(ns_of(&a5.it_interval) == 45 * NS + NS / 4, "fd 5: interval %lld ns, want 45.25 s",
	       (long long)ns_of(&a5.it_interval));
	expect(ns_of(&a5.it_value) <= ns_of(&b5.it_value) &&
		   ns_of(&a5.it_value) >= ns_of(&b5.it_value) - since - NS / 10,
	       "fd 5: %lld ns left, was %lld ns %lld ns ago", (long long)ns_of(&a5.it_value),
	       (long long)ns_of(&b5.it_value), (long long)since);
	nanosleep(&ms30, NULL);
	struct itimerspec c5 = get(per);
	expect(ns_of(&c5.it_value) < ns_of(&a5.it_value), "fd 5 is not running");
	expect(fcntl(per, F_GETFL) & O_NONBLOCK, "fd 5 lost O_NONBLOCK");
	expect(fdinfo_num(per, "clockid:", 10) == CLOCK_MONOTONIC, "fd 5: clock changed");

	/* 6: disarmed */
	struct itimerspec a6 = get(off);
	expect(!ns_of(&a6.it_value) && !ns_of(&a6.it_interval), "fd 6 is armed (%lld ns left)",
	       (long long)ns_of(&a6.it_value));
	expect(!readable(off), "fd 6 is readable");
	expect(!(fcntl(off, F_GETFL) & O_NONBLOCK), "fd 6 became non-blocking");
	expect(fdinfo_num(off, "clockid:", 10) == CLOCK_BOOTTIME, "fd 6: clock changed");

	/* 7: fired, not read */
	uint64_t ticks = 0;
	ssize_t n = read(shot, &ticks, sizeof(ticks));
	expect(n == sizeof(ticks) && ticks == 1, "fd 7: read %zd (%m), %llu ticks, want 1", n,
	       (unsigned long long)ticks);
	expect(read(shot, &ticks, sizeof(ticks)) < 0 && errno == EAGAIN, "fd 7 readable twice");
	struct itimerspec a7 = get(shot);
	expect(!ns_of(&a7.it_value), "fd 7 is armed again");

	/* 8: absolute realtime, 4 expirations unread */
	int64_t e8 = expiry(past), want8 = abs8 + 4000 * NS;
	expect(e8 > want8 - NS / 10 && e8 < want8 + NS / 10, "fd 8: expires %lld ns off",
	       (long long)(e8 - want8));
	ticks = 0;
	n = read(past, &ticks, sizeof(ticks));
	expect(n == sizeof(ticks) && ticks == 4, "fd 8: read %zd (%m), %llu ticks, want 4", n,
	       (unsigned long long)ticks);
	expect(fdinfo_num(past, "settime flags:", 8) == TFD_TIMER_ABSTIME, "fd 8: settime flags %o",
	       fdinfo_num(past, "settime flags:", 8));

	/* 9: absolute realtime, cancel on set */
	int64_t e9 = expiry(canc);
	expect(e9 > abs9 - NS / 10 && e9 < abs9 + NS / 10, "fd 9: expires %lld ns off",
	       (long long)(e9 - abs9));
	expect(fdinfo_num(canc, "settime flags:", 8) ==
		   (TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET),
	       "fd 9: settime flags %o", fdinfo_num(canc, "settime flags:", 8));
	expect(!readable(canc), "fd 9 is readable");

	/* 10: absolute realtime, cancel on set, never */
	struct itimerspec a10 = get(watch);
	expect(a10.it_value.tv_sec > 200ll * 365 * 86400, "fd 10: %lld s left, want over 200 years",
	       (long long)a10.it_value.tv_sec);
	expect(fdinfo_num(watch, "settime flags:", 8) ==
		   (TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET),
	       "fd 10: settime flags %o", fdinfo_num(watch, "settime flags:", 8));
	expect(!readable(watch), "fd 10 is readable");
	pass();
}
