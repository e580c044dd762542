/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Batched getsockopt (util/sockopts.h): the answers through the ring are
 * getsockopt's, for options set to values other than a new socket's, on
 * two sockets in one batch, with levels the ring does not serve among
 * them, an option that fails, and without a ring.
 */
#include "util/sockopts.h"
#include "unit.h"

#include <linux/filter.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/time.h>
#include <unistd.h>

struct want {
	int level, name;
};
static const struct want opts[] = {
	{ SOL_SOCKET, SO_REUSEADDR }, { SOL_SOCKET, SO_KEEPALIVE }, { SOL_SOCKET, SO_PRIORITY },
	{ SOL_SOCKET, SO_RCVLOWAT },  { SOL_SOCKET, SO_SNDBUF },    { IPPROTO_TCP, TCP_NODELAY },
	{ IPPROTO_TCP, TCP_KEEPIDLE }, { IPPROTO_IP, IP_TTL },      { SOL_SOCKET, SO_MARK },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static int mksock(int k)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, v;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	v = 3 + k;
	setsockopt(s, SOL_SOCKET, SO_PRIORITY, &v, sizeof(v));
	v = 100 + k;
	setsockopt(s, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v));
	v = 70000 + 4096 * k;
	setsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	v = 33 + k;
	setsockopt(s, IPPROTO_IP, IP_TTL, &v, sizeof(v));
	struct timeval tv = { .tv_sec = 7 + k, .tv_usec = 5000 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return s;
}

/* opts of both sockets, SO_RCVTIMEO (a struct) and an unknown option
 * (which fails) in one batch through so, checked against getsockopt */
static size_t check_batch(struct sockopts *so, int s0, int s1)
{
	struct sockopt_req q[2 * NOPTS + 2];
	int val[2 * NOPTS];
	struct timeval tv = { 0 };
	int bogus = 0;
	size_t n = 0;
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < NOPTS; i++, n++) {
			val[n] = -1;
			q[n] = (struct sockopt_req){ k ? s1 : s0, opts[i].level, opts[i].name, &val[n],
						     sizeof(int), 1 };
		}
	q[n++] = (struct sockopt_req){ s1, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv), 1 };
	q[n++] = (struct sockopt_req){ s0, SOL_SOCKET, 12345, &bogus, sizeof(bogus), 1 };
	size_t ring = sockopts_get(so, q, n);
	for (size_t j = 0; j < 2 * NOPTS; j++) {
		int want = -2;
		socklen_t l = sizeof(want);
		CHECK_EQ(getsockopt(q[j].fd, q[j].level, q[j].name, &want, &l), 0);
		CHECK_EQ(q[j].res, 0);
		CHECK_EQ(q[j].len, l);
		CHECK_EQ(val[j], want);
	}
	CHECK_EQ(q[2 * NOPTS].res, 0);
	CHECK_EQ(q[2 * NOPTS].len, sizeof(tv));
	struct timeval want = { 0 };
	socklen_t l = sizeof(want);
	CHECK_EQ(getsockopt(s1, SOL_SOCKET, SO_RCVTIMEO, &want, &l), 0);
	CHECK(want.tv_sec >= 7); /* set, and not a new socket's 0 */
	CHECK_EQ(tv.tv_sec, want.tv_sec);
	CHECK_EQ(tv.tv_usec, want.tv_usec);
	CHECK_EQ(q[2 * NOPTS + 1].res, -ENOPROTOOPT);
	return ring;
}

TEST(without_ring)
{
	int s0 = mksock(0), s1 = mksock(1);
	CHECK_EQ(check_batch(NULL, s0, s1), 0);
	close(s0);
	close(s1);
}

TEST(with_ring)
{
	struct sockopts *so = NULL;
	int r = sockopts_new(8, &so); /* fewer entries than a batch: several rounds */
	int s0 = mksock(0), s1 = mksock(1);
	if (r < 0) {
		fprintf(stderr, "no io_uring here (%s): the fallback only\n", strerror(-r));
		CHECK_EQ(check_batch(NULL, s0, s1), 0);
	} else {
		/* the SOL_SOCKET ones (6 a socket and SO_RCVTIMEO) through the
		 * ring where the kernel has socket commands (6.7) */
		size_t ring = check_batch(so, s0, s1);
		CHECK(ring == 0 || ring == 13);
		/* again: the ring's rounds go on (generations, head and tail) */
		CHECK_EQ(check_batch(so, s0, s1), ring);
		for (int i = 0; i < 20; i++)
			check_batch(so, s1, s0);
		CHECK_EQ(check_batch(so, s0, s1), ring);
		fprintf(stderr, "%zu of 20 answers through the ring\n", ring);
	}
	sockopts_free(so);
	close(s0);
	close(s1);
}

/* SO_GET_FILTER with no room (inet's question: how many instructions)
 * answers the same through the ring and by getsockopt: 3 with a filter,
 * 0 without. */
TEST(filter_count)
{
	struct sock_filter prog[] = { BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
				      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 1, 0, 0),
				      BPF_STMT(BPF_RET | BPF_K, 0xffff) };
	struct sock_fprog fp = { .len = 3, .filter = prog };
	int s0 = mksock(0), s1 = mksock(1);
	CHECK_EQ(setsockopt(s1, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)), 0);
	struct sockopts *so = NULL;
	int r = sockopts_new(8, &so);
	for (int pass = 0; pass < 2; pass++) {
		struct sockopt_req q[2] = { { s0, SOL_SOCKET, SO_GET_FILTER, NULL, 0, 1 },
					    { s1, SOL_SOCKET, SO_GET_FILTER, NULL, 0, 1 } };
		sockopts_get(pass ? so : NULL, q, 2);
		CHECK_EQ(q[0].res, 0);
		CHECK_EQ(q[0].len, 0);
		CHECK_EQ(q[1].res, 0);
		CHECK_EQ(q[1].len, 3);
	}
	if (r < 0)
		fprintf(stderr, "no io_uring here: the fallback only\n");
	sockopts_free(so);
	close(s0);
	close(s1);
}

int main(void)
{
	RUN(without_ring);
	RUN(with_ring);
	RUN(filter_count);
	return unit_done();
}
