/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Names of unix sockets in the less common shapes:
 * - a stream listener bound to "sub/gone.sock" (a relative name with a
 *   directory), its file then unlinked, with a pending connection holding
 *   data: after the restart the file is still absent, the name is the same
 *   and accept() returns the connection;
 * - connections accepted from listeners since closed, one abstract, one a
 *   path whose file (mode 0700) stays: the accepted side keeps the name;
 * - a dgram socket connect()ed to a socket since closed: send() fails with
 *   ECONNREFUSED as it would have;
 * - two dgram sockets with abstract names connect()ed to each other, one
 *   holding a datagram from a third socket sent before the connect;
 * - SO_PEEK_OFF at 3 on a stream socket: the next peek starts there.
 */
#include "lib.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static socklen_t addr_of(struct sockaddr_un *a, const char *name, bool abstract)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	size_t len = strlen(name);
	memcpy(a->sun_path + abstract, name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + len + !abstract);
}

static int sock(int type, const struct sockaddr_un *a, socklen_t len)
{
	int s = socket(AF_UNIX, type, 0);
	if (s < 0 || (a && bind(s, (const struct sockaddr *)a, len) < 0))
		fail("socket/bind: %m");
	return s;
}

static bool has_name(int fd, bool peer, const struct sockaddr_un *a, socklen_t len)
{
	struct sockaddr_un b;
	socklen_t bl = sizeof(b);
	int r = peer ? getpeername(fd, (struct sockaddr *)&b, &bl)
		     : getsockname(fd, (struct sockaddr *)&b, &bl);
	return r == 0 && bl == len && !memcmp(&b, a, len);
}

/* a connection to a listener bound to a, which is then closed: returns
 * the accepted end, *ret_c the client */
static int accepted_orphan(const struct sockaddr_un *a, socklen_t len, int *ret_c)
{
	int l = sock(SOCK_STREAM, a, len);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	if (listen(l, 1) || connect(c, (const struct sockaddr *)a, len))
		fail("listen/connect: %m");
	int s = accept(l, NULL, NULL);
	if (s < 0 || write(c, "orphan", 6) != 6)
		fail("accept: %m");
	close(l);
	*ret_c = c;
	return s;
}

static void expect_data(int fd, const char *want, const char *what)
{
	char got[64];
	ssize_t n = recv(fd, got, sizeof(got), MSG_DONTWAIT);
	expect(n == (ssize_t)strlen(want) && !memcmp(got, want, (size_t)n),
	       "%s: got %zd bytes (%m)", what, n);
}

int main(void)
{
	struct sockaddr_un ga, oa, pa, xa, ya, ta;
	char on[64], xn[64], yn[64];
	int pid = (int)getpid();
	snprintf(on, sizeof(on), "ckpt-e2e-orphan-%d", pid);
	snprintf(xn, sizeof(xn), "ckpt-e2e-x-%d", pid);
	snprintf(yn, sizeof(yn), "ckpt-e2e-y-%d", pid);
	socklen_t gl = addr_of(&ga, "sub/gone.sock", false), ol = addr_of(&oa, on, true),
		  pl = addr_of(&pa, "orphan.sock", false), xl = addr_of(&xa, xn, true),
		  yl = addr_of(&ya, yn, true), tl = addr_of(&ta, "tmp.sock", false);
	if (mkdir("sub", 0755))
		fail("mkdir: %m");

	int g = sock(SOCK_STREAM, &ga, gl), gc = socket(AF_UNIX, SOCK_STREAM, 0);
	if (listen(g, 2) || connect(gc, (struct sockaddr *)&ga, gl) ||
	    write(gc, "to gone", 7) != 7 || unlink("sub/gone.sock"))
		fail("gone listener: %m");

	int oc, os = accepted_orphan(&oa, ol, &oc);
	umask(077);
	int pc, ps = accepted_orphan(&pa, pl, &pc);
	umask(022);

	int t = sock(SOCK_DGRAM, &ta, tl), d = sock(SOCK_DGRAM, NULL, 0);
	if (connect(d, (struct sockaddr *)&ta, tl))
		fail("connect: %m");
	close(t);
	unlink("tmp.sock");

	int x = sock(SOCK_DGRAM, &xa, xl), y = sock(SOCK_DGRAM, &ya, yl);
	int third = sock(SOCK_DGRAM, NULL, 0);
	if (sendto(third, "early", 5, 0, (struct sockaddr *)&xa, xl) != 5 ||
	    connect(x, (struct sockaddr *)&ya, yl) || connect(y, (struct sockaddr *)&xa, xl) ||
	    send(y, "from y", 6, 0) != 6)
		fail("dgram pair: %m");

	int sv[2], three = 3;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || write(sv[0], "abcdef", 6) != 6 ||
	    setsockopt(sv[1], SOL_SOCKET, SO_PEEK_OFF, &three, sizeof(three)))
		fail("peek pair: %m");

	test_ready();
	test_wait();

	struct stat st;
	expect(stat("sub/gone.sock", &st) < 0 && errno == ENOENT, "sub/gone.sock came back");
	expect(has_name(g, false, &ga, gl), "the unlinked listener's name changed");
	struct pollfd p = {.fd = g, .events = POLLIN};
	int ac = poll(&p, 1, 0) == 1 ? accept(g, NULL, NULL) : -1;
	expect(ac >= 0, "no pending connection on the unlinked listener");
	if (ac >= 0)
		expect_data(ac, "to gone", "pending connection of the unlinked listener");

	expect(has_name(os, false, &oa, ol) && has_name(oc, true, &oa, ol),
	       "abstract orphan connection lost its name");
	expect_data(os, "orphan", "abstract orphan connection");
	expect(has_name(ps, false, &pa, pl) && has_name(pc, true, &pa, pl),
	       "path orphan connection lost its name");
	expect_data(ps, "orphan", "path orphan connection");
	expect(!stat("orphan.sock", &st) && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0700,
	       "orphan.sock is not a socket of mode 0700 (%o)", st.st_mode);
	expect(write(os, "back", 4) == 4, "write: %m");
	expect_data(oc, "back", "abstract orphan connection, back");

	expect(send(d, "x", 1, 0) < 0 && errno == ECONNREFUSED,
	       "send to a closed dgram peer did not fail with ECONNREFUSED (%m)");

	expect_data(x, "early", "datagram queued before the connect");
	expect_data(x, "from y", "datagram from the connected peer");
	expect(has_name(x, true, &ya, yl) && has_name(y, true, &xa, xl),
	       "the dgram pair is not connected both ways");
	expect(sendto(third, "late", 4, 0, (struct sockaddr *)&xa, xl) < 0 && errno == EPERM,
	       "a connected dgram socket accepted a stranger's datagram (%m)");
	expect(send(x, "to y", 4, 0) == 4, "send: %m");
	expect_data(y, "to y", "dgram pair, x to y");

	char got[8] = "";
	expect(recv(sv[1], got, sizeof(got), MSG_PEEK | MSG_DONTWAIT) == 3 &&
		   !memcmp(got, "def", 3),
	       "SO_PEEK_OFF was not kept (peeked %.3s)", got);
	unlink("orphan.sock");
	rmdir("sub");
	pass();
}
