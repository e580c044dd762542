/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Packet sockets on lo, with ethertypes of the local experimental range so
 * that no other traffic of the host reaches them:
 * - p1: SOCK_RAW for 0x88b5, bound to lo; PACKET_AUXDATA and
 *   PACKET_IGNORE_OUTGOING on; lo in promiscuous mode through it and
 *   01:00:5e:01:02:03 added twice; a classic BPF filter (accept all, 2
 *   instructions);
 * - p2: SOCK_DGRAM made with protocol 0, bound to lo for 0x88b6,
 *   O_NONBLOCK, PACKET_VERSION TPACKET_V2, in fanout group 0x77 (hash);
 * - tx: SOCK_RAW with protocol 0 (receives nothing), unbound.
 * After the restart their protocols, devices, options, fanout, filter and
 * memberships (lo is still promiscuous) are what they were, and a frame
 * tx sends on lo for each ethertype reaches p1 and p2.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int opt(int s, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	return getsockopt(s, SOL_PACKET, name, &v, &l) < 0 ? -1 : v;
}

static void setopt(int s, int name, int v)
{
	if (setsockopt(s, SOL_PACKET, name, &v, sizeof(v)) < 0)
		fail("setsockopt SOL_PACKET %d: %m", name);
}

static void bind_lo(int s, unsigned lo, uint16_t proto)
{
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = htons(proto),
				  .sll_ifindex = (int)lo };
	if (bind(s, (struct sockaddr *)&ll, sizeof(ll)) < 0)
		fail("bind: %m");
}

static void member(int s, unsigned lo, int type, const uint8_t *addr)
{
	struct packet_mreq mr = { .mr_ifindex = (int)lo, .mr_type = (unsigned short)type };
	if (addr) {
		mr.mr_alen = 6;
		memcpy(mr.mr_address, addr, 6);
	}
	if (setsockopt(s, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0)
		fail("PACKET_ADD_MEMBERSHIP %d: %m", type);
}

static bool lo_promisc(void)
{
	char buf[32] = "";
	test_read_file("/sys/class/net/lo/flags", buf, sizeof(buf));
	return strtoul(buf, NULL, 16) & IFF_PROMISC;
}

/* tx sends an Ethernet frame of type proto with payload msg on lo */
static void frame(int tx, unsigned lo, uint16_t proto, const char *msg)
{
	uint8_t f[64] = { 0 };
	uint16_t p = htons(proto);
	memcpy(f + 12, &p, 2);
	memcpy(f + 14, msg, strlen(msg));
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_protocol = htons(proto),
				  .sll_ifindex = (int)lo, .sll_halen = 6 };
	if (sendto(tx, f, sizeof(f), 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)sizeof(f))
		fail("send a frame: %m");
}

/* s must read msg (at off in what it reads) within 10 s */
static void expect_frame(int s, size_t off, const char *msg, const char *what)
{
	uint8_t buf[128];
	struct pollfd p = { .fd = s, .events = POLLIN };
	if (poll(&p, 1, 10000) != 1) {
		test_failf("%s: no frame", what);
		return;
	}
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	expect(n >= (ssize_t)(off + strlen(msg)) && !memcmp(buf + off, msg, strlen(msg)),
	       "%s: another frame (%zd bytes)", what, n);
}

int main(void)
{
	static const uint8_t mc[6] = { 0x01, 0x00, 0x5e, 0x01, 0x02, 0x03 };
	unsigned lo = if_nametoindex("lo");
	bool was_promisc = lo_promisc();

	int p1 = socket(AF_PACKET, SOCK_RAW, htons(0x88b5));
	if (p1 < 0)
		skip("no packet socket: %m");
	bind_lo(p1, lo, 0x88b5);
	setopt(p1, PACKET_AUXDATA, 1);
	setopt(p1, PACKET_IGNORE_OUTGOING, 1);
	member(p1, lo, PACKET_MR_PROMISC, NULL);
	member(p1, lo, PACKET_MR_MULTICAST, mc);
	member(p1, lo, PACKET_MR_MULTICAST, mc);
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
		BPF_STMT(BPF_RET | BPF_K, 0x40000),
	};
	struct sock_fprog prog = { .len = 2, .filter = code };
	if (setsockopt(p1, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
		fail("SO_ATTACH_FILTER: %m");

	int p2 = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	setopt(p2, PACKET_VERSION, TPACKET_V2);
	bind_lo(p2, lo, 0x88b6);
	int fo = 0x77 | (PACKET_FANOUT_HASH << 16);
	setopt(p2, PACKET_FANOUT, fo);
	int tx = socket(AF_PACKET, SOCK_RAW, 0);
	if (p2 < 0 || tx < 0)
		fail("socket: %m");
	if (!was_promisc && !lo_promisc())
		fail("lo is not promiscuous with p1's membership");

	test_ready();
	test_wait();

	struct sockaddr_ll ll;
	socklen_t l = sizeof(ll);
	expect(getsockname(p1, (struct sockaddr *)&ll, &l) == 0 && ll.sll_ifindex == (int)lo &&
	       ll.sll_protocol == htons(0x88b5), "p1: not bound to lo for 0x88b5");
	l = sizeof(ll);
	expect(getsockname(p2, (struct sockaddr *)&ll, &l) == 0 && ll.sll_ifindex == (int)lo &&
	       ll.sll_protocol == htons(0x88b6), "p2: not bound to lo for 0x88b6");
	int v = -1;
	l = sizeof(v);
	getsockopt(p2, SOL_SOCKET, SO_TYPE, &v, &l);
	expect(v == SOCK_DGRAM, "p2: not a datagram socket");
	expect(opt(p1, PACKET_AUXDATA) == 1 && opt(p1, PACKET_IGNORE_OUTGOING) == 1,
	       "p1: PACKET_AUXDATA or PACKET_IGNORE_OUTGOING lost");
	expect(opt(p2, PACKET_VERSION) == TPACKET_V2, "p2: PACKET_VERSION lost");
	expect(opt(p2, PACKET_FANOUT) == fo, "p2: fanout %#x, was %#x", opt(p2, PACKET_FANOUT), fo);
	expect(fcntl(p2, F_GETFL) & O_NONBLOCK, "p2: O_NONBLOCK lost");
	socklen_t flen = 0;
	getsockopt(p1, SOL_SOCKET, SO_GET_FILTER, NULL, &flen);
	expect(flen == 2, "p1: a filter of %u instructions, was 2", flen);
	expect(was_promisc || lo_promisc(), "lo is not promiscuous any more");

	frame(tx, lo, 0x88b5, "to p1");
	expect_frame(p1, 14, "to p1", "p1");
	frame(tx, lo, 0x88b6, "to p2");
	expect_frame(p2, 0, "to p2", "p2");
	/* p1 saw its frame once (PACKET_IGNORE_OUTGOING) */
	char c;
	expect(recv(p1, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "p1: a second copy");
	pass();
}
