/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sockets of a task in another network namespace than the tree's root's:
 * child C unshares a network namespace of its own (loopback up) and makes
 * there
 * (a) a unix stream socketpair with bytes queued in one end, a unix
 *     datagram socketpair with two datagrams queued, and a seqpacket
 *     socketpair with two records queued, the second carrying a pipe's
 *     read end (SCM_RIGHTS) with bytes in the pipe;
 * (b) a unix stream listener bound to an abstract name, a client connected
 *     and accepted (with bytes queued at the server's end), and a second
 *     client connected and not accepted yet that sent bytes (the
 *     checkpoint swaps that pending connection, in C's namespace);
 * (c) a NETLINK_ROUTE socket bound to RTMGRP_IPV4_IFADDR;
 * (d) a packet socket bound to the namespace's lo, protocol 0x88b5 (a
 *     local experimental ethertype: nothing else sends it, so its queue
 *     is empty at the checkpoint).
 * (e) C also holds one end of a unix stream socketpair the root made before
 *     the fork (so of the root's namespace), the root the other, with
 *     bytes queued for C; and (f) C makes a unix stream socketpair in its
 *     namespace and passes one end to the root over (e) (SCM_RIGHTS), bytes
 *     queued for the root: the root, collected first, holds a socket of a
 *     namespace the checkpoint has not met yet.
 * After checkpoint --kill and restart, C
 * checks from inside: each socket is of its namespace (SO_NETNS_COOKIE),
 * the queued bytes and datagrams are there, the accepted connection and
 * the pending one hold what was sent, a new client reaches the abstract
 * name; an address added to lo comes as RTM_NEWADDR on (c); a frame sent
 * on lo with that ethertype comes in on (d); its end of (e) is of the
 * root's namespace, not its own, and holds the bytes. The root checks that the
 * abstract name is not reachable in its own namespace.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define ETH_LOCAL 0x88b5

static char name[64]; /* the abstract name, without its leading NUL */

static socklen_t abstract(struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	size_t n = strlen(name);
	memcpy(a->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void get(int fd, char *c)
{
	ssize_t n;
	while ((n = read(fd, c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		fail("a pipe closed");
}

/* Reads exactly len bytes from s within 10 s (what was queued). */
static void read_all(int s, char *buf, size_t len, const char *what)
{
	size_t at = 0;
	while (at < len) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		if (poll(&p, 1, 10000) != 1)
			fail("%s: nothing to read after %zu bytes", what, at);
		ssize_t n = read(s, buf + at, len - at);
		if (n <= 0)
			fail("%s: %s", what, n ? strerror(errno) : "end of file");
		at += (size_t)n;
	}
	buf[at] = 0;
}

static void expect_read(int s, const char *want, const char *what)
{
	char buf[128];
	read_all(s, buf, strlen(want), what);
	expect(!strcmp(buf, want), "%s: read '%s', expected '%s'", what, buf, want);
}

static void send_str(int s, const char *text)
{
	if (send(s, text, strlen(text), 0) != (ssize_t)strlen(text))
		fail("send %s: %m", text);
}

static void lo_up(void)
{
	struct ifreq r = {0};
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	snprintf(r.ifr_name, sizeof(r.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &r) < 0)
		fail("lo: %m");
	r.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &r) < 0)
		fail("lo up: %m");
	close(s);
}

/* Does an RTM_NEWADDR come on s within 10 s? */
static bool newaddr(int s)
{
	char buf[8192];
	for (;;) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		if (poll(&p, 1, 10000) != 1)
			return false;
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		if (n < 0)
			return false;
		int len = (int)n;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len))
			if (h->nlmsg_type == RTM_NEWADDR)
				return true;
	}
}

struct c_socks {
	int cross; /* (e) */
	int mine;  /* (f): C's end */
	int pair[2], dpair[2], spair[2], listener, client, server, pending, nl, pk;
};

/* (f): one end of a pair of C's namespace passed to the root */
static void pass_to_root(struct c_socks *k)
{
	int fp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fp) < 0)
		fail("socketpair: %m");
	test_send_fds(k->cross, "f", &fp[1], 1);
	close(fp[1]);
	send_str(fp[0], "to the root");
	k->mine = fp[0];
}

/* The root: the fd that came with a message on s. */
static int recv_fd(int s)
{
	char c;
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = &c, .iov_len = 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	struct cmsghdr *ch = recvmsg(s, &mh, 0) == 1 ? CMSG_FIRSTHDR(&mh) : NULL;
	int fd;
	if (!ch || ch->cmsg_type != SCM_RIGHTS)
		fail("the root: no fd from C: %m");
	memcpy(&fd, CMSG_DATA(ch), sizeof(fd));
	return fd;
}

