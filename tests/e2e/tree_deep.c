/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A tree of 20 processes, 5 levels (root and 4 below), with mixed sessions
 * and groups: two new sessions, group leaders, members joining a cousin's
 * or a sibling's group. Every process records its parent, group and
 * session, says it is ready, and blocks in read() on a shared "go" pipe.
 * After restart the root sends one byte per process; each checks that
 * getppid(), getpgrp() and getsid() are as recorded, reaps its children
 * (each must exit 0, and SIGCHLD must reach it) and exits 0, or prints
 * what differs and exits 1.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum act { NONE, SETSID, GROUP_SELF, GROUP_OF };

static const struct node {
	const char *name;
	int parent;
	enum act act;
	int group_of; /* GROUP_OF: the node whose group it joins */
} nodes[] = {
	{ "R", -1, NONE, 0 },	    { "A", 0, SETSID, 0 },	{ "A1", 1, GROUP_SELF, 0 },
	{ "A1a", 2, NONE, 0 },	    { "A1b", 2, GROUP_OF, 5 }, { "A2", 1, GROUP_SELF, 0 },
	{ "A2a", 5, GROUP_OF, 2 },  { "A3", 1, NONE, 0 },	{ "B", 0, GROUP_SELF, 0 },
	{ "B1", 8, NONE, 0 },	    { "B1a", 9, GROUP_SELF, 0 }, { "B1a1", 10, NONE, 0 },
	{ "B2", 8, SETSID, 0 },	    { "B2a", 12, NONE, 0 },	{ "B2a1", 13, GROUP_SELF, 0 },
	{ "C", 0, NONE, 0 },	    { "C1", 15, GROUP_OF, 8 },	{ "C2", 15, NONE, 0 },
	{ "D", 0, NONE, 0 },	    { "D1", 18, NONE, 0 },
};
#define N ((int)(sizeof(nodes) / sizeof(nodes[0])))

static int board = -1, ready_w = -1, go_r = -1;
static volatile sig_atomic_t sigchld;

static void on_chld(int s)
{
	(void)s;
	sigchld++;
}

static pid_t board_get(int i)
{
	pid_t pid = 0;
	for (int n = 0; n < 5000 && pid == 0; n++) {
		if (pread(board, &pid, sizeof(pid), i * sizeof(pid)) != sizeof(pid))
			pid = 0;
		if (!pid)
			usleep(1000);
	}
	if (!pid)
		fail("no pid for node %s", nodes[i].name);
	return pid;
}

static int run_node(int me);

static void start_children(int me, pid_t *kids, int *nkids)
{
	for (int i = 0; i < N; i++) {
		if (nodes[i].parent != me)
			continue;
		pid_t pid = fork();
		if (pid < 0)
			fail("fork: %m");
		if (pid == 0)
			_exit(run_node(i));
		kids[(*nkids)++] = pid;
	}
}

/* Sets up node me; returns its exit code after the go. */
static int run_node(int me)
{
	const struct node *n = &nodes[me];
	pid_t self = getpid(), kids[N];
	int nkids = 0, bad = 0;

	if (n->act == SETSID && setsid() < 0)
		fail("%s: setsid: %m", n->name);
	if (n->act == GROUP_SELF && setpgid(0, 0) < 0)
		fail("%s: setpgid: %m", n->name);
	if (pwrite(board, &self, sizeof(self), me * sizeof(self)) != sizeof(self))
		fail("%s: board: %m", n->name);
	if (n->act == GROUP_OF && setpgid(0, board_get(n->group_of)) < 0)
		fail("%s: setpgid(%s): %m", n->name, nodes[n->group_of].name);
	start_children(me, kids, &nkids);

	const pid_t ppid = getppid(), pgrp = getpgrp(), sid = getsid(0);
	if (me == 0)
		return 0;
	if (write(ready_w, "r", 1) != 1)
		fail("%s: ready: %m", n->name);
	char c;
	ssize_t r;
	while ((r = read(go_r, &c, 1)) < 0 && errno == EINTR)
		;
	if (r != 1) {
		test_log("FAIL: %s: read of go: %zd %m\n", n->name, r);
		return 1;
	}
	if (getppid() != ppid || getpgrp() != pgrp || getsid(0) != sid) {
		test_log("FAIL: %s (pid %d): ppid %d pgrp %d sid %d, were %d %d %d\n", n->name,
			 (int)self, (int)getppid(), (int)getpgrp(), (int)getsid(0), (int)ppid,
			 (int)pgrp, (int)sid);
		bad = 1;
	}
	for (int i = 0; i < nkids; i++) {
		int st;
		pid_t w;
		while ((w = waitpid(kids[i], &st, 0)) < 0 && errno == EINTR)
			;
		if (w != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st)) {
			test_log("FAIL: %s: child %d did not exit 0\n", n->name, (int)kids[i]);
			bad = 1;
		}
	}
	return bad;
}

int main(void)
{
	int rp[2], gp[2];
	board = open("pids", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (board < 0 || pipe(rp) || pipe(gp))
		fail("setup: %m");
	ready_w = rp[1];
	go_r = gp[0];
	struct sigaction sa = { .sa_handler = on_chld };
	sigaction(SIGCHLD, &sa, NULL);

	pid_t kids[N];
	int nkids = 0;
	if (pwrite(board, &(pid_t){ getpid() }, sizeof(pid_t), 0) != sizeof(pid_t))
		fail("board: %m");
	start_children(0, kids, &nkids);
	close(rp[1]);
	for (int i = 1; i < N; i++) {
		char c;
		if (read(rp[0], &c, 1) != 1)
			fail("only %d of %d processes got ready", i - 1, N - 1);
	}
	const pid_t pgrp = getpgrp(), sid = getsid(0);

	test_ready();
	test_wait();

	for (int i = 1; i < N; i++)
		if (write(gp[1], "g", 1) != 1)
			fail("go: %m");
	for (int i = 0; i < nkids; i++) {
		int st;
		pid_t w;
		while ((w = waitpid(kids[i], &st, 0)) < 0 && errno == EINTR)
			;
		expect(w == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		       "child %d of the root: status %#x", (int)kids[i], w == kids[i] ? st : -1);
	}
	expect(sigchld > 0, "no SIGCHLD reached the root");
	expect(getpgrp() == pgrp && getsid(0) == sid, "the root's group or session changed");
	pass();
}
