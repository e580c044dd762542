/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"

int cmd_check(const struct cli_args *a)
{
	(void)a;
	int r = ckpt_check(STDOUT_FILENO);
	if (r == -EPERM) {
		fputs("ckpt: the kernel has every feature ckpt needs, but this user may not use "
		      "those marked DENIED\n"
		      "ckpt: run ckpt as root, or start the program with 'ckpt run -- CMD': a "
		      "container in a user namespace of one's own, which this user can checkpoint "
		      "and restart\n",
		      stderr);
		return 1;
	}
	if (r < 0) {
		fputs("ckpt: this kernel lacks features ckpt needs (those marked MISSING)\n", stderr);
		return 1;
	}
	puts("all required features are present");
	return 0;
}