static void make_socks(struct c_socks *k)
{
	struct sockaddr_un a;
	socklen_t alen = abstract(&a);
	/* (a) */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, k->pair) < 0 ||
	    socketpair(AF_UNIX, SOCK_DGRAM, 0, k->dpair) < 0)
		fail("socketpair: %m");
	send_str(k->pair[1], "queued in the pair");
	send_str(k->dpair[1], "first datagram");
	send_str(k->dpair[1], "second");
	int pp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, k->spair) < 0 || pipe(pp) < 0)
		fail("a seqpacket pair: %m");
	send_str(k->spair[1], "record one");
	if (write(pp[1], "piped", 5) != 5)
		fail("write: %m");
	test_send_fds(k->spair[1], "with a pipe", &pp[0], 1);
	close(pp[0]);
	close(pp[1]);
	/* (b) */
	k->listener = socket(AF_UNIX, SOCK_STREAM, 0);
	if (k->listener < 0 || bind(k->listener, (struct sockaddr *)&a, alen) < 0 ||
	    listen(k->listener, 8) < 0)
		fail("listen on @%s: %m", name);
	k->client = socket(AF_UNIX, SOCK_STREAM, 0);
	if (k->client < 0 || connect(k->client, (struct sockaddr *)&a, alen) < 0)
		fail("connect to @%s: %m", name);
	k->server = accept(k->listener, NULL, NULL);
	if (k->server < 0)
		fail("accept: %m");
	send_str(k->client, "to the server");
	k->pending = socket(AF_UNIX, SOCK_STREAM, 0);
	if (k->pending < 0 || connect(k->pending, (struct sockaddr *)&a, alen) < 0)
		fail("connect to @%s: %m", name);
	send_str(k->pending, "sent while pending");
	/* (c) */
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK, .nl_groups = RTMGRP_IPV4_IFADDR};
	k->nl = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	if (k->nl < 0 || bind(k->nl, (struct sockaddr *)&nl, sizeof(nl)) < 0)
		fail("netlink: %m");
	/* (d) */
	struct sockaddr_ll ll = {.sll_family = AF_PACKET,
				 .sll_protocol = htons(ETH_LOCAL),
				 .sll_ifindex = (int)if_nametoindex("lo")};
	k->pk = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_LOCAL));
	if (k->pk < 0 || !ll.sll_ifindex || bind(k->pk, (struct sockaddr *)&ll, sizeof(ll)) < 0)
		fail("packet socket on lo: %m");
}

