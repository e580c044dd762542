/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A plain process tree (no pid namespace of its own) whose root is in a
 * uts namespace of its own, as under `unshare -u` (the runner starts it
 * so) or systemd's ProtectHostname=yes: it sets a hostname and a
 * domainname there and forks a child, which inherits the namespace.
 * After the restart, from inside: both still see the hostname and
 * domainname, both are in one uts namespace, and it is not the runner's
 * (ckpt's); the runner's namespace still has the host's hostname (a child
 * joins it with setns to look: nothing leaked onto the host). Started
 * without `unshare -u`, it unshares itself.
 */
#include "lib.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOST   "ns16-uts-box"
#define DOMAIN "ns16.example"

/* pid's uts namespace (0: this process's: under --pidns its pid is not
 * the one /proc knows it by) */
static ino_t ns_ino(pid_t pid)
{
	char path[64];
	struct stat st;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/uts", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/uts");
	if (stat(path, &st) < 0)
		fail("stat %s: %m", path);
	return st.st_ino;
}

/* 0 if this process sees HOST and DOMAIN, else a reason's number */
static int names_ok(void)
{
	char h[65] = "", d[65] = "";
	if (gethostname(h, sizeof(h)) < 0 || getdomainname(d, sizeof(d)) < 0)
		return 10;
	return strcmp(h, HOST) ? 11 : strcmp(d, DOMAIN) ? 12 : 0;
}

/* The hostname of the runner's uts namespace, read by a child that joins
 * it (the test's own namespace is left alone). */
static void host_name(pid_t runner, char *out, size_t len)
{
	int p[2];
	char path[64];
	if (pipe(p) < 0)
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		char h[65] = "";
		snprintf(path, sizeof(path), "/proc/%d/ns/uts", runner);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWUTS) < 0 || gethostname(h, sizeof(h)) < 0)
			_exit(1);
		_exit(write(p[1], h, strlen(h)) < 0);
	}
	close(p[1]);
	ssize_t n = read(p[0], out, len - 1);
	out[n > 0 ? n : 0] = '\0';
	close(p[0]);
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("cannot read the host's hostname (status %#x)", st);
}

int main(void)
{
	pid_t runner = getppid();
	char host[65] = "", now[65];
	int go[2];
	if (ns_ino(0) == ns_ino(runner) && unshare(CLONE_NEWUTS) < 0)
		fail("unshare(CLONE_NEWUTS): %m");
	host_name(runner, host, sizeof(host));
	if (!strcmp(host, HOST))
		fail("the host is called %s already", HOST);
	if (sethostname(HOST, strlen(HOST)) < 0 || setdomainname(DOMAIN, strlen(DOMAIN)) < 0)
		fail("sethostname, setdomainname: %m");
	if (pipe(go) < 0)
		fail("pipe: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		ino_t root;
		close(go[1]);
		/* the root's namespace after the restart (or its death: EOF) */
		if (read(go[0], &root, sizeof(root)) != sizeof(root))
			_exit(2);
		_exit(root != ns_ino(0) ? 3 : names_ok());
	}
	close(go[0]);

	test_ready();
	test_wait();

	expect(names_ok() == 0, "the hostname or domainname is lost (%d)", names_ok());
	expect(ns_ino(0) != ns_ino(runner), "the uts namespace is the runner's");
	host_name(runner, now, sizeof(now));
	expect(!strcmp(now, host), "the host's hostname is %s, was %s", now, host);
	int st;
	ino_t root = ns_ino(0);
	if (write(go[1], &root, sizeof(root)) != sizeof(root) || waitpid(child, &st, 0) != child)
		fail("child: write or wait: %m");
	expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	pass();
}
