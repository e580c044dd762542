/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POSIX timers on the CPU-time clocks of other threads of the process, as
 * haproxy's watchdog arms one on each thread's pthread_getcpuclockid():
 *   0  thread A's clock  SIGEV_THREAD_ID to A  SIGRTMIN+1  200 ms of A's CPU
 *   1  thread B's clock  SIGEV_NONE                       1000 s of B's CPU
 * both made by the main thread, while A and B wait on a flag using no CPU.
 * After restore /proc/self/timers is the same text, each timer has no more
 * time left than before; then A spins: timer 0 fires into A within 200 ms
 * of A's CPU time (within 20 s of wall time), and timer 1, on B's clock,
 * has not moved meanwhile: each counts the thread it named.
 *
 * With argv[1] "refuse": thread A makes a timer on CLOCK_THREAD_CPUTIME_ID
 * (glibc's clock of pid 0: the thread that made it, which nothing shows);
 * the runner expects the checkpoint to be refused naming the timer.
 */
#include "lib.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* the threads wait in read(2) of these, using no CPU time at all */
static int pipe_a[2], pipe_b[2];
static volatile pid_t tid_a, fired_in;

static void wait_pipe(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0)
		;
}

static void release(int fd)
{
	if (write(fd, "x", 1) != 1)
		fail("write: %m");
}

static void on_timer(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	if (si->si_code == SI_TIMER && si->si_timerid == 0)
		fired_in = (pid_t)syscall(SYS_gettid);
}

static long long ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000 + t->tv_nsec;
}

static void *thread_a(void *arg)
{
	bool refuse = arg != NULL;
	tid_a = (pid_t)syscall(SYS_gettid);
	if (refuse) {
		struct sigevent se = {.sigev_notify = SIGEV_NONE};
		timer_t t;
		struct itimerspec its = {.it_value = {1000, 0}};
		if (timer_create(CLOCK_THREAD_CPUTIME_ID, &se, &t) || timer_settime(t, 0, &its, NULL))
			fail("thread A: timer_create(CLOCK_THREAD_CPUTIME_ID): %m");
	}
	wait_pipe(pipe_a[0]);
	/* spins until timer 0 fires (or 20 s of wall time) */
	long long end = test_now_ns(CLOCK_MONOTONIC) + 20000000000LL;
	while (!fired_in && !refuse && test_now_ns(CLOCK_MONOTONIC) < end)
		;
	return NULL;
}

static void *thread_b(void *arg)
{
	(void)arg;
	wait_pipe(pipe_b[0]);
	return NULL;
}

static timer_t make(pthread_t th, int notify, pid_t tid, int sig)
{
	clockid_t clock;
	struct sigevent se;
	timer_t t;
	if (pthread_getcpuclockid(th, &clock))
		fail("pthread_getcpuclockid");
	memset(&se, 0, sizeof(se));
	se.sigev_notify = notify;
	se.sigev_signo = sig;
	se._sigev_un._tid = tid;
	if (timer_create(clock, &se, &t))
		fail("timer_create(clock %d): %m", clock);
	return t;
}

int main(int argc, char **argv)
{
	bool refuse = argc > 1 && strcmp(argv[1], "refuse") == 0;
	struct sigaction sa = {.sa_sigaction = on_timer, .sa_flags = SA_SIGINFO};
	sigaction(SIGRTMIN + 1, &sa, NULL);
	pthread_t a, b;
	if (pipe(pipe_a) || pipe(pipe_b))
		fail("pipe: %m");
	if (pthread_create(&a, NULL, thread_a, refuse ? "refuse" : NULL) ||
	    pthread_create(&b, NULL, thread_b, NULL))
		fail("pthread_create");
	while (!tid_a)
		usleep(1000);
	if (refuse) {
		test_ready();
		test_wait();
		release(pipe_a[1]);
		pthread_join(a, NULL);
		release(pipe_b[1]);
		pthread_join(b, NULL);
		pass();
	}
	timer_t t0 = make(a, SIGEV_SIGNAL | SIGEV_THREAD_ID, tid_a, SIGRTMIN + 1);
	timer_t t1 = make(b, SIGEV_NONE, 0, 0);
	if ((intptr_t)t0 != 0 || (intptr_t)t1 != 1)
		skip("timer ids %ld, %ld: not handed out in order", (long)(intptr_t)t0,
		     (long)(intptr_t)t1);
	struct itimerspec its0 = {.it_value = {0, 200000000}}, its1 = {.it_value = {1000, 0}};
	if (timer_settime(t0, 0, &its0, NULL) || timer_settime(t1, 0, &its1, NULL))
		fail("timer_settime: %m");
	char before[1024], after[1024];
	struct itimerspec was0, was1, now0, now1, spun1;
	if (test_read_file("/proc/self/timers", before, sizeof(before)) < 0)
		fail("/proc/self/timers: %m");
	timer_gettime(t0, &was0);
	timer_gettime(t1, &was1);

	test_ready();
	test_wait();

	if (test_read_file("/proc/self/timers", after, sizeof(after)) < 0)
		fail("/proc/self/timers after restore: %m");
	expect(!strcmp(before, after), "/proc/self/timers was\n%s\nand is\n%s", before, after);
	if (timer_gettime(t0, &now0) || timer_gettime(t1, &now1))
		fail("timer_gettime after restore: %m");
	expect(ns(&now0.it_value) > 0 && ns(&now0.it_value) <= ns(&was0.it_value),
	       "timer 0: %lld ns left, was %lld", ns(&now0.it_value), ns(&was0.it_value));
	expect(ns(&now1.it_value) > 0 && ns(&now1.it_value) <= ns(&was1.it_value),
	       "timer 1: %lld ns left, was %lld", ns(&now1.it_value), ns(&was1.it_value));
	release(pipe_a[1]);
	pthread_join(a, NULL);
	expect(fired_in == tid_a, "timer 0 fired in thread %d, want thread A %d (0: not in 20 s)",
	       (int)fired_in, (int)tid_a);
	timer_gettime(t1, &spun1);
	expect(ns(&spun1.it_value) == ns(&now1.it_value),
	       "timer 1 (thread B's clock) moved from %lld to %lld ns while only A ran",
	       ns(&now1.it_value), ns(&spun1.it_value));
	release(pipe_b[1]);
	pthread_join(b, NULL);
	pass();
}
