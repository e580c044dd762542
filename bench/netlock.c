/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the network lock (src/net/lock.c) costs, in a network namespace of
 * its own (the host's is not touched): for N loopback TCP connections,
 * both ends held here, the time to make the lock (netlock_new: its netlink
 * socket in the namespace), to install it (libnftables, one transaction
 * with 2N set elements) and to remove it: what the lock adds to the time a
 * tree is frozen. How long a checkpoint keeps it in place is in ckpt's log
 * ("network lock NAME removed after N us in place").
 *
 *   ckpt-bench-netlock [N...]     (default: 100 1000 9000)
 *
 * Run as root (unshare(CLONE_NEWNET)).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/lock.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int setup(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	close(s);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	return 0;
}

static int run(int n)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4096) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0)
		return -errno;
	int *fds = calloc(2 * (size_t)n, sizeof(int));
	struct sockaddr_in *loc = calloc((size_t)n, sizeof(*loc));
	if (!fds || !loc)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		fds[2 * i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[2 * i] < 0 || connect(fds[2 * i], (struct sockaddr *)&a, len) < 0) {
			fprintf(stderr, "connection %d: %s\n", i, strerror(errno));
			return -errno;
		}
		fds[2 * i + 1] = accept(l, NULL, NULL);
		socklen_t ll = sizeof(loc[i]);
		getsockname(fds[2 * i], (struct sockaddr *)&loc[i], &ll);
	}
	char name[NETLOCK_NAME_MAX];
	netlock_name(name, sizeof(name));
	struct netlock *nl = NULL;
	double t0 = now();
	int r = netlock_new(-1, name, &nl);
	for (int i = 0; r >= 0 && i < n; i++) {
		r = netlock_add(nl, (struct sockaddr *)&loc[i], (struct sockaddr *)&a);
		if (r >= 0)
			r = netlock_add(nl, (struct sockaddr *)&a, (struct sockaddr *)&loc[i]);
	}
	double t1 = now();
	if (r >= 0)
		r = netlock_install(nl);
	double t2 = now();
	if (r >= 0)
		r = netlock_remove(nl);
	double t3 = now();
	if (r < 0) {
		fprintf(stderr, "n=%d: %s %s\n", n, strerror(-r), nl ? netlock_error(nl) : "");
		return r;
	}
	printf("%8d %12.2f %12.2f %12.2f\n", n, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
	       (t3 - t2) * 1e3);
	netlock_free(nl);
	for (int i = 0; i < 2 * n; i++)
		close(fds[i]);
	close(l);
	free(fds);
	free(loc);
	return 0;
}

int main(int argc, char **argv)
{
	static const int def[] = { 100, 1000, 9000 }; /* both ends here: 2 fds each */
	int r = setup();
	if (r < 0) {
		fprintf(stderr, "ckpt-bench-netlock: a network namespace of its own: %s\n",
			strerror(-r));
		return 1;
	}
	printf("   conns   new+add ms   install ms    remove ms\n");
	int cnt = argc > 1 ? argc - 1 : 3;
	for (int i = 0; i < cnt; i++)
		if (run(argc > 1 ? atoi(argv[i + 1]) : def[i]) < 0)
			return 1;
	return 0;
}
