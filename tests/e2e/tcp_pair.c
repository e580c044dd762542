/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An established TCP connection over loopback whose two ends are both in
 * the tree, with data in flight both ways at the checkpoint: each side
 * sends until its send buffer is full (the peer's receive queue full, its
 * own send queue holding data not acknowledged and not sent), without the
 * peer reading. Also a listener on the port the connection was accepted
 * from, and options on both ends.
 * After the restart: each end reads exactly the bytes the other sent, in
 * order; both ends carry new data both ways; addresses and options are
 * what they were; the listener accepts a new connection.
 *
 * FAMILY (compile time): 4 = AF_INET on 127.0.0.1; 6 = AF_INET6 on ::1;
 * 46 = a dual-stack AF_INET6 listener on :: with an AF_INET client to
 * 127.0.0.1 (the accepted end is v4-mapped) and, after the restart, an
 * AF_INET6 client to ::ffff:127.0.0.1.
 * The listener's port is written to the file "port" (rst_addr_busy).
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef FAMILY
#define FAMILY 4
#endif

union addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

static socklen_t mkaddr(union addr *a, int family, const char *ip, int port)
{
	memset(a, 0, sizeof(*a));
	if (family == AF_INET) {
		a->v4.sin_family = AF_INET;
		a->v4.sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, ip, &a->v4.sin_addr);
		return sizeof(a->v4);
	}
	a->v6.sin6_family = AF_INET6;
	a->v6.sin6_port = htons((uint16_t)port);
	inet_pton(AF_INET6, ip, &a->v6.sin6_addr);
	return sizeof(a->v6);
}

static int port_of(int s)
{
	union addr a;
	socklen_t l = sizeof(a);
	if (getsockname(s, &a.sa, &l) < 0)
		fail("getsockname: %m");
	return ntohs(a.sa.sa_family == AF_INET ? a.v4.sin_port : a.v6.sin6_port);
}

static int opt(int s, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	if (getsockopt(s, level, name, &v, &l) < 0)
		return -1;
	return v;
}

static uint8_t pattern(uint64_t i, uint8_t seed)
{
	return (uint8_t)((i * 7 + (i >> 8) * 13 + seed) & 0xff);
}

/* Sends the pattern until the socket stays full (the peer's window closed
 * and its own buffer full); the count sent. */
static uint64_t fill(int s, uint8_t seed)
{
	static uint8_t buf[65536];
	uint64_t n = 0;
	for (;;) {
		struct pollfd p = { .fd = s, .events = POLLOUT };
		if (n && poll(&p, 1, 100) == 0)
			return n;
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = pattern(n + i, seed);
		ssize_t r = send(s, buf, sizeof(buf), MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (r <= 0)
			fail("send: %m");
		n += (uint64_t)r;
	}
}

/* Reads exactly n bytes of the pattern; then nothing more is there. */
static void drain(int s, uint64_t n, uint8_t seed, const char *what)
{
	static uint8_t buf[65536];
	uint64_t got = 0;
	while (got < n) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 20000) != 1)
			fail("%s: no data after %llu of %llu bytes", what, (unsigned long long)got,
			     (unsigned long long)n);
		size_t want = n - got < sizeof(buf) ? (size_t)(n - got) : sizeof(buf);
		ssize_t r = recv(s, buf, want, 0);
		if (r <= 0)
			fail("%s: recv after %llu of %llu bytes: %s", what, (unsigned long long)got,
			     (unsigned long long)n, r < 0 ? strerror(errno) : "end of file");
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != pattern(got + (uint64_t)i, seed))
				fail("%s: byte %llu is wrong", what,
				     (unsigned long long)(got + (uint64_t)i));
		got += (uint64_t)r;
	}
	char c;
	expect(recv(s, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "%s: more than %llu bytes",
	       what, (unsigned long long)n);
}

static void ping(int from, int to, const char *msg)
{
	char buf[64] = "";
	if (send(from, msg, strlen(msg), 0) != (ssize_t)strlen(msg))
		fail("send %s: %m", msg);
	struct pollfd p = { .fd = to, .events = POLLIN };
	if (poll(&p, 1, 20000) != 1)
		fail("%s: not received", msg);
	ssize_t r = recv(to, buf, sizeof(buf) - 1, 0);
	expect(r == (ssize_t)strlen(msg) && !memcmp(buf, msg, strlen(msg)), "%s: got %zd bytes '%s'",
	       msg, r, buf);
}

static void same_names(int s, const union addr *self, const union addr *peer, const char *what)
{
	union addr a, b;
	socklen_t al = sizeof(a), bl = sizeof(b);
	expect(getsockname(s, &a.sa, &al) == 0 && !memcmp(&a, self, al), "%s: local address changed",
	       what);
	expect(getpeername(s, &b.sa, &bl) == 0 && !memcmp(&b, peer, bl), "%s: peer address changed",
	       what);
}

