/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Many loopback TCP connections of one process, each with options and
 * queued data of its own: what ckpt's threads read ahead (inet.c's
 * prefetch, fdtable's batches of fds) must come back exactly as the
 * one-by-one reading would have saved it, whatever thread read which.
 *
 * 160 connections over IPv4 and 40 over IPv6 (both ends in the process),
 * two listeners. Connection i: TCP_NODELAY on odd i, SO_KEEPALIVE with
 * TCP_KEEPIDLE/INTVL/CNT of its own on every third, TCP_USER_TIMEOUT on
 * i % 4 == 1, IP_TOS or IPV6_TCLASS (i % 8) << 2 (IPv4: IP_RECVERR on
 * i % 3 == 1, IP_FREEBIND on i % 6 == 2, IP_TRANSPARENT on i % 10 == 3,
 * IP_BIND_ADDRESS_NO_PORT on i % 5 == 4, and IP_RECVERR on the accepted end
 * of i % 4 == 2: the IP options the network lock's dump says), SO_RCVBUF set (locked)
 * on i % 5 == 0, SO_LINGER on i % 7 == 0, O_NONBLOCK on the accepted end
 * of even i, the accepted end of i % 10 == 0 dup'ed at a second fd. The
 * client sent i + 1 bytes the server end has not read; the server end
 * sent (3i) % 500 + 1 the client has not read.
 * After the restart: every option as read before, both queues byte for
 * byte, the dup'ed fds one socket, and one more byte each way on each.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define N4 160
#define N  200

static const struct {
	int level, name;
} opts[] = {
	{ IPPROTO_TCP, TCP_NODELAY },	{ SOL_SOCKET, SO_KEEPALIVE },
	{ IPPROTO_TCP, TCP_KEEPIDLE },	{ IPPROTO_TCP, TCP_KEEPINTVL },
	{ IPPROTO_TCP, TCP_KEEPCNT },	{ IPPROTO_TCP, TCP_USER_TIMEOUT },
	{ SOL_SOCKET, SO_RCVBUF },	{ SOL_SOCKET, SO_SNDBUF },
	{ IPPROTO_IP, IP_TOS },		{ IPPROTO_IPV6, IPV6_TCLASS },
	{ SOL_SOCKET, SO_REUSEADDR },	{ IPPROTO_IP, IP_RECVERR },
	{ IPPROTO_IP, IP_FREEBIND },	{ IPPROTO_IP, IP_TRANSPARENT },
	{ IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

struct conn {
	int c, s, dup; /* client, accepted end, its dup (-1) */
	int v6;
	int copt[NOPTS], sopt[NOPTS];
	struct linger lg;
	int sflags;
};

static struct conn cs[N];

static uint8_t pat(int i, int k, int side)
{
	return (uint8_t)(i * 31 + k * 7 + side * 101);
}

static void read_opts(int s, int v6, int *v)
{
	for (size_t k = 0; k < NOPTS; k++) {
		bool other = (opts[k].level == IPPROTO_IP && v6) ||
			     (opts[k].level == IPPROTO_IPV6 && !v6);
		v[k] = other ? 0 : test_getopt(s, opts[k].level, opts[k].name);
	}
}

static void send_all(int s, int i, int len, int side)
{
	uint8_t buf[512];
	for (int k = 0; k < len; k++)
		buf[k] = pat(i, k, side);
	if (send(s, buf, (size_t)len, 0) != len)
		fail("conn %d: send: %m", i);
}

/* len bytes of pattern side, then nothing more queued */
static void expect_queue(int s, int i, int len, int side, const char *who)
{
	uint8_t buf[600];
	int got = 0;
	while (got < len) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 5000) != 1)
			fail("conn %d %s: %d of %d bytes, then nothing", i, who, got, len);
		ssize_t n = recv(s, buf + got, sizeof(buf) - (size_t)got, MSG_DONTWAIT);
		if (n <= 0)
			fail("conn %d %s: recv: %zd (%m) after %d of %d", i, who, n, got, len);
		got += (int)n;
	}
	if (got != len)
		fail("conn %d %s: %d bytes queued, not %d", i, who, got, len);
	for (int k = 0; k < len; k++)
		if (buf[k] != pat(i, k, side))
			fail("conn %d %s: byte %d differs", i, who, k);
}

union addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

/* The loopback address of family at port (0: any), and its length. */
static socklen_t loopback(int family, int port, union addr *a)
{
	*a = (union addr){ 0 };
	if (family == AF_INET) {
		a->v4.sin_family = AF_INET;
		a->v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->v4.sin_port = htons((uint16_t)port);
		return sizeof(a->v4);
	}
	a->v6.sin6_family = AF_INET6;
	a->v6.sin6_addr = in6addr_loopback;
	a->v6.sin6_port = htons((uint16_t)port);
	return sizeof(a->v6);
}

static int listener(int family, int *port)
{
	int l = socket(family, SOCK_STREAM, 0);
	union addr a;
	socklen_t al = loopback(family, 0, &a);
	if (l < 0 || bind(l, &a.sa, al) < 0 || listen(l, 256) < 0)
		return -1;
	al = sizeof(a);
	getsockname(l, &a.sa, &al);
	*port = ntohs(family == AF_INET ? a.v4.sin_port : a.v6.sin6_port);
	return l;
}

