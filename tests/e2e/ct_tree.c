/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A container (run by the runner under `ckpt run --hostname box`): pid 1
 * with children that are pids 2, 3, 4 inside (one leads a session, one a
 * group), and a zombie. After restart into fresh namespaces: still pid 1,
 * the children have their pids, parents, groups and sessions inside, the
 * zombie is reaped with its status, the hostname is box, and the /proc of
 * the container lists only the container's processes.
 */
#include "lib.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int count_procs(void)
{
	DIR *d = opendir("/proc");
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] >= '1' && de->d_name[0] <= '9';
	if (d)
		closedir(d);
	return n;
}

int main(void)
{
	int go[2];
	if (getpid() != 1)
		fail("not pid 1 of a container (pid %d): run me under ckpt run", (int)getpid());
	if (pipe(go))
		fail("pipe: %m");
	pid_t kids[3];
	for (int i = 0; i < 3; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			if (i == 0)
				setsid();
			if (i == 1)
				setpgid(0, 0);
			pid_t pg = getpgrp(), sid = getsid(0);
			char c;
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
			_exit(getppid() == 1 && getpgrp() == pg && getsid(0) == sid ? 10 + i : 1);
		}
	}
	pid_t z = fork();
	if (z == 0)
		_exit(33);
	siginfo_t si;
	waitid(P_PID, z, &si, WEXITED | WNOWAIT);
	char host[65] = "";
	gethostname(host, sizeof(host));
	const int nprocs = count_procs();

	test_ready();
	test_wait();

	char now[65] = "", self[16] = "";
	gethostname(now, sizeof(now));
	expect(!strcmp(now, host) && !strcmp(now, "box"), "hostname is '%s', was '%s'", now, host);
	expect(readlink("/proc/self", self, sizeof(self) - 1) > 0 && !strcmp(self, "1"),
	       "/proc/self is '%s', not 1: not the container's /proc", self);
	expect(count_procs() == nprocs, "the container's /proc lists %d processes, was %d",
	       count_procs(), nprocs);
	expect(kids[0] == 2 && kids[1] == 3 && kids[2] == 4 && z == 5, "children %d %d %d %d",
	       (int)kids[0], (int)kids[1], (int)kids[2], (int)z);
	int st;
	expect(waitpid(z, &st, 0) == z && WIFEXITED(st) && WEXITSTATUS(st) == 33,
	       "the zombie: status %#x", st);
	if (write(go[1], "ggg", 3) != 3)
		fail("write: %m");
	for (int i = 0; i < 3; i++)
		expect(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) &&
			       WEXITSTATUS(st) == 10 + i,
		       "child %d: status %#x", i, st);
	pass();
}
