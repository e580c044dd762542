/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A parallel loop: par_for() runs fn(arg, i, slot) once for every i of
 * [0, n) on up to nthreads threads, the caller's thread one of them, and
 * returns once every call has returned. slot (0 .. threads - 1) names the
 * thread a call runs on, for state of its own (a ring, a buffer); calls of
 * one slot never overlap. fn must not touch anything another call touches
 * unlocked: it is for work on independent objects (sockets, fds). The
 * threads block every signal. If no thread can be made, every call runs
 * on the caller's (slot 0). No global, nothing logged.
 */
#ifndef CKPT_PAR_H
#define CKPT_PAR_H

#include <stddef.h>

/* The CPUs the calling thread may run on (its affinity), at least 1. */
unsigned par_cpus(void);

/* The number of threads that ran calls (at least 1). */
unsigned par_for(size_t n, unsigned nthreads, void (*fn)(void *arg, size_t i, unsigned slot),
		 void *arg);
/* The same for a few slow calls: each index taken alone (par_for takes 16
 * at a time and makes no thread for 16 or fewer). */
unsigned par_for_each(size_t n, unsigned nthreads, void (*fn)(void *arg, size_t i, unsigned slot),
		      void *arg);

#endif
