/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A unix dgram socket at fd 5, bound to $CKPT_TEST_DIR/cli-dg.sock and
 * connect()ed to a socket outside the tree (the runner's, bound to
 * $CKPT_TEST_DIR/srv-dg.sock, like /dev/log: it answers "got:" and what
 * it got to a named sender). A datagram from a socket of the tree waits
 * in its queue. The runner checkpoints it with --external unix; after the
 * restart the socket has its name and its queued datagram, is connected
 * to srv-dg.sock again, and the server gets what it sends.
 */
#include "lib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void talk(const char *what)
{
	char want[64], got[64] = "";
	snprintf(want, sizeof(want), "got:%s", what);
	ssize_t n = (ssize_t)strlen(what);
	expect(send(5, what, (size_t)n, 0) == n, "send \"%s\": %m", what);
	n = recv(5, got, sizeof(got), 0);
	expect(n == (ssize_t)strlen(want) && !memcmp(got, want, strlen(want)),
	       "the server answered %zd bytes \"%.*s\" to \"%s\" (%m)", n, n > 0 ? (int)n : 0, got,
	       what);
}

static void path(struct sockaddr_un *a, const char *dir, const char *name)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	if (snprintf(a->sun_path, sizeof(a->sun_path), "%s/%s", dir, name) >=
	    (int)sizeof(a->sun_path))
		fail("CKPT_TEST_DIR is too long");
}

int main(void)
{
	const char *dir = getenv("CKPT_TEST_DIR");
	struct sockaddr_un srv, me, q;
	if (!dir)
		fail("no CKPT_TEST_DIR");
	path(&srv, dir, "srv-dg.sock");
	path(&me, dir, "cli-dg.sock");
	path(&q, dir, "tx-dg.sock");
	int s = socket(AF_UNIX, SOCK_DGRAM, 0), tx = socket(AF_UNIX, SOCK_DGRAM, 0);
	unlink(me.sun_path);
	unlink(q.sun_path);
	if (s < 0 || tx < 0 || bind(s, (struct sockaddr *)&me, sizeof(me)) ||
	    bind(tx, (struct sockaddr *)&q, sizeof(q)))
		fail("bind: %m");
	/* queued before the connect: from a socket of the tree */
	if (sendto(tx, "queued", 6, 0, (struct sockaddr *)&me, sizeof(me)) != 6)
		fail("sendto: %m");
	if (connect(s, (struct sockaddr *)&srv, sizeof(srv)))
		fail("connect to %s: %m", srv.sun_path);
	test_move_fd(s, 5);
	test_move_fd(tx, 6);
	char got[64] = "";
	struct sockaddr_un from;
	socklen_t fl = sizeof(from);

	test_ready();
	test_wait();

	ssize_t n = recvfrom(5, got, sizeof(got), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	expect(n == 6 && !memcmp(got, "queued", 6) && !strcmp(from.sun_path, q.sun_path),
	       "the queued datagram: %zd bytes from \"%s\"", n, n >= 0 ? from.sun_path : "");
	struct sockaddr_un p;
	socklen_t pl = sizeof(p);
	expect(!getpeername(5, (struct sockaddr *)&p, &pl) && !strcmp(p.sun_path, srv.sun_path),
	       "connected to \"%s\", not to %s", pl > 2 ? p.sun_path : "", srv.sun_path);
	pl = sizeof(p);
	expect(!getsockname(5, (struct sockaddr *)&p, &pl) && !strcmp(p.sun_path, me.sun_path),
	       "bound to \"%s\", not to %s", pl > 2 ? p.sun_path : "", me.sun_path);
	talk("after");
	expect(sendto(6, "x", 1, 0, (struct sockaddr *)&me, sizeof(me)) < 0 && errno == EPERM,
	       "a connected dgram socket takes datagrams from another than its peer");
	unlink(me.sun_path);
	unlink(q.sun_path);
	pass();
}
