/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util/par.c: every index once, on as many threads as asked (at most),
 * each slot's calls never at the same time as another of the slot, the
 * helpers with every signal blocked, and the caller's thread alone for a
 * small loop or one thread.
 */
#include "util/par.h"
#include "unit.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define N 10000

struct arg {
	atomic_int seen[N];
	atomic_int busy[16];   /* calls of a slot running now */
	atomic_int overlap;    /* a slot's calls ran at once */
	atomic_int slot_bad;   /* a slot out of range */
	atomic_int unblocked;  /* a helper that takes signals */
	unsigned nthreads;
	pthread_t caller;
};

static void work(void *p, size_t i, unsigned slot)
{
	struct arg *a = p;
	if (slot >= a->nthreads || slot >= 16) {
		atomic_fetch_add(&a->slot_bad, 1);
		return;
	}
	if (atomic_fetch_add(&a->busy[slot], 1) != 0)
		atomic_fetch_add(&a->overlap, 1);
	atomic_fetch_add(&a->seen[i], 1);
	if (!pthread_equal(pthread_self(), a->caller)) {
		sigset_t cur;
		pthread_sigmask(SIG_SETMASK, NULL, &cur);
		if (!sigismember(&cur, SIGTERM) || !sigismember(&cur, SIGCHLD))
			atomic_fetch_add(&a->unblocked, 1);
	}
	if (i % 97 == 0)
		usleep(10); /* let the others run meanwhile */
	atomic_fetch_sub(&a->busy[slot], 1);
}

static void check(size_t n, unsigned nthreads, unsigned *ret_used)
{
	struct arg *a = calloc(1, sizeof(*a));
	CHECK(a != NULL);
	a->nthreads = nthreads ? nthreads : 1;
	a->caller = pthread_self();
	*ret_used = par_for(n, nthreads, work, a);
	for (size_t i = 0; i < n; i++)
		CHECK_EQ(atomic_load(&a->seen[i]), 1);
	CHECK_EQ(atomic_load(&a->overlap), 0);
	CHECK_EQ(atomic_load(&a->slot_bad), 0);
	CHECK_EQ(atomic_load(&a->unblocked), 0);
	CHECK(*ret_used >= 1 && *ret_used <= a->nthreads);
	free(a);
}

TEST(every_index_once)
{
	unsigned used;
	check(N, 4, &used);
	CHECK(used > 1); /* 4 threads asked, 10,000 calls: helpers ran */
	check(N, 2, &used);
	CHECK_EQ(used, 2);
	check(N, 1, &used);
	CHECK_EQ(used, 1);
	check(N, 0, &used);
	CHECK_EQ(used, 1);
}

TEST(small_and_empty)
{
	unsigned used;
	check(5, 4, &used); /* fewer than a chunk: on the caller alone */
	CHECK_EQ(used, 1);
	check(0, 4, &used);
	CHECK_EQ(used, 1);
	check(17, 4, &used); /* two chunks: one helper at most */
	CHECK(used <= 2);
}

TEST(cpus)
{
	CHECK(par_cpus() >= 1);
}

int main(void)
{
	RUN(every_index_once);
	RUN(small_and_empty);
	RUN(cpus);
	return unit_done();
}
