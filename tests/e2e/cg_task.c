/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A process in a cgroup the runner made (and moved it into after "ready"):
 *   cg_task PATH DIR [FILE=VALUE...]
 * After restart, from inside: /proc/self/cgroup names PATH (as this
 * process's cgroup namespace shows it), and each limit FILE in the cgroup's
 * directory DIR (as the runner sees it) reads VALUE.
 */
#include "lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 3)
		fail("usage: cg_task PATH DIR [FILE=VALUE...]");
	test_ready();
	test_wait();

	char buf[4096], want[4200];
	if (test_read_file("/proc/self/cgroup", buf, sizeof(buf)) < 0)
		fail("read /proc/self/cgroup: %m");
	snprintf(want, sizeof(want), "0::%s\n", argv[1]);
	const char *line = strstr(buf, "0::");
	expect(line && !strncmp(line, want, strlen(want)), "/proc/self/cgroup: %s, want %s", buf,
	       want);
	for (int i = 3; i < argc; i++) {
		char name[256], path[4600], value[256] = "";
		const char *eq = strchr(argv[i], '=');
		if (!eq)
			fail("bad limit %s", argv[i]);
		snprintf(name, sizeof(name), "%.*s", (int)(eq - argv[i]), argv[i]);
		snprintf(path, sizeof(path), "%s/%s", argv[2], name);
		ssize_t n = test_read_file(path, value, sizeof(value));
		if (n > 0 && value[n - 1] == '\n')
			value[n - 1] = '\0';
		expect(n > 0 && !strcmp(value, eq + 1), "%s is '%s', want '%s'", name, value, eq + 1);
	}
	pass();
}
