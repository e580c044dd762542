/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an epoll instance at fd 5 watching a pipe as fd 6, which was
 * then dup'ed to fd 7 and closed: the watch lives on (the file is open),
 * keyed by a fd number the file has left, so it cannot be made again. The
 * runner expects the checkpoint to fail naming the pid, fd 5 and epoll;
 * afterwards the watch still reports the pipe.
 */
#include "lib.h"

#include <sys/epoll.h>
#include <unistd.h>

int main(void)
{
	int p[2];
	if (pipe(p))
		fail("pipe: %m");
	int ep = test_move_fd(epoll_create1(0), 5);
	test_move_fd(p[0], 6);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 42};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, 6, &ev) < 0)
		fail("EPOLL_CTL_ADD: %m");
	test_move_fd(6, 7);

	test_ready();
	test_wait();

	if (write(p[1], "x", 1) != 1)
		fail("write: %m");
	int n = epoll_wait(ep, &ev, 1, 0);
	expect(n == 1 && ev.data.u64 == 42, "the watch no longer reports (%d)", n);
	pass();
}
