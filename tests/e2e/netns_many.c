/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * netns_many [N]: N (6 by default) children, each in a network namespace
 * of its own (more than the 4 that once could hold a network lock each),
 * each with a TCP connection there between two of its sockets
 * (127.0.0.1:7000 of its namespace, accepted and connected in the same
 * process) and bytes in flight on it, unread, from before the checkpoint.
 * After the restart each child checks from inside: its namespace is
 * neither the root's nor any other child's, what was in flight arrives,
 * and the connection carries a line each way.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX 32

static void get(int fd, void *buf, size_t len)
{
	size_t at = 0;
	while (at < len) {
		ssize_t n = read(fd, (char *)buf + at, len - at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail("read: %s", n ? strerror(errno) : "end of file");
		at += (size_t)n;
	}
}

static void put(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		fail("write: %m");
}

/* Child i: its namespace, its connection; then the checks. */
static int child(int i, int up, int go)
{
	if (unshare(CLONE_NEWNET) < 0 || system("ip link set lo up") != 0)
		fail("child %d: no network namespace of its own", i);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(7000),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("child %d: connect to 127.0.0.1:7000: %m", i);
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail("child %d: accept: %m", i);
	char msg[32], buf[32];
	int len = snprintf(msg, sizeof(msg), "in flight %d\n", i);
	put(c, msg, (size_t)len); /* unread until after the restart */
	put(up, "u", 1);
	get(go, buf, 1);
	get(s, buf, (size_t)len);
	expect(!memcmp(buf, msg, (size_t)len), "child %d: %.*s came, not %s", i, len, buf, msg);
	put(s, "back\n", 5);
	get(c, buf, 5);
	expect(!memcmp(buf, "back\n", 5), "child %d: the answer %.5s", i, buf);
	expect(test_tcp_state(c) == 1 && test_tcp_state(s) == 1,
	       "child %d: its connection is not established", i);
	return test_failures() ? 1 : 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 6;
	if (n < 1 || n > MAX)
		fail("usage: netns_many [N], N from 1 to %d", MAX);
	pid_t kids[MAX];
	int up[2], go[2];
	if (pipe(up) || pipe(go))
		fail("pipe: %m");
	for (int i = 0; i < n; i++) {
		if ((kids[i] = fork()) < 0)
			fail("fork: %m");
		if (kids[i] == 0)
			_exit(child(i, up[1], go[0]));
		char c;
		get(up[0], &c, 1);
	}

	test_ready();
	test_wait();

	ino_t ns[MAX + 1];
	ns[n] = test_netns_of(getpid());
	for (int i = 0; i < n; i++)
		ns[i] = test_netns_of(kids[i]);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j <= n; j++)
			expect(ns[i] != ns[j],
			       "the namespaces of %d and %d (%d: the root) are "
			       "the same net:[%lu]",
			       i, j, n, (unsigned long)ns[i]);
	for (int i = 0; i < n; i++)
		put(go[1], "g", 1);
	for (int i = 0; i < n; i++) {
		int st = 0;
		pid_t w;
		while ((w = waitpid(kids[i], &st, 0)) < 0 && errno == EINTR) /* SIGUSR1 again */
			;
		expect(w == kids[i] && WIFEXITED(st) && !WEXITSTATUS(st), "child %d: status %x", i,
		       st);
	}
	pass();
}
