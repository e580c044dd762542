/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * UDP and UDP-Lite sockets with datagrams not read yet, multicast groups
 * and shutdown states, all on loopback:
 * - r4 (127.0.0.1, IP_PKTINFO on) holds "one", "" and "three" from a4
 *   (127.0.0.1) and "four" from b4 (127.0.0.2), then 30000 bytes from a4;
 * - r6 ([::], dual stack, IPV6_RECVPKTINFO) holds "six" from a6 ([::1])
 *   and "mapped" from a4 (::ffff:127.0.0.1);
 * - lite (UDP-Lite, 127.0.0.1) holds "lite" from a UDP-Lite sender;
 * - conn (connected to a4) holds "conn" from a4;
 * - m4 joined 239.1.2.3 on lo and 232.1.1.1 from 127.0.0.1 only (a source
 *   filter), with IP_MULTICAST_IF/TTL/LOOP set; m6 joined ff15::1234 on lo
 *   with IPV6_MULTICAST_IF/HOPS;
 * - shw and shr (connected) shut down writing and reading.
 * After the restart each reads the same datagrams in the same order from
 * the same senders (and to the same destination addresses), then nothing;
 * the groups, options and shutdowns are what they were; and the senders
 * (the peers) exchange new datagrams with the restored sockets.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/sock_diag.h>
#include <unistd.h>

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif

union addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
	struct sockaddr_storage ss;
};

static socklen_t addr_of(int family, const char *ip, union addr *a)
{
	memset(a, 0, sizeof(*a));
	if (family == AF_INET) {
		a->v4.sin_family = AF_INET;
		inet_pton(AF_INET, ip, &a->v4.sin_addr);
		return sizeof(a->v4);
	}
	a->v6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, ip, &a->v6.sin6_addr);
	return sizeof(a->v6);
}

/* a socket bound to ip (port chosen), its name in *a */
static int sock_at(int family, int proto, const char *ip, union addr *a, socklen_t *al)
{
	int s = socket(family, SOCK_DGRAM, proto);
	socklen_t l = addr_of(family, ip, a);
	if (s < 0 || bind(s, &a->sa, l) < 0)
		fail("socket at %s: %m", ip);
	*al = sizeof(*a);
	if (getsockname(s, &a->sa, al) < 0)
		fail("getsockname: %m");
	return s;
}

static uint32_t rmem_of(int s)
{
	uint32_t v[SK_MEMINFO_VARS];
	socklen_t l = sizeof(v);
	if (getsockopt(s, SOL_SOCKET, SO_MEMINFO, v, &l) < 0)
		fail("SO_MEMINFO: %m");
	return v[SK_MEMINFO_RMEM_ALLOC];
}

/* s sends buf to `to`, where socket r receives it: waited for in r's queue
 * (its memory grew; a peek would mark a datagram of 0 bytes) */
static void send_to(int s, const void *buf, size_t len, const union addr *to, socklen_t tl, int r)
{
	uint32_t before = rmem_of(r);
	if (sendto(s, buf, len, 0, &to->sa, tl) != (ssize_t)len)
		fail("sendto: %m");
	for (int i = 0; i < 10000 && rmem_of(r) == before; i++)
		poll(NULL, 0, 1);
	if (rmem_of(r) == before)
		fail("a datagram of %zu bytes did not come", len);
}

/* The next datagram of s must be want (len bytes) from `from`, sent to dst if given. */
static void expect_dgram(int s, const char *what, const void *want, size_t len,
			 const union addr *from, socklen_t fl, const char *dst)
{
	static char buf[65536];
	union addr src;
	char ctl[256];
	struct iovec io = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr m = { .msg_name = &src, .msg_namelen = sizeof(src), .msg_iov = &io,
			    .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	memset(&src, 0, sizeof(src));
	ssize_t n = recvmsg(s, &m, MSG_DONTWAIT);
	if (n < 0) {
		test_failf("%s: no datagram: %m", what);
		return;
	}
	expect((size_t)n == len && !memcmp(buf, want, len), "%s: got %zd bytes '%.*s'", what, n,
	       (int)(n > 20 ? 20 : n), buf);
	expect(m.msg_namelen == fl && !memcmp(&src, from, fl), "%s: from another address", what);
	if (!dst)
		return;
	char got[INET6_ADDRSTRLEN] = "none";
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO)
			inet_ntop(AF_INET, &((struct in_pktinfo *)CMSG_DATA(c))->ipi_addr, got,
				  sizeof(got));
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO)
			inet_ntop(AF_INET6, &((struct in6_pktinfo *)CMSG_DATA(c))->ipi6_addr, got,
				  sizeof(got));
	}
	expect(!strcmp(got, dst), "%s: sent to %s, want %s", what, got, dst);
}

