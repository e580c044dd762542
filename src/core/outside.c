/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Who outside the tree holds a file the tree shares (a pipe, a FIFO), for
 * the refusals of kinds that find one of its ends "held outside the image":
 * the holders by pid, name and fd, and, when one is the process that
 * started the tree, that the fd was inherited and how to start it instead
 * or save the fd as external (a root's fd only: other tasks' fds cannot be).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"

#define MAX_NAMED 3

static bool in_tree(void *arg, pid_t pid)
{
	struct ckpt_ctx *ctx = arg;
	return pid == getpid() || ctx_find_task(ctx, pid) != NULL;
}

static bool mode_matches(uint32_t flags, int accmode)
{
	int m = (int)(flags & O_ACCMODE);
	return accmode < 0 || m == accmode || m == O_RDWR;
}

/* Appends to buf (len bytes, NUL-terminated) at *at; cut short when full. */
static void append(char *buf, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	if (*at + 1 >= len)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}

/* Is the root's fd this file? Only a root's fd can be saved as external. */
static bool root_holds(pid_t root, int fd, uint64_t dev, uint64_t ino)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", root, fd);
	return stat(path, &st) == 0 && st.st_ino == ino && (!dev || st.st_dev == dev);
}

bool ctx_outside_holders(struct ckpt_ctx *ctx, uint64_t dev, uint64_t ino, int accmode, int fd,
			 char *buf, size_t len)
{
	struct proc_holder h[32];
	const struct task *root = ctx_find_task(ctx, ctx->pid);
	pid_t parent = root ? root->stat.ppid : 0;
	int n = proc_find_holders(dev, ino, in_tree, ctx, h, sizeof(h) / sizeof(h[0]));
	size_t named = 0, at = 0;
	bool inherited = false;

	if (!len)
		return false;
	buf[0] = '\0';
	for (int i = 0; i < n && i < (int)(sizeof(h) / sizeof(h[0])); i++) {
		if (!mode_matches(h[i].flags, accmode))
			continue;
		if (named == MAX_NAMED) {
			append(buf, len, &at, ", ...");
			break;
		}
		append(buf, len, &at, "%s pid %d (%s) fd %d", named ? "," : " by", h[i].pid,
		       h[i].comm, h[i].fd);
		named++;
		if (h[i].pid == parent && parent > 0)
			inherited = true;
	}
	if (inherited)
		append(buf, len, &at,
		       "; pid %d is the parent that started the tree: the fd was inherited; "
		       "start the program with ckpt run (fds above 2 closed) or close it (%d>&-)",
		       parent, fd);
	if (inherited && root_holds(ctx->pid, fd, dev, ino))
		append(buf, len, &at, ", or save it as external (--external fd:%d, given again "
		       "at restart with --inherit-fd %d:FD)", fd, fd);
	return inherited;
}
