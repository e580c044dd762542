/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Directories removed while still in use: the cwd ("gone-cwd", mode 0751)
 * and an open directory fd ("gone-fd", at fd 10, and an O_PATH one at
 * fd 11), each removed with rmdir. After restart /proc/self/cwd and the
 * fds read "PATH (deleted)" as before, each is a directory with no links
 * and the same mode, getcwd() fails with ENOENT as it did, and nothing
 * can be made in them.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void link_of(const char *what, char *buf, size_t len)
{
	ssize_t n = readlink(what, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

int main(void)
{
	const char *dir = getenv("CKPT_TEST_DIR") ? getenv("CKPT_TEST_DIR") : ".";
	char cwd[4096], fdd[4096], lc[4096], lf[4096], lp[4096], now[4096];
	snprintf(cwd, sizeof(cwd), "%s/gone-cwd", dir);
	snprintf(fdd, sizeof(fdd), "%s/gone-fd", dir);
	if (mkdir(cwd, 0751) < 0 || mkdir(fdd, 0700) < 0)
		fail("mkdir: %m");
	int a = open(fdd, O_RDONLY | O_DIRECTORY), b = open(fdd, O_PATH);
	if (a < 0 || b < 0 || chdir(cwd) < 0)
		fail("open/chdir: %m");
	test_move_fd(a, 10);
	test_move_fd(b, 11);
	if (rmdir(cwd) < 0 || rmdir(fdd) < 0)
		fail("rmdir: %m");
	link_of("/proc/self/cwd", lc, sizeof(lc));
	link_of("/proc/self/fd/10", lf, sizeof(lf));
	link_of("/proc/self/fd/11", lp, sizeof(lp));

	test_ready();
	test_wait();

	char got[4096];
	link_of("/proc/self/cwd", got, sizeof(got));
	expect(!strcmp(got, lc), "cwd reads '%s', was '%s'", got, lc);
	link_of("/proc/self/fd/10", got, sizeof(got));
	expect(!strcmp(got, lf), "fd 10 reads '%s', was '%s'", got, lf);
	link_of("/proc/self/fd/11", got, sizeof(got));
	expect(!strcmp(got, lp), "fd 11 reads '%s', was '%s'", got, lp);
	struct stat st;
	expect(stat(".", &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 0 &&
	       (st.st_mode & 07777) == 0751, "cwd: mode 0%o, %lu links", st.st_mode & 07777,
	       (unsigned long)st.st_nlink);
	expect(fstat(10, &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 0,
	       "fd 10 is not a removed directory");
	expect(!getcwd(now, sizeof(now)) && errno == ENOENT, "getcwd works: the cwd is not gone");
	expect(openat(10, "x", O_CREAT | O_WRONLY, 0600) < 0 && errno == ENOENT,
	       "a file could be made in the removed directory");
	pass();
}
