/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A parallel loop over independent objects (par.h). */
#include "util/par.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#define PAR_MAX   16
#define PAR_CHUNK 16 /* indices taken at once: fewer atomics, calls near in order */

struct par {
	size_t n, chunk;
	atomic_size_t next;
	void (*fn)(void *arg, size_t i, unsigned slot);
	void *arg;
};

struct par_slot {
	struct par *p;
	unsigned slot;
};

static void run(struct par *p, unsigned slot)
{
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, p->chunk);
		if (i >= p->n)
			return;
		size_t end = i + p->chunk < p->n ? i + p->chunk : p->n;
		for (; i < end; i++)
			p->fn(p->arg, i, slot);
	}
}

static void *thread_main(void *arg)
{
	struct par_slot *s = arg;
	run(s->p, s->slot);
	return NULL;
}

/* The CPUs this thread may run on: one system call, where sysconf's
 * online count opened and read a /sys file (fdtable asks once a process) */
unsigned par_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static unsigned par_run(size_t n, size_t chunk, unsigned nthreads,
			void (*fn)(void *arg, size_t i, unsigned slot), void *arg)
{
	struct par p = { .n = n, .chunk = chunk, .fn = fn, .arg = arg };
	struct par_slot slots[PAR_MAX];
	pthread_t th[PAR_MAX];
	unsigned made = 0;
	sigset_t all, old;

	atomic_init(&p.next, 0);
	if (nthreads > PAR_MAX)
		nthreads = PAR_MAX;
	if (nthreads > 1 && n > chunk) {
		/* no signal for the helpers: the caller's thread takes them */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		for (unsigned k = 1; k < nthreads && (size_t)k * chunk < n; k++) {
			slots[made] = (struct par_slot){ &p, k };
			if (pthread_create(&th[made], NULL, thread_main, &slots[made]) != 0)
				break;
			made++;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	run(&p, 0);
	for (unsigned k = 0; k < made; k++)
		pthread_join(th[k], NULL);
	return made + 1;
}

unsigned par_for(size_t n, unsigned nthreads, void (*fn)(void *arg, size_t i, unsigned slot),
		 void *arg)
{
	return par_run(n, PAR_CHUNK, nthreads, fn, arg);
}

unsigned par_for_each(size_t n, unsigned nthreads, void (*fn)(void *arg, size_t i, unsigned slot),
		      void *arg)
{
	return par_run(n, 1, nthreads, fn, arg);
}
