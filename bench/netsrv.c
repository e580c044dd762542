/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench/ workload: a server holding N established loopback TCP
 * connections. It listens on 127.0.0.1 (port 0), then for each connection
 * connects a client socket and accepts it, both ends held here (2N
 * sockets); each client then sends 4 bytes (its number) that the server
 * leaves unread, so every server socket has a receive queue. Prints
 * "ready SECONDS" (the time making them took) on its stdout. On SIGUSR1
 * the server reads each connection's 4 bytes, answers them back through
 * the connection and the client checks the answer; it prints "intact" and
 * exits 0, or "CORRUPT" and exits 1.
 *
 *   ckpt-bench-netsrv N
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int check(int n, const int *cli, const int *srv)
{
	for (int i = 0; i < n; i++) {
		uint32_t v;
		if (full(srv[i], &v, sizeof(v), 1) < 0 || v != (uint32_t)i)
			return -1;
		v = ~v;
		if (full(srv[i], &v, sizeof(v), 0) < 0 || full(cli[i], &v, sizeof(v), 1) < 0 ||
		    v != ~(uint32_t)i)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return fprintf(stderr, "usage: %s N\n", argv[0]), 2;
	int n = atoi(argv[1]);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGUSR1, on_usr1);
	int *cli = calloc((size_t)n, sizeof(int)), *srv = calloc((size_t)n, sizeof(int));
	double t0 = now();
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (!cli || !srv || l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 128) < 0 || getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return perror("listen"), 1;
	for (int i = 0; i < n; i++) {
		uint32_t v = (uint32_t)i;
		cli[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (cli[i] < 0 || connect(cli[i], (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    (srv[i] = accept(l, NULL, NULL)) < 0 || full(cli[i], &v, sizeof(v), 0) < 0)
			return fprintf(stderr, "connection %d: %m\n", i), 1;
	}
	printf("ready %.4f\n", now() - t0);
	fflush(stdout);
	while (!go)
		pause();
	int bad = check(n, cli, srv);
	printf("%s\n", bad ? "CORRUPT" : "intact");
	return bad ? 1 : 0;
}
