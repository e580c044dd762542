/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The working directory: a subdirectory "sub/deeper dir" of the test
 * directory. After restore getcwd(), /proc/self/cwd and the inode of "."
 * are unchanged, and a relative open finds the file left there.
 */
#include "lib.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	if (mkdir("sub", 0755) || mkdir("sub/deeper dir", 0755) || chdir("sub/deeper dir"))
		fail("mkdir/chdir: %m");
	int fd = open("marker", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "here", 4) != 4)
		fail("marker: %m");
	close(fd);
	char cwd[4096], link[4096];
	if (!getcwd(cwd, sizeof(cwd)))
		fail("getcwd: %m");
	struct stat st;
	stat(".", &st);

	test_ready();
	test_wait();

	char now[4096] = "";
	expect(getcwd(now, sizeof(now)) && !strcmp(now, cwd), "cwd is '%s', was '%s'", now, cwd);
	ssize_t n = readlink("/proc/self/cwd", link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	expect(!strcmp(link, cwd), "/proc/self/cwd is '%s', was '%s'", link, cwd);
	struct stat st2;
	expect(!stat(".", &st2) && st2.st_ino == st.st_ino && st2.st_dev == st.st_dev,
	       "\".\" is another directory");
	char buf[8] = "";
	fd = open("marker", O_RDONLY);
	expect(fd >= 0 && read(fd, buf, 4) == 4 && !memcmp(buf, "here", 4),
	       "relative open of marker failed");
	pass();
}
