/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "util/thread.h"

struct thread_start {
	void *(*fn)(void *);
	void *arg;
	int nice;
};

static void *thread_main(void *p)
{
	struct thread_start s = *(struct thread_start *)p;
	free(p);
	/* this thread's own nice (PRIO_PROCESS with 0 names the calling thread) */
	if (s.nice < 0 && setpriority(PRIO_PROCESS, 0, s.nice) < 0) {
		/* no CAP_SYS_NICE: at the nice the kernel gave */
	}
	return s.fn(s.arg);
}

int util_thread_create(pthread_t *th, void *(*fn)(void *), void *arg)
{
	struct thread_start *s = malloc(sizeof(*s));
	if (!s)
		return ENOMEM;
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, 0);
	*s = (struct thread_start){ .fn = fn, .arg = arg, .nice = errno ? 0 : nice };
	int e = pthread_create(th, NULL, thread_main, s);
	if (e)
		free(s);
	return e;
}
