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

static const char usage[] =
	"usage: ckpt COMMAND [OPTIONS]\n"
	"\n"
	"  checkpoint PID -o FILE [--kill [--verify] | --leave-frozen] [--shell-job]\n"
	"        [--external unix] [--drop-queued-events] [--detach-clients]\n"
	"        [--key KEYFILE] [--log FILE] [-v]\n"
	"        save process PID to FILE (- for stdout); it keeps running unless --kill;\n"
	"        --kill first checks that a restart by this user would work, --verify\n"
	"        also restarts the image as a dry run; if not, nothing is killed\n"
	"        --external unix: a unix socket whose peer is outside the tree is saved\n"
	"        to be connected again, at restart, to that peer's name;\n"
	"        --key: encrypt and authenticate the image with the key in KEYFILE\n"
	"        --drop-queued-events: inotify/fanotify events not read yet are left out\n"
	"        --detach-clients: a server's clients outside the tree (tmux attach,\n"
	"        screen -r) are detached: their connections and terminals come back\n"
	"        closed, as if each client had gone\n"
	"  restart FILE [--detach] [--pidfile F] [--frozen] [--dry-run] [--pidns]\n"
	"        [--shell-job] [--key KEYFILE] [--log FILE] [-v]\n"
	"        bring the process back with its pid, as a child of ckpt; without\n"
	"        --detach wait for it and exit with its status (FILE may be -);\n"
	"        --pidns: in a new pid namespace, under an init of ckpt's, when its pids\n"
	"        are taken here (without privilege: in a user namespace of one's own);\n"
	"        --shell-job: a job of a terminal outside the image\n"
	"        (checkpoint), made the foreground job of this terminal (restart);\n"
	"        --key: refuse any image not made with the key in KEYFILE\n"
	"  inspect FILE [--json] [--key KEYFILE]\n"
	"        print every record of an image\n"
	"  keygen KEYFILE\n"
	"        write a new random key for --key to KEYFILE (a new file, mode 0600)\n"
	"  run [--detach] [--hostname H] [--pidfile F] [--cgroup NAME] [--memory-max N]\n"
	"      [--pids-max N] [--cpu-max 'QUOTA PERIOD'] [--cgroup-set FILE=V,...] -- CMD [ARGS...]\n"
	"        run CMD as pid 1 of new pid, mount (own /proc), uts and ipc namespaces:\n"
	"        a container whose pids can always be restored; --detach prints its pid\n"
	"  check\n"
	"        say which kernel features ckpt needs are present\n"
	"  help, version\n";

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
		fputs(usage, stdout);
		return 0;
	}
	if (a.cmd == CMD_VERSION) {
		puts("ckpt " CKPT_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].cmd == a.cmd)
			return commands[i].run(&a);
	fputs(usage, stderr);
	return 2;
}
