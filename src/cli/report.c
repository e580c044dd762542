/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What checkpoint and restart say on success: one summary line on stderr,
 * nothing with --quiet, or one JSON object with --json (warnings included:
 * without --log, the library logs them to a memfd read back here).
 */
#include <stdio.h>
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
