/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Raw sockets (root) and, where net.ipv4.ping_group_range lets this
 * process make them, ICMP ping sockets:
 * - r4: AF_INET raw ICMP bound to 127.0.0.1 and to device lo, with an
 *   ICMP_FILTER that drops echo requests, IP_TTL 33;
 * - h4: AF_INET IPPROTO_RAW (IP_HDRINCL), IP_TOS 0x10;
 * - r6: AF_INET6 raw ICMPv6 bound to ::1 with an ICMP6_FILTER that passes
 *   only echo replies; c6: AF_INET6 raw protocol 253 with IPV6_CHECKSUM 2;
 * - p4, p6: ping sockets bound to loopback (their ICMP ids chosen by the
 *   kernel), IP_TTL 44 on p4.
 * After the restart the options, filters, bound addresses and ids are what
 * they were; r4 sends an echo request to 127.0.0.1 and reads the kernel's
 * echo reply (its own request filtered out); r6 the same over ::1; p4 and
 * p6 ping loopback and get their replies with their ids.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/icmp.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint16_t csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t sum = 0;
	for (; len > 1; len -= 2, b += 2)
		sum += (uint32_t)(b[0] << 8 | b[1]);
	if (len)
		sum += (uint32_t)b[0] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* an echo request of id and seq to dst through s (ICMP or ICMPv6) */
static void echo(int s, bool v6, const struct sockaddr *dst, socklen_t dl, uint16_t id,
		 uint16_t seq)
{
	uint8_t pkt[16] = { v6 ? 128 : 8, 0, 0, 0 };
	uint16_t w[2] = { htons(id), htons(seq) };
	memcpy(pkt + 4, w, 4);
	memcpy(pkt + 8, "ckptping", 8);
	if (!v6) {
		uint16_t c = csum(pkt, sizeof(pkt));
		memcpy(pkt + 2, &c, 2);
	}
	if (sendto(s, pkt, sizeof(pkt), 0, dst, dl) != (ssize_t)sizeof(pkt))
		fail("echo: %m");
}

/* Reads s until the echo reply of id comes (other ICMP traffic of the host
 * on loopback skipped); false if the echo request of id comes first (a
 * filter lost) or nothing in 10 s. */
static bool reply_first(int s, bool v6, bool iphdr, uint16_t want)
{
	uint8_t buf[512];
	for (int i = 0; i < 100; i++) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 10000) != 1)
			return false;
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		size_t off = iphdr ? (size_t)(buf[0] & 15) * 4 : 0;
		if (n < (ssize_t)(off + 8))
			continue;
		uint16_t id;
		memcpy(&id, buf + off + 4, 2);
		if (ntohs(id) != want)
			continue;
		if (buf[off] == (v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO))
			return false;
		if (buf[off] == (v6 ? ICMP6_ECHO_REPLY : ICMP_ECHOREPLY))
			return true;
	}
	return false;
}

