/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Refusals of a tree in several network namespaces (the tree itself in
 * ckpt's namespace):
 * - "thread": a second thread unshares a network namespace of its own;
 *   the checkpoint must refuse it by pid and thread;
 * - "tcp": a child unshares a network namespace of its own, listens on its
 *   127.0.0.1:7778 and accepts (fd 7) a connection from a process outside
 *   the tree (a grandchild's orphan) in that namespace; the checkpoint must
 *   refuse the connection by pid and fd (the network lock does not cover
 *   that namespace);
 * - "veth": fd 5 holds a network namespace no process is in, joined by a
 *   veth pair (a0 there) to a named one (`ip netns add`) that nothing of
 *   the tree holds; the checkpoint must refuse the link, whose other end is
 *   outside the image, by name.
 * - "inet", "netlink": fd 5 holds a network namespace no process is in,
 *   and fd 7 is a socket (UDP, NETLINK_ROUTE) the process made in it (setns
 *   there and back); the checkpoint must refuse the socket by pid and fd
 *   (a unix socket made so is saved: its namespace is the one whose
 *   sock_diag shows it);
 * - "unix": fd 7 is a unix datagram socket the process made in a named
 *   network namespace (`ip netns add`) that nothing of the tree holds; the
 *   checkpoint must refuse it by pid and fd.
 * Each time the process lives on and checks that what it made is still
 * there.
 */
#include "lib.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int pipefd[2];

static void *thread_main(void *arg)
{
	(void)arg;
	char c = unshare(CLONE_NEWNET) == 0 ? 'u' : 'e';
	if (write(pipefd[1], &c, 1) != 1)
		return NULL;
	for (;;)
		pause();
	return NULL;
}

/* The tid of the process's other thread. */
static int other_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int tid = 0;
	while (d && (e = readdir(d)))
		if (atoi(e->d_name) > 0 && atoi(e->d_name) != getpid())
			tid = atoi(e->d_name);
	if (d)
		closedir(d);
	if (!tid)
		fail("no other thread");
	return tid;
}

static ino_t ns_ino(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		fail("stat %s: %m", path);
	return st.st_ino;
}

static char named[32];

/* "veth": a namespace held by fd 5, a veth pair to a named one. */
static void veth_between(void)
{
	pid_t a = test_netns_child(NULL);
	char cmd[256];
	snprintf(named, sizeof(named), "ckpt-rn-%d", getpid());
	snprintf(cmd, sizeof(cmd), "ip netns add %s && ip link add a0 netns /proc/%d/ns/net type "
		 "veth peer name b0 netns %s", named, a, named);
	if (system(cmd) != 0)
		fail("%s failed", cmd);
	test_hold_netns(a, 5);
}

static pid_t outsider;

/* "tcp": a child in a namespace of its own, connected to a process outside
 * the tree there. */
static pid_t child_tcp(void)
{
	int p[2], alive[2];
	if (pipe(p) || pipe(alive))
		fail("pipe: %m");
	alive[0] = test_move_fd(alive[0], 30);
	alive[1] = test_move_fd(alive[1], 31);
	pid_t child = fork();
	if (child == 0) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7778),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int l = -1;
		if (unshare(CLONE_NEWNET) < 0 || system("ip link set lo up") != 0 ||
		    (l = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
			_exit(1);
		pid_t d = fork();
		if (d == 0) {
			pid_t e = fork();
			if (e == 0) {
				int s = socket(AF_INET, SOCK_STREAM, 0);
				char c;
				close(alive[1]);
				if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
					_exit(1);
				/* until the tree is gone, whatever the end of the test */
				while (read(alive[0], &c, 1) < 0)
					;
				_exit(0);
			}
			_exit(write(p[1], &e, sizeof(e)) == sizeof(e) ? 0 : 1);
		}
		int s = accept(l, NULL, NULL);
		if (d < 0 || waitpid(d, NULL, 0) != d || s < 0)
			_exit(1);
		close(l);
		test_move_fd(s, 7);
		for (;;)
			pause();
	}
	if (child < 0 || read(p[0], &outsider, sizeof(outsider)) != sizeof(outsider))
		fail("no child in a namespace of its own connected to an outsider");
	close(p[0]);
	close(p[1]);
	/* the connection accepted: the child holds fd 7 */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/7", child);
	for (int i = 0; i < 3000 && access(path, F_OK) < 0; i++)
		usleep(10000);
	if (access(path, F_OK) < 0)
		fail("the child has no fd 7");
	return child;
}

/* "inet", "netlink": a socket of a held namespace (fd 5) at fd 7; "unix":
 * of a named namespace the tree does not hold. */
static void sock_in_other(const char *mode)
{
	int ns = 5;
	if (!strcmp(mode, "unix")) {
		char cmd[64], path[64];
		snprintf(named, sizeof(named), "ckpt-rn-%d", getpid());
		snprintf(cmd, sizeof(cmd), "ip netns add %s", named);
		snprintf(path, sizeof(path), "/run/netns/%s", named);
		if (system(cmd) != 0 || (ns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			fail("%s failed", cmd);
	} else {
		test_hold_netns(test_netns_child(NULL), 5);
	}
	int own = open("/proc/self/ns/net", O_RDONLY);
	if (own < 0)
		fail("open /proc/self/ns/net: %m");
	if (setns(ns, CLONE_NEWNET) < 0)
		fail("setns: %m");
	bool inet = !strcmp(mode, "inet"), nl = !strcmp(mode, "netlink");
	int s = inet ? socket(AF_INET6, SOCK_DGRAM, 0)
		: nl ? socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)
		     : socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "\0ckpt-refuse-netns" };
	struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
	if (s < 0 || (inet ? bind(s, (struct sockaddr *)&a6, sizeof(a6))
		      : nl ? bind(s, (struct sockaddr *)&snl, sizeof(snl))
			   : bind(s, (struct sockaddr *)&un, sizeof(un))) < 0)
		fail("socket in the other namespace: %m");
	test_move_fd(s, 7);
	if (setns(own, CLONE_NEWNET) < 0)
		fail("setns back: %m");
	close(own);
	if (ns != 5)
		close(ns);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "thread";
	char c, path[64];
	pid_t child = 0;
	pthread_t th;
	if (pipe(pipefd))
		fail("pipe: %m");
	if (!strcmp(mode, "thread")) {
		if (pthread_create(&th, NULL, thread_main, NULL))
			fail("pthread_create");
		if (read(pipefd[0], &c, 1) != 1 || c != 'u')
			fail("no network namespace of its own (unshare failed)");
	} else if (!strcmp(mode, "veth")) {
		veth_between();
	} else if (!strcmp(mode, "inet") || !strcmp(mode, "unix") || !strcmp(mode, "netlink")) {
		sock_in_other(mode);
	} else {
		child = child_tcp();
	}
	ino_t mine = ns_ino("/proc/self/ns/net");

	test_ready();
	test_wait();

	if (!strcmp(mode, "thread")) /* the other entry of /proc/self/task */
		snprintf(path, sizeof(path), "/proc/self/task/%d/ns/net", other_tid());
	else if (!strcmp(mode, "unix")) /* the socket, of the named namespace */
		snprintf(path, sizeof(path), "/run/netns/%s", named);
	else if (strcmp(mode, "tcp"))
		snprintf(path, sizeof(path), "/proc/self/fd/5");
	else
		snprintf(path, sizeof(path), "/proc/%d/ns/net", child);
	expect(ns_ino(path) != mine, "%s is in the process's network namespace", mode);
	if (outsider > 0)
		kill(outsider, SIGKILL);
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	if (named[0]) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "ip netns del %s", named);
		expect(system(cmd) == 0, "%s failed", cmd);
	}
	pass();
}
