/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an epoll instance at fd 5 watching a pipe's read end as fd 10,
 * which was then sent into a unix socket's queue (SCM_RIGHTS) and closed:
 * the watch lives on (the file is open in flight), keyed by a fd number no
 * fd of the image holds the file at. The runner expects the checkpoint to
 * fail naming the pid, fd 5, epoll and fd 10; afterwards the watch still
 * reports the pipe.
 */
#include "lib.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	int p[2], sv[2];
	int ep = test_move_fd(epoll_create1(0), 5);
	if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("pipe/socketpair: %m");
	test_move_fd(p[0], 10);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 42};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, 10, &ev) < 0)
		fail("EPOLL_CTL_ADD: %m");
	int fd = 10;
	test_send_fds(sv[0], "f", &fd, 1);
	close(10);

	test_ready();
	test_wait();

	if (write(p[1], "x", 1) != 1)
		fail("write: %m");
	int n = epoll_wait(ep, &ev, 1, 0);
	expect(n == 1 && ev.data.u64 == 42, "the watch no longer reports (%d)", n);
	pass();
}
