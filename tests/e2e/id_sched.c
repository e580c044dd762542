/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Scheduling attributes and the other per-task state a fresh process gets
 * from its parent, each set to what ckpt restart does not have: the main
 * thread SCHED_BATCH at nice 7, a thread SCHED_IDLE pinned to one CPU, a
 * thread SCHED_FIFO priority 3 with SCHED_RESET_ON_FORK, oom_score_adj 321,
 * the audit loginuid 4321 (when this kernel lets it be set), membarrier
 * registrations (private and global expedited), the main thread's I/O
 * priority (best effort, level 6) and coredump_filter 0x3f. After restart each thread
 * reads the same attributes, and a private expedited membarrier works
 * (without the registration it fails with EPERM).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ioprio.h>
#include <linux/membarrier.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MEMBARRIER_CMD_GET_REGISTRATIONS
#define MEMBARRIER_CMD_GET_REGISTRATIONS (1 << 9)
#endif

struct attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
	uint32_t util_min, util_max;
};

struct snap {
	struct attr a;
	cpu_set_t cpus;
};

static pid_t tids[3];
static pthread_barrier_t started;

static void take(pid_t tid, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	if (syscall(SYS_sched_getattr, tid, &s->a, sizeof(s->a), 0) < 0)
		fail("sched_getattr(%d): %m", tid);
	if (sched_getaffinity(tid, sizeof(s->cpus), &s->cpus) < 0)
		fail("sched_getaffinity(%d): %m", tid);
}

static void set(uint32_t policy, uint64_t flags, int nice, uint32_t prio)
{
	struct attr a = { .size = sizeof(a), .policy = policy, .flags = flags, .nice = nice,
			  .priority = prio };
	if (syscall(SYS_sched_setattr, 0, &a, 0) < 0)
		fail("sched_setattr(policy %u): %m", policy);
}

/* the runner's SIGUSR1 is the main thread's: a thread that took it would
 * leave the main thread in pause() (the wake lost until a second one) */
static void block_wake(void)
{
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
}

static void *idle_thread(void *arg)
{
	(void)arg;
	block_wake();
	tids[1] = (pid_t)syscall(SYS_gettid);
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 1 : 0, &one);
	if (sched_setaffinity(0, sizeof(one), &one) < 0)
		fail("sched_setaffinity: %m");
	set(SCHED_IDLE, 0, 0, 0);
	pthread_barrier_wait(&started);
	for (;;)
		pause();
	return NULL;
}

static void *fifo_thread(void *arg)
{
	(void)arg;
	block_wake();
	tids[2] = (pid_t)syscall(SYS_gettid);
	set(SCHED_FIFO, SCHED_FLAG_RESET_ON_FORK, 0, 3);
	pthread_barrier_wait(&started);
	for (;;)
		pause();
	return NULL;
}

static int read_int(const char *path, long long *ret)
{
	char buf[64];
	if (test_read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	*ret = strtoll(buf, NULL, 10);
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	int r = write(fd, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : -1;
	close(fd);
	return r;
}

int main(void)
{
	pthread_t th[2];
	tids[0] = getpid();
	set(SCHED_BATCH, 0, 7, 0);
	pthread_barrier_init(&started, NULL, 3);
	if (pthread_create(&th[0], NULL, idle_thread, NULL) ||
	    pthread_create(&th[1], NULL, fifo_thread, NULL))
		fail("pthread_create");
	pthread_barrier_wait(&started);
	if (write_str("/proc/self/oom_score_adj", "321") < 0 ||
	    write_str("/proc/self/coredump_filter", "0x3f") < 0)
		fail("oom_score_adj, coredump_filter: %m");
	const int ioprio = IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 6);
	if (syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, ioprio) < 0)
		fail("ioprio_set: %m");
	/* loginuid is per task; the kernel may refuse it (immutable, no audit) */
	bool loginuid = write_str("/proc/self/loginuid", "4321") == 0;
	if (!loginuid)
		test_log("loginuid cannot be set here (%m): not checked\n");
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) < 0 ||
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) < 0)
		fail("membarrier register: %m");
	long regs = syscall(SYS_membarrier, MEMBARRIER_CMD_GET_REGISTRATIONS, 0, 0);

	struct snap before[3], after[3];
	for (int i = 0; i < 3; i++)
		take(tids[i], &before[i]);

	test_ready();
	test_wait();

	static const char *const who[3] = { "main thread", "idle thread", "fifo thread" };
	for (int i = 0; i < 3; i++) {
		take(tids[i], &after[i]);
		expect(after[i].a.policy == before[i].a.policy, "%s: policy %u, was %u", who[i],
		       after[i].a.policy, before[i].a.policy);
		expect(after[i].a.flags == before[i].a.flags, "%s: sched flags 0x%llx, was 0x%llx",
		       who[i], (unsigned long long)after[i].a.flags,
		       (unsigned long long)before[i].a.flags);
		expect(after[i].a.nice == before[i].a.nice, "%s: nice %d, was %d", who[i],
		       after[i].a.nice, before[i].a.nice);
		expect(after[i].a.priority == before[i].a.priority, "%s: priority %u, was %u",
		       who[i], after[i].a.priority, before[i].a.priority);
		expect(CPU_EQUAL(&after[i].cpus, &before[i].cpus), "%s: CPU affinity differs",
		       who[i]);
	}
	/* an idle-policy thread may wait long for a CPU to exit on a busy
	 * machine, holding the pid the next restart of this image needs */
	struct attr normal = { .size = sizeof(normal) };
	syscall(SYS_sched_setattr, tids[1], &normal, 0);
	long long v;
	expect(read_int("/proc/self/oom_score_adj", &v) == 0 && v == 321,
	       "oom_score_adj is %lld, was 321", v);
	char cf[32] = "";
	test_read_file("/proc/self/coredump_filter", cf, sizeof(cf));
	expect(strtoul(cf, NULL, 16) == 0x3f, "coredump_filter is %s, was 0x3f", cf);
	long io = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0);
	expect(io == ioprio, "I/O priority %#lx, was %#x", io, ioprio);
	if (loginuid)
		expect(read_int("/proc/self/loginuid", &v) == 0 && v == 4321,
		       "loginuid is %lld, was 4321", v);
	long now = syscall(SYS_membarrier, MEMBARRIER_CMD_GET_REGISTRATIONS, 0, 0);
	expect(now == regs, "membarrier registrations 0x%lx, were 0x%lx", now, regs);
	expect(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0,
	       "private expedited membarrier: %m");
	pass();
}
