/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The read end of a pipe at fd 5, holding data, whose write end is closed
 * everywhere (so it is not in the image, and need not be): after restart
 * the data is there to read, then EOF (no writer). Also a write end whose
 * read end is closed everywhere, at fd 6: writing to it fails with EPIPE.
 */
#include "lib.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	int p[2];
	if (pipe(p))
		fail("pipe: %m");
	if (write(p[1], "left", 4) != 4)
		fail("write: %m");
	close(p[1]);
	test_move_fd(p[0], 5);
	int q[2];
	if (pipe(q))
		fail("pipe: %m");
	close(q[0]);
	test_move_fd(q[1], 6);
	signal(SIGPIPE, SIG_IGN);

	test_ready();
	test_wait();

	char buf[8] = "";
	expect(read(5, buf, sizeof(buf)) == 4 && !memcmp(buf, "left", 4), "pipe data lost");
	expect(read(5, buf, sizeof(buf)) == 0, "no EOF after the data");
	expect(write(6, "x", 1) == -1 && errno == EPIPE, "a write without reader: %m, not EPIPE");
	pass();
}
