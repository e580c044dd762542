/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A process group leader inside the runner's session: setpgid(0, 0). After
 * restore getpgrp() == getpid() and the session is the one of before
 * (ckpt restart runs in the runner's session, so it is there to join).
 */
#include "lib.h"

#include <unistd.h>

int main(void)
{
	if (setpgid(0, 0))
		fail("setpgid: %m");
	const pid_t pid = getpid(), sid = getsid(0);
	if (sid == pid)
		fail("started as a session leader");

	test_ready();
	test_wait();

	expect(getpgrp() == pid, "getpgrp() is %d, want %d", (int)getpgrp(), (int)pid);
	expect(getsid(0) == sid, "getsid(0) is %d, was %d", (int)getsid(0), (int)sid);
	pass();
}
