/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What checkpoint and restart say on success: one summary line on stderr,
 * nothing with --quiet, or one JSON object with --json (warnings included:
 * without --log, the library logs them to a memfd read back here).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckpt.h"
#include "cli/cli.h"
#include "util/units.h"

int cli_warn_capture(const struct cli_args *a, int *logfd, int *level)
{
	if (!a->json || a->log)
		return -1;
	int fd = memfd_create("ckpt-warnings", MFD_CLOEXEC);
	if (fd >= 0) {
		*logfd = fd;
		*level = CKPT_LOG_WARN;
	}
	return fd;
}

/* "\rckpt: checkpoint: 312.0 MiB of 545.2 MiB, 410.3 MiB/s, 0.6 s left" */
static void show_progress(void *arg, const struct ckpt_progress *p)
{
	struct cli_progress *cp = arg;
	if (p->phase == CKPT_PHASE_END) {
		cli_progress_clear(cp);
		return;
	}
	double secs = (double)p->elapsed_us / 1e6;
	unsigned long long rate = secs > 0 ? (unsigned long long)((double)p->done / secs) : 0;
	char done[32], total[40] = "", speed[32], left[32] = "";
	human_size(done, sizeof(done), p->done);
	human_size(speed, sizeof(speed), rate);
	if (p->total) {
		char t[32];
		/* an estimate: the image's bytes overtake it at the end */
		human_size(t, sizeof(t), p->done > p->total ? p->done : p->total);
		snprintf(total, sizeof(total), " of %s", t);
		if (rate)
			snprintf(left, sizeof(left), ", %.1f s left",
				 (double)(p->done > p->total ? 0 : p->total - p->done) /
					 (double)rate);
	}
	fprintf(stderr, "\rckpt: %s: %s%s, %s/s%s\033[K",
		p->phase == CKPT_PHASE_RESTART ? "restart" : "checkpoint", done, total, speed, left);
	fflush(stderr);
	cp->shown = true;
}

int cli_progress_setup(const struct cli_args *a, struct ckpt_opts *o, struct cli_progress *p)
{
	unsigned long ms = 0;
	if (a->progress_interval) {
		char *end;
		errno = 0;
		ms = strtoul(a->progress_interval, &end, 10);
		if (errno || end == a->progress_interval || *end || ms == 0 || ms > 60000) {
			fprintf(stderr, "ckpt: --progress-interval '%s': not a number of milliseconds "
				"from 1 to 60000\n", a->progress_interval);
			return -1;
		}
	}
	p->shown = false;
	if (a->quiet || !isatty(STDERR_FILENO))
		return 0;
	o->progress = show_progress;
	o->progress_arg = p;
	o->progress_interval_ms = (unsigned)ms;
	return 0;
}

void cli_progress_clear(struct cli_progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* The warning lines the library wrote to warnfd, as a JSON array. */
static void json_warnings(FILE *f, int warnfd)
{
	char buf[16384];
	ssize_t n = warnfd >= 0 ? pread(warnfd, buf, sizeof(buf) - 1, 0) : 0;
	bool first = true;
	buf[n > 0 ? n : 0] = '\0';
	fputc('[', f);
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		const char *w = strstr(line, ": warning: ");
		if (!w)
			continue;
		fputs(first ? "" : ", ", f);
		json_string(f, w + strlen(": warning: "));
		first = false;
	}
	fputc(']', f);
}

void cli_report(const struct cli_args *a, const struct ckpt_result *res, const char *image,
		int warnfd, int exit_status)
{
	bool ckpt = a->cmd == CMD_CHECKPOINT;
	double secs = (double)res->elapsed_us / 1e6;
	if (a->json) {
		FILE *f = stdout;
		fprintf(f, "{\"command\": \"%s\", \"pid\": %d, \"image\": ", cli_cmd_names[a->cmd],
			(int)res->root);
		json_string(f, image);
		fprintf(f,
			", \"processes\": %lu, \"threads\": %lu, \"memory_bytes\": %llu, "
			"\"image_bytes\": %llu, \"seconds\": %.6f",
			res->processes, res->threads, res->memory_bytes, res->image_bytes, secs);
		if (ckpt)
			fprintf(f, ", \"killed\": %s, \"frozen\": %s", a->kill ? "true" : "false",
				a->leave_frozen ? "true" : "false");
		else
			fprintf(f, ", \"dry_run\": %s, \"detached\": %s", a->dry_run ? "true" : "false",
				a->detach ? "true" : "false");
		if (exit_status >= 0)
			fprintf(f, ", \"exit_status\": %d", exit_status);
		fprintf(f, ", \"warning_count\": %lu, \"warnings\": ", res->warnings);
		json_warnings(f, warnfd);
		fputs("}\n", f);
		fflush(f);
		return;
	}
	if (a->quiet)
		return;
	char mem[32], img[32], warn[64] = "";
	human_size(mem, sizeof(mem), res->memory_bytes);
	human_size(img, sizeof(img), res->image_bytes);
	if (res->warnings)
		snprintf(warn, sizeof(warn), " (%lu warning%s%s)", res->warnings,
			 res->warnings > 1 ? "s" : "", a->log ? ", see the log" : ", see --log");
	if (ckpt)
		fprintf(stderr,
			"ckpt: checkpointed %lu process%s (%lu thread%s), %s of memory, image %s "
			"%s, in %.2f s%s%s\n",
			res->processes, res->processes == 1 ? "" : "es", res->threads,
			res->threads == 1 ? "" : "s", mem, image, img, secs,
			a->kill ? ", killed" : a->leave_frozen ? ", left stopped" : "", warn);
	else if (a->dry_run)
		fprintf(stderr,
			"ckpt: dry run of %s (%s): %lu process%s (%lu thread%s), %s of memory "
			"built and torn down in %.2f s%s\n",
			image, img, res->processes, res->processes == 1 ? "" : "es", res->threads,
			res->threads == 1 ? "" : "s", mem, secs, warn);
	else
		fprintf(stderr,
			"ckpt: restarted %lu process%s (%lu thread%s), %s of memory, from %s %s, "
			"as pid %d, in %.2f s%s\n",
			res->processes, res->processes == 1 ? "" : "es", res->threads,
			res->threads == 1 ? "" : "s", mem, image, img, (int)res->root, secs, warn);
}
