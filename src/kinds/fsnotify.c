/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by inotify.c and fanotify.c: see fsnotify.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fsnotify.h"
#include "util/cleanup.h"
#include "util/proc.h"

dev_t fsnotify_dev(uint32_t kdev)
{
	return makedev(kdev >> 20, kdev & 0xfffff);
}

int fsnotify_parse_handle(const char *hex, unsigned bytes, int type, struct fsnotify_handle *ret)
{
	if (bytes > FSNOTIFY_HANDLE_MAX || strlen(hex) != 2 * (size_t)bytes)
		return -EINVAL;
	for (unsigned i = 0; i < bytes; i++) {
		unsigned b;
		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -EINVAL;
		ret->data[i] = (uint8_t)b;
	}
	ret->bytes = bytes;
	ret->type = type;
	return 0;
}

void fsnotify_unescape(char *s)
{
	char *d = s;
	for (; *s; s++) {
		unsigned c;
		if (s[0] == '\\' && sscanf(s + 1, "%3o", &c) == 1 && s[1] && s[2] && s[3]) {
			*d++ = (char)c;
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* Opens the handle through mount mnt of pid and takes the path if lstat
 * shows the same inode. */
static int try_mount(pid_t pid, const char *mnt, const struct file_handle *fh, uint64_t ino,
		     dev_t dev, char **ret_path, struct stat *ret_st)
{
	char path[4096 + 64], got[4096];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, mnt);
	_cleanup_close_ int mfd =
	    open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* not O_PATH: EBADF */
	if (mfd < 0)
		return -errno;
	_cleanup_close_ int hfd =
	    open_by_handle_at(mfd, (struct file_handle *)fh, O_PATH | O_CLOEXEC);
	if (hfd < 0)
		return -errno;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", hfd);
	ssize_t n = readlink(path, got, sizeof(got) - 1);
	if (n <= 0)
		return -errno;
	got[n] = '\0';
	if (got[0] != '/' || lstat(got, &st) < 0 || st.st_ino != ino || st.st_dev != dev)
		return -ENOENT;
	char *p = strdup(got);
	if (!p)
		return -ENOMEM;
	*ret_path = p;
	*ret_st = st;
	return 0;
}

int fsnotify_resolve(pid_t pid, const struct fsnotify_handle *fh, uint32_t kdev, uint64_t ino,
		     char **ret_path, struct stat *ret_st)
{
	_cleanup_free_ char *text = NULL;
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + FSNOTIFY_HANDLE_MAX];
	} h;
	dev_t dev = fsnotify_dev(kdev);
	int r = proc_read(pid, "mountinfo", &text, NULL);

	if (r < 0)
		return r;
	if (fh->bytes > FSNOTIFY_HANDLE_MAX)
		return -EINVAL;
	h.fh.handle_bytes = fh->bytes;
	h.fh.handle_type = fh->type;
	memcpy(h.fh.f_handle, fh->data, fh->bytes);
	for (int pass = 0; pass < 2; pass++) {
		for (char *line = text; line && *line;
		     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
			unsigned ma, mi;
			char root[4096], mnt[4096];
			if (sscanf(line, "%*d %*d %u:%u %4095s %4095s", &ma, &mi, root, mnt) != 4 ||
			    makedev(ma, mi) != dev || (pass == 0) != !strcmp(root, "/"))
				continue;
			fsnotify_unescape(mnt);
			r = try_mount(pid, mnt, &h.fh, ino, dev, ret_path, ret_st);
			if (r == 0 || r == -EPERM || r == -ENOMEM)
				return r;
		}
	}
	return -ENOENT;
}

const char *fsnotify_why_unresolved(int r)
{
	if (r == -EOPNOTSUPP)
		return "has no file handle to find it by";
	if (r == -EPERM)
		return "cannot be found by its file handle: open_by_handle_at needs "
		       "CAP_DAC_READ_SEARCH";
	return "has no path any more (deleted?)";
}

int fsnotify_check_queue(struct ckpt_ctx *ctx, struct task *t, int fd, const char *kind)
{
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fd);
	int queued = 0;
	if (copy < 0)
		return log_fail(&ctx->log, copy, "pid %d fd %d (%s): cannot take a copy: %s", t->pid,
				fd, kind, strerror(-copy));
	if (ioctl(copy, FIONREAD, &queued) < 0)
		return log_fail(&ctx->log, -errno, "pid %d fd %d (%s): FIONREAD: %s", t->pid, fd,
				kind, strerror(errno));
	if (queued <= 0)
		return 0;
	if (ctx->flags & CKPT_DROP_EVENTS) {
		log_warn(&ctx->log,
			 "pid %d fd %d (%s): %d bytes of queued events are not in the image "
			 "(--drop-queued-events): after a restart it reads none of them",
			 t->pid, fd, kind, queued);
		return 0;
	}
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d fd %d (%s): %d bytes of events are queued, unread; they cannot be "
			"saved without taking them from the process (--drop-queued-events saves "
			"the instance without them)",
			t->pid, fd, kind, queued);
}
