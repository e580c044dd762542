/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Zombies and a parent inside wait(). The root has three zombie children
 * (one exited 7, one killed by SIGTERM, one by SIGKILL, which no handler
 * can catch), not reaped before the checkpoint,
 * and a child W blocked in waitpid() for its own child W1, which blocks in
 * read() on a pipe. After restart: both zombies are still zombies of the
 * root and reap with their statuses; the root writes to the pipe, W1
 * exits 5, W's waitpid() returns it and W exits 0.
 */
#include "lib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char state_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return '?';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static void wait_zombie(pid_t pid)
{
	siginfo_t si;
	if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0)
		fail("waitid %d: %m", (int)pid);
}

int main(void)
{
	int go[2];
	if (pipe(go))
		fail("pipe: %m");
	pid_t z1 = fork();
	if (z1 == 0)
		_exit(7);
	pid_t z2 = fork();
	if (z2 == 0) {
		signal(SIGTERM, SIG_DFL);
		raise(SIGTERM);
		_exit(99);
	}
	pid_t z3 = fork();
	if (z3 == 0) {
		raise(SIGKILL);
		_exit(99);
	}
	pid_t w = fork();
	if (w == 0) {
		pid_t w1 = fork();
		if (w1 == 0) {
			char c;
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
			_exit(5);
		}
		int st;
		pid_t r;
		while ((r = waitpid(w1, &st, 0)) < 0 && errno == EINTR)
			;
		_exit(r == w1 && WIFEXITED(st) && WEXITSTATUS(st) == 5 ? 0 : 1);
	}
	wait_zombie(z1);
	wait_zombie(z2);
	wait_zombie(z3);
	/* W is blocked in waitpid once W1 exists and W sleeps */
	for (int i = 0; i < 2000 && state_of(w) != 'S'; i++)
		usleep(1000);

	test_ready();
	test_wait();

	expect(state_of(z1) == 'Z', "pid %d is not a zombie (state %c)", (int)z1, state_of(z1));
	expect(state_of(z2) == 'Z', "pid %d is not a zombie (state %c)", (int)z2, state_of(z2));
	int st;
	expect(waitpid(z1, &st, 0) == z1 && WIFEXITED(st) && WEXITSTATUS(st) == 7,
	       "zombie 1: status %#x, want exit 7", st);
	expect(waitpid(z2, &st, 0) == z2 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
	       "zombie 2: status %#x, want SIGTERM", st);
	expect(state_of(z3) == 'Z', "pid %d is not a zombie (state %c)", (int)z3, state_of(z3));
	expect(waitpid(z3, &st, 0) == z3 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	       "zombie 3: status %#x, want SIGKILL", st);
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	expect(waitpid(w, &st, 0) == w && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "the waiting child: status %#x", st);
	expect(waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD, "the root has extra children");
	pass();
}
