/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * O_PATH fds: of a regular file, of a directory, of a symlink itself
 * (O_PATH | O_NOFOLLOW), of a FIFO and of /dev/null, each at a known fd.
 * After restart each is still O_PATH (F_GETFL), names the same inode
 * (fstat), and works as a path: openat() through the directory fd,
 * readlinkat() of the symlink fd gives its target, the file opens again
 * through /proc/self/fd with its contents.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const names[] = { "file", "dir", "link", "fifo", "/dev/null" };
#define N 5

int main(void)
{
	int fd[N], target[N] = { 10, 11, 12, 13, 14 };
	struct stat before[N], after;
	const char *dir = getenv("CKPT_TEST_DIR") ? getenv("CKPT_TEST_DIR") : ".";
	char path[4096];

	snprintf(path, sizeof(path), "%s/file", dir);
	int w = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (w < 0 || write(w, "contents", 8) != 8)
		fail("make file: %m");
	close(w);
	snprintf(path, sizeof(path), "%s/dir", dir);
	if (mkdir(path, 0755) < 0)
		fail("mkdir: %m");
	snprintf(path, sizeof(path), "%s/dir/inner", dir);
	if ((w = open(path, O_WRONLY | O_CREAT, 0644)) < 0)
		fail("make inner: %m");
	close(w);
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink("file", path) < 0)
		fail("symlink: %m");
	snprintf(path, sizeof(path), "%s/fifo", dir);
	if (mkfifo(path, 0644) < 0)
		fail("mkfifo: %m");
	for (int i = 0; i < N; i++) {
		if (names[i][0] == '/')
			snprintf(path, sizeof(path), "%s", names[i]);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		fd[i] = open(path, O_PATH | (i == 2 ? O_NOFOLLOW : 0));
		if (fd[i] < 0)
			fail("open O_PATH %s: %m", path);
		test_move_fd(fd[i], target[i]);
		fd[i] = target[i];
		if (fstat(fd[i], &before[i]) < 0)
			fail("fstat: %m");
	}

	test_ready();
	test_wait();

	for (int i = 0; i < N; i++) {
		int fl = fcntl(fd[i], F_GETFL);
		expect(fl >= 0 && (fl & O_PATH), "%s: fd %d is not O_PATH (flags 0%o)", names[i],
		       fd[i], fl);
		expect(fstat(fd[i], &after) == 0 && after.st_ino == before[i].st_ino &&
		       after.st_dev == before[i].st_dev && after.st_mode == before[i].st_mode,
		       "%s: another inode after restart", names[i]);
	}
	int in = openat(fd[1], "inner", O_RDONLY);
	expect(in >= 0, "openat through the directory fd: %m");
	char buf[64] = "";
	ssize_t n = readlinkat(fd[2], "", buf, sizeof(buf) - 1);
	expect(n == 4 && !memcmp(buf, "file", 4), "readlinkat of the symlink fd: %zd '%s'", n, buf);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd[0]);
	int r = open(path, O_RDONLY);
	memset(buf, 0, sizeof(buf));
	expect(r >= 0 && read(r, buf, sizeof(buf)) == 8 && !memcmp(buf, "contents", 8),
	       "reopening the file's O_PATH fd: %m");
	pass();
}
