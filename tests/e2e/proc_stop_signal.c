/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The signal of a job-control stop. The root has three children, each
 * leading a group of its own (so the groups are not orphaned: the root is
 * in another group of the same session), stopped by SIGTSTP (^Z), SIGTTIN
 * and SIGSTOP, whose stops the root has collected with WUNTRACED. After
 * restart each is stopped again and the root's waitpid(WUNTRACED) reports
 * the same signal (a shell's job table shows "Stopped" for ^Z, "Stopped
 * (signal)" for SIGSTOP); SIGCONT then lets each exit 0.
 */
#include "lib.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t stopped_child(int sig)
{
	pid_t pid = fork();
	if (pid < 0)
		fail("fork: %m");
	if (pid == 0) {
		if (setpgid(0, 0) < 0)
			_exit(2);
		raise(sig);
		_exit(0);
	}
	setpgid(pid, pid); /* whichever of the two comes first */
	int st;
	pid_t r;
	while ((r = waitpid(pid, &st, WUNTRACED)) < 0 && errno == EINTR)
		;
	if (r != pid || !WIFSTOPPED(st) || WSTOPSIG(st) != sig)
		fail("child stopped by %d: status %#x", sig, st);
	return pid;
}

int main(void)
{
	const int sigs[] = { SIGTSTP, SIGTTIN, SIGSTOP };
	pid_t kids[3];
	for (int i = 0; i < 3; i++)
		kids[i] = stopped_child(sigs[i]);

	test_ready();
	test_wait();

	for (int i = 0; i < 3; i++) {
		int st = 0;
		pid_t r;
		while ((r = waitpid(kids[i], &st, WUNTRACED)) < 0 && errno == EINTR)
			;
		expect(r == kids[i] && WIFSTOPPED(st) && WSTOPSIG(st) == sigs[i],
		       "child %d: waitpid gave %d status %#x, want stopped by %d", (int)kids[i],
		       (int)r, st, sigs[i]);
		kill(kids[i], SIGCONT);
		while ((r = waitpid(kids[i], &st, 0)) < 0 && errno == EINTR)
			;
		expect(r == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		       "child %d: status %#x after SIGCONT, want exit 0", (int)kids[i], st);
	}
	pass();
}
