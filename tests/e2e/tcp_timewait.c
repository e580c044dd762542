/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A listener on 127.0.0.1 without SO_REUSEADDR, as many small servers are,
 * that has served connections and closed them first: they wait in
 * TIME_WAIT on its port (60 s), outside any process. The original bound
 * the port before they existed; the restart must bind it while they are
 * there, which the kernel refuses to a socket without SO_REUSEADDR (and
 * to one with it too, as the connections inherited the listener's
 * setting). After the restart the listener still has no SO_REUSEADDR, its
 * address is the same, and it accepts a new connection that carries data.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SERVED 3

static int opt(int s, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	if (getsockopt(s, level, name, &v, &l) < 0)
		return -1;
	return v;
}

/* A connection to a of the listener lst, a line each way; the server's
 * end closes first when close_first (TIME_WAIT on the listener's port). */
static void serve(int lst, const struct sockaddr_in *a, bool close_first, const char *what)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (const struct sockaddr *)a, sizeof(*a)) < 0)
		fail("%s: connect: %m", what);
	struct pollfd p = { .fd = lst, .events = POLLIN };
	if (poll(&p, 1, 20000) != 1)
		fail("%s: nothing to accept", what);
	int s = accept(lst, NULL, NULL);
	if (s < 0)
		fail("%s: accept: %m", what);
	char buf[16] = "";
	if (send(c, "hello", 5, 0) != 5 || recv(s, buf, sizeof(buf), 0) != 5 || memcmp(buf, "hello", 5))
		fail("%s: no hello", what);
	if (send(s, "bye", 3, 0) != 3 || recv(c, buf, sizeof(buf), 0) != 3 || memcmp(buf, "bye", 3))
		fail("%s: no bye", what);
	close(close_first ? s : c);
	/* the other end reads the FIN, then closes too */
	if (recv(close_first ? c : s, buf, sizeof(buf), 0) != 0)
		fail("%s: no end of file after the close", what);
	close(close_first ? c : s);
}

static int time_waits(int port)
{
	char line[512];
	unsigned lport, st;
	int n = 0;
	FILE *f = fopen("/proc/net/tcp", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*8x:%x %*s %x", &lport, &st) == 2 && (int)lport == port &&
		    st == 6)
			n++;
	if (f)
		fclose(f);
	return n;
}

int main(void)
{
	int lst = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	if (lst < 0 || bind(lst, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lst, 8) < 0 ||
	    getsockname(lst, (struct sockaddr *)&a, &l) < 0)
		fail("listener: %m");
	if (opt(lst, SOL_SOCKET, SO_REUSEADDR) != 0)
		fail("the listener has SO_REUSEADDR");
	for (int i = 0; i < SERVED; i++)
		serve(lst, &a, true, "before");
	int port = ntohs(a.sin_port);
	if (time_waits(port) < SERVED)
		fail("%d connections in TIME_WAIT on port %d, want %d", time_waits(port), port, SERVED);

	test_ready();
	test_wait();

	struct sockaddr_in b;
	l = sizeof(b);
	expect(getsockname(lst, (struct sockaddr *)&b, &l) == 0 && b.sin_port == a.sin_port &&
		       b.sin_addr.s_addr == a.sin_addr.s_addr,
	       "the listener's address changed");
	expect(opt(lst, SOL_SOCKET, SO_REUSEADDR) == 0, "the listener has SO_REUSEADDR now");
	expect(opt(lst, SOL_SOCKET, SO_ACCEPTCONN) == 1, "the socket does not listen");
	serve(lst, &a, false, "after");
	pass();
}
