/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rseq: glibc registers a struct rseq for the thread at thread pointer +
 * __rseq_offset. After restore it is still registered there, with the same
 * length and signature: registering it again fails with EBUSY (EINVAL would
 * mean another area or length, EPERM another signature, 0 that nothing was
 * registered), and the kernel updates it: a bogus cpu_id is rewritten to
 * a valid cpu on the return from a signal handler.
 */
#include "lib.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile sig_atomic_t handled;

static void on_usr2(int sig)
{
	(void)sig;
	handled++;
}

static struct rseq *area(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/* 0 if registered here with this signature, else why not */
static const char *registered(struct rseq *rs)
{
	static char why[128];
	const unsigned lens[] = {__rseq_size, 32, 20};
	int einval = 0;
	for (int i = 0; i < 3; i++) {
		if (!lens[i])
			continue;
		long r = syscall(SYS_rseq, rs, lens[i], 0, RSEQ_SIG);
		if (r == 0) {
			syscall(SYS_rseq, rs, lens[i], RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
			return "not registered (a new registration succeeded)";
		}
		if (errno == EBUSY)
			return NULL;
		if (errno == EPERM)
			return "registered with another signature";
		einval += errno == EINVAL;
	}
	snprintf(why, sizeof(why), "registered elsewhere or with another length (%d EINVAL)",
		 einval);
	return why;
}

static void check(const char *when)
{
	struct rseq *rs = area();
	const char *why = registered(rs);
	if (why)
		test_failf("%s: rseq area %p %s", when, (void *)rs, why);
	rs->cpu_id = 0xdead;
	rs->cpu_id_start = 0xdead;
	handled = 0;
	raise(SIGUSR2);
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	uint32_t cpu = rs->cpu_id;
	expect(handled == 1, "%s: SIGUSR2 handler did not run", when);
	expect(cpu != 0xdead && (long)cpu < ncpu,
	       "%s: cpu_id is %#x after a signal: the kernel does not update it", when, cpu);
}

int main(void)
{
	if (__rseq_size == 0)
		skip("glibc did not register rseq (glibc.pthread.rseq=0?)");
	signal(SIGUSR2, on_usr2);
	check("before the checkpoint");
	if (test_failures())
		fail("rseq does not behave as expected before the checkpoint");
	const struct rseq *before = area();

	test_ready();
	test_wait();

	expect(area() == before, "rseq area moved");
	check("after restore");
	pass();
}
