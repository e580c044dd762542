/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Half-closed TCP connections over loopback, both ends in the tree:
 *   pair 1: the client shut down writing after sending "bye" (the client
 *     in FIN_WAIT2, the server in CLOSE_WAIT with "bye" unread); the
 *     server then sent "late" that the client has not read.
 *   pair 2: the server's end is in CLOSE_WAIT and its peer closed and gone
 *     from the tree (an orphan in FIN_WAIT2, as after a client's close()).
 * After the restart: the server reads "bye" then end of file; the client
 *   reads "late", and its write fails (EPIPE); the server can still send
 *   to the client, which reads it; the server's close reaches the client
 *   (end of file). Pair 2's server end reads end of file and can close.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int tcp_state(int s)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0)
		return -1;
	return ti.tcpi_state;
}

static void wait_state(int s, int state, const char *what)
{
	for (int i = 0; i < 1000 && tcp_state(s) != state; i++)
		usleep(10000);
	if (tcp_state(s) != state)
		fail("%s: state %d, not %d", what, tcp_state(s), state);
}

/* Reads until n bytes or end of file (poll up to 20 s); the count. */
static ssize_t get(int s, char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 20000) != 1)
			fail("nothing to read after %zu bytes", got);
		ssize_t r = read(s, buf + got, n - got);
		if (r < 0)
			fail("read: %m");
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 8) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		fail("listen: %m");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect: %m");
	int s = accept(l, NULL, NULL);
	int c2 = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c2, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect: %m");
	int s2 = accept(l, NULL, NULL);
	if (s < 0 || s2 < 0)
		fail("accept: %m");
	if (write(c, "bye", 3) != 3 || shutdown(c, SHUT_WR) < 0)
		fail("client: %m");
	wait_state(c, TCP_FIN_WAIT2, "client");
	wait_state(s, TCP_CLOSE_WAIT, "server");
	if (write(s, "late", 4) != 4)
		fail("server write: %m");
	close(c2);
	wait_state(s2, TCP_CLOSE_WAIT, "server 2");
	/* "late" acknowledged by the client's end */
	for (int i = 0; i < 1000; i++) {
		int q = 0;
		struct tcp_info ti;
		socklen_t tl = sizeof(ti);
		if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 && !ti.tcpi_unacked)
			break;
		(void)q;
		usleep(10000);
	}

	test_ready();
	test_wait();

	char buf[16] = { 0 };
	expect(get(s, buf, sizeof(buf)) == 3 && !memcmp(buf, "bye", 3), "server: not bye then end");
	memset(buf, 0, sizeof(buf));
	expect(get(c, buf, 4) == 4 && !memcmp(buf, "late", 4), "client: late not read");
	expect(write(c, "x", 1) < 0 && errno == EPIPE, "client can still write: %m");
	expect(write(s, "more", 4) == 4, "server write after restart: %m");
	memset(buf, 0, sizeof(buf));
	expect(get(c, buf, 4) == 4 && !memcmp(buf, "more", 4), "client: more not read");
	close(s);
	expect(get(c, buf, sizeof(buf)) == 0, "client: no end of file after the server's close");
	expect(get(s2, buf, sizeof(buf)) == 0, "server 2: no end of file");
	close(s2);
	close(c);
	pass();
}
