/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A unix stream socket at fd 5 connected to a server outside the tree
 * (the runner's echo server at $CKPT_TEST_DIR/srv.sock, which answers
 * "echo:" and what it got), with a receive timeout of its own. The runner
 * checkpoints it with --external unix (and sees it refused without); after
 * the restart the socket is a new connection to the same server: it is
 * connected to srv.sock, keeps its options and talks to the server.
 */
#include "lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static void talk(const char *what)
{
	char want[64], got[64] = "";
	snprintf(want, sizeof(want), "echo:%s", what);
	ssize_t n = strlen(what);
	expect(write(5, what, (size_t)n) == n, "write \"%s\": %m", what);
	n = read(5, got, sizeof(got));
	expect(n == (ssize_t)strlen(want) && !memcmp(got, want, strlen(want)),
	       "the server answered %zd bytes \"%.*s\" to \"%s\" (%m)", n, n > 0 ? (int)n : 0, got,
	       what);
}

int main(void)
{
	const char *dir = getenv("CKPT_TEST_DIR");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!dir ||
	    snprintf(a.sun_path, sizeof(a.sun_path), "%s/srv.sock", dir) >= (int)sizeof(a.sun_path))
		fail("no CKPT_TEST_DIR, or it is too long");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
		fail("connect to %s: %m", a.sun_path);
	test_move_fd(s, 5);
	struct timeval tv = {.tv_sec = 9, .tv_usec = 500000};
	if (setsockopt(5, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		fail("setsockopt: %m");
	talk("before");

	test_ready();
	test_wait();

	struct sockaddr_un p;
	socklen_t pl = sizeof(p);
	expect(!getpeername(5, (struct sockaddr *)&p, &pl) && !strcmp(p.sun_path, a.sun_path),
	       "connected to \"%s\", not to %s", p.sun_path, a.sun_path);
	socklen_t l = sizeof(tv);
	expect(!getsockopt(5, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) && tv.tv_sec == 9 &&
		   tv.tv_usec == 500000,
	       "SO_RCVTIMEO lost");
	talk("after");
	talk("and again");
	pass();
}
