/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * TCP sockets in the closing states and in a connect in progress, made on
 * loopback with sockets that drop every packet (a classic BPF filter that
 * returns 0, attached to the peer and detached after the restart, when the
 * peers hear what is retransmitted):
 * - LAST_ACK: a sent "hello" and shut down writing (FIN_WAIT2); then, a's
 *   packets dropped, b (CLOSE_WAIT, "hello" unread) sent "world" and shut
 *   down writing: b is in LAST_ACK, "world" and its FIN not acknowledged;
 * - CLOSING: c and d both dropping, each sent a line and shut down
 *   writing (FIN_WAIT1); c stops dropping and gets d's line and FIN: c is
 *   in CLOSING, d in FIN_WAIT1;
 * - SYN_SENT: s (O_NONBLOCK) connects to a listener that drops its SYNs.
 * After the restart: b reads "hello" then end of file and cannot write
 * (EPIPE); a, the peer, reads "world" then end of file; c and d each read
 * the other's line then end of file; s becomes writable with SO_ERROR 0,
 * from the same address to the same peer, the listener accepts it, and
 * bytes go both ways.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void wait_state(int s, int state, const char *what)
{
	for (int i = 0; i < 30000 && test_tcp_state(s) != state; i++)
		poll(NULL, 0, 1);
	if (test_tcp_state(s) != state)
		fail("%s: state %d, want %d", what, test_tcp_state(s), state);
}

static void drop_all(int s, bool on)
{
	struct sock_filter code[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
	struct sock_fprog prog = { .len = 1, .filter = code };
	int dummy = 0;
	if (on ? setsockopt(s, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog))
	       : setsockopt(s, SOL_SOCKET, SO_DETACH_FILTER, &dummy, sizeof(dummy)))
		fail("filter: %m");
}

static int listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t al = sizeof(*a);
	*a = (struct sockaddr_in){ .sin_family = AF_INET };
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)a, sizeof(*a)) < 0 || listen(l, 8) < 0 ||
	    getsockname(l, (struct sockaddr *)a, &al) < 0)
		fail("listener: %m");
	return l;
}

static void pair(int *x, int *y)
{
	struct sockaddr_in a;
	int l = listener(&a);
	*x = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*x, (struct sockaddr *)&a, sizeof(a)) < 0 || (*y = accept(l, NULL, NULL)) < 0)
		fail("pair: %m");
	close(l);
}

static void put(int s, const char *msg)
{
	if (send(s, msg, strlen(msg), MSG_NOSIGNAL) != (ssize_t)strlen(msg))
		fail("send '%s': %m", msg);
}

/* s must give want, then end of file (waiting for retransmissions) */
static void expect_then_eof(int s, const char *want, const char *what)
{
	char buf[64];
	size_t got = 0;
	for (;;) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, 30000) != 1) {
			test_failf("%s: nothing after '%.*s' in 30 s", what, (int)got, buf);
			return;
		}
		ssize_t n = recv(s, buf + got, sizeof(buf) - 1 - got, 0);
		if (n < 0) {
			test_failf("%s: recv: %m", what);
			return;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = 0;
	expect(!strcmp(buf, want), "%s: read '%s', want '%s'", what, buf, want);
}

