/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An fd held outside the tree (checkpoint --external fd:5, restart
 * --inherit-fd 5:FD): the runner starts this program with the write end
 * of a pipe at fd 251, which it moves to fd 5 (as a shell job's redirection
 * would leave it) and writes "before" to. After the restart fd 5 must be
 * the write end of the pipe the restart was given, open for writing, with
 * its close-on-exec flag as it was; the program writes "after PID" to it,
 * which the runner reads from that new pipe.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	struct stat st;
	char line[64];

	if (dup2(251, 5) != 5 || close(251) < 0)
		fail("fd 251 (the runner's pipe): %m");
	if (write(5, "before\n", 7) != 7)
		fail("write to fd 5: %m");
	test_ready();
	test_wait();
	if (fstat(5, &st) < 0 || !S_ISFIFO(st.st_mode))
		fail("fd 5 is not a pipe after the restart: %m");
	int fl = fcntl(5, F_GETFL), fdfl = fcntl(5, F_GETFD);
	expect((fl & O_ACCMODE) == O_WRONLY, "fd 5 has access mode %#x, want O_WRONLY",
	       fl & O_ACCMODE);
	expect(fdfl == 0, "fd 5 has fd flags %#x, want none (no close-on-exec)", fdfl);
	int n = snprintf(line, sizeof(line), "after %d\n", getpid());
	expect(write(5, line, (size_t)n) == n, "write to fd 5 after the restart: %m");
	pass();
}
