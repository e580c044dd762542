/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The subcommands: each returns the process exit status. */
#ifndef CKPT_CLI_H
#define CKPT_CLI_H

#include "cli/opts.h"

int cmd_checkpoint(const struct cli_args *a);
int cmd_restart(const struct cli_args *a);
int cmd_inspect(const struct cli_args *a);
int cmd_check(const struct cli_args *a);
int cmd_run(const struct cli_args *a);

/* Opens --log FILE (append), or -1. Reports a failure itself. */
int cli_open_log(const char *path);
/* The log level for -v counts. */
int cli_log_level(int verbose);

#endif