int main(void)
{
	struct sockaddr_in lo4 = { .sin_family = AF_INET };
	struct sockaddr_in6 lo6 = { .sin6_family = AF_INET6, .sin6_addr = in6addr_loopback };
	lo4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int r4 = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	if (r4 < 0)
		skip("no raw socket: %m");
	if (bind(r4, (struct sockaddr *)&lo4, sizeof(lo4)) < 0 ||
	    setsockopt(r4, SOL_SOCKET, SO_BINDTODEVICE, "lo", 2) < 0)
		fail("r4: %m");
	struct icmp_filter f4 = { .data = 1u << ICMP_ECHO };
	if (setsockopt(r4, SOL_RAW, ICMP_FILTER, &f4, sizeof(f4)) < 0)
		fail("ICMP_FILTER: %m");
	test_setopt(r4, IPPROTO_IP, IP_TTL, 33);
	int h4 = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	test_setopt(h4, IPPROTO_IP, IP_TOS, 0x10);
	int r6 = socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
	if (r6 < 0 || bind(r6, (struct sockaddr *)&lo6, sizeof(lo6)) < 0)
		fail("r6: %m");
	struct icmp6_filter f6;
	ICMP6_FILTER_SETBLOCKALL(&f6);
	ICMP6_FILTER_SETPASS(ICMP6_ECHO_REPLY, &f6);
	if (setsockopt(r6, IPPROTO_ICMPV6, ICMP6_FILTER, &f6, sizeof(f6)) < 0)
		fail("ICMP6_FILTER: %m");
	int c6 = socket(AF_INET6, SOCK_RAW, 253);
	test_setopt(c6, IPPROTO_IPV6, IPV6_CHECKSUM, 2);

	/* ping sockets, where this process may make them */
	struct sockaddr_in p4n;
	struct sockaddr_in6 p6n;
	socklen_t l;
	int p4 = socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
	int p6 = socket(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6);
	if (p4 >= 0) {
		if (bind(p4, (struct sockaddr *)&lo4, sizeof(lo4)) < 0)
			fail("p4: %m");
		test_setopt(p4, IPPROTO_IP, IP_TTL, 44);
		l = sizeof(p4n);
		getsockname(p4, (struct sockaddr *)&p4n, &l);
	} else {
		test_log("no ICMP ping socket (net.ipv4.ping_group_range): %m; not tested");
	}
	if (p6 >= 0) {
		if (bind(p6, (struct sockaddr *)&lo6, sizeof(lo6)) < 0)
			fail("p6: %m");
		l = sizeof(p6n);
		getsockname(p6, (struct sockaddr *)&p6n, &l);
	}

	test_ready();
	test_wait();

	struct sockaddr_in a4;
	struct sockaddr_in6 a6;
	l = sizeof(a4);
	expect(getsockname(r4, (struct sockaddr *)&a4, &l) == 0 &&
	       a4.sin_addr.s_addr == lo4.sin_addr.s_addr, "r4: not bound to 127.0.0.1");
	char dev[16] = "";
	l = sizeof(dev);
	getsockopt(r4, SOL_SOCKET, SO_BINDTODEVICE, dev, &l);
	expect(!strcmp(dev, "lo"), "r4: bound to device '%s'", dev);
	struct icmp_filter g4 = { 0 };
	l = sizeof(g4);
	getsockopt(r4, SOL_RAW, ICMP_FILTER, &g4, &l);
	expect(g4.data == f4.data, "r4: ICMP_FILTER %#x, was %#x", g4.data, f4.data);
	expect(test_getopt(r4, IPPROTO_IP, IP_TTL) == 33, "r4: IP_TTL lost");
	expect(test_getopt(h4, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_RAW && test_getopt(h4, IPPROTO_IP, IP_HDRINCL) == 1,
	       "h4: not an IPPROTO_RAW socket with IP_HDRINCL");
	expect(test_getopt(h4, IPPROTO_IP, IP_TOS) == 0x10, "h4: IP_TOS lost");
	l = sizeof(a6);
	expect(getsockname(r6, (struct sockaddr *)&a6, &l) == 0 &&
	       !memcmp(&a6.sin6_addr, &in6addr_loopback, 16), "r6: not bound to ::1");
	struct icmp6_filter g6;
	l = sizeof(g6);
	getsockopt(r6, IPPROTO_ICMPV6, ICMP6_FILTER, &g6, &l);
	expect(!memcmp(&g6, &f6, sizeof(f6)), "r6: ICMP6_FILTER changed");
	expect(test_getopt(c6, SOL_SOCKET, SO_PROTOCOL) == 253 && test_getopt(c6, IPPROTO_IPV6, IPV6_CHECKSUM) == 2,
	       "c6: protocol or IPV6_CHECKSUM lost");

	/* the kernel answers; the filters keep the requests out */
	echo(r4, false, (struct sockaddr *)&lo4, sizeof(lo4), 0x4242, 1);
	expect(reply_first(r4, false, true, 0x4242), "r4: no echo reply, or the request first");
	echo(r6, true, (struct sockaddr *)&lo6, sizeof(lo6), 0x4343, 1);
	expect(reply_first(r6, true, false, 0x4343), "r6: no echo reply, or the request first");

	if (p4 >= 0) {
		l = sizeof(a4);
		getsockname(p4, (struct sockaddr *)&a4, &l);
		expect(a4.sin_port == p4n.sin_port, "p4: its id changed");
		expect(test_getopt(p4, IPPROTO_IP, IP_TTL) == 44, "p4: IP_TTL lost");
		echo(p4, false, (struct sockaddr *)&lo4, sizeof(lo4), 0, 7);
		expect(reply_first(p4, false, false, ntohs(p4n.sin_port)), "p4: no echo reply");
	}
	if (p6 >= 0) {
		l = sizeof(a6);
		getsockname(p6, (struct sockaddr *)&a6, &l);
		expect(a6.sin6_port == p6n.sin6_port, "p6: its id changed");
		echo(p6, true, (struct sockaddr *)&lo6, sizeof(lo6), 0, 7);
		expect(reply_first(p6, true, false, ntohs(p6n.sin6_port)), "p6: no echo reply");
	}
	pass();
}
