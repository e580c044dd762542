/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A group whose leader is gone, whose member was forked by the leader with
 * CLONE_PARENT: the root forks L, L leads a group and clones M with
 * CLONE_PARENT (so M is the root's child, in L's group), then L exits and
 * the root reaps it. After restart M is still the root's child, in group
 * L (rebuilt by a ghost with L's pid that is gone again), and the root has
 * no other child.
 */
#include "lib.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int go[2];

static __attribute__((noreturn)) void member(pid_t pgrp, pid_t ppid)
{
	char c;
	while (read(go[0], &c, 1) < 0 && errno == EINTR)
		;
	_exit((getpgrp() != pgrp) | (getppid() != ppid) << 1);
}

int main(void)
{
	if (pipe(go))
		fail("pipe: %m");
	pid_t root = getpid(), leader = fork();
	if (leader < 0)
		fail("fork: %m");
	if (leader == 0) {
		setpgid(0, 0);
		pid_t m = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
		if (m == 0)
			member(getpgrp(), root);
		_exit(m > 0 ? 0 : 1);
	}
	int st;
	if (waitpid(leader, &st, 0) != leader || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("leader failed");
	/* M is ours now; find it: our only child */
	test_ready();
	test_wait();

	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	pid_t m = waitpid(-1, &st, 0);
	expect(m > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "member: %d exit %d (1: wrong group, 2: wrong parent)", m,
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	expect(waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD, "the root has another child");
	pass();
}
