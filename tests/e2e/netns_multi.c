/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A tree in several network namespaces, as pid 1 of `ckpt run --net` (the
 * root in the container's namespace):
 * - child C unshares a network namespace of its own and makes a veth pair
 *   between it and the root's (vc0 in C, 10.77.0.2/30; vr0 in the root's,
 *   10.77.0.1/30), loopback up with 192.0.2.7/32, a route through vc0,
 *   net.ipv4.ip_forward on; then forks G, which stays in C's namespace, and
 *   G2, which unshares one more (loopback up only);
 * - G is a TCP echo server on 127.0.0.1:7777 of C's namespace, C its client:
 *   a line echoed before the checkpoint, and one after the restart on the
 *   same connection;
 * - each notes what `ip` lists in its namespace (C, and the root).
 * After the checkpoint and restart, each checks from inside: its notes are
 * the same; C's namespace is not the root's, G's is C's, G2's is neither;
 * and the pair works: C binds a UDP socket to 10.77.0.2 and the root's
 * datagram from 10.77.0.1 comes through.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOTES                                                                                      \
	"ip -4 -o addr show | awk '{print $2, $4}'; "                                              \
	"ip -o link show | awk '{sub(/@.*/, \"\", $2); print $2, ($3 ~ /[<,]UP[,>]/ ? \"up\" : "   \
	"\"down\"), $5}'; ip route | sed 's/ linkdown//'; "                                        \
	"cat /proc/sys/net/ipv4/ip_forward"

/* What `ip` lists in the caller's network namespace. */
static void notes(char *out, size_t len)
{
	test_netns_run(-1, NOTES, out, len);
}

static void sh(const char *cmd)
{
	if (system(cmd) != 0)
		fail("%s failed", cmd);
}

static void get(int fd, char *c)
{
	ssize_t n;
	while ((n = read(fd, c, 1)) < 0)
		;
	if (n != 1)
		fail("a pipe closed");
}

static struct sockaddr_in lo7777(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7777)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	return a;
}

/* G: echoes what comes on one connection to 127.0.0.1:7777 until its end. */
static void echo(int listening)
{
	struct sockaddr_in a = lo7777();
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
		fail("G: listen on 127.0.0.1:7777: %m");
	if (write(listening, "l", 1) != 1)
		fail("write: %m");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail("G: accept: %m");
	char buf[256];
	ssize_t n;
	while ((n = read(s, buf, sizeof(buf))) != 0) {
		if (n < 0)
			fail("G: read: %m");
		if (!test_netns_here(s) || !test_netns_here(l))
			fail("G: its sockets are not of its network namespace");
		if (write(s, buf, (size_t)n) != n)
			fail("G: write: %m");
	}
	close(s);
	close(l);
}

/* C: one line sent and its echo read back. */
static void line(int s, const char *text)
{
	char buf[64];
	size_t len = strlen(text), at = 0;
	if (write(s, text, len) != (ssize_t)len)
		fail("C: write: %m");
	while (at < len) {
		ssize_t n = read(s, buf + at, len - at);
		if (n <= 0)
			fail("C: the echo of %s: %s", text, n ? strerror(errno) : "end of file");
		at += (size_t)n;
	}
	buf[at] = 0;
	expect(!strcmp(buf, text), "C: sent %s, got %s back", text, buf);
}

static pid_t root_pid;

/* G and G2: wait for the word, check their namespace, exit 0 if right. */
static int grandchild(int go, bool own)
{
	char c;
	get(go, &c);
	ino_t mine = test_netns_of(getpid()), parent = test_netns_of(getppid()),
	      root = test_netns_of(root_pid);
	if (own ? mine == parent || mine == root : mine != parent)
		fail("%s: net:[%lu], its parent's net:[%lu], the root's net:[%lu]",
		     own ? "G2" : "G", (unsigned long)mine, (unsigned long)parent,
		     (unsigned long)root);
	return 0;
}

/* The vr0 of an earlier run in the root's namespace (ckpt's, for
 * netns_multi_host) goes only when that run's namespace is freed, which the
 * kernel does later: wait until the root's namespace has none. */
static void wait_no_vr0(pid_t root)
{
	char path[64];
	static char buf[65536];
	snprintf(path, sizeof(path), "/proc/%d/net/dev", (int)root);
	for (int i = 0; i < 3000; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fail("open %s: %m", path);
		size_t len = 0;
		ssize_t n;
		while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
			len += (size_t)n;
		close(fd);
		buf[len] = 0;
		if (!strstr(buf, " vr0:") && !strstr(buf, "\nvr0:"))
			return;
		usleep(10000);
	}
	fail("a vr0 of an earlier run is still in the root's namespace after 30 s");
}