static void expect_epipe(int s, const char *what)
{
	errno = 0;
	expect(send(s, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EPIPE,
	       "%s: a write did not say EPIPE (%m)", what);
}

int main(void)
{
	int a, b, c, d;
	signal(SIGPIPE, SIG_IGN);

	/* LAST_ACK */
	pair(&a, &b);
	put(a, "hello");
	shutdown(a, SHUT_WR);
	wait_state(a, TCP_FIN_WAIT2, "a");
	wait_state(b, TCP_CLOSE_WAIT, "b");
	drop_all(a, true);
	put(b, "world");
	shutdown(b, SHUT_WR);
	wait_state(b, TCP_LAST_ACK, "b");

	/* CLOSING */
	pair(&c, &d);
	drop_all(c, true);
	drop_all(d, true);
	put(c, "from c");
	put(d, "from d");
	shutdown(c, SHUT_WR);
	shutdown(d, SHUT_WR);
	wait_state(c, TCP_FIN_WAIT1, "c");
	wait_state(d, TCP_FIN_WAIT1, "d");
	drop_all(c, false);
	wait_state(c, TCP_CLOSING, "c"); /* d's retransmission came */

	/* SYN_SENT */
	struct sockaddr_in la, sn, sp;
	int l = listener(&la);
	drop_all(l, true);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (connect(s, (struct sockaddr *)&la, sizeof(la)) == 0 || errno != EINPROGRESS)
		fail("connect did not stay in progress: %m");
	wait_state(s, TCP_SYN_SENT, "s");
	socklen_t sl = sizeof(sn);
	getsockname(s, (struct sockaddr *)&sn, &sl);
	/* its local port, for a runner that takes it meanwhile (tcp_port_taken) */
	FILE *pf = fopen("sport.tmp", "w");
	if (!pf || fprintf(pf, "%d\n", ntohs(sn.sin_port)) < 0 || fclose(pf) ||
	    rename("sport.tmp", "sport"))
		fail("sport file: %m");

	test_ready();
	test_wait();

	/* the peers hear again (their filters are restored since sock_filter) */
	int none = 0;
	setsockopt(a, SOL_SOCKET, SO_DETACH_FILTER, &none, sizeof(none));
	setsockopt(d, SOL_SOCKET, SO_DETACH_FILTER, &none, sizeof(none));
	setsockopt(l, SOL_SOCKET, SO_DETACH_FILTER, &none, sizeof(none));
	expect_then_eof(b, "hello", "b (LAST_ACK)");
	expect_epipe(b, "b (LAST_ACK)");
	expect_then_eof(a, "world", "a (b's peer)");
	expect_then_eof(c, "from d", "c (CLOSING)");
	expect_epipe(c, "c (CLOSING)");
	expect_then_eof(d, "from c", "d (c's peer, FIN_WAIT1)");
	expect_epipe(d, "d (FIN_WAIT1)");

	struct pollfd p = { .fd = s, .events = POLLOUT };
	expect(poll(&p, 1, 30000) == 1, "s: the connect did not end in 30 s");
	int err = -1;
	socklen_t el = sizeof(err);
	getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el);
	expect(err == 0, "s: SO_ERROR %d (%s)", err, strerror(err));
	struct sockaddr_in x;
	sl = sizeof(x);
	expect(getsockname(s, (struct sockaddr *)&x, &sl) == 0 && x.sin_port == sn.sin_port &&
	       x.sin_addr.s_addr == sn.sin_addr.s_addr, "s: another local address");
	sl = sizeof(x);
	expect(getpeername(s, (struct sockaddr *)&x, &sl) == 0 && x.sin_port == la.sin_port,
	       "s: another peer");
	expect(fcntl(s, F_GETFL) & O_NONBLOCK, "s: O_NONBLOCK lost");
	sl = sizeof(sp);
	int t = accept(l, (struct sockaddr *)&sp, &sl);
	expect(t >= 0, "the listener accepted nothing: %m");
	if (t >= 0) {
		expect(sp.sin_port == sn.sin_port, "the listener's client is another port");
		put(s, "ping");
		put(t, "pong");
		char buf[8] = "";
		struct pollfd q = { .fd = t, .events = POLLIN };
		poll(&q, 1, 10000);
		expect(recv(t, buf, 4, 0) == 4 && !memcmp(buf, "ping", 4), "t: got '%s'", buf);
		q.fd = s;
		poll(&q, 1, 10000);
		expect(recv(s, buf, 4, 0) == 4 && !memcmp(buf, "pong", 4), "s: got '%s'", buf);
	}
	pass();
}
