/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a unix socketpair at fds 5 and 6 with a message queued at 5
 * that carries a file descriptor (SCM_RIGHTS) which is itself a unix
 * socket with a message in its queue carrying an fd (the read end of a
 * pipe): fds in flight inside fds in flight. The runner expects the
 * checkpoint to fail naming the pid, fd 5 and the socket in flight;
 * afterwards the task has the fds it had (none that ckpt lent it to look
 * at the fds in flight is left), the message is still there with its fd,
 * and the socket in it still holds its own message, whose fd still reads
 * the pipe's data.
 */
#include "lib.h"

#include <dirent.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void send_fd(int s, int fd)
{
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
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(s, &m, 0) != 1)
		fail("sendmsg: %m");
}

static int recv_fd(int s)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char byte = 0;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	int fd = -1;
	if (recvmsg(s, &m, MSG_DONTWAIT) != 1 || byte != 'F')
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static int nfds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1; /* the directory's own */
}

int main(void)
{
	int sv[2], in[2], p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair: %m");
	if (sv[1] == 5)
		sv[1] = test_move_fd(sv[1], 7);
	test_move_fd(sv[0], 5);
	test_move_fd(sv[1], 6);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, in) || pipe(p))
		fail("pipe: %m");
	if (write(p[1], "inside", 6) != 6)
		fail("write: %m");
	send_fd(in[1], p[0]); /* queued in in[0] */
	send_fd(6, in[0]);    /* in[0] queued at 5 */
	close(p[0]);
	close(p[1]);
	close(in[0]);
	int before = nfds();

	test_ready();
	test_wait();

	expect(nfds() == before, "%d fds after the refused checkpoint, %d before", nfds(), before);
	int s = recv_fd(5);
	expect(s >= 0, "the message at fd 5 or its fd is lost");
	int fd = s >= 0 ? recv_fd(s) : -1;
	char buf[8] = "";
	expect(fd >= 0 && read(fd, buf, sizeof(buf)) == 6 && !memcmp(buf, "inside", 6),
	       "the fd in flight in the socket in flight is lost or does not read the pipe");
	pass();
}
