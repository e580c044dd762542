/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The init of a container on the host's root whose copies of the host's
 * mounts are slaves of them, as `unshare --pid --fork --mount
 * --propagation slave --mount-proc` makes it (the runner starts it so,
 * with pidns_launch.py, beside a shared tmpfs of its own at
 * CKPT_TEST_DIR/ha). After the restart, from inside: ha is still a slave
 * of the host's mount and not shared; a restart that made every copy
 * private (as before December 2026) cut it off from what the host mounts
 * there.
 */
#include "lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The optional fields of the mount at point in this process's
 * mountinfo, into fields; 0 if there is none, else 1. */
static int fields_at(const char *point, char *fields, size_t len)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		fail("open /proc/self/mountinfo: %m");
	while (fgets(line, sizeof(line), f)) {
		char mp[4096];
		int off = 0;
		if (sscanf(line, "%*u %*u %*u:%*u %*s %4095s%n", mp, &off) != 1 || strcmp(mp, point))
			continue;
		char *sep = strstr(line + off, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		snprintf(fields, len, "%s", line + off);
		found = 1;
	}
	fclose(f);
	return found;
}

int main(void)
{
	const char *base = getenv("CKPT_TEST_DIR");
	char ha[4200], fields[4096];
	snprintf(ha, sizeof(ha), "%s/ha", base ? base : ".");
	if (getpid() != 1)
		skip("not the init of a pid namespace (pidns_launch.py)");
	if (!fields_at(ha, fields, sizeof(fields)) || !strstr(fields, "master:") ||
	    strstr(fields, "shared:"))
		fail("%s is not a slave of the host's mount here (%s)", ha, fields);

	test_ready();
	test_wait();

	expect(fields_at(ha, fields, sizeof(fields)), "no mount at %s after the restart", ha);
	expect(strstr(fields, "master:") != NULL, "%s is no longer a slave of the host's (%s)", ha,
	       fields);
	expect(!strstr(fields, "shared:"), "%s is shared now (%s)", ha, fields);
	pass();
}
