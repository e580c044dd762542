/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ckpt(1): a thin layer over libckpt, one cmd-<verb>.c per subcommand. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/safefile.h"

static const struct {
	enum cli_cmd cmd;
	int (*run)(const struct cli_args *a);
} commands[] = {
	{ CMD_CHECKPOINT, cmd_checkpoint },
	{ CMD_RESTART, cmd_restart },
	{ CMD_INSPECT, cmd_inspect },
	{ CMD_CHECK, cmd_check },
	{ CMD_RUN, cmd_run },
	{ CMD_KEYGEN, cmd_keygen },
	{ CMD_MIGRATE, cmd_migrate },
	{ CMD_RECEIVE, cmd_receive },
	{ CMD_UNLOCK, cmd_unlock },
};

/* Never through a symlink, never into a file that is not the caller's own. */
int cli_open_log(const char *path)
{
	if (!path)
		return -1;
	int fd = safe_open_append(path);
	if (fd == -EPERM || fd == -EMLINK || fd == -EINVAL)
		fprintf(stderr, "ckpt: cannot open log '%s': %s\n", path,
			fd == -EPERM	? "it is owned by another user"
			: fd == -EMLINK ? "it has other hard links"
					: "it is not a regular file");
	else if (fd == -ELOOP)
		fprintf(stderr, "ckpt: cannot open log '%s': it is a symbolic link\n", path);
	else if (fd < 0)
		fprintf(stderr, "ckpt: cannot open log '%s': %s\n", path, strerror(-fd));
	return fd < 0 ? -1 : fd;
}

int cli_log_level(int verbose)
{
	return verbose > 0 ? CKPT_LOG_DEBUG : CKPT_LOG_INFO;
}

int main(int argc, char **argv)
{
	struct cli_args a;
	char err[256];

	if (cli_parse(argc, argv, &a, err, sizeof(err)) < 0) {
		fprintf(stderr, "ckpt: %s\n", err);
		return 2;
	}
	if (a.cmd == CMD_HELP || a.help) {
		cli_usage(stdout, a.cmd == CMD_HELP ? a.topic : a.cmd);
		return 0;
	}
	if (a.cmd == CMD_VERSION) {
		puts("ckpt " CKPT_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].cmd == a.cmd)
			return commands[i].run(&a);
	cli_usage(stderr, CMD_NONE);
	return 2;
}
