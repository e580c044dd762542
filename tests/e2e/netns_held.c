/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A network namespace no process is in, held by fd 5 (as a file of
 * `ip netns` is): a child makes it (unshare), sets it up with `ip` (lo up
 * with an address, a veth pair whose other end, nhPID, is in the
 * process's own namespace, addresses, a route in table 100, a policy
 * routing rule, ip_forward) and exits; fd 5 (and fd 6, a second open of
 * the same namespace) are all that hold it. The process notes what `ip`
 * lists inside (through a child that enters it by setns(fd 5); the host
 * end's index, "eth0@ifN", is left out: it is the host's); after the
 * checkpoint and restart the notes must be the same, and fds 5 and 6 the
 * same namespace, another than the process's. Fd 7 is a unix datagram
 * socket the process made in that namespace (setns there and back), bound
 * to an abstract name, with a datagram queued: after the restart the
 * datagram is there, and the name is reached from inside the namespace,
 * not from the process's own.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char host_if[16];

/* What `ip` lists inside the namespace of fd 5. */
static void notes(char *out, size_t len)
{
	test_netns_run(5,
		       "ip -4 -o addr show | awk '{print $2, $4}'; ip -o link show | "
		       "awk '{sub(/@.*/, \"\", $2); print $2, $5, $17}'; ip route; ip route show table 100; ip rule; "
		       "cat /proc/sys/net/ipv4/ip_forward",
		       out, len);
}

static pid_t me; /* the process's pid, in the name */

static socklen_t held_name(struct sockaddr_un *a)
{
	int n;
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "ckpt-held-%d", me);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* A datagram sent to the abstract name from the namespace of fd 5 (in):
 * 0, or the errno of sendto (from a child that entered it) */
static int send_held(bool in, const char *text)
{
	pid_t p = fork();
	if (p == 0) {
		struct sockaddr_un a;
		socklen_t al = held_name(&a);
		if (in && setns(5, CLONE_NEWNET) < 0)
			_exit(250);
		int s = socket(AF_UNIX, SOCK_DGRAM, 0);
		if (s < 0)
			_exit(251);
		_exit(sendto(s, text, strlen(text), 0, (struct sockaddr *)&a, al) < 0 ? errno : 0);
	}
	int st;
	if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st))
		fail("a sender to the held namespace's name");
	return WEXITSTATUS(st);
}

static void run(const char *fmt, const char *arg)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), fmt, arg, arg);
	if (system(cmd) != 0)
		fail("%s failed", cmd);
}

int main(void)
{
	static char before[16384], after[16384];
	me = getpid();
	snprintf(host_if, sizeof(host_if), "nh%d", getpid() % 1000000);
	pid_t c = test_netns_child("ip link set lo up && ip addr add 198.51.100.1/24 dev lo && "
				   "ip route add 203.0.113.0/24 dev lo table 100 && "
				   "ip rule add pref 100 lookup 100 && "
				   "echo 1 > /proc/sys/net/ipv4/ip_forward");
	/* the veth pair: the host end here, eth0 there */
	char cmd[256], path[64];
	snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name eth0 netns /proc/%d/ns/net",
		 host_if, c);
	if (system(cmd) != 0)
		fail("%s failed", cmd);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", c);
	int fd2 = open(path, O_RDONLY);
	if (fd2 < 0)
		fail("open %s: %m", path);
	test_move_fd(fd2, 6);
	test_hold_netns(c, 5);
	run("ip addr add 10.213.77.1/30 dev %s && ip link set %s up", host_if);
	/* inside: eth0's address, up */
	pid_t s = fork();
	if (s == 0) {
		if (setns(5, CLONE_NEWNET) < 0)
			_exit(1);
		_exit(system("ip addr add 10.213.77.2/30 dev eth0 && ip link set eth0 up && "
			     "ip route add default via 10.213.77.1") != 0);
	}
	int st;
	if (s < 0 || waitpid(s, &st, 0) != s || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("eth0 inside");
	notes(before, sizeof(before));
	static const char *const want[] = { "lo 198.51.100.1/24", "eth0 10.213.77.2/30",
					    "203.0.113.0/24 dev lo", "100:\tfrom all lookup 100",
					    "default via 10.213.77.1" };
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
		expect(strstr(before, want[i]) != NULL, "no '%s' in the notes:\n%s", want[i], before);

	/* fd 7: a unix socket of the held namespace */
	int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (own < 0 || setns(5, CLONE_NEWNET) < 0)
		fail("setns into fd 5: %m");
	struct sockaddr_un an;
	socklen_t al = held_name(&an);
	int u = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (u < 0 || bind(u, (struct sockaddr *)&an, al) < 0)
		fail("a unix socket in the held namespace: %m");
	test_move_fd(u, 7);
	if (setns(own, CLONE_NEWNET) < 0)
		fail("setns back: %m");
	close(own);
	expect(send_held(true, "queued") == 0, "no datagram to the name from inside");

	test_ready();
	test_wait();

	char dg[16] = "";
	expect(recv(7, dg, sizeof(dg) - 1, MSG_DONTWAIT) == 6 && !strcmp(dg, "queued"),
	       "fd 7: the queued datagram is not there");
	expect(send_held(true, "again") == 0, "the name is not reached from inside");
	memset(dg, 0, sizeof(dg));
	expect(recv(7, dg, sizeof(dg) - 1, MSG_DONTWAIT) == 5 && !strcmp(dg, "again"),
	       "fd 7: the datagram from inside did not come");
	expect(send_held(false, "outside") == ECONNREFUSED,
	       "the name is reached from the process's own namespace");

	notes(after, sizeof(after));
	expect(!strcmp(before, after), "the namespace changed:\n--- before\n%s--- after\n%s", before,
	       after);
	struct stat a, b, self;
	expect(fstat(5, &a) == 0 && fstat(6, &b) == 0 && stat("/proc/self/ns/net", &self) == 0 &&
		       a.st_ino == b.st_ino && a.st_ino != self.st_ino,
	       "fds 5 and 6 are not one namespace other than the process's");
	snprintf(path, sizeof(path), "/sys/class/net/%s", host_if);
	expect(access(path, F_OK) == 0, "no host end %s", host_if);
	pass();
}
