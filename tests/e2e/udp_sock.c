/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * UDP sockets, their queues empty at the checkpoint:
 * - IPv4: a server bound to 127.0.0.1 (SO_BROADCAST, IP_TOS, a receive
 *   buffer of its own), a client connected to it (O_NONBLOCK), and a
 *   socket never bound;
 * - IPv6: a server bound to ::1 (IPV6_V6ONLY), a client connected to it.
 * After the restart the addresses and options are what they were, the
 * connected clients reach their servers from the same source, the servers
 * answer them, and the unbound socket sends to the IPv4 server.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

union addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
	struct sockaddr_storage ss;
};

static socklen_t name_of(int s, bool peer, union addr *a)
{
	socklen_t l = sizeof(*a);
	memset(a, 0, sizeof(*a));
	if ((peer ? getpeername(s, &a->sa, &l) : getsockname(s, &a->sa, &l)) < 0)
		return 0;
	return l;
}

/* from sends msg; to gets it from the address want */
static void dgram(int from, const union addr *dst, socklen_t dl, int to, const union addr *want,
		  socklen_t wl, const char *msg)
{
	char buf[64] = "";
	union addr src;
	socklen_t sl = sizeof(src);
	ssize_t n = dst ? sendto(from, msg, strlen(msg), 0, &dst->sa, dl)
			: send(from, msg, strlen(msg), 0);
	if (n != (ssize_t)strlen(msg))
		fail("%s: send: %m", msg);
	struct pollfd p = { .fd = to, .events = POLLIN };
	if (poll(&p, 1, 10000) != 1)
		fail("%s: not received", msg);
	memset(&src, 0, sizeof(src));
	n = recvfrom(to, buf, sizeof(buf) - 1, 0, &src.sa, &sl);
	expect(n == (ssize_t)strlen(msg) && !memcmp(buf, msg, strlen(msg)), "%s: got '%s'", msg,
	       buf);
	expect(!want || (sl == wl && !memcmp(&src, want, wl)), "%s: from another address", msg);
}

int main(void)
{
	union addr a, s4n, c4n, s6n, c6n;
	socklen_t s4l, c4l, s6l, c6l;

	int s4 = socket(AF_INET, SOCK_DGRAM, 0);
	test_setopt(s4, SOL_SOCKET, SO_BROADCAST, 1);
	test_setopt(s4, IPPROTO_IP, IP_TOS, 0x10);
	test_setopt(s4, SOL_SOCKET, SO_RCVBUF, 100000);
	a.v4 = (struct sockaddr_in){ .sin_family = AF_INET };
	a.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s4, &a.sa, sizeof(a.v4)) < 0)
		fail("bind: %m");
	s4l = name_of(s4, false, &s4n);
	int c4 = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (connect(c4, &s4n.sa, s4l) < 0)
		fail("connect: %m");
	c4l = name_of(c4, false, &c4n);
	int u = socket(AF_INET, SOCK_DGRAM, 0);

	int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
	test_setopt(s6, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	a.v6 = (struct sockaddr_in6){ .sin6_family = AF_INET6, .sin6_addr = in6addr_loopback };
	if (bind(s6, &a.sa, sizeof(a.v6)) < 0)
		fail("bind6: %m");
	s6l = name_of(s6, false, &s6n);
	int c6 = socket(AF_INET6, SOCK_DGRAM, 0);
	if (connect(c6, &s6n.sa, s6l) < 0)
		fail("connect6: %m");
	c6l = name_of(c6, false, &c6n);
	dgram(c4, NULL, 0, s4, &c4n, c4l, "before 4");
	dgram(c6, NULL, 0, s6, &c6n, c6l, "before 6");
	int rcvbuf = test_getopt(s4, SOL_SOCKET, SO_RCVBUF);

	test_ready();
	test_wait();

	union addr x;
	expect(name_of(s4, false, &x) == s4l && !memcmp(&x, &s4n, s4l), "server 4: name changed");
	expect(name_of(c4, false, &x) == c4l && !memcmp(&x, &c4n, c4l), "client 4: name changed");
	expect(name_of(c4, true, &x) == s4l && !memcmp(&x, &s4n, s4l), "client 4: peer changed");
	expect(name_of(s6, false, &x) == s6l && !memcmp(&x, &s6n, s6l), "server 6: name changed");
	expect(name_of(c6, true, &x) == s6l && !memcmp(&x, &s6n, s6l), "client 6: peer changed");
	expect(name_of(s4, true, &x) == 0 && errno == ENOTCONN, "server 4 is connected");
	expect(test_getopt(s4, SOL_SOCKET, SO_BROADCAST) == 1, "SO_BROADCAST lost");
	expect(test_getopt(s4, IPPROTO_IP, IP_TOS) == 0x10, "IP_TOS is %d", test_getopt(s4, IPPROTO_IP, IP_TOS));
	expect(test_getopt(s4, SOL_SOCKET, SO_RCVBUF) == rcvbuf, "SO_RCVBUF %d, was %d",
	       test_getopt(s4, SOL_SOCKET, SO_RCVBUF), rcvbuf);
	expect(test_getopt(s6, IPPROTO_IPV6, IPV6_V6ONLY) == 1, "IPV6_V6ONLY lost");
	expect(fcntl(c4, F_GETFL) & O_NONBLOCK, "O_NONBLOCK lost");
	expect(test_getopt(u, SOL_SOCKET, SO_TYPE) == SOCK_DGRAM, "the unbound socket is not a dgram one");
	dgram(c4, NULL, 0, s4, &c4n, c4l, "after 4");
	dgram(s4, &c4n, c4l, c4, &s4n, s4l, "answer 4");
	dgram(c6, NULL, 0, s6, &c6n, c6l, "after 6");
	dgram(s6, &c6n, c6l, c6, &s6n, s6l, "answer 6");
	dgram(u, &s4n, s4l, s4, NULL, 0, "unbound");
	pass();
}
