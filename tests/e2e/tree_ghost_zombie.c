/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A gone group leader whose only members left are zombies, all made
 * through CLONE_PARENT: the root forks X, X clones L with CLONE_PARENT (L
 * is the root's child), L leads a group and clones M1, M2 and M3 with
 * CLONE_PARENT (the root's children, in L's group); M1 exits with status
 * 7, M2 is killed by SIGKILL, M3 waits; L exits and the root reaps it. At
 * checkpoint M1 and M2 are zombies. After restart the group's ghost (L's
 * pid) is gone again, M1 and M2 are still zombies with their statuses, M3
 * is in group L and the root's child, X is the root's child, and the root
 * has no other child.
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

static int go[2], pids[2], mpids[2]; /* X writes L's pid to pids, L its members' to mpids */

static void wait_go(void)
{
	char c;
	while (read(go[0], &c, 1) < 0 && errno == EINTR)
		;
}

static pid_t clone_parent(void)
{
	return (pid_t)syscall(SYS_clone, CLONE_PARENT, 0, 0, 0, 0);
}

/* L: leads its group, makes the members, tells the root their pids */
static __attribute__((noreturn)) void leader(pid_t root)
{
	setpgid(0, 0);
	pid_t m[3];
	for (int i = 0; i < 3; i++) {
		m[i] = clone_parent();
		if (m[i] == 0) {
			if (i == 0)
				_exit(7);
			if (i == 1)
				for (;;)
					pause();
			wait_go();
			_exit((getppid() != root) << 1);
		}
		if (m[i] < 0)
			_exit(1);
	}
	kill(m[1], SIGKILL);
	_exit(write(mpids[1], m, sizeof(m)) == sizeof(m) ? 0 : 1);
}

int main(void)
{
	if (pipe(go) || pipe(pids) || pipe(mpids))
		fail("pipe: %m");
	pid_t root = getpid(), x = fork();
	if (x < 0)
		fail("fork: %m");
	if (x == 0) {
		pid_t l = clone_parent();
		if (l == 0)
			leader(root);
		if (l < 0 || write(pids[1], &l, sizeof(l)) != sizeof(l))
			_exit(1);
		wait_go();
		_exit(getppid() == root ? 0 : 2);
	}
	pid_t l, m[3];
	if (read(pids[0], &l, sizeof(l)) != sizeof(l) || read(mpids[0], m, sizeof(m)) != sizeof(m))
		fail("no pids from L");
	int st;
	if (waitpid(l, &st, 0) != l || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("L failed: %#x", st);
	siginfo_t si;
	for (int i = 0; i < 2; i++)
		if (waitid(P_PID, (id_t)m[i], &si, WEXITED | WNOWAIT))
			fail("waitid %d: %m", m[i]);
	test_ready();
	test_wait();

	expect(getpgid(m[2]) == l, "M3 is in group %d, want L's %d", getpgid(m[2]), l);
	expect(waitpid(m[0], &st, 0) == m[0] && WIFEXITED(st) && WEXITSTATUS(st) == 7,
	       "M1: status %#x, want exit 7", st);
	expect(waitpid(m[1], &st, 0) == m[1] && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	       "M2: status %#x, want SIGKILL", st);
	if (write(go[1], "gg", 2) != 2)
		fail("write: %m");
	expect(waitpid(m[2], &st, 0) == m[2] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "M3: status %#x (2: wrong parent)", st);
	expect(waitpid(x, &st, 0) == x && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "X: status %#x (2: wrong parent)", st);
	expect(waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD, "the root has another child");
	pass();
}
