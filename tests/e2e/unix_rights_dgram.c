/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * File descriptors in flight in datagram and seqpacket queues, message
 * boundaries kept:
 * - a dgram socketpair: "zero" (no fds), "one" (a memfd holding
 *   "memfd-data", closed by the task), "" (empty, an eventfd of count 4),
 *   "three" (no fds);
 * - a seqpacket socketpair: "alpha" (a pipe's read end; the task keeps
 *   the write end), "beta" (no fds), "gamma" (the same read end again and
 *   the eventfd);
 * - a dgram socket bound to ./dg.sock: "named", from an unnamed sender
 *   since closed, carrying a regular file at offset 2;
 * - a seqpacket listener at ./lst.sock with a connection not accepted yet
 *   whose client sent "pending" with the eventfd.
 * After the restart every message comes back whole, in order, with its
 * fds, and they work.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

union cm {
	char buf[CMSG_SPACE(sizeof(int) * 8)];
	struct cmsghdr align;
};

/* One message: its data must be want, with nfds fds (put in fds). */
static void recv_fds(int s, const char *want, int *fds, int nfds)
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
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int k =
	    c && c->cmsg_type == SCM_RIGHTS ? (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) : 0;
	expect(k == nfds, "message \"%s\": %d fds, want %d", want, k, nfds);
	for (int i = 0; i < nfds; i++)
		fds[i] = i < k ? ((int *)CMSG_DATA(c))[i] : -1;
}

static socklen_t addr(struct sockaddr_un *a, const char *path)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	strcpy(a->sun_path, path);
	return sizeof(*a);
}

static uint64_t count(int efd)
{
	uint64_t v = 0;
	return efd >= 0 && read(efd, &v, 8) == 8 ? v : 0;
}

int main(void)
{
	int d[2], q[2], p[2];
	struct sockaddr_un a;
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, d) || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, q) ||
	    pipe(p))
		fail("socketpair: %m");
	int mfd = memfd_create("in-flight", 0);
	int efd = eventfd(4, EFD_NONBLOCK);
	int file = open("data.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (mfd < 0 || efd < 0 || file < 0 || write(mfd, "memfd-data", 10) != 10 ||
	    write(file, "0123456789", 10) != 10 || lseek(file, 2, SEEK_SET) != 2)
		fail("setup: %m");
	test_send_fds(d[1], "zero", NULL, 0);
	test_send_fds(d[1], "one", &mfd, 1);
	test_send_fds(d[1], "", &efd, 1);
	test_send_fds(d[1], "three", NULL, 0);
	test_send_fds(q[1], "alpha", &p[0], 1);
	test_send_fds(q[1], "beta", NULL, 0);
	test_send_fds(q[1], "gamma", (int[]){p[0], efd}, 2);

	int bound = socket(AF_UNIX, SOCK_DGRAM, 0), tx = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (bound < 0 || tx < 0 || bind(bound, (struct sockaddr *)&a, addr(&a, "dg.sock")) ||
	    connect(tx, (struct sockaddr *)&a, sizeof(a)))
		fail("dg.sock: %m");
	test_send_fds(tx, "named", &file, 1);
	close(tx);

	int lst = socket(AF_UNIX, SOCK_SEQPACKET, 0), cli = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (lst < 0 || cli < 0 || bind(lst, (struct sockaddr *)&a, addr(&a, "lst.sock")) ||
	    listen(lst, 4) || connect(cli, (struct sockaddr *)&a, sizeof(a)))
		fail("lst.sock: %m");
	test_send_fds(cli, "pending", &efd, 1);
	close(mfd);
	close(file);
	close(p[0]);
	close(efd);

	test_ready();
	test_wait();

	int f[2];
	char buf[64] = "";
	recv_fds(d[0], "zero", f, 0);
	recv_fds(d[0], "one", f, 1);
	expect(f[0] >= 0 && pread(f[0], buf, sizeof(buf), 0) == 10 &&
		   !memcmp(buf, "memfd-data", 10),
	       "memfd in flight lost its data");
	recv_fds(d[0], "", f, 1);
	int e1 = f[0];
	recv_fds(d[0], "three", f, 0);
	expect(recv(d[0], buf, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "dgram: more messages");

	recv_fds(q[0], "alpha", f, 1);
	int r1 = f[0];
	recv_fds(q[0], "beta", f, 0);
	recv_fds(q[0], "gamma", f, 2);
	int r2 = f[0], e2 = f[1];
	expect(recv(q[0], buf, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "seqpacket: more messages");
	expect(write(p[1], "piped", 5) == 5 && r1 >= 0 && read(r1, buf, sizeof(buf)) == 5 &&
		   !memcmp(buf, "piped", 5),
	       "pipe in flight does not read what the task writes");
	struct stat s1, s2;
	expect(r2 >= 0 && !fstat(r1, &s1) && !fstat(r2, &s2) && s1.st_ino == s2.st_ino,
	       "the two pipe ends in flight are not of one pipe");

	recv_fds(bound, "named", f, 1);
	expect(f[0] >= 0 && lseek(f[0], 0, SEEK_CUR) == 2 && read(f[0], buf, 3) == 3 &&
		   !memcmp(buf, "234", 3),
	       "file in flight is not at its offset");

	int acc = accept(lst, NULL, NULL);
	expect(acc >= 0, "no pending connection: %m");
	recv_fds(acc, "pending", f, 1);
	int e3 = f[0];
	/* one eventfd (count 4) in all three messages */
	expect(count(e2) == 4, "eventfd in flight lost its count");
	expect(count(e1) == 0 && count(e3) == 0, "the eventfds in flight are not one");
	expect(send(d[0], "back", 4, 0) == 4 && recv(d[1], buf, sizeof(buf), 0) == 4,
	       "the dgram pair does not carry messages");
	unlink("dg.sock");
	unlink("lst.sock");
	pass();
}
