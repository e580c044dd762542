/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util_thread_create: pthread_create, and the new thread runs at its
 * creator's nice value when that is negative.
 *
 * A caller that raised its priority for work that must end soon (ckpt
 * migrate's frozen round, ckpt receive's restart: nice -10) does so with
 * SCHED_RESET_ON_FORK, so that no process it forks inherits it; the kernel
 * applies that to threads as well, and a helper thread then ran at nice 0
 * while its creator, at -10, waited for it: on a loaded host the wait is
 * the helper's turn for a CPU. The thread sets its own nice first (which
 * needs the CAP_SYS_NICE its creator used; without it, it runs as before).
 */
#ifndef CKPT_THREAD_H
#define CKPT_THREAD_H

#include <pthread.h>

/* 0 or an errno value (positive), as pthread_create */
int util_thread_create(pthread_t *th, void *(*fn)(void *), void *arg)
	__attribute__((warn_unused_result));

#endif
