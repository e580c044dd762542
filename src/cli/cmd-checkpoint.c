/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"

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

	struct ckpt_opts o = {
		.size = sizeof(o),
		.flags = CKPT_SUBTREE | (a->kill ? CKPT_KILL : 0) |
			 (a->leave_frozen ? CKPT_LEAVE_FROZEN : 0) | (a->shell_job ? CKPT_SHELL_JOB : 0) |
			 (a->ext_unix ? CKPT_EXT_UNIX : 0),
		.logfd = logfd,
		.log_level = cli_log_level(a->verbose),
		.errbuf = err,
		.errbuf_len = sizeof(err),
	};
	/* a reader of -o - that goes away is an error (EPIPE), not a death:
	 * though the guardian would put the tree back either way */
	signal(SIGPIPE, SIG_IGN);
	/* a plain process is a subtree; a namespace init is checkpointed whole */
	r = ckpt_checkpoint_opts(a->pid, fd, &o);
	if (r == -EPIPE && to_stdout)
		snprintf(err, sizeof(err), "the image stream was closed by its reader; the tree "
			 "runs on unharmed");
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
	if (logfd >= 0)
		close(logfd);
	if (r < 0) {
		fprintf(stderr, "ckpt: checkpoint failed: %s\n", err[0] ? err : strerror(-r));
		return 1;
	}
	return 0;
}