static void make(int i, int l, int family, int port)
{
	struct conn *k = &cs[i];
	k->v6 = family == AF_INET6;
	k->c = socket(family, SOCK_STREAM, 0);
	if (k->c < 0)
		fail("socket: %m");
	if (i % 2)
		test_setopt(k->c, IPPROTO_TCP, TCP_NODELAY, 1);
	if (i % 3 == 0) {
		test_setopt(k->c, SOL_SOCKET, SO_KEEPALIVE, 1);
		test_setopt(k->c, IPPROTO_TCP, TCP_KEEPIDLE, 100 + i);
		test_setopt(k->c, IPPROTO_TCP, TCP_KEEPINTVL, 10 + i % 50);
		test_setopt(k->c, IPPROTO_TCP, TCP_KEEPCNT, 1 + i % 9);
	}
	if (i % 4 == 1)
		test_setopt(k->c, IPPROTO_TCP, TCP_USER_TIMEOUT, 1000 + 10 * i);
	if (family == AF_INET) {
		test_setopt(k->c, IPPROTO_IP, IP_TOS, (i % 8) << 2);
		if (i % 3 == 1)
			test_setopt(k->c, IPPROTO_IP, IP_RECVERR, 1);
		if (i % 6 == 2)
			test_setopt(k->c, IPPROTO_IP, IP_FREEBIND, 1);
		if (i % 10 == 3)
			test_setopt(k->c, IPPROTO_IP, IP_TRANSPARENT, 1);
		if (i % 5 == 4)
			test_setopt(k->c, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1);
	}
	else
		test_setopt(k->c, IPPROTO_IPV6, IPV6_TCLASS, (i % 8) << 2);
	if (i % 5 == 0)
		test_setopt(k->c, SOL_SOCKET, SO_RCVBUF, 65536 + 64 * i);
	if (i % 7 == 0) {
		struct linger lg = { 1, i % 30 };
		if (setsockopt(k->c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
			fail("SO_LINGER: %m");
	}
	union addr a;
	socklen_t al = loopback(family, port, &a);
	if (connect(k->c, &a.sa, al) < 0)
		fail("connect %d: %m", i);
	k->s = accept(l, NULL, NULL);
	if (k->s < 0)
		fail("accept %d: %m", i);
	if (family == AF_INET && i % 4 == 2)
		test_setopt(k->s, IPPROTO_IP, IP_RECVERR, 1);
	if (i % 2 == 0 && fcntl(k->s, F_SETFL, O_NONBLOCK) < 0)
		fail("O_NONBLOCK: %m");
	k->dup = i % 10 == 0 ? dup(k->s) : -1;
	send_all(k->c, i, i + 1, 0);
	send_all(k->s, i, (3 * i) % 500 + 1, 1);
}

int main(void)
{
	int p4, p6, l4 = listener(AF_INET, &p4), l6 = listener(AF_INET6, &p6);
	if (l4 < 0)
		fail("IPv4 listener: %m");
	if (l6 < 0)
		skip("no IPv6 loopback");
	for (int i = 0; i < N; i++)
		make(i, i < N4 ? l4 : l6, i < N4 ? AF_INET : AF_INET6, i < N4 ? p4 : p6);
	/* the data arrived: each receive queue holds what was sent */
	for (int i = 0; i < N; i++) {
		for (int t = 0; t < 500; t++) {
			struct tcp_info ti;
			socklen_t l = sizeof(ti);
			getsockopt(cs[i].s, IPPROTO_TCP, TCP_INFO, &ti, &l);
			if (ti.tcpi_unacked == 0)
				break;
			usleep(1000);
		}
		read_opts(cs[i].c, cs[i].v6, cs[i].copt);
		read_opts(cs[i].s, cs[i].v6, cs[i].sopt);
		socklen_t l = sizeof(cs[i].lg);
		getsockopt(cs[i].c, SOL_SOCKET, SO_LINGER, &cs[i].lg, &l);
		cs[i].sflags = fcntl(cs[i].s, F_GETFL);
	}
	test_ready();
	test_wait();

	for (int i = 0; i < N; i++) {
		struct conn *k = &cs[i];
		int v[NOPTS];
		read_opts(k->c, k->v6, v);
		for (size_t j = 0; j < NOPTS; j++)
			expect(v[j] == k->copt[j], "conn %d client option %d/%d: %d, was %d", i,
			       opts[j].level, opts[j].name, v[j], k->copt[j]);
		read_opts(k->s, k->v6, v);
		for (size_t j = 0; j < NOPTS; j++)
			expect(v[j] == k->sopt[j], "conn %d server option %d/%d: %d, was %d", i,
			       opts[j].level, opts[j].name, v[j], k->sopt[j]);
		struct linger lg;
		socklen_t l = sizeof(lg);
		getsockopt(k->c, SOL_SOCKET, SO_LINGER, &lg, &l);
		expect(lg.l_onoff == k->lg.l_onoff && lg.l_linger == k->lg.l_linger,
		       "conn %d: SO_LINGER %d/%d, was %d/%d", i, lg.l_onoff, lg.l_linger,
		       k->lg.l_onoff, k->lg.l_linger);
		expect(fcntl(k->s, F_GETFL) == k->sflags, "conn %d: file flags %#x, were %#x", i,
		       fcntl(k->s, F_GETFL), k->sflags);
		if (k->dup >= 0) {
			struct stat a, b;
			expect(fstat(k->s, &a) == 0 && fstat(k->dup, &b) == 0 && a.st_ino == b.st_ino,
			       "conn %d: the dup is another socket", i);
		}
		expect(test_tcp_state(k->c) == TCP_ESTABLISHED, "conn %d: client not established", i);
		expect_queue(k->s, i, i + 1, 0, "server end");
		expect_queue(k->c, i, (3 * i) % 500 + 1, 1, "client end");
		send_all(k->c, i, 1, 2);
		send_all(k->s, i, 1, 3);
		expect_queue(k->s, i, 1, 2, "server end, after");
		expect_queue(k->c, i, 1, 3, "client end, after");
	}
	pass();
}
