/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Siblings sharing one fd table and one fs (CLONE_FILES between processes
 * that are not parent and child): the root forks A; A clones B with
 * CLONE_FILES | CLONE_FS | CLONE_PARENT (B is the root's child, sharing
 * A's table and cwd); B clones C with CLONE_FILES | CLONE_PARENT (also
 * the root's child, sharing the same table, with a cwd of its own).
 * After restart: an fd A opens is seen by B and C and not by the root,
 * A's chdir moves B and not C, and B and C are still the root's children.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int go[2], go_a[2], back[2], root_pid;

static void wait_byte(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static void report(char c)
{
	if (write(back[1], &c, 1) != 1)
		_exit(3);
}

/* B and C: after the go, fd 40 must be open, the parent must be the root */
static __attribute__((noreturn)) void sibling(int moved)
{
	wait_byte(go[0]);
	char cwd[4096];
	int bad = (fcntl(40, F_GETFD) < 0) | (getppid() != root_pid) << 1;
	if (!getcwd(cwd, sizeof(cwd)) || (strcmp(cwd + strlen(cwd) - 4, "/sub") == 0) != moved)
		bad |= 4;
	report((char)('0' + bad));
	_exit(bad);
}

static pid_t clone_parent(unsigned long flags)
{
	return (pid_t)syscall(SYS_clone, flags | CLONE_PARENT, 0, 0, 0, 0);
}

int main(void)
{
	if (pipe(go) || pipe(go_a) || pipe(back) || mkdir("sub", 0700))
		fail("setup: %m");
	root_pid = getpid();
	pid_t a = fork();
	if (a < 0)
		fail("fork: %m");
	if (a == 0) {
		pid_t b = clone_parent(CLONE_FILES | CLONE_FS);
		if (b == 0) {
			pid_t c = clone_parent(CLONE_FILES);
			if (c == 0)
				sibling(0); /* C: A's chdir does not move it */
			if (c < 0)
				_exit(9);
			sibling(1);
		}
		if (b < 0)
			_exit(9);
		wait_byte(go_a[0]);
		int fd = open("/dev/null", O_RDONLY);
		if (fd < 0 || dup2(fd, 40) != 40 || chdir("sub") < 0)
			_exit(8);
		close(fd);
		report('a');
		_exit(0);
	}
	test_ready();
	test_wait();

	/* A first: it opens fd 40 and moves its (and B's) cwd */
	if (write(go_a[1], "g", 1) != 1)
		fail("write: %m");
	char c = 0;
	expect(read(back[0], &c, 1) == 1 && c == 'a', "A did not do its part (%c)", c);
	if (write(go[1], "gg", 2) != 2)
		fail("write: %m");
	for (int i = 0; i < 2; i++) {
		c = 0;
		expect(read(back[0], &c, 1) == 1 && c == '0',
		       "a sibling reports %c (1: no fd 40, 2: wrong parent, 4: wrong cwd)", c);
	}
	expect(fcntl(40, F_GETFD) < 0, "the root sees A's fd 40 (its table is its own)");
	int n = 0, st;
	pid_t w;
	while ((w = waitpid(-1, &st, 0)) > 0) {
		n++;
		expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", w, st);
	}
	expect(n == 3, "the root reaped %d children, want 3", n);
	pass();
}
