/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * restart --tcp-close (RESTART_CONN_RESET): a loopback TCP connection of
 * the tree, data queued both ways, and its listener. After the restart
 * both ends of the connection read ECONNRESET, then end of file; the
 * listener lives and accepts a new connection.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	char buf[64];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		fail("listen: %m");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("connect: %m");
	int s = accept(l, NULL, NULL);
	if (s < 0 || send(c, "ping", 4, 0) != 4 || send(s, "pong", 4, 0) != 4)
		fail("accept/send: %m");

	test_ready();
	test_wait();

	errno = 0;
	expect(recv(s, buf, sizeof(buf), 0) < 0 && errno == ECONNRESET,
	       "the accepted end: not ECONNRESET (%s)", strerror(errno));
	errno = 0;
	expect(recv(c, buf, sizeof(buf), 0) < 0 && errno == ECONNRESET,
	       "the client end: not ECONNRESET (%s)", strerror(errno));
	expect(recv(c, buf, sizeof(buf), 0) == 0, "the client end: no end of file after");
	int c2 = socket(AF_INET, SOCK_STREAM, 0);
	expect(connect(c2, (struct sockaddr *)&a, sizeof(a)) == 0, "connect after: %m");
	int s2 = accept(l, NULL, NULL);
	expect(s2 >= 0 && send(c2, "x", 1, 0) == 1 && recv(s2, buf, 1, 0) == 1,
	       "the new connection carries no data");
	pass();
}
