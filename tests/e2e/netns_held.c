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
 * same namespace, another than the process's.
 */
#include "lib.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

	test_ready();
	test_wait();

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
