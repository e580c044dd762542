/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * netns_routed HOSTIF HOSTADDR CHILDADDR [forward|kept]: a tree whose child has a network
 * namespace of its own, joined by a veth pair to the root's (vc0 in the
 * child's with CHILDADDR/30, HOSTIF in the root's with HOSTADDR/30, the
 * child's default route through it), and a TCP connection there to a peer
 * outside the tree, reached through the root's namespace (the runner's
 * client, in ckpt's). "forward": the root's namespace is a `ckpt run --net`
 * container's, which forwards (ip_forward on) between the child's and the
 * host's.
 * - The child listens on CHILDADDR:7777 ("listening" made) and echoes what
 *   its one client sends, line by line until "END": each line must be the
 *   number after the one before (from 0), so that no byte is lost nor
 *   comes twice across the checkpoint --kill and restart.
 * - After the restart (the root woken by SIGUSR1, the child told), the
 *   child checks from inside: its connection is of its own namespace, which
 *   is not the root's, still established, and lines came on it after the
 *   restart (its namespace's cookie another); then it closes it. "kept":
 *   the checkpoint is refused, no restart is awaited (lines came in the
 *   original namespace only).
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void sh(const char *cmd)
{
	if (system(cmd) != 0)
		fail("%s failed", cmd);
}

static void get(int fd, char *c)
{
	ssize_t n;
	while ((n = read(fd, c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		fail("a pipe closed");
}

/* The child: the namespace, the echo server, the checks. */
static int child(const char *hostif, const char *hostaddr, const char *addr, int up, int go,
		 bool kept)
{
	char cmd[512], c;
	if (unshare(CLONE_NEWNET) < 0)
		fail("unshare: %m");
	snprintf(cmd, sizeof(cmd),
		 "ip link set lo up && ip link add vc0 type veth peer name %s netns "
		 "/proc/%d/ns/net && ip addr add %s/30 dev vc0 && ip link set vc0 up",
		 hostif, getppid(), addr);
	sh(cmd);
	if (write(up, "v", 1) != 1)
		fail("write: %m");
	get(go, &c); /* the root's end is up */
	snprintf(cmd, sizeof(cmd), "ip route add default via %s dev vc0", hostaddr);
	sh(cmd);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7777)};
	inet_pton(AF_INET, addr, &a.sin_addr);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
		fail("listen on %s:7777: %m", addr);
	int f = open("listening", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (f < 0)
		fail("listening: %m");
	close(f);
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail("accept: %m");
	close(l);
	char buf[4096], line[64];
	size_t at = 0;
	long want = 0, after = 0;
	bool restarted = false, end = false;
	uint64_t first = test_netns_cookie(s);
	while (!end) {
		struct pollfd p[2] = {{.fd = s, .events = POLLIN}, {.fd = go, .events = POLLIN}};
		if (poll(p, restarted ? 1 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail("poll: %m");
		}
		if (!restarted && (p[1].revents & POLLIN)) {
			get(go, &c);
			restarted = true;
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t n = read(s, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail("the connection: %s after line %ld",
			     n ? strerror(errno) : "end of file", want - 1);
		if (write(s, buf, (size_t)n) != n)
			fail("write: %m");
		bool restored = test_netns_cookie(s) != first; /* in a restored namespace */
		for (ssize_t i = 0; i < n && !end; i++) {
			if (buf[i] != '\n') {
				if (at + 1 >= sizeof(line))
					fail("a line of more than %zu bytes", sizeof(line));
				line[at++] = buf[i];
				continue;
			}
			line[at] = 0;
			at = 0;
			if (!strcmp(line, "END")) {
				end = true;
				break;
			}
			char *e;
			long v = strtol(line, &e, 10);
			if (*e || v != want)
				fail("line %s, want %ld: a byte lost or twice", line, want);
			want++;
			after += restored;
		}
	}
	if (!restarted)
		get(go, &c);
	expect(test_netns_here(s), "its connection is not of its network namespace");
	expect(test_netns_of(getpid()) != test_netns_of(getppid()),
	       "it is in the root's network namespace");
	expect(test_tcp_state(s) == 1, "its connection is in state %d", test_tcp_state(s));
	expect(kept || after > 0, "no line came after the restart (%ld before)", want);
	expect(!kept || !after, "%ld lines came in another namespace, never restored", after);
	test_log("%ld lines, %ld of them after the restart\n", want, after);
	close(s);
	return test_failures() ? 1 : 0;
}

int main(int argc, char **argv)
{
	bool fwd = argc == 5 && !strcmp(argv[4], "forward"),
	     kept = argc == 5 && !strcmp(argv[4], "kept");
	if (argc != 4 && !fwd && !kept)
		fail("usage: netns_routed HOSTIF HOSTADDR CHILDADDR [forward|kept]");
	int up[2], go[2];
	if (pipe(up) || pipe(go))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0)
		_exit(child(argv[1], argv[2], argv[3], up[1], go[0], kept));
	char r;
	get(up[0], &r);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ip addr add %s/30 dev %s && ip link set %s up%s", argv[2],
		 argv[1], argv[1], fwd ? " && echo 1 > /proc/sys/net/ipv4/ip_forward" : "");
	sh(cmd);
	if (write(go[1], "u", 1) != 1)
		fail("write: %m");

	test_ready();
	test_wait();

	expect(test_netns_of(c) != test_netns_of(getpid()),
	       "the child is in the root's network namespace");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st = 0;
	pid_t w;
	while ((w = waitpid(c, &st, 0)) < 0 && errno == EINTR) /* SIGUSR1 again */
		;
	expect(w == c && WIFEXITED(st) && !WEXITSTATUS(st), "the child: status %x", st);
	pass();
}
