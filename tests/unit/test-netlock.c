/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The network lock (src/net/lock.c), in network namespaces of the test's
 * own: the host's is never touched. The connections live in namespace A;
 * the test's thread then moves to namespace B, so every lock call reaches
 * A through the fd it is given (a thread that enters it), as ckpt does for
 * a tree in another namespace.
 */
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/lock.h"
#include "unit.h"

static int ns_a = -1; /* the namespace of the connections */
static int ns_b = -1; /* the test thread's, otherwise */

/* A socket made in namespace A. */
static int socket_a(int family)
{
	if (setns(ns_a, CLONE_NEWNET) < 0)
		return -1;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (setns(ns_b, CLONE_NEWNET) < 0)
		abort();
	return fd;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int r = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 ? 0 : -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (r == 0)
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	if (s >= 0)
		close(s);
	return r;
}

struct pair {
	int client, server;
	struct sockaddr_storage caddr, saddr; /* as the client sees them */
};

/* A connection to the listener lfd, accepted. */
static int connect_pair(int lfd, int family, struct pair *p)
{
	struct sockaddr_storage to;
	socklen_t len = sizeof(to);
	if (getsockname(lfd, (struct sockaddr *)&to, &len) < 0)
		return -1;
	p->client = socket_a(family);
	if (p->client < 0 || connect(p->client, (struct sockaddr *)&to, len) < 0)
		return -1;
	p->server = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	len = sizeof(p->caddr);
	getsockname(p->client, (struct sockaddr *)&p->caddr, &len);
	len = sizeof(p->saddr);
	getpeername(p->client, (struct sockaddr *)&p->saddr, &len);
	int one = 1;
	setsockopt(p->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(p->server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return p->server < 0 ? -1 : 0;
}

static int listener(int family)
{
	int fd = socket_a(family);
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int r = family == AF_INET ? bind(fd, (struct sockaddr *)&in, sizeof(in))
				  : bind(fd, (struct sockaddr *)&in6, sizeof(in6));
	if (r < 0 || listen(fd, 16) < 0)
		return -1;
	return fd;
}

/* Waits up to ms for one byte on fd: the byte, or -1. */
static int recv_byte(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;
	if (poll(&p, 1, ms) != 1 || recv(fd, &c, 1, MSG_DONTWAIT) != 1)
		return -1;
	return (unsigned char)c;
}

/* Waits until the lock's counters pass min packets; the count. */
static uint64_t wait_dropped(struct netlock *nl, uint64_t min)
{
	uint64_t n = 0, until = now_ms() + 10000;
	while (netlock_dropped(nl, &n) == 0 && n < min && now_ms() < until)
		poll(NULL, 0, 5); /* polled: a condition with a deadline */
	return n;
}

TEST(lock_drops_one_flow)
{
	int lfd = listener(AF_INET);
	struct pair a, b;
	CHECK(lfd >= 0);
	CHECK(connect_pair(lfd, AF_INET, &a) == 0);
	CHECK(connect_pair(lfd, AF_INET, &b) == 0);

	char name[NETLOCK_NAME_MAX];
	netlock_name(name, sizeof(name));
	struct netlock *nl = NULL;
	CHECK_EQ(netlock_new(ns_a, name, &nl), 0);
	CHECK_EQ(netlock_add(nl, (struct sockaddr *)&a.caddr, (struct sockaddr *)&a.saddr), 0);
	/* its other end too, as the tree's two ends of a loopback pair give */
	CHECK_EQ(netlock_add(nl, (struct sockaddr *)&a.saddr, (struct sockaddr *)&a.caddr), 0);
	CHECK_EQ(netlock_count(nl), 2);
	CHECK_EQ(netlock_exists(ns_a, name), 0);
	CHECK_EQ(netlock_install(nl), 0);
	CHECK_EQ(netlock_exists(ns_a, name), 1);
	/* in A only: this thread's namespace B has no such table */
	CHECK_EQ(netlock_exists(-1, name), 0);

	/* the locked flow, both ways: dropped (counted), never delivered */
	CHECK_EQ(send(a.client, "x", 1, 0), 1);
	CHECK(wait_dropped(nl, 1) >= 1);
	CHECK_EQ(send(a.server, "y", 1, 0), 1);
	CHECK(wait_dropped(nl, 2) >= 2);
	char c;
	CHECK(recv(a.server, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
	CHECK(recv(a.client, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
	/* another flow on the same ports' listener passes */
	CHECK_EQ(send(b.client, "z", 1, 0), 1);
	CHECK_EQ(recv_byte(b.server, 10000), 'z');

	/* a second lock of the same name is refused, the first untouched */
	struct netlock *dup = NULL;
	CHECK_EQ(netlock_new(ns_a, name, &dup), 0);
	CHECK_EQ(netlock_install(dup), -EEXIST);
	CHECK(netlock_error(dup)[0] != 0);
	netlock_free(dup);
	CHECK_EQ(netlock_exists(ns_a, name), 1);

	/* removed: the peers' retransmissions arrive, nothing was lost */
	CHECK_EQ(netlock_remove(nl), 0);
	CHECK_EQ(netlock_exists(ns_a, name), 0);
	CHECK_EQ(recv_byte(a.server, 20000), 'x');
	CHECK_EQ(recv_byte(a.client, 20000), 'y');
	CHECK_EQ(send(a.client, "w", 1, 0), 1);
	CHECK_EQ(recv_byte(a.server, 10000), 'w');
	CHECK_EQ(netlock_remove(nl), 0); /* twice is fine */
	netlock_free(nl);
	close(a.client), close(a.server), close(b.client), close(b.server), close(lfd);
}

/* A listener's port held out: a new client's first SYN is dropped (its
 * connect waits, nothing queued), a connection already made goes on both
 * ways; once removed, the client's retransmitted SYN connects. */
TEST(hold_drops_first_syn)
{
	int lfd = listener(AF_INET);
	struct pair a;
	CHECK(lfd >= 0);
	CHECK(connect_pair(lfd, AF_INET, &a) == 0);
	struct sockaddr_in to;
	socklen_t len = sizeof(to);
	CHECK(getsockname(lfd, (struct sockaddr *)&to, &len) == 0);

	char name[NETLOCK_NAME_MAX];
	netlock_name(name, sizeof(name));
	struct netlock *nl = NULL;
	CHECK_EQ(netlock_new(ns_a, name, &nl), 0);
	CHECK_EQ(netlock_add_syn_port(nl, ntohs(to.sin_port)), 0);
	CHECK_EQ(netlock_install(nl), 0);

	/* the new client: its SYN counted as dropped, nothing to accept */
	int c = socket_a(AF_INET);
	CHECK(c >= 0);
	CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0);
	CHECK(connect(c, (struct sockaddr *)&to, len) < 0 && errno == EINPROGRESS);
	CHECK(wait_dropped(nl, 1) >= 1);
	struct pollfd lp = { .fd = lfd, .events = POLLIN };
	CHECK_EQ(poll(&lp, 1, 200), 0);
	/* the connection made before goes on */
	CHECK_EQ(send(a.client, "x", 1, 0), 1);
	CHECK_EQ(recv_byte(a.server, 10000), 'x');
	CHECK_EQ(send(a.server, "y", 1, 0), 1);
	CHECK_EQ(recv_byte(a.client, 10000), 'y');

	/* removed: the SYN's retransmission (after 1 s) is answered */
	CHECK_EQ(netlock_remove(nl), 0);
	CHECK_EQ(poll(&lp, 1, 20000), 1);
	int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(s >= 0);
	struct pollfd cp = { .fd = c, .events = POLLOUT };
	int err = -1;
	socklen_t el = sizeof(err);
	CHECK_EQ(poll(&cp, 1, 10000), 1);
	CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	netlock_free(nl);
	close(s), close(c), close(a.client), close(a.server), close(lfd);
}

/* A socket made in namespace A from B: it reaches A's loopback listener. */
TEST(socket_in_namespace)
{
	int lfd = listener(AF_INET);
	CHECK(lfd >= 0);
	struct sockaddr_in to;
	socklen_t len = sizeof(to);
	CHECK(getsockname(lfd, (struct sockaddr *)&to, &len) == 0);
	int here = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(here >= 0 && connect(here, (struct sockaddr *)&to, len) < 0); /* B: no such */
	int c = netns_socket(ns_a, AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0);
	CHECK_EQ(connect(c, (struct sockaddr *)&to, len), 0);
	CHECK(fcntl(c, F_GETFD) & FD_CLOEXEC);
	close(c), close(here), close(lfd);
}

TEST(lock_ipv6_and_mapped)
{
	int l6 = listener(AF_INET6);
	struct pair p;
	CHECK(l6 >= 0);
	CHECK(connect_pair(l6, AF_INET6, &p) == 0);
	/* a v4-mapped address is an IPv4 flow */
	struct sockaddr_in6 m = { .sin6_family = AF_INET6, .sin6_port = htons(5) };
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr);
	struct sockaddr_in v4 = { .sin_family = AF_INET, .sin_port = htons(6) };
	v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	char name[NETLOCK_NAME_MAX];
	netlock_name(name, sizeof(name));
	struct netlock *nl = NULL;
	CHECK_EQ(netlock_new(ns_a, name, &nl), 0);
	CHECK_EQ(netlock_add(nl, (struct sockaddr *)&p.caddr, (struct sockaddr *)&p.saddr), 0);
	CHECK_EQ(netlock_add(nl, (struct sockaddr *)&m, (struct sockaddr *)&v4), 0);
	CHECK_EQ(netlock_add(nl, (struct sockaddr *)&p.caddr, (struct sockaddr *)&v4), -EINVAL);
	CHECK_EQ(netlock_install(nl), 0);
	CHECK_EQ(send(p.client, "6", 1, 0), 1);
	CHECK(wait_dropped(nl, 1) >= 1);
	char c;
	CHECK(recv(p.server, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
	netlock_free(nl); /* removes it */
	CHECK_EQ(netlock_exists(ns_a, name), 0);
	CHECK_EQ(recv_byte(p.server, 20000), '6');
	close(p.client), close(p.server), close(l6);
}

/* What ckpt's guardian does: another process, no lock object, and the
 * removal request built at install, sent on a copy of the lock's socket. */
TEST(remove_from_another_process)
{
	char name[NETLOCK_NAME_MAX];
	netlock_name(name, sizeof(name));
	struct netlock *nl = NULL;
	CHECK_EQ(netlock_new(ns_a, name, &nl), 0);
	CHECK_EQ(netlock_install(nl), 0);
	pid_t pid = fork();
	if (pid == 0)
		_exit(netlock_remove_name(ns_a, name) == 0 ? 0 : 1);
	int status = -1;
	waitpid(pid, &status, 0);
	CHECK_EQ(status, 0);
	CHECK_EQ(netlock_exists(ns_a, name), 0);
	CHECK_EQ(netlock_remove_name(ns_a, name), -ENOENT);
	CHECK_EQ(netlock_remove(nl), 0); /* gone already: fine */
	netlock_free(nl);

	netlock_name(name, sizeof(name));
	nl = NULL;
	CHECK_EQ(netlock_new(ns_a, name, &nl), 0);
	CHECK_EQ(netlock_install(nl), 0);
	int fd = -1;
	const void *msg = NULL;
	size_t len = 0;
	CHECK_EQ(netlock_undo(nl, &fd, &msg, &len), 0);
	pid = fork();
	if (pid == 0) {
		struct sockaddr_nl k = { .nl_family = AF_NETLINK };
		_exit(sendto(fd, msg, len, 0, (struct sockaddr *)&k, sizeof(k)) == (ssize_t)len ? 0
												 : 1);
	}
	waitpid(pid, &status, 0);
	CHECK_EQ(status, 0);
	CHECK_EQ(netlock_exists(ns_a, name), 0);
	netlock_free(nl);
	CHECK_EQ(netlock_remove_name(ns_a, "bad name"), -EINVAL);
}

/* libnftables waits with select(): its socket must stay below FD_SETSIZE
 * however many fds the caller holds (ckpt holds one per fd it copied) */
TEST(many_fds)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max < 1200)
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	int fds[1100], n = 0;
	while (n < 1100 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		n++;
	CHECK_EQ(n, 1100);
	char name[NETLOCK_NAME_MAX];
	netlock_name(name, sizeof(name));
	struct netlock *nl = NULL;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(1) };
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_port = htons(2) };
	CHECK_EQ(netlock_new(ns_a, name, &nl), 0);
	CHECK_EQ(netlock_add(nl, (struct sockaddr *)&a, (struct sockaddr *)&b), 0);
	CHECK_EQ(netlock_install(nl), 0);
	uint64_t dropped = 1;
	CHECK_EQ(netlock_dropped(nl, &dropped), 0);
	CHECK_EQ(dropped, 0);
	netlock_free(nl);
	CHECK_EQ(netlock_exists(ns_a, name), 0);
	while (n > 0)
		close(fds[--n]);
}

int main(void)
{
	if (unshare(CLONE_NEWNET) < 0) {
		printf("SKIP: cannot make a network namespace: %s\n", strerror(errno));
		return 77;
	}
	ns_a = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns_a < 0 || lo_up() < 0) {
		printf("FAIL: lo up: %s\n", strerror(errno));
		return 1;
	}
	/* from now on the lock must reach A from elsewhere */
	if (unshare(CLONE_NEWNET) < 0 || (ns_b = open("/proc/thread-self/ns/net", O_RDONLY)) < 0) {
		printf("FAIL: second namespace: %s\n", strerror(errno));
		return 1;
	}
	struct netlock *probe = NULL;
	if (netlock_new(-1, "ckpt_probe", &probe) == 0 && netlock_install(probe) == -EPROTO &&
	    strstr(netlock_error(probe), "not supported")) {
		printf("SKIP: nftables: %s\n", netlock_error(probe));
		return 77;
	}
	netlock_free(probe);
	RUN(lock_drops_one_flow);
	RUN(lock_ipv6_and_mapped);
	RUN(hold_drops_first_syn);
	RUN(socket_in_namespace);
	RUN(remove_from_another_process);
	RUN(many_fds);
	return unit_done();
}
