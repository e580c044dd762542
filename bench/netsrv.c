/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench/ workload: a server holding N established loopback TCP
 * connections, and its clients in another process (outside the tree that
 * is checkpointed: ckpt keeps a copy of every socket it saves, and 2N
 * sockets and their copies would pass a hard RLIMIT_NOFILE of 20,000).
 *
 *   ckpt-bench-netsrv serve N     listens on 127.0.0.1 (port 0), prints
 *       "port P", accepts N connections, waits until each has 4 bytes in
 *       its receive queue (left unread), prints "ready SECONDS" (the time
 *       since listen). On SIGUSR1 it reads each connection's 4 bytes and
 *       sends back their complement, then exits 0.
 *   ckpt-bench-netsrv connect P N  connects N times to port P, sends each
 *       connection its number, prints "ready"; on SIGUSR1 reads each
 *       answer and prints "intact" and exits 0, or "CORRUPT" and exits 1.
 */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int full(int fd, void *buf, size_t len, int rd)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = rd ? read(fd, (char *)buf + done, len - done)
			       : write(fd, (char *)buf + done, len - done);
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static void wait_go(void)
{
	sigset_t m, old;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	sigprocmask(SIG_BLOCK, &m, &old);
	while (!go)
		sigsuspend(&old);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static int serve(int n, int *fds)
{
	double t0 = now();
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4096) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return perror("listen"), 1;
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (int i = 0; i < n; i++)
		if ((fds[i] = accept(l, NULL, NULL)) < 0)
			return perror("accept"), 1;
	for (int i = 0; i < n; i++) {
		int q = 0;
		struct pollfd p = { .fd = fds[i], .events = POLLIN };
		while (ioctl(fds[i], FIONREAD, &q) == 0 && q < 4)
			poll(&p, 1, 100);
	}
	printf("ready %.4f\n", now() - t0);
	fflush(stdout);
	wait_go();
	for (int i = 0; i < n; i++) {
		uint32_t v;
		if (full(fds[i], &v, sizeof(v), 1) < 0)
			return fprintf(stderr, "connection %d: %m\n", i), 1;
		v = ~v;
		if (full(fds[i], &v, sizeof(v), 0) < 0)
			return fprintf(stderr, "connection %d: %m\n", i), 1;
	}
	return 0;
}

static int connect_all(int port, int n, int *fds)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	for (int i = 0; i < n; i++) {
		uint32_t v = (uint32_t)i;
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    full(fds[i], &v, sizeof(v), 0) < 0)
			return fprintf(stderr, "connection %d: %m\n", i), 1;
	}
	printf("ready\n");
	fflush(stdout);
	wait_go();
	int bad = 0;
	for (int i = 0; i < n && !bad; i++) {
		uint32_t v;
		bad = full(fds[i], &v, sizeof(v), 1) < 0 || v != ~(uint32_t)i;
	}
	printf("%s\n", bad ? "CORRUPT" : "intact");
	return bad;
}

int main(int argc, char **argv)
{
	int serving = argc == 3 && !strcmp(argv[1], "serve");
	if (!serving && !(argc == 4 && !strcmp(argv[1], "connect")))
		return fprintf(stderr, "usage: %s serve N | connect PORT N\n", argv[0]), 2;
	int n = atoi(argv[argc - 1]);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGUSR1, on_usr1);
	int *fds = calloc((size_t)n, sizeof(int));
	if (!fds)
		return 1;
	return serving ? serve(n, fds) : connect_all(atoi(argv[2]), n, fds);
}
