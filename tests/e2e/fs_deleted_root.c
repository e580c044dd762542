/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A root directory removed while in use: the child chroot()s into
 * "gone-root" (mode 0751) and chdir("/"), then the root removes it with
 * rmdir. After restart, from inside: the child's /proc/PID/root (read by
 * the root) is "DIR/gone-root (deleted)" as before, and the child finds
 * its "/" a directory with no links and mode 0751, in which nothing can
 * be made (ENOENT), and "/.." is still "/" (the same inode).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	const char *dir = getenv("CKPT_TEST_DIR") ? getenv("CKPT_TEST_DIR") : ".";
	char root[4096], link[64], was[4096], now[4096];
	snprintf(root, sizeof(root), "%s/gone-root", dir);
	if (mkdir(root, 0751) < 0 || chmod(root, 0751) < 0)
		fail("mkdir: %m");
	int go[2], back[2];
	if (pipe(go) || pipe(back))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		char x;
		if (chroot(root) < 0 || chdir("/") < 0)
			_exit(1);
		if (write(back[1], "r", 1) != 1 || read(go[0], &x, 1) != 1)
			_exit(2);
		struct stat a, b;
		if (stat("/", &a) < 0 || !S_ISDIR(a.st_mode) || a.st_nlink != 0 ||
		    (a.st_mode & 07777) != 0751)
			_exit(3);
		if (stat("/..", &b) < 0 || b.st_ino != a.st_ino)
			_exit(4);
		if (mkdir("/x", 0700) == 0 || errno != ENOENT)
			_exit(5);
		_exit(0);
	}
	char x;
	if (read(back[0], &x, 1) != 1)
		fail("the child could not chroot");
	if (rmdir(root) < 0)
		fail("rmdir: %m");
	snprintf(link, sizeof(link), "/proc/%d/root", c);
	ssize_t n = readlink(link, was, sizeof(was) - 1);
	was[n > 0 ? n : 0] = 0;

	test_ready();
	test_wait();

	n = readlink(link, now, sizeof(now) - 1);
	now[n > 0 ? n : 0] = 0;
	expect(!strcmp(now, was), "the child's root reads '%s', was '%s'", now, was);
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (3: its root is not a removed directory of mode 0751, 4: /.. "
	       "is not /, 5: something can be made in it)",
	       st);
	pass();
}
