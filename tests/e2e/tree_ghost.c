/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Groups and sessions whose leader is gone. The root is a subreaper. G
 * leads a group, forks M into it and exits; S starts a session, forks T
 * and exits; the root reaps G and S, and M and T are reparented to it.
 * After restart (ghosts with the pids of G and S rebuild the group and the
 * session, then go): M is still in group G, T in session and group S,
 * both children of the root, and the root has no other child.
 */
#include "lib.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int go[2];

/* waits for the go, then exits 0 if its group, session and parent are right */
static __attribute__((noreturn)) void member(pid_t pgrp, pid_t sid, pid_t ppid)
{
	char c;
	while (read(go[0], &c, 1) < 0 && errno == EINTR)
		;
	_exit((getpgrp() != pgrp) | (getsid(0) != sid) << 1 | (getppid() != ppid) << 2);
}

static pid_t ppid_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	char *p = strrchr(buf, ')');
	return p ? (pid_t)strtol(p + 4, NULL, 10) : -1;
}

/* forks a leader that forks one member and exits; returns the member */
static pid_t orphan(bool session, pid_t *leader)
{
	int kid[2];
	pid_t root = getpid();
	if (pipe(kid))
		fail("pipe: %m");
	pid_t l = fork();
	if (l < 0)
		fail("fork: %m");
	if (l == 0) {
		if (session ? setsid() < 0 : setpgid(0, 0) < 0)
			_exit(1);
		pid_t sid = getsid(0), me = getpid();
		pid_t m = fork();
		if (m == 0)
			member(me, sid, root);
		_exit(write(kid[1], &m, sizeof(m)) == sizeof(m) ? 0 : 1);
	}
	pid_t m = 0;
	int st;
	if (read(kid[0], &m, sizeof(m)) != sizeof(m) || waitpid(l, &st, 0) != l || st)
		fail("the leader failed");
	close(kid[0]);
	close(kid[1]);
	for (int i = 0; i < 2000 && ppid_of(m) != root; i++)
		usleep(1000);
	if (ppid_of(m) != root)
		fail("pid %d was not reparented to the subreaper", (int)m);
	*leader = l;
	return m;
}

int main(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) || pipe(go))
		fail("setup: %m");
	pid_t g, s;
	pid_t m = orphan(false, &g);
	pid_t t = orphan(true, &s);
	expect(getpgid(m) == g && getsid(t) == s && getpgid(t) == s, "setup went wrong");

	test_ready();
	test_wait();

	if (write(go[1], "gg", 2) != 2)
		fail("write: %m");
	int st;
	expect(waitpid(m, &st, 0) == m && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "M (group of gone leader %d): status %#x (1 group, 2 session, 4 parent)", (int)g,
	       st);
	expect(waitpid(t, &st, 0) == t && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "T (session of gone leader %d): status %#x (1 group, 2 session, 4 parent)", (int)s,
	       st);
	expect(waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD, "the root has extra children");
	pass();
}
