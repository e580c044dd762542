/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: the read end of a pipe at fd 5 whose SIGIO goes to the parent
 * (F_SETOWN getppid()), a process outside the image. The runner expects
 * the checkpoint to fail naming the pid, fd 5 and the owner; the process
 * lives on with the owner unchanged.
 */
#include "lib.h"

#include <fcntl.h>
#include <unistd.h>

int main(void)
{
	int p[2];
	if (pipe(p))
		fail("pipe: %m");
	test_move_fd(p[0], 5);
	pid_t parent = getppid();
	if (fcntl(5, F_SETOWN, parent) < 0)
		fail("F_SETOWN: %m");

	test_ready();
	test_wait();

	expect(fcntl(5, F_GETOWN) == parent, "owner changed to %d, was %d", fcntl(5, F_GETOWN),
	       parent);
	pass();
}
