/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A stream socketpair whose queue at fd 5 holds plain bytes ("abc", one
 * send) followed by a message carrying an fd ("xyz" with an eventfd, a
 * second send). No peek shows where "abc" ends, and a restart would glue
 * the two: a read() of 3 bytes would then drop the fd. The runner expects
 * the checkpoint to refuse fd 5, saying why; the original then reads
 * "abc" and receives the fd with "xyz", as sent.
 * "closed": the sender's end (fd 6) is closed before the checkpoint, so
 * its queued memory cannot be measured: refused all the same.
 */
#include "lib.h"

#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fail("socketpair: %m");
	test_move_fd(sv[0], 5);
	test_move_fd(sv[1], 6);
	int e = eventfd(3, EFD_CLOEXEC);
	if (e < 0)
		fail("eventfd: %m");
	if (write(6, "abc", 3) != 3)
		fail("write: %m");
	test_send_fds(6, "xyz", &e, 1);
	close(e);
	if (argc > 1 && !strcmp(argv[1], "closed"))
		close(6);

	test_ready();
	test_wait();

	char buf[8] = {0};
	expect(read(5, buf, 3) == 3 && !memcmp(buf, "abc", 3), "read %s", buf);
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	memset(buf, 0, sizeof(buf));
	expect(recvmsg(5, &m, 0) == 3 && !memcmp(buf, "xyz", 3), "recvmsg: %s", buf);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	expect(c && c->cmsg_type == SCM_RIGHTS, "the fd is lost");
	pass();
}
