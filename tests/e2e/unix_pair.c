/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unix socketpairs with data queued in them at the checkpoint:
 * - stream: 100000 bytes one way, 300 the other; one end O_NONBLOCK, the
 *   other with a send buffer and a receive timeout of its own and
 *   SO_PASSCRED;
 * - seqpacket: four messages (one empty) whose boundaries must survive,
 *   and SO_PEEK_OFF set on the receiver;
 * - dgram: three datagrams one way, one the other, the receiver with
 *   SO_PASSCRED: each datagram carries the sender's credentials (its pid);
 * - stream, shut down for writing after its data: data, then EOF;
 * - stream whose peer was closed after writing: data, then EOF.
 * After the restart every byte comes back in order, boundaries and options
 * hold, and each pair still carries data both ways.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define BIG 100000
static unsigned char big[BIG], small[300];
static const char *seq[] = {"first", "", "third message", "4"};

static int opt(int fd, int name)
{
	int v = -7;
	socklen_t l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, name, &v, &l) < 0)
		return -7;
	return v;
}

static void pair(int type, int sv[2])
{
	if (socketpair(AF_UNIX, type, 0, sv) < 0)
		fail("socketpair(%d): %m", type);
}

/* reads exactly len bytes (the socket may be non-blocking: data is there) */
static void read_all(int fd, void *buf, size_t len, const char *what)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
		if (n <= 0) {
			test_failf("%s: got %zu of %zu bytes (%zd, %m)", what, got, len, n);
			return;
		}
		got += (size_t)n;
	}
}

static void check_stream(int a, int b, int sndbuf)
{
	static unsigned char got[BIG];
	read_all(b, got, BIG, "stream a->b");
	expect(!memcmp(got, big, BIG), "stream a->b data differs");
	read_all(a, got, sizeof(small), "stream b->a");
	expect(!memcmp(got, small, sizeof(small)), "stream b->a data differs");
	expect(recv(b, got, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "stream a->b: more data");
	expect(fcntl(a, F_GETFL) & O_NONBLOCK, "stream end a lost O_NONBLOCK");
	expect(!(fcntl(b, F_GETFL) & O_NONBLOCK), "stream end b became non-blocking");
	expect(opt(b, SO_SNDBUF) == sndbuf, "SO_SNDBUF %d, want %d", opt(b, SO_SNDBUF), sndbuf);
	expect(opt(b, SO_PASSCRED) == 1 && opt(a, SO_PASSCRED) == 0, "SO_PASSCRED changed");
	struct timeval tv;
	socklen_t l = sizeof(tv);
	expect(!getsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) && tv.tv_sec == 7 &&
		   tv.tv_usec == 500000,
	       "SO_RCVTIMEO lost");
	expect(write(a, "xy", 2) == 2 && recv(b, got, 2, 0) == 2 && !memcmp(got, "xy", 2),
	       "stream pair does not carry data");
}