static void check_socks(struct c_socks *k)
{
	struct sockaddr_un a;
	socklen_t alen = abstract(&a);
	int all[] = {k->pair[0],  k->pair[1], k->dpair[0], k->dpair[1], k->spair[0], k->spair[1],
		     k->listener, k->client,  k->server,   k->pending,	k->nl,	     k->pk};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		expect(test_netns_here(all[i]),
		       "C: socket %zu (fd %d) is not of its network namespace", i, all[i]);
	/* (e), (f) */
	expect(!test_netns_here(k->cross), "C: its end of the root's pair is of its own namespace");
	expect(test_netns_here(k->mine),
	       "C: its end of the pair it passed is not of its namespace");
	expect_read(k->mine, "to C", "the pair C passed to the root");
	expect_read(k->cross, "from the root", "the root's pair");
	/* (a) */
	expect_read(k->pair[0], "queued in the pair", "the stream pair");
	send_str(k->pair[0], "back");
	expect_read(k->pair[1], "back", "the stream pair, the other way");
	char buf[64];
	ssize_t n = recv(k->dpair[0], buf, sizeof(buf) - 1, MSG_DONTWAIT);
	expect(n == 14 && !memcmp(buf, "first datagram", 14), "the dgram pair: first %zd", n);
	n = recv(k->dpair[0], buf, sizeof(buf) - 1, MSG_DONTWAIT);
	expect(n == 6 && !memcmp(buf, "second", 6), "the dgram pair: second %zd", n);
	n = recv(k->spair[0], buf, sizeof(buf) - 1, MSG_DONTWAIT);
	expect(n == 10 && !memcmp(buf, "record one", 10), "the seqpacket pair: first %zd", n);
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	n = recvmsg(k->spair[0], &mh, MSG_DONTWAIT);
	struct cmsghdr *ch = n == 11 ? CMSG_FIRSTHDR(&mh) : NULL;
	expect(ch && ch->cmsg_type == SCM_RIGHTS && !memcmp(buf, "with a pipe", 11),
	       "the seqpacket pair: no second record with its fd (%zd)", n);
	if (ch) {
		int pfd;
		memcpy(&pfd, CMSG_DATA(ch), sizeof(pfd));
		char piped[8] = "";
		expect(read(pfd, piped, sizeof(piped) - 1) == 5 && !strcmp(piped, "piped"),
		       "the pipe passed on the seqpacket pair lost its bytes");
		close(pfd);
	}
	/* (b) */
	expect_read(k->server, "to the server", "the accepted connection");
	send_str(k->server, "reply");
	expect_read(k->client, "reply", "the client");
	int p = accept(k->listener, NULL, NULL);
	if (p < 0)
		fail("C: accept the pending connection: %m");
	expect_read(p, "sent while pending", "the pending connection");
	send_str(p, "late reply");
	expect_read(k->pending, "late reply", "the pending client");
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, alen) < 0)
		fail("C: a new client to @%s: %m", name);
	int s = accept(k->listener, NULL, NULL);
	expect(s >= 0, "C: accept the new client: %m");
	close(c);
	close(s);
	close(p);
	/* (c) */
	if (system("ip addr add 192.0.2.9/32 dev lo") != 0)
		fail("ip addr add failed");
	expect(newaddr(k->nl), "C: no RTM_NEWADDR on the restored route socket");
	/* (d) */
	struct sockaddr_ll to = {.sll_family = AF_PACKET,
				 .sll_protocol = htons(ETH_LOCAL),
				 .sll_ifindex = (int)if_nametoindex("lo"),
				 .sll_halen = 6};
	int snd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_LOCAL));
	if (snd < 0 || sendto(snd, "frame", 5, 0, (struct sockaddr *)&to, sizeof(to)) != 5)
		fail("C: send a frame on lo: %m");
	close(snd);
	struct pollfd pf = {.fd = k->pk, .events = POLLIN};
	n = poll(&pf, 1, 10000) == 1 ? recv(k->pk, buf, sizeof(buf), MSG_DONTWAIT) : -1;
	expect(n == 5 && !memcmp(buf, "frame", 5), "C: the frame on lo did not come (%zd)", n);
	struct sockaddr_ll me = {0};
	socklen_t ml = sizeof(me);
	expect(getsockname(k->pk, (struct sockaddr *)&me, &ml) == 0 &&
		   me.sll_ifindex == (int)if_nametoindex("lo") &&
		   ntohs(me.sll_protocol) == ETH_LOCAL,
	       "C: the packet socket is not bound to lo, 0x%x", ETH_LOCAL);
}

static int child_c(int ready, int go, int cross)
{
	struct c_socks k = {.cross = cross};
	if (unshare(CLONE_NEWNET) < 0)
		fail("unshare: %m");
	lo_up();
	make_socks(&k);
	pass_to_root(&k);
	char c;
	if (write(ready, "c", 1) != 1)
		fail("write: %m");
	get(go, &c);
	check_socks(&k);
	return test_failures() ? 1 : 0;
}

int main(void)
{
	int ready[2], go[2], cross[2];
	snprintf(name, sizeof(name), "ckpt-netns-socks-%d", getpid());
	if (pipe(ready) || pipe(go) || socketpair(AF_UNIX, SOCK_STREAM, 0, cross))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		close(cross[1]);
		_exit(child_c(ready[1], go[0], cross[0]));
	}
	close(cross[0]);
	send_str(cross[1], "from the root");
	char r;
	get(ready[0], &r);
	int passed = recv_fd(cross[1]);

	test_ready();
	test_wait();

	expect(test_netns_of(c) != test_netns_of(getpid()), "C is in the root's network namespace");
	expect(!test_netns_here(passed), "the root: the end C passed is of the root's namespace");
	expect_read(passed, "to the root", "the root: the end C passed");
	send_str(passed, "to C");
	/* the abstract name is C's namespace's only */
	struct sockaddr_un a;
	socklen_t alen = abstract(&a);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	expect(s >= 0 && connect(s, (struct sockaddr *)&a, alen) < 0 && errno == ECONNREFUSED,
	       "the root reaches @%s in its own namespace", name);
	close(s);
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st), "C: status %x", st);
	pass();
}
