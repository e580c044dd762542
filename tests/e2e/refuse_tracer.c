/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The root traces a process outside the tree, as strace -p or gdb -p do:
 * its child forks B and exits, so B (reparented away) is not of the tree,
 * and the root PTRACE_SEIZEs B. No ptrace relation is saved: the
 * checkpoint must be refused naming the root and B (before, it succeeded;
 * after the restart strace, so checkpointed, ended on "wait4(__WALL): No
 * child processes" and its tracee ran on untraced). After the refusal the
 * root still traces B: B's TracerPid is the root's, and B stops on
 * PTRACE_INTERRUPT.
 *
 * With argument "thread": B has a second thread, and the root seizes only
 * that thread, as strace -p TID or a debugger attached to one thread does:
 * B's main thread has no tracer, only the thread's own status names it
 * (before, that went unseen and the checkpoint succeeded).
 */
#include "lib.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t tracer_of(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *t = strstr(buf, "\nTracerPid:");
	return t ? atoi(t + 11) : -1;
}

static int tid_pipe = -1;

static void *second(void *arg)
{
	(void)arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	if (write(tid_pipe, &tid, sizeof(tid)) != sizeof(tid))
		_exit(1);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	bool thread = argc > 1 && !strcmp(argv[1], "thread");
	/* B's pid comes on p, its thread's tid on q: on one pipe the thread
	 * wrote first once, and the root seized B's main thread instead */
	int p[2], q[2];
	if (pipe(p) < 0 || pipe(q) < 0)
		fail("pipe: %m");
	pid_t a = fork();
	if (a < 0)
		fail("fork: %m");
	if (a == 0) {
		pid_t b = fork();
		if (b == 0) {
			pthread_t th;
			tid_pipe = q[1];
			if (thread && pthread_create(&th, NULL, second, NULL))
				_exit(1);
			for (;;)
				pause();
		}
		_exit(write(p[1], &b, sizeof(b)) == sizeof(b) ? 0 : 1);
	}
	pid_t b = 0;
	int st;
	if (read(p[0], &b, sizeof(b)) != sizeof(b) || waitpid(a, &st, 0) != a || st)
		fail("the child that forks B");
	pid_t bt = b; /* what the root traces: B, or B's second thread */
	if (thread && read(q[0], &bt, sizeof(bt)) != sizeof(bt))
		fail("B's second thread");
	pid_t b_main = b;
	b = bt;
	if (ptrace(PTRACE_SEIZE, b, 0, PTRACE_O_EXITKILL) < 0)
		fail("PTRACE_SEIZE %d: %m", b);

	test_ready();
	test_wait();

	expect(tracer_of(b) == getpid(), "B's tracer is %d, not the root", tracer_of(b));
	if (ptrace(PTRACE_INTERRUPT, b, 0, 0) < 0)
		fail("PTRACE_INTERRUPT %d: %m", b);
	expect(waitpid(b, &st, __WALL) == b && WIFSTOPPED(st), "B did not stop: %x", st);
	if (thread)
		expect(tracer_of(b_main) == 0, "B's main thread is traced by %d", tracer_of(b_main));
	kill(b_main, SIGKILL);
	pass();
}
