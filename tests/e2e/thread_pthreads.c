/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Threads: 8 counting threads, each with its own tid, TLS and signal
 * mask; a mutex/condvar ping-pong between two threads; a joiner blocked in
 * pthread_join() on a thread that blocks in read(). After restart: every
 * thread has its tid, TLS value and mask, the counters and the ping-pong
 * go on, and when the reader gets its byte and exits, the joiner wakes
 * (clear_child_tid and its futex wake were restored). The process is a
 * child subreaper with THP disabled, which are its own, not a thread's:
 * asked of its leader only, and still so after restart.
 */
#include "lib.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NCOUNT 8

static __thread int tls_id = -1;
static atomic_long counters[NCOUNT];
static pid_t tids[NCOUNT];
static atomic_int stop, bad_tls, bad_tid, bad_mask;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long turn, rounds;
static int pipefd[2];
static atomic_int joined;

static void *counter(void *arg)
{
	int id = (int)(long)arg;
	tls_id = id;
	tids[id] = (pid_t)syscall(SYS_gettid);
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGRTMIN + id);
	pthread_sigmask(SIG_BLOCK, &m, NULL);
	while (!stop) {
		counters[id]++;
		if (tls_id != id)
			bad_tls = 1;
		if ((pid_t)syscall(SYS_gettid) != tids[id])
			bad_tid = 1;
		sigset_t now;
		pthread_sigmask(SIG_BLOCK, NULL, &now);
		if (!sigismember(&now, SIGRTMIN + id))
			bad_mask = 1;
		usleep(1000);
	}
	return NULL;
}

static void *pinger(void *arg)
{
	long me = (long)arg;
	pthread_mutex_lock(&mu);
	while (!stop) {
		while (turn != me && !stop)
			pthread_cond_wait(&cv, &mu);
		turn = !me;
		rounds++;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		usleep(500);
		pthread_mutex_lock(&mu);
	}
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	char c;
	while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void *joiner(void *arg)
{
	pthread_join(*(pthread_t *)arg, NULL);
	joined = 1;
	return NULL;
}

static long rounds_now(void)
{
	pthread_mutex_lock(&mu);
	long r = rounds;
	pthread_mutex_unlock(&mu);
	return r;
}

int main(void)
{
	pthread_t c[NCOUNT], p[2], rd, jn;
	if (pipe(pipefd))
		fail("pipe: %m");
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) || prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
		fail("prctl: %m");
	for (long i = 0; i < NCOUNT; i++)
		if (pthread_create(&c[i], NULL, counter, (void *)i))
			fail("pthread_create");
	for (long i = 0; i < 2; i++)
		if (pthread_create(&p[i], NULL, pinger, (void *)i))
			fail("pthread_create");
	if (pthread_create(&rd, NULL, reader, NULL) || pthread_create(&jn, NULL, joiner, &rd))
		fail("pthread_create");
	usleep(100000);
	for (int i = 0; i < NCOUNT; i++)
		if (!counters[i])
			fail("counter %d did not start", i);

	test_ready();
	test_wait();

	long before[NCOUNT], r0 = rounds_now();
	for (int i = 0; i < NCOUNT; i++)
		before[i] = counters[i];
	usleep(300000);
	for (int i = 0; i < NCOUNT; i++)
		expect(counters[i] > before[i], "counter %d stopped at %ld", i, before[i]);
	expect(rounds_now() > r0, "the ping-pong stopped at %ld rounds", r0);
	expect(!joined, "the joiner returned before its thread exited");
	int sub = 0;
	expect(prctl(PR_GET_CHILD_SUBREAPER, &sub) == 0 && sub == 1,
	       "the process is no longer a child subreaper (%d)", sub);
	expect(prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1, "THP is no longer disabled");
	if (write(pipefd[1], "x", 1) != 1)
		fail("write: %m");
	for (int i = 0; i < 2000 && !joined; i++)
		usleep(1000);
	expect(joined, "the joiner did not wake when the reader exited");
	stop = 1;
	for (int i = 0; i < NCOUNT; i++)
		pthread_join(c[i], NULL);
	pthread_join(p[0], NULL);
	pthread_join(p[1], NULL);
	pthread_join(jn, NULL);
	expect(!bad_tls, "a thread's TLS changed");
	expect(!bad_tid, "a thread's tid changed");
	expect(!bad_mask, "a thread's signal mask changed");
	pass();
}
