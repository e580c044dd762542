/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Classic BPF socket filters (SO_ATTACH_FILTER) across checkpoint and
 * restart:
 * - a UDP socket on 127.0.0.1 whose filter keeps only datagrams starting
 *   with 'A', locked (SO_LOCK_FILTER);
 * - the receiving end of a unix datagram socketpair with the same test on
 *   its first byte, attached after a datagram "Bq" was queued (the queue
 *   must come back whole: what it holds passed no filter);
 * - a UDP socket without a filter.
 * After the restart each filter reads back the same, the lock is kept, a
 * "B" datagram is dropped and an "A" one arrives, and "Bq" is still the
 * first datagram of the unix queue.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* keep (whole) if the byte at off is 'A', else drop */
#define PROG(off)                                                                                  \
	{                                                                                          \
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, (off)),                                         \
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 'A', 0, 1),                                    \
		BPF_STMT(BPF_RET | BPF_K, 0xffff),                                                 \
		BPF_STMT(BPF_RET | BPF_K, 0),                                                      \
	}

static struct sock_filter udp_prog[] = PROG(8); /* after the UDP header */
static struct sock_filter unix_prog[] = PROG(0);

static void attach(int s, struct sock_filter *p, unsigned short n, bool lock)
{
	struct sock_fprog fp = { .len = n, .filter = p };
	int one = 1;
	if (setsockopt(s, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) < 0 ||
	    (lock && setsockopt(s, SOL_SOCKET, SO_LOCK_FILTER, &one, sizeof(one)) < 0))
		fail("attach a filter: %m");
}

/* The filter reads back as want (n instructions; 0: none), locked or not. */
static void check_filter(int s, const char *what, const struct sock_filter *want, socklen_t n,
			 int locked)
{
	struct sock_filter got[16];
	socklen_t len = 16;
	int lk = -1;
	socklen_t l = sizeof(lk);
	if (getsockopt(s, SOL_SOCKET, SO_GET_FILTER, got, &len) < 0)
		fail("%s: SO_GET_FILTER: %m", what);
	expect(len == n, "%s: %u filter instructions, want %u", what, (unsigned)len, (unsigned)n);
	expect(!n || !memcmp(got, want, n * sizeof(*want)), "%s: another filter program", what);
	if (getsockopt(s, SOL_SOCKET, SO_LOCK_FILTER, &lk, &l) < 0)
		fail("%s: SO_LOCK_FILTER: %m", what);
	expect(lk == locked, "%s: SO_LOCK_FILTER %d, want %d", what, lk, locked);
}

/* Sends "B" then "A" to the receiver; "first" (if any) comes first, then "A", then nothing. */
static void check_drop(int tx, int rx, const struct sockaddr *to, socklen_t tolen,
		       const char *what, const char *first)
{
	char buf[16];
	if (sendto(tx, "B", 1, 0, to, tolen) != 1 || sendto(tx, "A", 1, 0, to, tolen) != 1)
		fail("%s: send: %m", what);
	if (first) {
		ssize_t n = recv(rx, buf, sizeof(buf), 0);
		expect(n == (ssize_t)strlen(first) && !memcmp(buf, first, (size_t)n),
		       "%s: the queued datagram is gone (got %zd bytes)", what, n);
	}
	ssize_t n = recv(rx, buf, sizeof(buf), 0);
	expect(n == 1 && buf[0] == 'A', "%s: got %zd bytes '%c', want 'A'", what, n,
	       n > 0 ? buf[0] : '?');
	n = recv(rx, buf, sizeof(buf), MSG_DONTWAIT);
	expect(n < 0 && errno == EAGAIN, "%s: a datagram the filter should drop came through",
	       what);
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int u = socket(AF_INET, SOCK_DGRAM, 0), plain = socket(AF_INET, SOCK_DGRAM, 0);
	int tx = socket(AF_INET, SOCK_DGRAM, 0), sp[2];
	if (u < 0 || plain < 0 || tx < 0 || socketpair(AF_UNIX, SOCK_DGRAM, 0, sp) < 0)
		fail("sockets: %m");
	if (bind(u, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(u, (struct sockaddr *)&a, &al) < 0)
		fail("bind: %m");
	attach(u, udp_prog, 4, true);
	if (send(sp[1], "Bq", 2, 0) != 2)
		fail("queue Bq: %m");
	attach(sp[0], unix_prog, 4, false);
	check_filter(u, "udp", udp_prog, 4, 1);
	check_filter(sp[0], "unix", unix_prog, 4, 0);

	test_ready();
	test_wait();

	check_filter(u, "udp", udp_prog, 4, 1);
	check_filter(sp[0], "unix", unix_prog, 4, 0);
	check_filter(plain, "plain udp", NULL, 0, 0);
	check_drop(tx, u, (struct sockaddr *)&a, sizeof(a), "udp", NULL);
	check_drop(sp[1], sp[0], NULL, 0, "unix", "Bq");
	pass();
}
