/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a unix socketpair at fds 5 and 6 with a message queued at 5
 * that carries a file descriptor (SCM_RIGHTS: the read end of a pipe the
 * process has closed). The runner expects the checkpoint to fail naming the
 * pid, fd 5 and the fds in flight; afterwards the message is still there,
 * with its fd, which still reads the pipe's data.
 */
#include "lib.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	int sv[2], p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair: %m");
	if (sv[1] == 5)
		sv[1] = test_move_fd(sv[1], 7);
	test_move_fd(sv[0], 5);
	test_move_fd(sv[1], 6);
	if (pipe(p))
		fail("pipe: %m");
	if (write(p[1], "inside", 6) != 6)
		fail("write: %m");
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = "F", .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[0], sizeof(int));
	if (sendmsg(6, &m, 0) != 1)
		fail("sendmsg: %m");
	close(p[0]);
	close(p[1]);

	test_ready();
	test_wait();

	char byte = 0, buf[8] = "";
	iov.iov_base = &byte;
	m.msg_controllen = sizeof(u.buf);
	expect(recvmsg(5, &m, 0) == 1 && byte == 'F', "the message is lost");
	c = CMSG_FIRSTHDR(&m);
	int fd = -1;
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	expect(fd >= 0 && read(fd, buf, sizeof(buf)) == 6 && !memcmp(buf, "inside", 6),
	       "the fd in flight is lost or does not read the pipe");
	pass();
}
