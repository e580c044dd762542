/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The victim of the network-lock fault walk (runner flow "netlock_fault"):
 * a process in a network namespace of its own (lo up) holding both ends of
 * a loopback TCP connection, so that a checkpoint of it locks that
 * connection (an nftables table in this namespace). ckpt (ckpt-fault) is
 * killed at every point of a checkpoint in turn; after each, the runner
 * sends SIGUSR2 and the process checks from inside and writes "N ok" (or
 * "N FAIL: why") to check-PID: no table of ckpt's (ckpt_lock_*) is left in
 * its namespace, and a byte sent each way on the connection arrives. At
 * the end SIGUSR1 makes it pass.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib.h"

static volatile sig_atomic_t check_req;
static int cl = -1, sv = -1;
static unsigned checks;

static void on_check(int sig)
{
	(void)sig;
	check_req++;
}

static void lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		fail("lo: %m");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		fail("lo up: %m");
	close(s);
}

/* "" or why: a table of ckpt's in this namespace */
static void tables(char *why, size_t size)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!nft) {
		snprintf(why, size, "nft_ctx_new failed");
		return;
	}
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	if (nft_run_cmd_from_buffer(nft, "list tables") != 0)
		snprintf(why, size, "list tables: %s", nft_ctx_get_error_buffer(nft));
	else if (strstr(nft_ctx_get_output_buffer(nft), "ckpt_lock_"))
		snprintf(why, size, "a network lock is left: %s", nft_ctx_get_output_buffer(nft));
	nft_ctx_free(nft);
}

/* A byte from one end to the other, within 15 s (a lock just removed: the
 * retransmission of what it dropped comes first). */
static void pass_byte(int from, int to, char c, char *why, size_t size)
{
	char got;
	if (send(from, &c, 1, MSG_NOSIGNAL) != 1) {
		snprintf(why, size, "send: %s", strerror(errno));
		return;
	}
	struct pollfd p = { .fd = to, .events = POLLIN };
	for (;;) {
		int n = poll(&p, 1, 15000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1) {
			snprintf(why, size, "byte '%c' did not arrive in 15 s: the connection is "
				 "still locked", c);
			return;
		}
		break;
	}
	/* what an earlier check sent and the lock held back may come first */
	while (recv(to, &got, 1, MSG_DONTWAIT) == 1)
		if (got == c)
			return;
	snprintf(why, size, "byte '%c' did not arrive", c);
}

static void answer(void)
{
	char why[4096] = "", path[4096], tmp[4200], line[64];
	const char *dir = getenv("CKPT_TEST_DIR");
	/* the connection first: once a byte passes, the lock was removed (the
	 * guardian removes it after it has let the process go) */
	pass_byte(cl, sv, 'a' + (char)(checks % 26), why, sizeof(why));
	if (!why[0])
		pass_byte(sv, cl, 'A' + (char)(checks % 26), why, sizeof(why));
	if (!why[0])
		tables(why, sizeof(why));
	checks++;
	snprintf(path, sizeof(path), "%s/check-%d", dir ? dir : ".", getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	int n = snprintf(line, sizeof(line), "%u %s", checks, why[0] ? "FAIL: " : "ok\n");
	if (write(fd, line, (size_t)n) < 0 || (why[0] && write(fd, why, strlen(why)) < 0))
		test_failf("write %s: %m", tmp);
	close(fd);
	rename(tmp, path);
}

int main(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		skip("cannot make a network namespace: %m");
	lo_up();
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0)
		fail("listen: %m");
	cl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cl < 0 || connect(cl, (struct sockaddr *)&a, len) < 0)
		fail("connect: %m");
	sv = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (sv < 0)
		fail("accept: %m");
	close(l);
	int one = 1;
	setsockopt(cl, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(sv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	struct sigaction sa = { .sa_handler = on_check };
	sigaction(SIGUSR2, &sa, NULL);
	test_ready();
	sig_atomic_t handled = 0;
	sigset_t none;
	sigemptyset(&none);
	while (!test_woken) {
		if (check_req != handled) {
			handled = check_req;
			answer();
			continue;
		}
		/* the handlers interrupt it: nothing is missed between test and wait */
		struct timespec ts = { .tv_sec = 1 };
		ppoll(NULL, 0, &ts, &none);
	}
	char why[4096] = "";
	tables(why, sizeof(why));
	expect(!why[0], "%s", why);
	pass();
}