int main(void)
{
#if FAMILY == 4
	int lfam = AF_INET, cfam = AF_INET;
	const char *lip = "127.0.0.1", *cip = "127.0.0.1", *cip2 = "127.0.0.1";
#elif FAMILY == 6
	int lfam = AF_INET6, cfam = AF_INET6;
	const char *lip = "::1", *cip = "::1", *cip2 = "::1";
#else
	int lfam = AF_INET6, cfam = AF_INET;
	const char *lip = "::", *cip = "127.0.0.1", *cip2 = "::ffff:127.0.0.1";
#endif
	union addr la, ca, aself, apeer, cself, cpeer;
	socklen_t l;

	int lst = socket(lfam, SOCK_STREAM, 0);
	if (lst < 0)
		fail("socket: %m");
	test_setopt(lst, SOL_SOCKET, SO_REUSEADDR, 1);
	test_setopt(lst, SOL_SOCKET, SO_RCVBUF, 8192);
#if FAMILY == 46
	test_setopt(lst, IPPROTO_IPV6, IPV6_V6ONLY, 0);
#endif
	l = mkaddr(&la, lfam, lip, 0);
	if (bind(lst, &la.sa, l) < 0 || listen(lst, 16) < 0)
		fail("bind/listen: %m");
	int port = port_of(lst);
	FILE *pf = fopen("port.tmp", "w");
	if (!pf || fprintf(pf, "%d\n", port) < 0 || fclose(pf) || rename("port.tmp", "port"))
		fail("port file: %m");

	int c = socket(cfam, SOCK_STREAM, 0);
	test_setopt(c, IPPROTO_TCP, TCP_NODELAY, 1);
	test_setopt(c, SOL_SOCKET, SO_SNDBUF, 32768);
	test_setopt(c, SOL_SOCKET, SO_RCVBUF, 16384);
	l = mkaddr(&ca, cfam, cip, port);
	if (connect(c, &ca.sa, l) < 0)
		fail("connect: %m");
	int a = accept(lst, NULL, NULL);
	if (a < 0)
		fail("accept: %m");
	test_setopt(a, SOL_SOCKET, SO_KEEPALIVE, 1);
	test_setopt(a, IPPROTO_TCP, TCP_KEEPIDLE, 77);
	test_setopt(a, IPPROTO_TCP, TCP_KEEPINTVL, 11);
	test_setopt(a, IPPROTO_TCP, TCP_KEEPCNT, 5);
	struct linger lg = { 1, 3 };
	if (setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
		fail("SO_LINGER: %m");
	fcntl(a, F_SETFL, O_NONBLOCK);

	ping(c, a, "hello");
	ping(a, c, "hi there");
	uint64_t n_ca = fill(c, 1), n_ac = fill(a, 2);
	if (!n_ca || !n_ac)
		fail("nothing sent");
	int outq = 0;
	ioctl(c, SIOCOUTQ, &outq);
	if (outq <= 0)
		fail("the client's send queue is empty");
	ioctl(a, SIOCOUTQ, &outq);
	if (outq <= 0)
		fail("the accepted end's send queue is empty");
	int sndbuf = opt(c, SOL_SOCKET, SO_SNDBUF);
	l = sizeof(aself);
	getsockname(a, &aself.sa, &l);
	l = sizeof(apeer);
	getpeername(a, &apeer.sa, &l);
	l = sizeof(cself);
	getsockname(c, &cself.sa, &l);
	l = sizeof(cpeer);
	getpeername(c, &cpeer.sa, &l);

	test_ready();
	test_wait();

	same_names(a, &aself, &apeer, "accepted end");
	same_names(c, &cself, &cpeer, "client end");
	expect(opt(c, IPPROTO_TCP, TCP_NODELAY) == 1, "TCP_NODELAY lost");
	expect(opt(c, SOL_SOCKET, SO_SNDBUF) == sndbuf, "SO_SNDBUF %d, was %d",
	       opt(c, SOL_SOCKET, SO_SNDBUF), sndbuf);
	expect(opt(a, SOL_SOCKET, SO_KEEPALIVE) == 1, "SO_KEEPALIVE lost");
	expect(opt(a, IPPROTO_TCP, TCP_KEEPIDLE) == 77, "TCP_KEEPIDLE lost");
	expect(opt(a, IPPROTO_TCP, TCP_KEEPINTVL) == 11, "TCP_KEEPINTVL lost");
	expect(opt(a, IPPROTO_TCP, TCP_KEEPCNT) == 5, "TCP_KEEPCNT lost");
	expect(opt(lst, SOL_SOCKET, SO_REUSEADDR) == 1, "SO_REUSEADDR of the listener lost");
	l = sizeof(lg);
	expect(getsockopt(a, SOL_SOCKET, SO_LINGER, &lg, &l) == 0 && lg.l_onoff && lg.l_linger == 3,
	       "SO_LINGER lost");
	expect(fcntl(a, F_GETFL) & O_NONBLOCK, "O_NONBLOCK lost");
	expect(!(fcntl(c, F_GETFL) & O_NONBLOCK), "O_NONBLOCK on the client");
	fcntl(a, F_SETFL, 0);

	drain(a, n_ca, 1, "client -> accepted");
	drain(c, n_ac, 2, "accepted -> client");
	ping(c, a, "after, one way");
	ping(a, c, "after, the other");

	/* the listener takes new connections */
	int c2 = socket(cfam == AF_INET && FAMILY == 46 ? AF_INET6 : cfam, SOCK_STREAM, 0);
	l = mkaddr(&ca, FAMILY == 46 ? AF_INET6 : cfam, cip2, port);
	if (connect(c2, &ca.sa, l) < 0)
		fail("connect after the restart: %m");
	int a2 = accept(lst, NULL, NULL);
	if (a2 < 0)
		fail("accept after the restart: %m");
	ping(c2, a2, "new connection");
	ping(a2, c2, "new connection, back");
	close(c);
	char ch;
	expect(recv(a, &ch, 1, 0) == 0, "no end of file after the peer closed");
	pass();
}
