/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: fd 5 is a pidfd of the test's parent (the runner), a process
 * outside the tree. The runner expects the checkpoint to fail naming the
 * pid, fd 5, the pidfd and that its process is outside; afterwards the
 * pidfd still refers to the parent.
 */
#include "lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int main(void)
{
	pid_t parent = getppid();
	int fd = (int)syscall(SYS_pidfd_open, parent, 0);
	if (fd < 0)
		fail("pidfd_open: %m");
	test_move_fd(fd, 5);

	test_ready();
	test_wait();

	char buf[1024];
	if (test_read_file("/proc/self/fdinfo/5", buf, sizeof(buf)) < 0)
		fail("fdinfo: %m");
	char *p = strstr(buf, "\nPid:");
	expect(p && strtol(p + 5, NULL, 10) == parent, "the pidfd no longer refers to pid %d",
	       parent);
	pass();
}
