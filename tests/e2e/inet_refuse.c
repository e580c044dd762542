/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A socket the inet kind refuses, chosen by argv[1], at fd 3:
 *   synsent   a TCP connect in progress (SYN_SENT: the listener's accept
 *             queue is full, so its SYN is dropped; saved since tcp_states,
 *             and this listener's queue is refused: no test uses it)
 *   pending   a TCP listener with a connection not accepted yet
 *   closewait a TCP connection whose peer has closed (CLOSE_WAIT; saved
 *             since tcp_halfclose: no test refuses it any more)
 *   udpcork   a UDP socket with data corked (UDP_CORK) in its send queue
 *   udpmore   the same corked by MSG_MORE, UDP_CORK not set (refused once
 *             the checkpoint has waited for it to leave, as a datagram
 *             sent would: udp_inflight)
 *             (datagrams in a receive queue are saved since udp_queue)
 *   netlink   a NETLINK_ROUTE socket with a reply not read yet (RTM_GETLINK of lo)
 *   packet    an AF_PACKET socket with an mmap'ed receive ring
 *   raw       an AF_INET raw socket (ICMP; saved since raw_sock: no test
 *             refuses it)
 * The checkpoint must be refused naming pid, fd and what the socket is;
 * the original then goes on: the socket still works as it did.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <sys/mman.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in lo(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int listener(int backlog, int *port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = lo(0);
	socklen_t al = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, backlog) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		fail("listener: %m");
	*port = ntohs(a.sin_port);
	return l;
}

static void ensure_fd3(int s)
{
	if (s != 3)
		fail("the socket is fd %d, not 3", s);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	int port, s;

	if (!strcmp(what, "synsent")) {
		ensure_fd3(s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
		int l = listener(0, &port), c = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = lo(port);
		if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
			fail("connect: %m");
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0 || errno != EINPROGRESS)
			fail("connect did not stay in progress: %m");
		if (test_tcp_state(s) != 2 /* SYN_SENT */)
			skip("the second connection is in state %d, not SYN_SENT", test_tcp_state(s));
		(void)l;
	} else if (!strcmp(what, "pending")) {
		ensure_fd3(s = listener(4, &port));
		int c = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = lo(port);
		if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
			fail("connect: %m");
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 10000) != 1)
			fail("no pending connection");
	} else if (!strcmp(what, "closewait")) {
		int l = listener(4, &port);
		ensure_fd3(l);
		s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = lo(port);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			fail("connect: %m");
		int c = accept(l, NULL, NULL);
		close(c);
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 10000) != 1 || test_tcp_state(s) != 8 /* CLOSE_WAIT */)
			fail("not in CLOSE_WAIT: %d", test_tcp_state(s));
	} else if (!strcmp(what, "udpcork") || !strcmp(what, "udpmore")) {
		ensure_fd3(s = socket(AF_INET, SOCK_DGRAM, 0));
		int r = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
		struct sockaddr_in a = lo(0);
		socklen_t al = sizeof(a);
		if (bind(r, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    getsockname(r, (struct sockaddr *)&a, &al) < 0 ||
		    connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			fail("bind: %m");
		bool more = !strcmp(what, "udpmore");
		if ((!more && setsockopt(s, IPPROTO_UDP, UDP_CORK, &one, sizeof(one)) < 0) ||
		    send(s, "dgram", 5, more ? MSG_MORE : 0) != 5)
			fail("corked send: %m");
	} else if (!strcmp(what, "netlink")) {
		ensure_fd3(s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
		struct sockaddr_nl a = { .nl_family = AF_NETLINK };
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			fail("bind: %m");
		struct {
			struct nlmsghdr h;
			struct ifinfomsg i;
		} req = { .h = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETLINK,
				 .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
			  .i = { .ifi_family = AF_UNSPEC, .ifi_index = 1 } };
		if (send(s, &req, sizeof(req), 0) != sizeof(req))
			fail("send RTM_GETLINK: %m");
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 10000) != 1)
			fail("no reply to RTM_GETLINK");
	} else if (!strcmp(what, "packet")) {
		/* a receive ring; protocol 0: no packet comes in */
		s = socket(AF_PACKET, SOCK_RAW, 0);
		if (s < 0)
			skip("no packet socket: %m");
		ensure_fd3(s);
		struct tpacket_req rq = { .tp_block_size = 4096, .tp_block_nr = 4,
					  .tp_frame_size = 2048, .tp_frame_nr = 8 };
		if (setsockopt(s, SOL_PACKET, PACKET_RX_RING, &rq, sizeof(rq)) < 0)
			fail("PACKET_RX_RING: %m");
		if (mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0) == MAP_FAILED)
			fail("mmap of the ring: %m");
	} else if (!strcmp(what, "raw")) {
		s = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
		if (s < 0)
			skip("no raw socket: %m");
		ensure_fd3(s);
	} else {
		fail("unknown case '%s'", what);
	}
	test_ready();
	test_wait();
	expect(fcntl(3, F_GETFD) >= 0, "fd 3 is gone");
	if (!strcmp(what, "udpcork") || !strcmp(what, "udpmore")) {
		int q = -1;
		expect(ioctl(s, SIOCOUTQ, &q) == 0 && q > 0, "the corked data is gone (%d)", q);
	}
	pass();
}
