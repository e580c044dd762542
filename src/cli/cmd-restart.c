/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/cleanup.h"

/* --detach: the pid, for scripts, the moment the tree runs (ckpt's
 * teardown goes on after: a reader of the line need not wait for it) */
static void print_pid(void *arg, pid_t root)
{
	(void)arg;
	printf("%d\n", root);
	fflush(stdout);
}

int cmd_restart(const struct cli_args *a)
{
	char err[512] = "";
	bool from_stdin = !strcmp(a->image, "-");
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };

	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;
	struct ckpt_inherit_fd inherit[CLI_MAX_FDS];
	for (size_t i = 0; i < a->n_inherit; i++)
		inherit[i] = (struct ckpt_inherit_fd){ a->inherit[i].fd, a->inherit[i].local };
	int fd = from_stdin ? STDIN_FILENO : open(a->image, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "ckpt: cannot open '%s': %s\n", a->image, strerror(errno));
		return 1;
	}
	int logfd = cli_open_log(a->log);
	if (a->log && logfd < 0)
		return 1;
	int level = cli_log_level(a->verbose);
	int warnfd = cli_warn_capture(a, &logfd, &level);
	struct ckpt_opts o = {
		.size = sizeof(o),
		.flags = (a->detach ? RESTART_DETACH | RESTART_CALLER_EXITS : 0) | (a->frozen ? RESTART_FROZEN : 0) |
			 (a->dry_run ? RESTART_GHOST : 0) | (a->tcp_close ? RESTART_CONN_RESET : 0) |
			 (a->pidns ? RESTART_PIDNS : 0) | (a->lazy ? RESTART_LAZY : 0) |
			 (a->shell_job ? RESTART_SHELL_JOB : 0) |
			 (a->changed_files ? RESTART_CHANGED_FILES : 0) |
			 (a->detach || a->dry_run ? 0 : RESTART_FORWARD_SIGNALS),
		.logfd = logfd,
		.log_level = level,
		.errbuf = err,
		.errbuf_len = sizeof(err),
		.pidfile = a->pidfile,
		.key = cli_key_ptr(&key),
		.key_len = sizeof(key.bytes),
		.inherit_fds = inherit,
		.n_inherit_fds = a->n_inherit,
		.running = a->detach && !a->json && !a->dry_run ? print_pid : NULL,
	};
	struct cli_progress progress;
	if (cli_progress_setup(a, &o, &progress) < 0)
		return 2;
	/* the restored process must not inherit the image fd */
	if (from_stdin) {
		int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (copy >= 0) {
			int devnull = open("/dev/null", O_RDONLY);
			if (devnull >= 0) {
				dup2(devnull, STDIN_FILENO);
				close(devnull);
			}
			fd = copy;
		}
	}
	int r = ckpt_restart_opts(0, fd, &o);
	cli_progress_clear(&progress);
	if (!from_stdin || fd != STDIN_FILENO)
		close(fd);
	if (logfd >= 0 && logfd != warnfd)
		close(logfd);
	if (r == -ENOKEY) {
		fputs("ckpt: restart failed: this image is encrypted: use --key FILE\n", stderr);
		return 1;
	}
	if (r < 0) {
		fprintf(stderr, "ckpt: restart failed: %s\n", err[0] ? err : strerror(-r));
		return 1;
	}
	int st = o.wait_status, ret = 0;
	if (!a->dry_run && !a->detach)
		ret = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 0;
	cli_report(a, &o.result, a->image, warnfd, a->dry_run || a->detach ? -1 : ret);
	if (warnfd >= 0)
		close(warnfd);
	return ret;
}
