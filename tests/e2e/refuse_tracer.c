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
 */
#include "lib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
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

int main(void)
{
	int p[2];
	if (pipe(p) < 0)
		fail("pipe: %m");
	pid_t a = fork();
	if (a < 0)
		fail("fork: %m");
	if (a == 0) {
		pid_t b = fork();
		if (b == 0) {
			for (;;)
				pause();
		}
		_exit(write(p[1], &b, sizeof(b)) == sizeof(b) ? 0 : 1);
	}
	pid_t b = 0;
	int st;
	if (read(p[0], &b, sizeof(b)) != sizeof(b) || waitpid(a, &st, 0) != a || st)
		fail("the child that forks B");
	if (ptrace(PTRACE_SEIZE, b, 0, PTRACE_O_EXITKILL) < 0)
		fail("PTRACE_SEIZE %d: %m", b);

	test_ready();
	test_wait();

	expect(tracer_of(b) == getpid(), "B's tracer is %d, not the root", tracer_of(b));
	if (ptrace(PTRACE_INTERRUPT, b, 0, 0) < 0)
		fail("PTRACE_INTERRUPT %d: %m", b);
	expect(waitpid(b, &st, __WALL) == b && WIFSTOPPED(st), "B did not stop: %x", st);
	kill(b, SIGKILL);
	pass();
}
