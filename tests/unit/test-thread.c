/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* util_thread_create (src/util/thread.c): a thread at its creator's raised priority */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "util/thread.h"
#include "unit.h"

static void *nice_of_thread(void *arg)
{
	errno = 0;
	*(int *)arg = getpriority(PRIO_PROCESS, 0);
	return NULL;
}

/* the thread's nice, made by util_thread_create (util) or pthread_create */
static int thread_nice(int util)
{
	pthread_t th;
	int nice = 99;
	int e = util ? util_thread_create(&th, nice_of_thread, &nice)
		     : pthread_create(&th, NULL, nice_of_thread, &nice);
	if (e)
		return 100 + e;
	pthread_join(th, NULL);
	return nice;
}

TEST(raised_with_reset_on_fork)
{
	/* as ckpt migrate and ckpt receive raise theirs */
	struct sched_param p = { 0 };
	CHECK(sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &p) == 0);
	CHECK(setpriority(PRIO_PROCESS, 0, -7) == 0);
	CHECK_EQ(thread_nice(0), 0);  /* what the kernel does to a plain thread */
	CHECK_EQ(thread_nice(1), -7); /* util_thread_create's runs at the creator's */
	CHECK(sched_setscheduler(0, SCHED_OTHER, &p) == 0);
	CHECK(setpriority(PRIO_PROCESS, 0, 3) == 0);
	CHECK_EQ(thread_nice(1), 3); /* a positive nice is inherited as always */
	CHECK(setpriority(PRIO_PROCESS, 0, 0) == 0);
}

int main(void)
{
	errno = 0;
	int old = getpriority(PRIO_PROCESS, 0);
	if (setpriority(PRIO_PROCESS, 0, old - 1) < 0) {
		printf("SKIP: cannot raise the priority (CAP_SYS_NICE): %s\n", strerror(errno));
		return 77;
	}
	setpriority(PRIO_PROCESS, 0, old);
	RUN(raised_with_reset_on_fork);
	return unit_done();
}
