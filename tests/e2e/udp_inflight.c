/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A UDP socket whose datagrams sent are still charged to it at the
 * checkpoint. Two network namespaces held by fds 5 and 6, joined by a veth
 * pair (ckq0 in fd 5's, 10.99.0.1/24; ckq1 in fd 6's, no address); child C
 * joins fd 5's namespace, where a UDP socket of its bound to 10.99.0.1
 * sends a datagram to 10.99.0.2 every 100 ms (an interval timer's
 * handler). Nobody answers
 * the ARP request for 10.99.0.2: each datagram waits in the neighbour's
 * queue (3 s, then is dropped), counted by SIOCOUTQ, as named's queries
 * to an upstream whose neighbour does not resolve are. That is no state
 * of the socket's (it leaves whether the program runs or not): the
 * checkpoint must wait for it, not refuse it as corked. C sees SIOCOUTQ
 * count bytes before it is ready; after the restart, that its socket is
 * bound to the same address and port and still sends.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int sock = -1;
static volatile sig_atomic_t sent, send_err;

static struct sockaddr_in addr(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static void send_one(int sig)
{
	(void)sig;
	int e = errno;
	struct sockaddr_in to = addr("10.99.0.2", 9);
	if (sendto(sock, "datagram", 8, 0, (struct sockaddr *)&to, sizeof(to)) == 8)
		sent++;
	else
		send_err = errno;
	errno = e;
}

static void in_ns(int fd, const char *cmd)
{
	pid_t c = fork();
	if (c == 0) {
		if (setns(fd, CLONE_NEWNET) < 0)
			_exit(1);
		_exit(system(cmd) != 0);
	}
	int st;
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("in fd %d's namespace: %s failed", fd, cmd);
}

static void every(long ms)
{
	struct itimerval it = {{0, ms * 1000}, {0, ms * 1000}};
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		fail("setitimer: %m");
}

/* C, in fd 5's namespace: the socket, its timer; checks once go says. */
static int child_c(int ready, int go)
{
	if (setns(5, CLONE_NEWNET) < 0)
		fail("C: setns: %m");
	sock = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in me = addr("10.99.0.1", 0), got;
	socklen_t l = sizeof(me);
	if (sock < 0 || bind(sock, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    getsockname(sock, (struct sockaddr *)&me, &l) < 0)
		fail("C: bind 10.99.0.1: %m");
	struct sigaction sa = {.sa_handler = send_one, .sa_flags = SA_RESTART};
	sigaction(SIGALRM, &sa, NULL);
	send_one(0);
	int outq = -1;
	if (send_err || ioctl(sock, SIOCOUTQ, &outq) < 0 || outq <= 0)
		fail("C: the datagram to 10.99.0.2 (error %d) is not charged to its socket "
		     "(SIOCOUTQ %d): nothing to test",
		     send_err, outq);
	every(100);
	char g;
	if (write(ready, "c", 1) != 1 || read(go, &g, 1) != 1)
		fail("C: the pipes to the root: %m");
	every(0);
	int before = sent;
	send_one(0);
	expect(sent == before + 1 && !send_err, "C: sendto 10.99.0.2 after the restart: %s",
	       strerror(send_err));
	l = sizeof(got);
	expect(getsockname(sock, (struct sockaddr *)&got, &l) == 0 && got.sin_port == me.sin_port &&
		   got.sin_addr.s_addr == me.sin_addr.s_addr,
	       "C: the socket is not bound to 10.99.0.1:%d any more", ntohs(me.sin_port));
	return test_failures() ? 1 : 0;
}

int main(void)
{
	if (system("command -v ip >/dev/null 2>&1") != 0)
		skip("ip (iproute2) not installed");
	pid_t a = test_netns_child("ip link set lo up"), b = test_netns_child("ip link set lo up");
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
		 "ip link add ckq0 netns /proc/%d/ns/net type veth peer name ckq1 netns "
		 "/proc/%d/ns/net",
		 a, b);
	if (system(cmd) != 0)
		fail("%s failed", cmd);
	test_hold_netns(a, 5);
	test_hold_netns(b, 6);
	in_ns(5, "ip addr add 10.99.0.1/24 dev ckq0 && ip link set ckq0 up");
	in_ns(6, "ip link set ckq1 up");

	int ready[2], go[2];
	if (pipe(ready) || pipe(go))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		/* the root's end closed: C's read ends if the root dies */
		close(go[1]);
		_exit(child_c(ready[1], go[0]));
	}
	close(go[0]);
	char r;
	if (read(ready[0], &r, 1) != 1)
		fail("C did not get ready");

	test_ready();
	test_wait();

	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st), "C: status %x", st);
	pass();
}
