/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an epoll fd in flight, queued with SCM_RIGHTS on a unix
 * socketpair (fds 5 and 6) and closed by the task. The checkpoint must
 * name the pid, fd 5 and the epoll instance, and why; afterwards the
 * message is still there and its epoll fd still reports its watched pipe
 * ready.
 */
#include "lib.h"

#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

union cm {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int))];
};

int main(void)
{
	int sv[2], p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || dup2(sv[0], 5) != 5 ||
	    dup2(sv[1], 6) != 6)
		fail("setup: %m");
	close(sv[0]);
	close(sv[1]);
	if (pipe(p))
		fail("pipe: %m");
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 42 };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) || write(p[1], "r", 1) != 1)
		fail("epoll: %m");
	union cm u;
	struct iovec iov = { "e", 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &ep, sizeof(int));
	if (sendmsg(6, &mh, 0) != 1)
		fail("sendmsg: %m");
	close(ep);
	test_ready();
	test_wait();

	char b;
	struct iovec riov = { &b, 1 };
	struct msghdr rm = { .msg_iov = &riov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	int got = -1;
	if (recvmsg(5, &rm, 0) == 1 && (c = CMSG_FIRSTHDR(&rm)) && c->cmsg_type == SCM_RIGHTS)
		memcpy(&got, CMSG_DATA(c), sizeof(int));
	expect(got >= 0, "the epoll fd in flight is gone");
	struct epoll_event out = { 0 };
	expect(got < 0 || (epoll_wait(got, &out, 1, 0) == 1 && out.data.u64 == 42),
	       "the epoll fd in flight does not report its watch");
	pass();
}
