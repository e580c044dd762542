/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Many threads, each with state of its own: 40 threads (restart clones
 * them 16 at a time, so three batches, the last one short), each with its
 * own name, timer slack, nice value, fs gid and effective and saved gids
 * (set by the raw system calls, which change only the calling thread; the
 * nice values are read ahead by ckpt's thread, probe.c). After restart
 * every thread checks that it has its tid and all of these back, and the
 * main thread that it has its own (root's) gids still.
 */
#include "lib.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NTHREADS 40

static pid_t tids[NTHREADS];
static atomic_int started, checked, go;
static atomic_int bad[NTHREADS];

static unsigned slack_of(int id)
{
	return 50000 + (unsigned)id * 1000;
}

static int nice_of(int id)
{
	return 1 + id % 19;
}

static unsigned gid_of(int id)
{
	return 2000 + (unsigned)id;
}

/* 0 if the calling thread has what thread id set, else what differs */
static int check_self(int id)
{
	char name[16] = { 0 }, want[16];
	snprintf(want, sizeof(want), "many-%d", id);
	if (prctl(PR_GET_NAME, name, 0, 0, 0) || strcmp(name, want))
		return 1;
	if ((unsigned)prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) != slack_of(id))
		return 2;
	/* setfsgid returns the previous fs gid; -1 changes nothing */
	if ((unsigned)syscall(SYS_setfsgid, -1) != gid_of(id) + 500)
		return 3;
	gid_t r, e, s;
	if (syscall(SYS_getresgid, &r, &e, &s) || r != 0 || e != gid_of(id) || s != gid_of(id))
		return 4;
	if ((pid_t)syscall(SYS_gettid) != tids[id])
		return 5;
	errno = 0; /* of the calling thread: PRIO_PROCESS 0 is its own tid */
	if (getpriority(PRIO_PROCESS, 0) != nice_of(id) || errno)
		return 6;
	return 0;
}

static void *thread(void *arg)
{
	int id = (int)(long)arg;
	char name[16];
	snprintf(name, sizeof(name), "many-%d", id);
	tids[id] = (pid_t)syscall(SYS_gettid);
	if (prctl(PR_SET_NAME, name, 0, 0, 0) ||
	    prctl(PR_SET_TIMERSLACK, slack_of(id), 0, 0, 0) ||
	    setpriority(PRIO_PROCESS, 0, nice_of(id)) ||
	    syscall(SYS_setresgid, -1, gid_of(id), gid_of(id)))
		bad[id] = 100;
	syscall(SYS_setfsgid, gid_of(id) + 500);
	if (!bad[id])
		bad[id] = 10 * check_self(id);
	started++;
	while (!go)
		usleep(1000);
	if (!bad[id])
		bad[id] = check_self(id);
	checked++;
	return NULL;
}

int main(void)
{
	pthread_t th[NTHREADS];
	if (geteuid() != 0)
		skip("needs root (gids of its own per thread)");
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, thread, (void *)i))
			fail("pthread_create");
	while (started < NTHREADS)
		usleep(1000);
	for (int i = 0; i < NTHREADS; i++)
		if (bad[i])
			fail("thread %d could not set up its state (%d)", i, bad[i]);

	test_ready();
	test_wait();

	go = 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	static const char *const what[] = { "",	    "name", "timer slack", "fs gid",
					    "gids", "tid",  "nice value" };
	for (int i = 0; i < NTHREADS; i++)
		expect(!bad[i], "thread %d: its %s changed", i,
		       bad[i] > 0 && bad[i] < 7 ? what[bad[i]] : "?");
	gid_t r, e, s;
	expect(!syscall(SYS_getresgid, &r, &e, &s) && r == 0 && e == 0 && s == 0,
	       "the main thread's gids changed to %u %u %u", r, e, s);
	pass();
}
