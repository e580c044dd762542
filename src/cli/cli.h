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
int cmd_keygen(const struct cli_args *a);
int cmd_migrate(const struct cli_args *a);
int cmd_receive(const struct cli_args *a);
int cmd_unlock(const struct cli_args *a);

/* run-root.c: in the container, before the exec: --root with its /dev,
 * /proc, /sys (none when userns: a user namespace of its own), --bind and
 * --tmpfs, then pivot_root (pts: the devpts options). -errno with "what
 * 'path': why" in why. */
int run_root(const struct cli_args *a, bool userns, const char *pts, char *why, size_t len);

/*
 * report.c: with --json and no --log, a memfd the library logs warnings to
 * (*logfd and *level set), to be given to cli_report(); else -1.
 */
int cli_warn_capture(const struct cli_args *a, int *logfd, int *level);
/* The summary line on stderr (none with --quiet), or the JSON object on
 * stdout with --json; exit_status -1 when there is none. */
struct ckpt_result;
void cli_report(const struct cli_args *a, const struct ckpt_result *res, const char *image,
		int warnfd, int exit_status);

/*
 * The progress line: when stderr is a terminal and not --quiet, o's progress
 * callback redraws one line in place; cli_progress_clear() wipes it before
 * the summary or an error. -1 (reported) for a bad --progress-interval.
 */
struct cli_progress {
	bool shown;
};
struct ckpt_opts;
int cli_progress_setup(const struct cli_args *a, struct ckpt_opts *o, struct cli_progress *p);
void cli_progress_clear(struct cli_progress *p);

/* Opens --log FILE (append), or -1. Reports a failure itself. */
int cli_open_log(const char *path);
/* The log level for -v counts. */
int cli_log_level(int verbose);

/*
 * A key read from a --key file (key.c): 32 bytes, wiped when it goes out of
 * scope (declare it _cleanup_(cli_key_wipe)). It is never printed or logged.
 */
struct cli_key {
	unsigned char bytes[32];
	bool set;
};
/* Reads a key file; refuses one other users may read or change, or of the
 * wrong size. Reports a failure itself. */
int cli_key_load(const char *path, struct cli_key *ret);
void cli_key_wipe(struct cli_key *k);
/* The key for struct ckpt_opts: NULL when none was given. */
static inline const void *cli_key_ptr(const struct cli_key *k)
{
	return k->set ? k->bytes : NULL;
}

#endif