static void expect_empty(int s, const char *what)
{
	char c;
	expect(recv(s, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "%s: more datagrams queued",
	       what);
}

/* the filter of s for group on ifindex: mode and sources, or -1 if not joined */
static int msfilter(int s, int family, const char *group, unsigned ifindex, int *nsrc)
{
	struct {
		struct group_filter gf;
		struct sockaddr_storage more[8];
	} f;
	memset(&f, 0, sizeof(f));
	f.gf.gf_interface = ifindex;
	f.gf.gf_numsrc = 8;
	addr_of(family, group, (union addr *)&f.gf.gf_group);
	socklen_t l = sizeof(f);
	if (getsockopt(s, family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6, MCAST_MSFILTER, &f, &l) < 0)
		return -1;
	*nsrc = (int)f.gf.gf_numsrc;
	return (int)f.gf.gf_fmode;
}

/* what poll, a recv and a send on s say now: "p<revents> r<ret>/<errno> s<ret>/<errno>" */
static void io_state(int s, char *buf, size_t len)
{
	char c;
	struct pollfd p = { .fd = s, .events = POLLIN | POLLRDHUP };
	poll(&p, 1, 0);
	errno = 0;
	ssize_t r = recv(s, &c, 1, MSG_DONTWAIT);
	int re = r < 0 ? errno : 0;
	errno = 0;
	ssize_t w = send(s, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	int we = w < 0 ? errno : 0;
	snprintf(buf, len, "p%x r%zd/%d s%zd/%d", (unsigned)p.revents, r, re, w, we);
}

int main(void)
{
	union addr r4n, a4n, b4n, r6n, a6n, litn, lsn, cn, m4n, m6n, x;
	socklen_t r4l, a4l, b4l, r6l, a6l, litl, lsl, cl, m4l, m6l;
	static char big[30000];
	unsigned lo = if_nametoindex("lo");

	int r4 = sock_at(AF_INET, 0, "127.0.0.1", &r4n, &r4l);
	test_setopt(r4, IPPROTO_IP, IP_PKTINFO, 1);
	int a4 = sock_at(AF_INET, 0, "127.0.0.1", &a4n, &a4l);
	int b4 = sock_at(AF_INET, 0, "127.0.0.2", &b4n, &b4l);
	int r6 = sock_at(AF_INET6, 0, "::", &r6n, &r6l);
	test_setopt(r6, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
	int a6 = sock_at(AF_INET6, 0, "::1", &a6n, &a6l);
	int lite = sock_at(AF_INET, IPPROTO_UDPLITE, "127.0.0.1", &litn, &litl);
	int ls = sock_at(AF_INET, IPPROTO_UDPLITE, "127.0.0.1", &lsn, &lsl);
	int conn = sock_at(AF_INET, 0, "127.0.0.1", &cn, &cl);
	if (connect(conn, &a4n.sa, a4l) < 0)
		fail("connect: %m");
	test_fill_random(big, sizeof(big), 7);

	send_to(a4, "one", 3, &r4n, r4l, r4);
	send_to(a4, "", 0, &r4n, r4l, r4);
	send_to(a4, "three", 5, &r4n, r4l, r4);
	send_to(b4, "four", 4, &r4n, r4l, r4);
	send_to(a4, big, sizeof(big), &r4n, r4l, r4);
	union addr to6;
	socklen_t to6l = addr_of(AF_INET6, "::1", &to6);
	to6.v6.sin6_port = r6n.v6.sin6_port;
	send_to(a6, "six", 3, &to6, to6l, r6);
	union addr to4;
	socklen_t to4l = addr_of(AF_INET, "127.0.0.1", &to4);
	to4.v4.sin_port = r6n.v6.sin6_port;
	send_to(a4, "mapped", 6, &to4, to4l, r6);
	send_to(ls, "lite", 4, &litn, litl, lite);
	send_to(a4, "conn", 4, &cn, cl, conn);

	/* multicast */
	int m4 = sock_at(AF_INET, 0, "0.0.0.0", &m4n, &m4l);
	struct ip_mreqn mr = { .imr_ifindex = (int)lo };
	inet_pton(AF_INET, "239.1.2.3", &mr.imr_multiaddr);
	if (setsockopt(m4, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0)
		fail("IP_ADD_MEMBERSHIP: %m");
	struct group_source_req gs = { .gsr_interface = lo };
	addr_of(AF_INET, "232.1.1.1", (union addr *)&gs.gsr_group);
	addr_of(AF_INET, "127.0.0.1", (union addr *)&gs.gsr_source);
	if (setsockopt(m4, IPPROTO_IP, MCAST_JOIN_SOURCE_GROUP, &gs, sizeof(gs)) < 0)
		fail("MCAST_JOIN_SOURCE_GROUP: %m");
	test_setopt(m4, IPPROTO_IP, IP_MULTICAST_TTL, 7);
	test_setopt(m4, IPPROTO_IP, IP_MULTICAST_LOOP, 0);
	struct in_addr ifa;
	inet_pton(AF_INET, "127.0.0.1", &ifa);
	if (setsockopt(m4, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa)) < 0)
		fail("IP_MULTICAST_IF: %m");
	int m6 = sock_at(AF_INET6, 0, "::", &m6n, &m6l);
	struct ipv6_mreq m6r = { .ipv6mr_interface = lo };
	inet_pton(AF_INET6, "ff15::1234", &m6r.ipv6mr_multiaddr);
	if (setsockopt(m6, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m6r, sizeof(m6r)) < 0)
		fail("IPV6_JOIN_GROUP: %m");
	test_setopt(m6, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, 9);
	test_setopt(m6, IPPROTO_IPV6, IPV6_MULTICAST_IF, (int)lo);

	/* shutdown */
	union addr skn;
	socklen_t skl, xl;
	int sink = sock_at(AF_INET, 0, "127.0.0.1", &skn, &skl);
	int shw = sock_at(AF_INET, 0, "127.0.0.1", &x, &xl);
	int shr = sock_at(AF_INET, 0, "127.0.0.1", &x, &xl);
	if (connect(shw, &skn.sa, skl) < 0 || connect(shr, &skn.sa, skl) < 0)
		fail("connect: %m");
	if (shutdown(shw, SHUT_WR) < 0 || shutdown(shr, SHUT_RD) < 0)
		fail("shutdown: %m");
	char shw_was[64], shr_was[64], now[64];
	io_state(shw, shw_was, sizeof(shw_was));
	io_state(shr, shr_was, sizeof(shr_was));
	(void)sink;

	test_ready();
	test_wait();

	expect_dgram(r4, "r4 1", "one", 3, &a4n, a4l, "127.0.0.1");
	expect_dgram(r4, "r4 2", "", 0, &a4n, a4l, "127.0.0.1");
	expect_dgram(r4, "r4 3", "three", 5, &a4n, a4l, "127.0.0.1");
	expect_dgram(r4, "r4 4", "four", 4, &b4n, b4l, "127.0.0.1");
	expect_dgram(r4, "r4 5", big, sizeof(big), &a4n, a4l, "127.0.0.1");
	expect_empty(r4, "r4");
	union addr a6from = a6n;
	expect_dgram(r6, "r6 1", "six", 3, &a6from, a6l, "::1");
	union addr mapped;
	socklen_t mappedl = addr_of(AF_INET6, "::ffff:127.0.0.1", &mapped);
	mapped.v6.sin6_port = a4n.v4.sin_port;
	expect_dgram(r6, "r6 2", "mapped", 6, &mapped, mappedl, "::ffff:127.0.0.1");
	expect_empty(r6, "r6");
	expect_dgram(lite, "lite", "lite", 4, &lsn, lsl, NULL);
	expect_empty(lite, "lite");
	expect_dgram(conn, "conn", "conn", 4, &a4n, a4l, NULL);
	expect_empty(conn, "conn");

	/* the peers and the restored sockets talk */
	send_to(a4, "after", 5, &r4n, r4l, r4);
	expect_dgram(r4, "r4 after", "after", 5, &a4n, a4l, "127.0.0.1");
	send_to(r4, "back", 4, &a4n, a4l, a4);
	expect_dgram(a4, "a4 back", "back", 4, &r4n, r4l, NULL);
	send_to(conn, "c2", 2, &a4n, a4l, a4);
	expect_dgram(a4, "a4 from conn", "c2", 2, &cn, cl, NULL);

	int nsrc = -1;
	expect(msfilter(m4, AF_INET, "239.1.2.3", lo, &nsrc) == MCAST_EXCLUDE && nsrc == 0,
	       "m4: not in 239.1.2.3 on lo (any source)");
	expect(msfilter(m4, AF_INET, "232.1.1.1", lo, &nsrc) == MCAST_INCLUDE && nsrc == 1,
	       "m4: not in 232.1.1.1 from one source (%d)", nsrc);
	expect(msfilter(m4, AF_INET, "239.9.9.9", lo, &nsrc) < 0, "m4: in a group it never joined");
	expect(msfilter(m6, AF_INET6, "ff15::1234", lo, &nsrc) == MCAST_EXCLUDE && nsrc == 0,
	       "m6: not in ff15::1234 on lo");
	expect(test_getopt(m4, IPPROTO_IP, IP_MULTICAST_TTL) == 7, "IP_MULTICAST_TTL lost");
	expect(test_getopt(m4, IPPROTO_IP, IP_MULTICAST_LOOP) == 0, "IP_MULTICAST_LOOP lost");
	struct in_addr ifb = { 0 };
	socklen_t il = sizeof(ifb);
	getsockopt(m4, IPPROTO_IP, IP_MULTICAST_IF, &ifb, &il);
	expect(ifb.s_addr == ifa.s_addr, "IP_MULTICAST_IF lost");
	expect(test_getopt(m6, IPPROTO_IPV6, IPV6_MULTICAST_HOPS) == 9, "IPV6_MULTICAST_HOPS lost");
	expect(test_getopt(m6, IPPROTO_IPV6, IPV6_MULTICAST_IF) == (int)lo, "IPV6_MULTICAST_IF lost");

	io_state(shw, now, sizeof(now));
	expect(!strcmp(now, shw_was), "shw (SHUT_WR): %s, was %s", now, shw_was);
	io_state(shr, now, sizeof(now));
	expect(!strcmp(now, shr_was), "shr (SHUT_RD): %s, was %s", now, shr_was);
	pass();
}
