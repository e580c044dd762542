/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A parent-death signal (PR_SET_PDEATHSIG, as `setpriv --pdeathsig` and
 * many supervised daemons set it): SIGTERM. After the restart it is the
 * same, unless the runner wrote another value to expect in the file
 * "pdeath" of the test's directory: a restart with --detach leaves it
 * unset (its parent then is ckpt, which exits at once: the signal would
 * kill the restored process).
 */
#include "lib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

int main(void)
{
	if (prctl(PR_SET_PDEATHSIG, SIGTERM))
		fail("PR_SET_PDEATHSIG: %m");
	test_ready();
	test_wait();
	int want = SIGTERM, got = -1;
	char path[4096], buf[16];
	const char *dir = getenv("CKPT_TEST_DIR");
	snprintf(path, sizeof(path), "%s/pdeath", dir ? dir : ".");
	if (test_read_file(path, buf, sizeof(buf)) > 0)
		want = atoi(buf);
	if (prctl(PR_GET_PDEATHSIG, &got))
		fail("PR_GET_PDEATHSIG: %m");
	expect(got == want, "parent-death signal %d, want %d", got, want);
	pass();
}
