/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: the child waits in fcntl(F_SETLKW) at its fd 5 for a write
 * lock the parent holds. The runner expects the checkpoint to fail naming
 * the child's pid, fd 5 and F_SETLKW; afterwards the child is still
 * waiting and gets the lock once the parent lets it go.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Is pid's request listed as blocked ("->") in /proc/locks? */
static bool waiting(pid_t pid)
{
	static char buf[1 << 16];
	char want[32];
	snprintf(want, sizeof(want), " %d ", pid);
	if (test_read_file("/proc/locks", buf, sizeof(buf)) < 0)
		return false;
	for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char *end = strchr(l, '\n'), *arrow = strstr(l, "->"), *p = strstr(l, want);
		if (arrow && p && (!end || p < end) && arrow < p)
			return true;
	}
	return false;
}

int main(void)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10};
	int fd = open("f", O_RDWR | O_CREAT, 0600);
	if (fd < 0 || fcntl(fd, F_SETLK, &fl) < 0)
		fail("lock: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		close(fd);
		int cfd = open("f", O_RDWR);
		if (cfd < 0)
			_exit(1);
		test_move_fd(cfd, 5);
		_exit(fcntl(5, F_SETLKW, &fl) == 0 ? 0 : 2);
	}
	for (int i = 0; i < 2000 && !waiting(child); i++)
		usleep(5000);
	if (!waiting(child))
		fail("the child does not wait for the lock");

	test_ready();
	test_wait();

	expect(waiting(child), "the child no longer waits for the lock");
	fl.l_type = F_UNLCK;
	if (fcntl(fd, F_SETLK, &fl) < 0)
		fail("unlock: %m");
	int st = -1;
	expect(waitpid(child, &st, 0) == child && st == 0, "child: status %#x", st);
	pass();
}
