/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: the read end of a pipe at fd 5, holding data, whose write end
 * the process has closed (so it is not in the image). The runner expects
 * the checkpoint to fail naming the pid, fd 5 and the pipe; afterwards the
 * data is still there to read, then EOF.
 */
#include "lib.h"

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

	test_ready();
	test_wait();

	char buf[8] = "";
	expect(read(5, buf, sizeof(buf)) == 4 && !memcmp(buf, "left", 4), "pipe data lost");
	expect(read(5, buf, sizeof(buf)) == 0, "no EOF after the data");
	pass();
}
