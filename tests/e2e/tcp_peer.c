/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A TCP server whose client is outside the tree (the runner's, flow
 * tcp_peer): it listens on 127.0.0.1 at a free port (written to the file
 * "port"), accepts one connection, sends a banner the client does not read
 * before the checkpoint, and leaves what the client sent unread. The
 * client keeps its connection across checkpoint --kill and restart, and
 * sends more meanwhile and after. Woken, the server reads everything the
 * client sent up to "END\n" (the first line was in its receive queue at
 * the checkpoint) and answers with what it got; the connection was never
 * reset.
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

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	char buf[4096];
	size_t n = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		fail("listen: %m");
	FILE *f = fopen("port.tmp", "w");
	if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f) || rename("port.tmp", "port"))
		fail("port file: %m");
	int c = accept(l, NULL, NULL);
	if (c < 0)
		fail("accept: %m");
	if (send(c, "banner\n", 7, 0) != 7)
		fail("send: %m");
	/* ready once the client's first line is in the receive queue */
	struct pollfd p = { .fd = c, .events = POLLIN };
	if (poll(&p, 1, 20000) != 1)
		fail("the client sent nothing");

	test_ready();
	test_wait();

	while (n < sizeof(buf) - 1 && !strstr(buf, "END\n")) {
		p = (struct pollfd){ .fd = c, .events = POLLIN };
		if (poll(&p, 1, 30000) != 1)
			fail("no data after %zu bytes: '%s'", n, buf);
		ssize_t r = recv(c, buf + n, sizeof(buf) - 1 - n, 0);
		if (r <= 0)
			fail("recv after %zu bytes: %s", n, r < 0 ? strerror(errno) : "end of file");
		n += (size_t)r;
		buf[n] = 0;
	}
	char reply[4200];
	int len = snprintf(reply, sizeof(reply), "got:%s", buf);
	if (send(c, reply, (size_t)len, 0) != len)
		fail("send the reply: %m");
	expect(!strcmp(buf, "hello\nwhile down\nafter\nEND\n") ||
		       !strcmp(buf, "hello\nafter\nEND\n"),
	       "the server got '%s'", buf);
	close(c);
	pass();
}