/* C: its namespace made, G and G2 forked; after the restart, the checks. */
static int child_c(int ready, int go, int res)
{
	static char before[8192], after[8192];
	wait_no_vr0(getppid());
	if (unshare(CLONE_NEWNET) < 0)
		fail("unshare: %m");
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "ip link set lo up && ip addr add 192.0.2.7/32 dev lo && "
		 "ip link add vc0 type veth peer name vr0 netns /proc/%d/ns/net && "
		 "ip addr add 10.77.0.2/30 dev vc0 && ip link set vc0 mtu 1400 up && "
		 "ip route add 198.51.100.0/24 via 10.77.0.1 && "
		 "echo 1 > /proc/sys/net/ipv4/ip_forward",
		 getppid());
	sh(cmd);
	int gp[2];
	if (pipe(gp))
		fail("pipe: %m");
	int lp[2];
	if (pipe(lp))
		fail("pipe: %m");
	pid_t g = fork();
	if (g == 0) {
		echo(lp[1]);
		_exit(grandchild(gp[0], false));
	}
	char l;
	get(lp[0], &l);
	int conn = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a7777 = lo7777();
	if (conn < 0 || connect(conn, (struct sockaddr *)&a7777, sizeof(a7777)) < 0)
		fail("C: connect to 127.0.0.1:7777: %m");
	line(conn, "before\n");
	pid_t g2 = fork();
	if (g2 == 0) {
		if (unshare(CLONE_NEWNET) < 0 || system("ip link set lo up") != 0)
			fail("G2: no namespace of its own");
		if (write(ready, "2", 1) != 1)
			_exit(1);
		_exit(grandchild(gp[0], true));
	}
	char c;
	if (write(ready, "c", 1) != 1)
		fail("write: %m");
	get(go, &c); /* vr0 is up */
	notes(before, sizeof(before));
	expect(strstr(before, "vc0 10.77.0.2/30") && strstr(before, "lo 192.0.2.7/32") &&
		   strstr(before, "198.51.100.0/24 via 10.77.0.1 dev vc0") &&
		   strstr(before, "vc0 up 1400"),
	       "C's notes before:\n%s", before);
	if (write(ready, "n", 1) != 1)
		fail("write: %m");

	get(go, &c);
	expect(test_netns_here(conn), "C: its connection is not of its network namespace");
	line(conn, "after the restart\n");
	close(conn);
	if (write(gp[1], "gg", 2) != 2)
		fail("write: %m");
	notes(after, sizeof(after));
	expect(!strcmp(before, after), "C's namespace changed:\n--- before\n%s--- after\n%s",
	       before, after);
	ino_t mine = test_netns_of(getpid()), root = test_netns_of(getppid());
	expect(mine != root, "C is in the root's network namespace net:[%lu]", (unsigned long)mine);
	int st;
	expect(waitpid(g, &st, 0) == g && WIFEXITED(st) && !WEXITSTATUS(st), "G: status %x", st);
	expect(waitpid(g2, &st, 0) == g2 && WIFEXITED(st) && !WEXITSTATUS(st), "G2: status %x", st);

	/* the pair: the root's datagram comes in */
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7070)};
	inet_pton(AF_INET, "10.77.0.2", &a.sin_addr);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("C: bind 10.77.0.2: %m");
	if (write(res, "b", 1) != 1)
		fail("write: %m");
	struct pollfd p = {.fd = s, .events = POLLIN};
	char buf[16] = "";
	expect(poll(&p, 1, 30000) == 1 && recv(s, buf, sizeof(buf) - 1, 0) == 5 &&
		   !strcmp(buf, "hello"),
	       "C: no datagram from the root through the pair");
	return test_failures() ? 1 : 0;
}

int main(void)
{
	static char before[8192], after[8192];
	int ready[2], go[2], res[2];
	root_pid = getpid();
	if (pipe(ready) || pipe(go) || pipe(res))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0)
		_exit(child_c(ready[1], go[0], res[1]));
	char r1, r2;
	get(ready[0], &r1);
	get(ready[0], &r2);
	sh("ip addr add 10.77.0.1/30 dev vr0 && ip link set vr0 up");
	if (write(go[1], "u", 1) != 1)
		fail("write: %m");
	get(ready[0], &r1);
	if (r1 != 'n')
		fail("C: %c", r1);
	notes(before, sizeof(before));
	expect(strstr(before, "vr0 10.77.0.1/30") != NULL, "the root's notes:\n%s", before);

	test_ready();
	test_wait();

	notes(after, sizeof(after));
	expect(!strcmp(before, after), "the root's namespace changed:\n--- before\n%s--- after\n%s",
	       before, after);
	expect(test_netns_of(c) != test_netns_of(getpid()), "C is in the root's network namespace");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	char b;
	get(res[0], &b);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in from = {.sin_family = AF_INET},
			   to = {.sin_family = AF_INET, .sin_port = htons(7070)};
	inet_pton(AF_INET, "10.77.0.1", &from.sin_addr);
	inet_pton(AF_INET, "10.77.0.2", &to.sin_addr);
	if (s < 0 || bind(s, (struct sockaddr *)&from, sizeof(from)) < 0 ||
	    sendto(s, "hello", 5, 0, (struct sockaddr *)&to, sizeof(to)) != 5)
		fail("the root: send to 10.77.0.2: %m");
	close(s);
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st), "C: status %x", st);
	pass();
}
