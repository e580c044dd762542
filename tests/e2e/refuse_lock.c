/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: "f" is open at fd 5 while a process outside the tree (a
 * grandchild orphaned to init) holds a POSIX write lock on its bytes 0-9.
 * The runner expects the checkpoint to fail naming the pid, fd 5, the
 * lock and the outsider; afterwards the lock is still the outsider's.
 */
#include "lib.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int ok[2];
	if (pipe(ok))
		fail("pipe: %m");
	pid_t test = getpid(), child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		if (fork() != 0)
			_exit(0);
		/* the outsider: holds the lock until the test is gone */
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10};
		int fd = open("f", O_RDWR | O_CREAT, 0600);
		if (fd < 0 || fcntl(fd, F_SETLK, &fl) < 0 ||
		    write(ok[1], &(pid_t){getpid()}, sizeof(pid_t)) != sizeof(pid_t))
			_exit(1);
		while (kill(test, 0) == 0) /* until the test is gone */
			usleep(20000);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(ok[1]);
	pid_t outsider;
	if (read(ok[0], &outsider, sizeof(outsider)) != sizeof(outsider))
		fail("the outsider did not take its lock");
	close(ok[0]);
	int fd = open("f", O_RDWR);
	if (fd < 0)
		fail("open: %m");
	test_move_fd(fd, 5);

	test_ready();
	test_wait();

	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1};
	expect(fcntl(5, F_GETLK, &fl) == 0 && fl.l_type == F_WRLCK && fl.l_pid != getpid(),
	       "the outsider's lock is gone");
	kill(outsider, SIGKILL);
	pass();
}
