/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: fd 5 holds a uts namespace that no process is in any more
 * (a child made it with unshare and exited). The runner expects the
 * checkpoint to fail naming the pid, fd 5 and the namespace; the process
 * lives on and setns() through fd 5 still works.
 */
#include "lib.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int p[2];
	if (pipe(p))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		if (unshare(CLONE_NEWUTS) < 0)
			_exit(1);
		if (write(p[1], "u", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char ch, path[64];
	if (read(p[0], &ch, 1) != 1)
		fail("child did not unshare");
	snprintf(path, sizeof(path), "/proc/%d/ns/uts", c);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("open %s: %m", path);
	test_move_fd(fd, 5);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	close(p[0]);
	close(p[1]);

	test_ready();
	test_wait();

	expect(setns(5, CLONE_NEWUTS) == 0, "setns(fd 5): %m");
	pass();
}
