/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A session leader: the program calls setsid() first. After restore it
 * still leads its session and its process group (getsid(0) == getpgrp()
 * == getpid(), also in /proc/self/stat) and has no controlling terminal.
 */
#include "lib.h"

#include <unistd.h>

int main(void)
{
	if (setsid() < 0)
		fail("setsid: %m");
	const pid_t pid = getpid();
	if (getsid(0) != pid || getpgrp() != pid)
		fail("not a session leader after setsid");

	test_ready();
	test_wait();

	expect(getsid(0) == pid, "getsid(0) is %d, want %d", (int)getsid(0), (int)pid);
	expect(getpgrp() == pid, "getpgrp() is %d, want %d", (int)getpgrp(), (int)pid);
	expect(test_stat_field(5) == (unsigned long long)pid &&
		       test_stat_field(6) == (unsigned long long)pid,
	       "/proc/self/stat pgrp %llu session %llu", test_stat_field(5), test_stat_field(6));
	expect(test_stat_field(7) == 0, "a controlling terminal appeared: tty_nr %llu",
	       test_stat_field(7));
	pass();
}
