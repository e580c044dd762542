/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Nested epoll: an outer instance (the lower fd, so it is saved first)
 * watches an inner one and a pipe (edge-triggered); the inner one watches
 * a pipe that holds a byte. After restart the inner instance is ready and
 * so the outer one reports it; the inner one reports its pipe; once that
 * pipe is read nothing is ready; a write into the other pipe reaches the
 * outer instance, which still watches the inner one by its fd number.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

enum { OUTER = 20, INNER = 30 };

static void add(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = {.events = events, .data.u64 = data};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fail("EPOLL_CTL_ADD %d to %d: %m", fd, ep);
}

int main(void)
{
	int p[2], q[2];
	struct epoll_event ev[4];

	if (pipe(p) || pipe(q))
		fail("pipe: %m");
	test_move_fd(epoll_create1(0), OUTER);
	test_move_fd(epoll_create1(0), INNER);
	add(INNER, p[0], EPOLLIN, 11);
	add(OUTER, INNER, EPOLLIN, 22);
	add(OUTER, q[0], EPOLLIN | EPOLLET, 33);
	if (write(p[1], "x", 1) != 1)
		fail("write: %m");

	test_ready();
	test_wait();

	int n = epoll_wait(OUTER, ev, 4, 0);
	expect(n == 1 && ev[0].data.u64 == 22 && ev[0].events == EPOLLIN,
	       "outer: %d events (data %llu), want the inner instance (22)", n,
	       n > 0 ? (unsigned long long)ev[0].data.u64 : 0ull);
	n = epoll_wait(INNER, ev, 4, 0);
	expect(n == 1 && ev[0].data.u64 == 11, "inner: %d events, want its pipe (11)", n);
	char c;
	expect(read(p[0], &c, 1) == 1 && c == 'x', "inner pipe lost its byte");
	expect(epoll_wait(OUTER, ev, 4, 0) == 0, "outer still ready with nothing to read");
	if (write(q[1], "y", 1) != 1)
		fail("write: %m");
	n = epoll_wait(OUTER, ev, 4, 100);
	expect(n == 1 && ev[0].data.u64 == 33, "outer: %d events after a write, want 33", n);
	if (write(p[1], "z", 1) != 1)
		fail("write: %m");
	n = epoll_wait(OUTER, ev, 4, 100);
	expect(n == 1 && ev[0].data.u64 == 22, "outer: %d events after a write to the inner pipe",
	       n);
	expect(epoll_ctl(OUTER, EPOLL_CTL_DEL, INNER, NULL) == 0,
	       "EPOLL_CTL_DEL of the inner fd: %m");
	expect(epoll_wait(OUTER, ev, 4, 0) == 0, "outer reports a deleted watch");
	pass();
}
