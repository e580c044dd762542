/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: the read end of a pipe at fd 5 whose write end is held by a
 * process outside the tree (a grandchild orphaned to init). The runner
 * expects the checkpoint to fail naming the pid, fd 5 and the pipe;
 * afterwards the pipe still works: the outsider's byte arrives.
 */
#include "lib.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int p[2], go[2];
	if (pipe(p) || pipe(go))
		fail("pipe: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		if (fork() != 0)
			_exit(0);
		/* the outsider: writes one byte when the test closes go */
		close(p[0]);
		close(go[1]);
		char c;
		while (read(go[0], &c, 1) > 0)
			;
		_exit(write(p[1], "o", 1) == 1 ? 0 : 1);
	}
	waitpid(child, NULL, 0);
	close(p[1]);
	close(go[0]);
	test_move_fd(p[0], 5);
	test_move_fd(go[1], 6);

	test_ready();
	test_wait();

	close(6);
	char c = 0;
	expect(read(5, &c, 1) == 1 && c == 'o', "the outsider's byte did not arrive");
	pass();
}
