/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Refusals of a tree in several network namespaces (the tree itself in
 * ckpt's namespace):
 * - "thread": a second thread unshares a network namespace of its own;
 *   the checkpoint must refuse it by pid and thread;
 * - "child": a child unshares a network namespace of its own; the
 *   checkpoint must refuse it by pid;
 * - "veth": fds 5 and 6 hold two network namespaces no process is in,
 *   joined by a veth pair (a0 in the first, b0 in the second); the
 *   checkpoint must refuse the link, whose other end is not in ckpt's
 *   namespace, by name.
 * - "inet", "unix": fd 5 holds a network namespace no process is in, and
 *   fd 7 is a socket (UDP, unix datagram) the process made in it (setns
 *   there and back); the checkpoint must refuse the socket by pid and fd.
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

/* "veth": two namespaces held by fds 5 and 6, a veth pair between them. */
static void veth_between(void)
{
	pid_t a = test_netns_child(NULL), b = test_netns_child(NULL);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "ip link add a0 netns /proc/%d/ns/net type veth peer name b0 "
		 "netns /proc/%d/ns/net", a, b);
	if (system(cmd) != 0)
		fail("%s failed", cmd);
	test_hold_netns(a, 5);
	test_hold_netns(b, 6);
}

/* "inet", "unix": a socket of a held namespace at fd 7. */
static void sock_in_held(bool inet)
{
	test_hold_netns(test_netns_child(NULL), 5);
	int own = open("/proc/self/ns/net", O_RDONLY);
	if (own < 0)
		fail("open /proc/self/ns/net: %m");
	if (setns(5, CLONE_NEWNET) < 0)
		fail("setns: %m");
	int s = socket(inet ? AF_INET6 : AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "\0ckpt-refuse-netns" };
	if (s < 0 || (inet ? bind(s, (struct sockaddr *)&a6, sizeof(a6))
			   : bind(s, (struct sockaddr *)&un, sizeof(un))) < 0)
		fail("socket in the held namespace: %m");
	test_move_fd(s, 7);
	if (setns(own, CLONE_NEWNET) < 0)
		fail("setns back: %m");
	close(own);
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
	} else if (!strcmp(mode, "inet") || !strcmp(mode, "unix")) {
		sock_in_held(!strcmp(mode, "inet"));
	} else {
		child = test_netns_child(NULL);
	}
	ino_t mine = ns_ino("/proc/self/ns/net");

	test_ready();
	test_wait();

	if (!strcmp(mode, "thread")) /* the other entry of /proc/self/task */
		snprintf(path, sizeof(path), "/proc/self/task/%d/ns/net", other_tid());
	else if (strcmp(mode, "child"))
		snprintf(path, sizeof(path), "/proc/self/fd/5");
	else
		snprintf(path, sizeof(path), "/proc/%d/ns/net", child);
	expect(ns_ino(path) != mine, "%s is in the process's network namespace", mode);
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	pass();
}
