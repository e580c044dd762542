/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Netlink sockets: a NETLINK_ROUTE socket bound by the kernel (port id 0
 * asked: the kernel gives the pid), joined to RTMGRP_LINK by bind and to
 * RTNLGRP_IPV6_ROUTE (group 11) and RTNLGRP_NSID (group 28) by
 * setsockopt, with NETLINK_EXT_ACK on and O_NONBLOCK; a NETLINK_GENERIC
 * socket bound to a port id of its own choosing (the pid + 2^30) and
 * connected to the kernel; an unbound NETLINK_SOCK_DIAG socket. After
 * restart each has its port id, groups (NETLINK_LIST_MEMBERSHIPS),
 * options and flags back, and the route socket still answers: an
 * RTM_GETLINK of lo comes back with its name.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint32_t portid_of(int s)
{
	struct sockaddr_nl a = { 0 };
	socklen_t l = sizeof(a);
	if (getsockname(s, (struct sockaddr *)&a, &l) < 0)
		fail("getsockname: %m");
	return a.nl_pid;
}

static uint32_t groups_word0(int s)
{
	uint32_t g[8] = { 0 };
	socklen_t l = sizeof(g);
	if (getsockopt(s, SOL_NETLINK, NETLINK_LIST_MEMBERSHIPS, g, &l) < 0)
		fail("NETLINK_LIST_MEMBERSHIPS: %m");
	return g[0];
}

static int opt(int s, int o)
{
	int v = -1;
	socklen_t l = sizeof(v);
	return getsockopt(s, SOL_NETLINK, o, &v, &l) < 0 ? -1 : v;
}

/* RTM_GETLINK of ifindex 1: its reply names lo */
static bool lo_answers(int s)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = { .h = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETLINK,
			 .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 7 },
		  .i = { .ifi_family = AF_UNSPEC, .ifi_index = 1 } };
	if (send(s, &req, sizeof(req), 0) != sizeof(req))
		return false;
	struct pollfd p = { .fd = s, .events = POLLIN };
	char buf[8192];
	if (poll(&p, 1, 10000) != 1)
		return false;
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (n < (ssize_t)sizeof(*h) || h->nlmsg_type != RTM_NEWLINK || h->nlmsg_seq != 7)
		return false;
	struct ifinfomsg *ifi = NLMSG_DATA(h);
	int len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(*ifi));
	for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == IFLA_IFNAME && !strcmp(RTA_DATA(a), "lo"))
			return true;
	return false;
}

int main(void)
{
	int route = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK, NETLINK_ROUTE);
	int gen = socket(AF_NETLINK, SOCK_DGRAM, NETLINK_GENERIC);
	int diag = socket(AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG);
	if (route < 0 || gen < 0 || diag < 0)
		fail("socket: %m");
	struct sockaddr_nl a = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK };
	if (bind(route, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("bind route: %m");
	int g = RTNLGRP_IPV6_ROUTE, g2 = RTNLGRP_NSID, one = 1;
	if (setsockopt(route, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g, sizeof(g)) < 0 ||
	    setsockopt(route, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g2, sizeof(g2)) < 0 ||
	    setsockopt(route, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one)) < 0)
		fail("setsockopt: %m");
	uint32_t own = (uint32_t)getpid() | (1u << 30);
	struct sockaddr_nl b = { .nl_family = AF_NETLINK, .nl_pid = own };
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	if (bind(gen, (struct sockaddr *)&b, sizeof(b)) < 0 ||
	    connect(gen, (struct sockaddr *)&k, sizeof(k)) < 0)
		fail("bind/connect generic: %m");
	uint32_t route_id = portid_of(route), route_groups = groups_word0(route);
	if (!route_id || portid_of(diag) != 0)
		fail("port ids before: %u %u", route_id, portid_of(diag));

	test_ready();
	test_wait();

	expect(portid_of(route) == route_id, "route: port id %u, want %u", portid_of(route),
	       route_id);
	expect(groups_word0(route) == route_groups, "route: groups %#x, want %#x",
	       groups_word0(route), route_groups);
	expect(route_groups == (RTMGRP_LINK | 1u << (RTNLGRP_IPV6_ROUTE - 1) |
				1u << (RTNLGRP_NSID - 1)),
	       "route: groups %#x before", route_groups);
	expect(opt(route, NETLINK_EXT_ACK) == 1, "route: NETLINK_EXT_ACK lost");
	expect(opt(route, NETLINK_CAP_ACK) == 0, "route: NETLINK_CAP_ACK appeared");
	expect(fcntl(route, F_GETFL) & O_NONBLOCK, "route: O_NONBLOCK lost");
	expect(portid_of(gen) == own, "generic: port id %u, want %u", portid_of(gen), own);
	struct sockaddr_nl peer = { 0 };
	socklen_t l = sizeof(peer);
	expect(getpeername(gen, (struct sockaddr *)&peer, &l) == 0 && peer.nl_family == AF_NETLINK,
	       "generic: getpeername: %m");
	expect(portid_of(diag) == 0, "sock_diag: bound to %u, was not bound", portid_of(diag));
	int type = 0;
	l = sizeof(type);
	expect(getsockopt(gen, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_DGRAM,
	       "generic: type %d", type);
	expect(lo_answers(route), "route: RTM_GETLINK of lo got no answer naming lo");
	pass();
}
