/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The task name: prctl(PR_SET_NAME, "renamed-comm"). After restore
 * PR_GET_NAME, /proc/self/comm and the comm field of /proc/self/stat all
 * say renamed-comm.
 */
#include "lib.h"

#include <string.h>
#include <sys/prctl.h>

int main(void)
{
	if (prctl(PR_SET_NAME, "renamed-comm"))
		fail("PR_SET_NAME: %m");

	test_ready();
	test_wait();

	char name[17] = "";
	prctl(PR_GET_NAME, name);
	expect(!strcmp(name, "renamed-comm"), "PR_GET_NAME: '%s'", name);
	char buf[64] = "";
	test_read_file("/proc/self/comm", buf, sizeof(buf));
	expect(!strcmp(buf, "renamed-comm\n"), "/proc/self/comm: '%s'", buf);
	char stat[512] = "";
	test_read_file("/proc/self/stat", stat, sizeof(stat));
	expect(strstr(stat, " (renamed-comm) ") != NULL, "/proc/self/stat: %.60s", stat);
	pass();
}
