/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"

int cmd_check(const struct cli_args *a)
{
	(void)a;
	int r = ckpt_check(STDOUT_FILENO);
	if (r < 0) {
		fputs("ckpt: some required kernel features are missing\n", stderr);
		return 1;
	}
	puts("all required features are present");
	return 0;
}
