/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ckpt(1): a thin layer over libckpt, one cmd-<verb>.c per subcommand. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
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

/*
 * ckpt's heap in huge pages where the kernel gives them (transparent huge
 * pages on madvise), and on one arena: a checkpoint of a process of 1,000
 * threads allocated about 28 MB a page at a time, 7,000 page faults (a
 * fifth of ckpt's CPU time on this paravirtualized machine), and its
 * threads' arenas grew by one mprotect a page or two (2,300 calls). The
 * heap is made 64 MiB ahead (virtual: only what is touched is memory, in 2
 * MiB steps) and never trimmed below that. For checkpoint only (restart
 * forks its puppets from ckpt: not measured with it). The program's, not
 * the library's: a program using libckpt keeps its own malloc settings.
 */
static void heap_setup(void)
{
	const size_t huge = 2u << 20;
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_TOP_PAD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	/* the heap grown now by 64 MiB (a malloc that does not fit in what is
	 * left of it; below the mmap threshold) and marked */
	uintptr_t start = (uintptr_t)sbrk(0);
	void *q[4];
	int n = 0;
	while (n < 4 && (uintptr_t)sbrk(0) == start && (q[n] = malloc(120 << 10)))
		n++;
	uintptr_t a = (start + huge - 1) & ~(uintptr_t)(huge - 1), end = (uintptr_t)sbrk(0);
	if (end > a + huge)
		(void)madvise((void *)a, (end - a) & ~(uintptr_t)(huge - 1), MADV_HUGEPAGE);
	while (n > 0)
		free(q[--n]);
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
	if (a.cmd == CMD_CHECKPOINT)
		heap_setup();
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].cmd == a.cmd)
			return commands[i].run(&a);
	cli_usage(stderr, CMD_NONE);
	return 2;
}
