/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Listening unix sockets with connections not accepted yet:
 * - a stream listener bound to the relative path "listen.sock"
 *   (O_NONBLOCK), with one connection accepted before the checkpoint
 *   (data queued both ways) and two pending ones whose clients sent data;
 * - a seqpacket listener with an abstract name, two pending connections:
 *   one whose client sent two messages, one whose client sent one and
 *   closed.
 * After the restart accept() returns the pending connections in order with
 * their data (boundaries kept, EOF after the closed client's), the names
 * are what they were, the clients are still connected to what accept()
 * returns, and both listeners take new connections.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define BIG 5000
static unsigned char big[BIG];

static socklen_t addr_of(struct sockaddr_un *a, const char *name, bool abstract)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	size_t len = strlen(name);
	memcpy(a->sun_path + abstract, name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + len + !abstract);
}

static int client(int type, const struct sockaddr_un *a, socklen_t len)
{
	int s = socket(AF_UNIX, type, 0);
	if (s < 0 || connect(s, (const struct sockaddr *)a, len) < 0)
		fail("connect: %m");
	return s;
}

static bool same_addr(int fd, bool peer, const struct sockaddr_un *a, socklen_t len)
{
	struct sockaddr_un b;
	socklen_t bl = sizeof(b);
	int r = peer ? getpeername(fd, (struct sockaddr *)&b, &bl)
		     : getsockname(fd, (struct sockaddr *)&b, &bl);
	return r == 0 && bl == len && !memcmp(&b, a, len);
}

static int take(int l, const char *what)
{
	struct pollfd p = {.fd = l, .events = POLLIN};
	if (poll(&p, 1, 0) != 1)
		fail("%s: no pending connection", what);
	int c = accept(l, NULL, NULL);
	if (c < 0)
		fail("%s: accept: %m", what);
	return c;
}

static void expect_msg(int fd, const void *want, size_t len, const char *what)
{
	static unsigned char got[BIG + 1];
	size_t n = 0;
	while (n < len) {
		ssize_t r = recv(fd, got + n, sizeof(got) - n, MSG_DONTWAIT);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	expect(n == len && !memcmp(got, want, len), "%s: got %zu bytes, want %zu", what, n, len);
}

int main(void)
{
	struct sockaddr_un pa, aa;
	char aname[64];
	test_fill_random(big, BIG, 21);
	snprintf(aname, sizeof(aname), "ckpt-e2e-listen-%d", (int)getpid());
	socklen_t pl = addr_of(&pa, "listen.sock", false), al = addr_of(&aa, aname, true);

	int l1 = socket(AF_UNIX, SOCK_STREAM, 0);
	if (l1 < 0 || bind(l1, (struct sockaddr *)&pa, pl) || listen(l1, 8))
		fail("listen.sock: %m");
	int a0 = client(SOCK_STREAM, &pa, pl), s0 = accept(l1, NULL, NULL);
	if (s0 < 0 || write(a0, "to server", 9) != 9 || write(s0, "to client", 9) != 9)
		fail("accepted connection: %m");
	int p1 = client(SOCK_STREAM, &pa, pl), p2 = client(SOCK_STREAM, &pa, pl);
	if (write(p1, "pending one", 11) != 11 || write(p2, big, BIG) != BIG)
		fail("write: %m");
	fcntl(l1, F_SETFL, O_NONBLOCK);

	int l2 = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (l2 < 0 || bind(l2, (struct sockaddr *)&aa, al) || listen(l2, 4))
		fail("abstract listener: %m");
	int q1 = client(SOCK_SEQPACKET, &aa, al), q2 = client(SOCK_SEQPACKET, &aa, al);
	if (send(q1, "m1", 2, 0) != 2 || send(q1, "msg 2", 5, 0) != 5 || send(q2, "x", 1, 0) != 1)
		fail("send: %m");
	close(q2);
	struct stat st0;
	if (stat("listen.sock", &st0))
		fail("stat: %m");

	test_ready();
	test_wait();

	struct stat st;
	expect(!stat("listen.sock", &st) && S_ISSOCK(st.st_mode) &&
		   (st.st_mode & 07777) == (st0.st_mode & 07777),
	       "listen.sock is not the socket file it was");
	expect(same_addr(l1, false, &pa, pl), "path listener's name changed");
	expect(same_addr(l2, false, &aa, al), "abstract listener's name changed");
	expect(fcntl(l1, F_GETFL) & O_NONBLOCK, "path listener lost O_NONBLOCK");
	expect(!(fcntl(l2, F_GETFL) & O_NONBLOCK), "abstract listener became non-blocking");

	/* the connection accepted before */
	expect_msg(s0, "to server", 9, "accepted connection, to the server");
	expect_msg(a0, "to client", 9, "accepted connection, to the client");
	expect(same_addr(s0, false, &pa, pl) && same_addr(a0, true, &pa, pl),
	       "the accepted connection lost the listener's name");

	int c1 = take(l1, "path listener, first"), c2 = take(l1, "path listener, second");
	expect_msg(c1, "pending one", 11, "first pending connection");
	expect_msg(c2, big, BIG, "second pending connection");
	expect(accept(l1, NULL, NULL) < 0 && errno == EAGAIN, "path listener: a third connection");
	expect(same_addr(p1, true, &pa, pl), "pending client's peer name changed");
	expect(write(c1, "hi", 2) == 2, "write: %m");
	expect_msg(p1, "hi", 2, "accepted pending connection, back to its client");

	int d1 = take(l2, "abstract listener, first"), d2 = take(l2, "abstract listener, second");
	expect_msg(d1, "m1", 2, "seqpacket pending, message 1");
	expect_msg(d1, "msg 2", 5, "seqpacket pending, message 2");
	expect_msg(d2, "x", 1, "pending connection of a closed client");
	expect(recv(d2, (char[4]){0}, 4, MSG_DONTWAIT) == 0, "no EOF after the closed client");
	struct pollfd p = {.fd = l2, .events = POLLIN};
	expect(poll(&p, 1, 0) == 0, "abstract listener: a third connection");

	int n1 = client(SOCK_STREAM, &pa, pl), n2 = client(SOCK_SEQPACKET, &aa, al);
	expect(take(l1, "new connection by path") >= 0 && take(l2, "new by name") >= 0,
	       "listeners do not accept");
	close(n1);
	close(n2);
	unlink("listen.sock");
	pass();
}
