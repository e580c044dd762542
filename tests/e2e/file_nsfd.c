/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Namespace files held open, as setns() takes them: /proc/self/ns/net at
 * fd 10 (and a dup at fd 13), ns/uts at fd 11, ns/pid_for_children at
 * fd 12. After restart (also in a container, as ct_nsfd, whose
 * namespaces are new) each names the namespace the process is in now (the
 * same inode as its /proc/self/ns file), the dup still shares the open
 * file, and setns() through fd 11 works.
 */
#include "lib.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const names[] = { "net", "uts", "pid_for_children" };

static void same(int fd, const char *name)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	expect(fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev, "fd %d is not this process's %s namespace", fd, name);
}

int main(void)
{
	for (int i = 0; i < 3; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/ns/%s", names[i]);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			fail("open %s: %m", path);
		test_move_fd(fd, 10 + i);
	}
	if (dup2(10, 13) != 13)
		fail("dup2: %m");
	if (fcntl(10, F_SETFL, O_NONBLOCK) < 0) /* seen through the dup */
		fail("F_SETFL: %m");

	test_ready();
	test_wait();

	for (int i = 0; i < 3; i++)
		same(10 + i, names[i]);
	same(13, "net");
	expect(fcntl(13, F_GETFL) & O_NONBLOCK, "fd 13 no longer shares fd 10's open file");
	expect(setns(11, CLONE_NEWUTS) == 0, "setns(fd 11): %m");
	pass();
}
