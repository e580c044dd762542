/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* no_new_privs: set before, still set after (prctl and /proc/self/status). */
#include "lib.h"

#include <string.h>
#include <sys/prctl.h>

int main(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		fail("PR_SET_NO_NEW_PRIVS: %m");

	test_ready();
	test_wait();

	expect(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1, "no_new_privs is not set");
	char v[16] = "";
	test_status_field("NoNewPrivs", v, sizeof(v));
	expect(!strcmp(v, "1"), "/proc/self/status NoNewPrivs: %s", v);
	pass();
}
