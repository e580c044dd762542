/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/cleanup.h"
#include "util/safefile.h"

/* Called by the library once the image is complete, before any kill. */
static int commit_image(void *arg, char *why, size_t why_len)
{
	struct safe_file *f = arg;
	const char *step = "";
	int r = safe_file_commit(f, &step);

	if (r < 0)
		snprintf(why, why_len, "writing it under its final name failed (%s): %s", step,
			 strerror(-r));
	return r;
}

/*
 * The final name is replaced by rename(), never written through; this check
 * only makes a planted symlink or a device an error the user understands
 * (a symlink swapped in after it is still replaced, not followed).
 */
static int check_target(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(st.st_mode)) {
		fprintf(stderr, "ckpt: '%s' is a symbolic link: ckpt does not replace it\n", path);
		return -ELOOP;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "ckpt: '%s' exists and is not a regular file: not replaced\n", path);
		return -EEXIST;
	}
	return 0;
}


/* One reason on the line; several (every refusal of the tree) one a line. */
static void print_failure(const char *err)
{
	int n = 1;
	for (const char *c = err; *c; c++)
		n += *c == '\n';
	if (n == 1) {
		fprintf(stderr, "ckpt: checkpoint failed: %s\n", err);
		return;
	}
	fprintf(stderr, "ckpt: checkpoint failed, %d reasons:\n", n);
	for (const char *l = err; *l;) {
		size_t len = strcspn(l, "\n");
		fprintf(stderr, "  %.*s\n", (int)len, l);
		l += len + (l[len] == '\n');
	}
}

int cmd_checkpoint(const struct cli_args *a)
{
	char err[4096] = "";
	struct safe_file out = { .fd = -1, .dirfd = -1 };
	int fd, logfd, r;
	bool to_stdout = !strcmp(a->output, "-");
	_cleanup_(cli_key_wipe) struct cli_key key = { 0 };

	if (a->key && cli_key_load(a->key, &key) < 0)
		return 1;

	if (to_stdout && isatty(STDOUT_FILENO)) {
		fputs("ckpt: refusing to write an image to a terminal\n", stderr);
		return 2;
	}
	/* written unnamed (O_TMPFILE), named and renamed over FILE once complete */
	if (!to_stdout) {
		if (check_target(a->output) < 0)
			return 1;
		struct stat so, sp;
		if (a->parent && stat(a->output, &so) == 0 && stat(a->parent, &sp) == 0 &&
		    so.st_dev == sp.st_dev && so.st_ino == sp.st_ino) {
			fprintf(stderr, "ckpt: --parent %s is the output: the child image would "
				"replace its own parent\n", a->parent);
			return 2;
		}
		r = safe_file_create(a->output, &out);
		if (r < 0) {
			fprintf(stderr, "ckpt: cannot write '%s': %s\n", a->output, strerror(-r));
			return 1;
		}
	}
	fd = to_stdout ? STDOUT_FILENO : out.fd;
	logfd = cli_open_log(a->log);
	if (a->log && logfd < 0) {
		safe_file_abort(&out);
		return 1;
	}
	int level = cli_log_level(a->verbose);
	int warnfd = cli_warn_capture(a, &logfd, &level);

	struct ckpt_opts o = {
		.size = sizeof(o),
		.flags = CKPT_SUBTREE | (a->kill ? CKPT_KILL : 0) | (a->verify ? CKPT_VERIFY : 0) |
			 (a->leave_frozen ? CKPT_LEAVE_FROZEN : 0) | (a->shell_job ? CKPT_SHELL_JOB : 0) |
			 (a->ext_unix ? CKPT_EXT_UNIX : 0) | (a->drop_events ? CKPT_DROP_EVENTS : 0) |
			 (a->detach_clients ? CKPT_DETACH_CLIENTS : 0) | (a->compress ? CKPT_COMPRESS : 0) |
			 (a->track ? CKPT_TRACK : 0) | (a->skip_in_flight ? CKPT_SKIP_IN_FLIGHT : 0),
		.logfd = logfd,
		.log_level = level,
		.errbuf = err,
		.errbuf_len = sizeof(err),
		.key = cli_key_ptr(&key),
		.key_len = sizeof(key.bytes),
		.image_done = to_stdout ? NULL : commit_image,
		.image_done_arg = &out,
		.external_fds = a->ext_fds,
		.n_external_fds = a->n_ext_fds,
		.parent = a->parent,
	};
	struct cli_progress progress;
	if (cli_progress_setup(a, &o, &progress) < 0) {
		safe_file_abort(&out);
		return 2;
	}
	/* a reader of -o - that goes away is an error (EPIPE), not a death:
	 * though the guardian would put the tree back either way */
	signal(SIGPIPE, SIG_IGN);
	/* a plain process is a subtree; a namespace init is checkpointed whole */
	r = ckpt_checkpoint_opts(a->pid, fd, &o);
	cli_progress_clear(&progress);
	if (r == -EPIPE && to_stdout)
		snprintf(err, sizeof(err), "the image stream was closed by its reader; the tree "
			 "runs on unharmed");
	safe_file_abort(&out); /* an incomplete image is not left behind */
	if (logfd >= 0 && logfd != warnfd)
		close(logfd);
	if (r < 0) {
		print_failure(err[0] ? err : strerror(-r));
		return 1;
	}
	cli_report(a, &o.result, to_stdout ? "-" : a->output, warnfd, -1);
	if (warnfd >= 0)
		close(warnfd);
	return 0;
}
