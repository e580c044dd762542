/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Twelve network namespaces no process is in, held by fds 5 to 16 (more
 * than the 8 ckpt once took): each with loopback up and an address of its
 * own (198.51.100.N/32); the first two joined by a veth pair (a0 in fd 5's,
 * 10.78.0.1/30; b0 in fd 6's, 10.78.0.2/30). After the checkpoint and
 * restart: what `ip` lists in each is the same, the twelve are distinct and
 * none is the process's, and a datagram goes from a0's address to b0's.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define N   12
#define FD0 5

/* What `ip` lists in the namespace of fd. */
static void notes(int fd, char *out, size_t len)
{
	test_netns_run(
	    fd,
	    "ip -4 -o addr show | awk '{print $2, $4}'; ip -o link show | "
	    "awk '{sub(/@.*/, \"\", $2); print $2, ($3 ~ /[<,]UP[,>]/ ? \"up\" : \"down\"), $5}'; "
	    "ip route | sed 's/ linkdown//'",
	    out, len);
}

/* A UDP socket made in the namespace of fd, bound to addr:7071. */
static int sock_in(int fd, const char *addr)
{
	int own = open("/proc/self/ns/net", O_RDONLY);
	if (own < 0 || setns(fd, CLONE_NEWNET) < 0)
		fail("setns: %m");
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(7071)};
	inet_pton(AF_INET, addr, &a.sin_addr);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("bind %s in fd %d's namespace: %m", addr, fd);
	if (setns(own, CLONE_NEWNET) < 0)
		fail("setns back: %m");
	close(own);
	return s;
}

int main(void)
{
	static char before[N][2048], after[N][2048];
	char cmd[512];
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		snprintf(cmd, sizeof(cmd),
			 "ip link set lo up && ip addr add 198.51.100.%d/32 dev lo", i + 1);
		kids[i] = test_netns_child(cmd);
	}
	snprintf(
	    cmd, sizeof(cmd),
	    "ip link add a0 netns /proc/%d/ns/net type veth peer name b0 netns /proc/%d/ns/net",
	    kids[0], kids[1]);
	if (system(cmd) != 0)
		fail("%s failed", cmd);
	for (int i = 0; i < N; i++)
		test_hold_netns(kids[i], FD0 + i);
	for (int i = 0; i < 2; i++) {
		pid_t c = fork();
		if (c == 0) {
			if (setns(FD0 + i, CLONE_NEWNET) < 0)
				_exit(1);
			_exit(system(i ? "ip addr add 10.78.0.2/30 dev b0 && ip link set b0 up"
				       : "ip addr add 10.78.0.1/30 dev a0 && ip link set a0 mtu "
					 "1300 up") != 0);
		}
		int st;
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
			fail("the veth's end %d", i);
	}
	for (int i = 0; i < N; i++)
		notes(FD0 + i, before[i], sizeof(before[i]));
	expect(strstr(before[0], "a0 10.78.0.1/30") && strstr(before[1], "b0 10.78.0.2/30") &&
		   strstr(before[11], "lo 198.51.100.12/32"),
	       "the notes before:\n%s%s%s", before[0], before[1], before[11]);

	test_ready();
	test_wait();

	struct stat self, st[N];
	if (stat("/proc/self/ns/net", &self) < 0)
		fail("stat: %m");
	for (int i = 0; i < N; i++) {
		notes(FD0 + i, after[i], sizeof(after[i]));
		expect(!strcmp(before[i], after[i]),
		       "fd %d's namespace changed:\n--- before\n%s--- after\n%s", FD0 + i,
		       before[i], after[i]);
		if (fstat(FD0 + i, &st[i]) < 0)
			fail("fstat %d: %m", FD0 + i);
		expect(st[i].st_ino != self.st_ino, "fd %d is the process's namespace", FD0 + i);
		for (int j = 0; j < i; j++)
			expect(st[i].st_ino != st[j].st_ino, "fds %d and %d are one namespace",
			       FD0 + j, FD0 + i);
	}
	int a = sock_in(FD0, "10.78.0.1"), b = sock_in(FD0 + 1, "10.78.0.2");
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(7071)};
	inet_pton(AF_INET, "10.78.0.2", &to.sin_addr);
	if (sendto(a, "hello", 5, 0, (struct sockaddr *)&to, sizeof(to)) != 5)
		fail("sendto 10.78.0.2: %m");
	struct pollfd p = {.fd = b, .events = POLLIN};
	char buf[16] = "";
	expect(poll(&p, 1, 30000) == 1 && recv(b, buf, sizeof(buf) - 1, 0) == 5 &&
		   !strcmp(buf, "hello"),
	       "no datagram from a0 to b0");
	pass();
}
