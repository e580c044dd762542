/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * File descriptors in flight (SCM_RIGHTS) in a unix stream socketpair
 * (fds 5 and 6), queued at 5 at the checkpoint:
 * - message "rights" carries the read end of a pipe (the task closed its
 *   own, it keeps the write end, with "before" buffered in the pipe), an
 *   eventfd (count 7; the task keeps it too) and a regular file at offset
 *   5 (the task closed it);
 * - message "more" carries the eventfd again and one end of another
 *   socketpair (the task closed it, it keeps the other end), with "hello"
 *   queued in it;
 * - then "plain", with no fds.
 * After the restart recvmsg gets the fds and they work: the pipe reads
 * "before" and then what the task writes to its write end after the
 * restart; the eventfd is the task's (3 added through the task's own fd:
 * 10 is read through the one in flight); the file reads on from offset 5;
 * the socket reads "hello" and carries data from its peer.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

union cm {
	char buf[CMSG_SPACE(sizeof(int) * 8)];
	struct cmsghdr align;
};

/* One message: its data must be want; its fds go to fds (count returned). */
static int recv_fds(int s, const char *want, int *fds, int max)
{
	union cm u;
	char got[64] = "";
	struct iovec iov = {.iov_base = got, .iov_len = sizeof(got)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(s, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	expect(n == (ssize_t)strlen(want) && !memcmp(got, want, strlen(want)),
	       "message \"%s\": got %zd bytes \"%.*s\" (%m)", want, n, n > 0 ? (int)n : 0, got);
	expect(!(m.msg_flags & MSG_CTRUNC), "message \"%s\": control data cut off", want);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return 0;
	int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	if (k > max)
		k = max;
	memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)k);
	return k;
}

int main(void)
{
	int sv[2], p[2], other[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair: %m");
	if (sv[1] == 5)
		sv[1] = test_move_fd(sv[1], 7);
	test_move_fd(sv[0], 5);
	test_move_fd(sv[1], 6);
	if (pipe(p) || write(p[1], "before", 6) != 6)
		fail("pipe: %m");
	int wend = test_move_fd(p[1], 20);
	int efd = test_move_fd(eventfd(7, 0), 21);
	int file = open("data.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (file < 0 || write(file, "0123456789abcdef", 16) != 16 || lseek(file, 5, SEEK_SET) != 5)
		fail("data.txt: %m");
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, other) || write(other[1], "hello", 5) != 5)
		fail("socketpair: %m");
	int peer = test_move_fd(other[1], 22);

	test_send_fds(6, "rights", (int[]){p[0], efd, file}, 3);
	test_send_fds(6, "more", (int[]){efd, other[0]}, 2);
	test_send_fds(6, "plain", NULL, 0);
	close(p[0]);
	close(file);
	close(other[0]);

	test_ready();
	test_wait();

	int a[3] = {-1, -1, -1}, b[2] = {-1, -1}, none[1];
	expect(recv_fds(5, "rights", a, 3) == 3, "message \"rights\" lost its fds");
	expect(recv_fds(5, "more", b, 2) == 2, "message \"more\" lost its fds");
	expect(recv_fds(5, "plain", none, 1) == 0, "message \"plain\" has fds");
	char buf[64] = "";
	expect(recv(5, buf, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "more data queued");

	/* the pipe: what it held, then what the task writes now */
	expect(write(wend, "after", 5) == 5, "write to the pipe: %m");
	ssize_t n = a[0] >= 0 ? read(a[0], buf, sizeof(buf)) : -1;
	expect(n == 11 && !memcmp(buf, "beforeafter", 11), "pipe in flight read %zd bytes \"%.*s\"",
	       n, n > 0 ? (int)n : 0, buf);
	close(wend);
	expect(a[0] >= 0 && read(a[0], buf, 1) == 0, "the pipe in flight has another writer");

	/* the eventfd is the task's own */
	uint64_t v = 3;
	expect(write(efd, &v, 8) == 8, "eventfd write: %m");
	v = 0;
	expect(a[1] >= 0 && read(a[1], &v, 8) == 8 && v == 10,
	       "eventfd in flight reads %llu, want 10", (unsigned long long)v);
	struct stat s1, s2;
	expect(b[0] >= 0 && !fstat(a[1], &s1) && !fstat(b[0], &s2) && s1.st_ino == s2.st_ino,
	       "the two eventfds in flight differ");

	/* the file, at its offset */
	expect(a[2] >= 0 && lseek(a[2], 0, SEEK_CUR) == 5, "file in flight at offset %lld, want 5",
	       a[2] >= 0 ? (long long)lseek(a[2], 0, SEEK_CUR) : -1LL);
	n = a[2] >= 0 ? read(a[2], buf, sizeof(buf)) : -1;
	expect(n == 11 && !memcmp(buf, "56789abcdef", 11), "file in flight read %zd bytes", n);

	/* the socket, with its own queue and its peer */
	n = b[1] >= 0 ? recv(b[1], buf, sizeof(buf), MSG_DONTWAIT) : -1;
	expect(n == 5 && !memcmp(buf, "hello", 5), "socket in flight: its queue read %zd bytes", n);
	expect(write(peer, "again", 5) == 5 && b[1] >= 0 && recv(b[1], buf, sizeof(buf), 0) == 5 &&
		   !memcmp(buf, "again", 5),
	       "socket in flight is not connected to its peer");
	expect(write(6, "x", 1) == 1 && recv(5, buf, 1, 0) == 1, "the pair does not carry data");
	pass();
}