static void check_seq(int a, int b)
{
	char got[64];
	expect(opt(b, SO_PEEK_OFF) == 0, "SO_PEEK_OFF %d, want 0", opt(b, SO_PEEK_OFF));
	int off = -1, one = 1;
	setsockopt(b, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof(off));
	/* sent while neither end had SO_PASSCRED: no credentials attached */
	setsockopt(b, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		union {
			char buf[CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = got, .iov_len = sizeof(got)};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = u.buf,
				   .msg_controllen = sizeof(u.buf)};
		ssize_t n = recvmsg(b, &m, MSG_DONTWAIT);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		struct ucred cr = {.pid = -1};
		if (c && c->cmsg_type == SCM_CREDENTIALS)
			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
		expect(cr.pid == 0, "seqpacket message %zu: credentials of pid %d attached", i,
		       cr.pid);
		expect(n == (ssize_t)strlen(seq[i]) && !memcmp(got, seq[i], (size_t)n),
		       "seqpacket message %zu: got %zd bytes, want \"%s\"", i, n, seq[i]);
	}
	expect(recv(b, got, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "seqpacket: more messages");
	expect(send(b, "back", 4, 0) == 4 && recv(a, got, sizeof(got), MSG_DONTWAIT) == 4,
	       "seqpacket pair does not carry messages back");
}

static void check_dgram(int a, int b)
{
	char got[64];
	for (int i = 0; i < 3; i++) {
		char want[16];
		union {
			char buf[CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = got, .iov_len = sizeof(got)};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = u.buf,
				   .msg_controllen = sizeof(u.buf)};
		snprintf(want, sizeof(want), "dgram %d", i);
		ssize_t n = recvmsg(b, &m, MSG_DONTWAIT);
		expect(n == (ssize_t)strlen(want) && !memcmp(got, want, (size_t)n),
		       "datagram %d: got %zd bytes", i, n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		struct ucred cr = {0};
		if (c && c->cmsg_type == SCM_CREDENTIALS)
			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
		expect(cr.pid == getpid() && cr.uid == getuid() && cr.gid == getgid(),
		       "datagram %d: sent by pid %d uid %u, want %d %u", i, cr.pid, cr.uid,
		       (int)getpid(), getuid());
	}
	ssize_t n = recv(a, got, sizeof(got), MSG_DONTWAIT);
	expect(n == 5 && !memcmp(got, "reply", 5), "datagram back: got %zd bytes", n);
	expect(recv(b, got, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "dgram: more datagrams");
	expect(send(a, "again", 5, 0) == 5 && recv(b, got, sizeof(got), MSG_DONTWAIT) == 5,
	       "dgram pair does not carry datagrams");
}

static void check_eof(int fd, const char *data, const char *what)
{
	char got[64];
	size_t len = strlen(data);
	ssize_t n = recv(fd, got, sizeof(got), MSG_DONTWAIT);
	expect(n == (ssize_t)len && !memcmp(got, data, len), "%s: got %zd bytes before EOF", what,
	       n);
	expect(recv(fd, got, sizeof(got), MSG_DONTWAIT) == 0, "%s: no EOF after the data", what);
}

int main(void)
{
	int st[2], sq[2], dg[2], sh[2], cl[2];
	test_fill_random(big, BIG, 11);
	test_fill_random(small, sizeof(small), 12);

	pair(SOCK_STREAM, st);
	int one = 1, zero = 0, sndbuf = 300000;
	struct timeval tv = {.tv_sec = 7, .tv_usec = 500000};
	if (setsockopt(st[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) ||
	    setsockopt(st[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) ||
	    setsockopt(st[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		fail("setsockopt: %m");
	sndbuf = opt(st[1], SO_SNDBUF);
	fcntl(st[0], F_SETFL, O_NONBLOCK);
	if (write(st[0], big, BIG) != BIG || write(st[1], small, sizeof(small)) != sizeof(small))
		fail("stream write: %m");

	pair(SOCK_SEQPACKET, sq);
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++)
		if (send(sq[0], seq[i], strlen(seq[i]), 0) != (ssize_t)strlen(seq[i]))
			fail("seqpacket send: %m");
	setsockopt(sq[1], SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero));

	pair(SOCK_DGRAM, dg);
	setsockopt(dg[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	for (int i = 0; i < 3; i++) {
		char m[16];
		snprintf(m, sizeof(m), "dgram %d", i);
		if (send(dg[0], m, strlen(m), 0) != (ssize_t)strlen(m))
			fail("dgram send: %m");
	}
	if (send(dg[1], "reply", 5, 0) != 5)
		fail("dgram send: %m");

	pair(SOCK_STREAM, sh);
	if (write(sh[0], "before shutdown", 15) != 15 || shutdown(sh[0], SHUT_WR))
		fail("shutdown: %m");
	pair(SOCK_STREAM, cl);
	if (write(cl[0], "last words", 10) != 10)
		fail("write: %m");
	close(cl[0]);

	test_ready();
	test_wait();

	check_stream(st[0], st[1], sndbuf);
	check_seq(sq[0], sq[1]);
	check_dgram(dg[0], dg[1]);
	check_eof(sh[1], "before shutdown", "shut-down stream");
	expect(send(sh[0], "x", 1, MSG_NOSIGNAL) < 0 && errno == EPIPE,
	       "writing after SHUT_WR did not fail");
	expect(write(sh[1], "ok", 2) == 2 && recv(sh[0], (char[4]){0}, 4, 0) == 2,
	       "the shut-down stream does not carry data the other way");
	check_eof(cl[1], "last words", "stream with a closed peer");
	pass();
}
