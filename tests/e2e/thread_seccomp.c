/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * seccomp across threads: two threads are started, then the second one
 * installs a filter that makes getppid() fail with EPERM, with
 * SECCOMP_FILTER_FLAG_TSYNC, which puts every thread under it. After
 * restore each thread, from inside, still gets EPERM from getppid() and
 * its /proc/thread-self/status says Seccomp: 2, Seccomp_filters: 1.
 */
#include "lib.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_barrier_t go;
static volatile int phase;

static void check(const char *who)
{
	errno = 0;
	long pp = syscall(SYS_getppid);
	expect(pp == -1 && errno == EPERM, "%s: getppid = %ld, errno %d: not under the filter",
	       who, pp, errno);
	char status[4096], *p;
	if (test_read_file("/proc/thread-self/status", status, sizeof(status)) <= 0)
		fail("%s: read status: %m", who);
	p = strstr(status, "Seccomp:");
	expect(p && !strncmp(p, "Seccomp:\t2\n", 11), "%s: %.*s", who, p ? 12 : 0, p ? p : "");
	p = strstr(status, "Seccomp_filters:");
	expect(p && !strncmp(p, "Seccomp_filters:\t1\n", 19), "%s: %.*s", who, p ? 20 : 0,
	       p ? p : "");
}

static void install(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		fail("no_new_privs: %m");
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog))
		fail("seccomp TSYNC: %m");
}

static void *thread(void *arg)
{
	pthread_barrier_wait(&go); /* started */
	if (!strcmp(arg, "thread 2"))
		install();
	pthread_barrier_wait(&go); /* installed */
	pthread_barrier_wait(&go); /* woken after restore */
	check(arg);
	pthread_barrier_wait(&go); /* checked */
	return NULL;
}

int main(void)
{
	pthread_t th[2];
	pthread_barrier_init(&go, NULL, 3);
	if (pthread_create(&th[0], NULL, thread, "thread 1") ||
	    pthread_create(&th[1], NULL, thread, "thread 2"))
		fail("pthread_create");
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&go); /* installed */

	test_ready();
	test_wait();

	check("main thread");
	pthread_barrier_wait(&go);
	pthread_barrier_wait(&go);
	pass();
}
