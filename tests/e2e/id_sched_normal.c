/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A program of the normal policy (SCHED_OTHER, nice 0: what nearly every
 * program has) back at that after a restart, though ckpt makes the tree at
 * real-time priority and every puppet inherits it: the main thread, a
 * thread, and a forked child each read their own policy and nice, and
 * their timer slack (which the kernel ignores and zeroes for a real-time
 * task) and its default (a task forked by a real-time one has none). And
 * what outlives the making at ckpt's side: the restored root's parent
 * (ckpt itself, waiting for the tree; or ckpt's init with --pidns). (With
 * --lazy, the runner reads the lazy server's policy from the restart's log,
 * where the server writes what it has.)
 */
#include "lib.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* 0 if tid runs SCHED_OTHER at nice 0; else what it has, in why */
static int normal(pid_t tid, char *why, size_t len)
{
	int policy = sched_getscheduler(tid);
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)tid);
	if (policy == SCHED_OTHER && nice == 0 && !errno)
		return 0;
	snprintf(why, len, "policy %d, nice %d", policy, nice);
	return -1;
}

/*
 * Each task's timer slack, set after the others are made; its default is
 * then the runner's (what a parent has when it forks is the child's
 * default), which ckpt, the runner's child too, has as well.
 */
#define SLACK 77777
static long slack_default;

/* The number of failures */
static int check_self(const char *who)
{
	char why[64];
	int bad = 0;
	if (normal((pid_t)syscall(SYS_gettid), why, sizeof(why)) < 0 && ++bad)
		test_failf("%s: %s after restart, want SCHED_OTHER at nice 0", who, why);
	long slack = prctl(PR_GET_TIMERSLACK);
	if (slack != SLACK && ++bad)
		test_failf("%s: timer slack %ld after restart, want %d", who, slack, SLACK);
	prctl(PR_SET_TIMERSLACK, 0); /* back to its default */
	if ((slack = prctl(PR_GET_TIMERSLACK)) != slack_default && ++bad)
		test_failf("%s: default timer slack %ld after restart, want %ld", who, slack,
			   slack_default);
	return bad;
}

static pthread_barrier_t started;

/* Its policy read once the main thread is woken (SIGUSR1 is for main). */
static void *thread_main(void *arg)
{
	(void)arg;
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	pthread_barrier_wait(&started);
	prctl(PR_SET_TIMERSLACK, SLACK);
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&started);
	check_self("the thread");
	return NULL;
}

int main(void)
{
	struct sched_param none = {0};
	if (sched_setscheduler(0, SCHED_OTHER, &none) < 0 || setpriority(PRIO_PROCESS, 0, 0) < 0)
		fail("cannot set SCHED_OTHER at nice 0: %m");
	char why[64];
	if (normal(getpid(), why, sizeof(why)) < 0)
		fail("before: %s", why);
	slack_default = prctl(PR_GET_TIMERSLACK);
	test_setup_wake();
	pthread_barrier_init(&started, NULL, 2);
	pthread_t th;
	if (pthread_create(&th, NULL, thread_main, NULL))
		fail("pthread_create");
	pthread_barrier_wait(&started);
	int go[2];
	if (pipe(go) < 0)
		fail("pipe: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) { /* checks itself once the main thread writes */
		char c;
		close(go[1]);
		prctl(PR_SET_TIMERSLACK, SLACK);
		while (read(go[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(check_self("the child") ? 1 : 0);
	}
	close(go[0]);
	prctl(PR_SET_TIMERSLACK, SLACK);
	pthread_barrier_wait(&started); /* the thread's slack set */
	test_ready();
	test_wait();

	check_self("the main thread");
	pthread_barrier_wait(&started);
	pthread_join(th, NULL);
	if (write(go[1], "g", 1) != 1)
		test_failf("cannot wake the child: %m");
	int st = 0;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
		test_failf("the child: status %#x (its checks above)", st);
	if (normal(getppid(), why, sizeof(why)) < 0)
		test_failf("the parent %d (ckpt or its init): %s, want SCHED_OTHER at nice 0",
			   getppid(), why);
	pass();
}
