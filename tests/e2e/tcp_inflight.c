/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A listener with a connection it has not accepted (the client c, which
 * sent "early"), checkpointed --kill --skip-in-flight: the connection is
 * left out. After the restart the listener's queue is empty (accept says
 * EAGAIN), c's next send is answered by a reset (ECONNRESET), and a new
 * client is accepted and talks both ways.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int queued(int l)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	memset(&ti, 0, sizeof(ti));
	getsockopt(l, IPPROTO_TCP, TCP_INFO, &ti, &len);
	return (int)ti.tcpi_unacked; /* a listener's accept queue */
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		fail("listener: %m");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 || send(c, "early", 5, 0) != 5)
		fail("client: %m");
	for (int i = 0; i < 10000 && queued(l) != 1; i++)
		poll(NULL, 0, 1);
	if (queued(l) != 1)
		fail("the accept queue holds %d connections, not 1", queued(l));

	test_ready();
	test_wait();

	expect(queued(l) == 0, "the accept queue holds %d connections after the restart",
	       queued(l));
	int fl = fcntl(l, F_GETFL);
	fcntl(l, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	expect(accept(l, NULL, NULL) < 0 && errno == EAGAIN, "accept found a connection (%m)");
	fcntl(l, F_SETFL, fl);
	/* c's peer is gone: its next segment is answered by a reset */
	expect(send(c, "x", 1, MSG_NOSIGNAL) == 1 || errno == ECONNRESET, "c: send: %m");
	struct pollfd p = { .fd = c, .events = POLLIN };
	expect(poll(&p, 1, 30000) == 1, "c: no reset in 30 s");
	char buf[8];
	errno = 0;
	expect(recv(c, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == ECONNRESET,
	       "c: recv did not say ECONNRESET (%m)");

	int n = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(n, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("new client: %m");
	int t = accept(l, NULL, NULL);
	expect(t >= 0, "the new client was not accepted: %m");
	if (t >= 0) {
		expect(send(n, "ping", 4, 0) == 4 && recv(t, buf, 4, MSG_WAITALL) == 4 &&
		       !memcmp(buf, "ping", 4), "the new connection: no ping");
		expect(send(t, "pong", 4, 0) == 4 && recv(n, buf, 4, MSG_WAITALL) == 4 &&
		       !memcmp(buf, "pong", 4), "the new connection: no pong");
	}
	pass();
}
