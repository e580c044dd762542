/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a pty slave at fd 5 whose master is held by a process outside
 * the tree (a grandchild orphaned to init). The runner expects the
 * checkpoint to fail naming the pid, fd 5 and the terminal; afterwards the
 * terminal still works: the outsider answers a line with a line.
 */
#include "lib.h"

#include <asm/termbits.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int zero = 0, n = -1;
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY);
	if (m < 0 || ioctl(m, TIOCSPTLCK, &zero) < 0 || ioctl(m, TIOCGPTN, &n) < 0)
		fail("ptmx: %m");
	char path[32];
	snprintf(path, sizeof(path), "/dev/pts/%d", n);
	int s = open(path, O_RDWR | O_NOCTTY);
	struct termios2 t;
	if (s < 0 || ioctl(s, TCGETS2, &t) < 0)
		fail("open %s: %m", path);
	t.c_lflag &= ~(ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE);
	ioctl(s, TCSETS2, &t);
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		if (fork() != 0)
			_exit(0);
		/* the outsider: answers the test's line, or goes when it closes */
		close(s);
		char buf[8];
		struct pollfd pf = {.fd = m, .events = POLLIN};
		if (poll(&pf, 1, 60000) != 1 || read(m, buf, sizeof(buf)) <= 0 ||
		    write(m, "o\n", 2) != 2)
			_exit(1);
		/* a closed master would hang the slave up, dropping its input */
		while (poll(&pf, 1, 60000) == 1 && !(pf.revents & POLLHUP))
			if (read(m, buf, sizeof(buf)) <= 0)
				break;
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(m);
	test_move_fd(s, 5);

	test_ready();
	test_wait();

	char buf[8] = "";
	struct pollfd pf = {.fd = 5, .events = POLLIN};
	if (write(5, "w\n", 2) != 2)
		fail("write: %m");
	int pr = poll(&pf, 1, 5000);
	ssize_t got = pr == 1 ? read(5, buf, sizeof(buf)) : -1;
	expect(got == 2 && !memcmp(buf, "o\n", 2),
	       "the outsider's line did not arrive (poll %d %#x, read %zd)", pr, pf.revents, got);
	pass();
}
