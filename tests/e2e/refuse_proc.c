/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: fd 5 holds /proc/PPID/stat of the parent, a process outside
 * the image, which a restart could not give back. The runner expects the
 * checkpoint to fail naming the pid, fd 5 and the /proc file; the process
 * lives on and the file still reads its parent's stat.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	char path[64], buf[256], want[32];
	pid_t parent = getppid();
	snprintf(path, sizeof(path), "/proc/%d/stat", parent);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("open %s: %m", path);
	test_move_fd(fd, 5);

	test_ready();
	test_wait();

	ssize_t n = pread(5, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), "%d (", parent);
	expect(!strncmp(buf, want, strlen(want)), "fd 5 reads '%.30s'", buf);
	pass();
}
