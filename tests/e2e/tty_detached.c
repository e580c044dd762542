/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A pty slave at fd 5 whose master is held by a process outside the tree
 * (a grandchild orphaned away), as a tmux or screen server holds its
 * client's terminal. The runner checkpoints it with --detach-clients
 * (refuse_tty_detached: without it, refused naming the option): after
 * restart the slave is hung up, as if the client had gone: a write fails
 * with EIO, a read returns 0, poll says POLLHUP. Natively the outsider
 * closes the master when the test writes a line, which does the same.
 */
#include "lib.h"

#include <asm/termbits.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
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
	if (s < 0)
		fail("open %s: %m", path);
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		if (fork() != 0)
			_exit(0);
		/* the outsider: goes (closing the master) at the test's line or its end */
		close(s);
		char buf[8];
		struct pollfd pf = {.fd = m, .events = POLLIN};
		while (poll(&pf, 1, 60000) == 1 && !(pf.revents & POLLHUP))
			if (read(m, buf, sizeof(buf)) != 0)
				break;
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(m);
	test_move_fd(s, 5);

	test_ready();
	test_wait();

	(void)!write(5, "w\n", 2);
	char buf[8];
	struct pollfd pf = {.fd = 5, .events = POLLIN};
	int pr = 0;
	for (int i = 0; i < 100 && !(pf.revents & POLLHUP); i++)
		pr = poll(&pf, 1, 100);
	expect(pr == 1 && (pf.revents & POLLHUP), "not hung up (poll %d %#x)", pr, pf.revents);
	ssize_t got = read(5, buf, sizeof(buf));
	expect(got == 0, "read %zd, not 0 (%m)", got);
	errno = 0;
	got = write(5, "x", 1);
	expect(got < 0 && errno == EIO, "write %zd (%m), not EIO", got);
	pass();
}
