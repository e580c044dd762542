/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/cleanup.h"

static void sync_dir_of(const char *path)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int cmd_checkpoint(const struct cli_args *a)
{
	char err[512] = "";
	int fd, logfd, r;
	bool to_stdout = !strcmp(a->output, "-");
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };

	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;

	if (to_stdout && isatty(STDOUT_FILENO)) {
		fputs("ckpt: refusing to write an image to a terminal\n", stderr);
		return 2;
	}
	/* written under a temporary name, renamed once complete */
	char tmp[4096];
	if (!to_stdout && snprintf(tmp, sizeof(tmp), "%s.part", a->output) >= (int)sizeof(tmp)) {
		fputs("ckpt: output path too long\n", stderr);
		return 2;
	}
	fd = to_stdout ? STDOUT_FILENO : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "ckpt: cannot write '%s': %s\n", a->output, strerror(errno));
		return 1;
	}
	/* the directory entry must be durable too before the process is killed */
	if (!to_stdout)
		sync_dir_of(tmp);
	logfd = cli_open_log(a->log);
	if (a->log && logfd < 0)
		return 1;
	int level = cli_log_level(a->verbose);
	int warnfd = cli_warn_capture(a, &logfd, &level);

	struct ckpt_opts o = {
		.size = sizeof(o),
		.flags = CKPT_SUBTREE | (a->kill ? CKPT_KILL : 0) | (a->verify ? CKPT_VERIFY : 0) |
			 (a->leave_frozen ? CKPT_LEAVE_FROZEN : 0) | (a->shell_job ? CKPT_SHELL_JOB : 0) |
			 (a->ext_unix ? CKPT_EXT_UNIX : 0) | (a->drop_events ? CKPT_DROP_EVENTS : 0) |
			 (a->detach_clients ? CKPT_DETACH_CLIENTS : 0),
		.logfd = logfd,
		.log_level = level,
		.errbuf = err,
		.errbuf_len = sizeof(err),
		.key = cli_key_ptr(&key),
		.key_len = sizeof(key.bytes),
	};
	/* a plain process is a subtree; a namespace init is checkpointed whole */
	r = ckpt_checkpoint_opts(a->pid, fd, &o);
	if (!to_stdout) {
		if (r < 0)
			unlink(tmp); /* never a complete image: it is not left behind */
		else if (rename(tmp, a->output) < 0) {
			r = -errno;
			snprintf(err, sizeof(err), "cannot rename the complete image to '%.300s': %s",
				 a->output, strerror(errno));
		} /* on a failed rename the complete image stays as FILE.part */
		else
			sync_dir_of(a->output);
		close(fd);
	}
	if (logfd >= 0 && logfd != warnfd)
		close(logfd);
	if (r < 0) {
		fprintf(stderr, "ckpt: checkpoint failed: %s\n", err[0] ? err : strerror(-r));
		return 1;
	}
	cli_report(a, &o.result, to_stdout ? "-" : a->output, warnfd, -1);
	if (warnfd >= 0)
		close(warnfd);
	return 0;
}
