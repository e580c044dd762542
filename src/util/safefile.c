/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Files ckpt creates: see safefile.h for the protocol. */
#include "util/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

#define MODE 0600
#define NAME_TRIES 64

/* Splits path into an open directory and the last component. */
static int open_parent(const char *path, int *ret_dirfd, char *base, size_t baselen)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	char dir[PATH_MAX];
	int fd;

	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EISDIR;
	if (strlen(name) >= baselen)
		return -ENAMETOOLONG;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(base, baselen, "%s", name);
	*ret_dirfd = fd;
	return 0;
}

/* ".NAME.XXXXXX" with six random characters, shortened to fit NAME_MAX */
static void tmp_name(const char *base, char *buf, size_t len)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	uint8_t rnd[6];
	char sfx[7];

	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		uint64_t x = (uint64_t)clock() ^ (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid();
		memcpy(rnd, &x, sizeof(rnd));
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		sfx[i] = set[rnd[i] % (sizeof(set) - 1)];
	sfx[6] = '\0';
	snprintf(buf, len, ".%.*s.%s", (int)(len - 10), base, sfx);
}

static bool no_tmpfile(int e)
{
	return e == EOPNOTSUPP || e == EISDIR || e == EINVAL || e == ENOTDIR;
}

int safe_file_create(const char *path, struct safe_file *ret)
{
	return safe_file_create_flags(path, 0, ret);
}

int safe_file_create_flags(const char *path, int flags, struct safe_file *ret)
{
	struct safe_file f = { .fd = -1, .dirfd = -1 };
	int r = open_parent(path, &f.dirfd, f.base, sizeof(f.base));

	if (r < 0)
		return r;
	if (!(flags & SAFE_NO_TMPFILE))
		f.fd = openat(f.dirfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, MODE);
	else
		errno = EOPNOTSUPP;
	if (f.fd < 0 && !no_tmpfile(errno)) {
		r = -errno;
		close(f.dirfd);
		return r;
	}
	for (int i = 0; f.fd < 0 && i < NAME_TRIES; i++) {
		tmp_name(f.base, f.tmp, sizeof(f.tmp));
		f.fd = openat(f.dirfd, f.tmp,
			      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, MODE);
		if (f.fd >= 0)
			f.named = true;
		else if (errno != EEXIST) {
			r = -errno;
			close(f.dirfd);
			return r;
		}
	}
	if (f.fd < 0) {
		close(f.dirfd);
		return -EEXIST;
	}
	*ret = f;
	return 0;
}

/* Gives the unnamed file a fresh unique name in its directory. */
static int link_tmp(struct safe_file *f)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
	for (int i = 0; i < NAME_TRIES; i++) {
		tmp_name(f->base, f->tmp, sizeof(f->tmp));
		if (linkat(AT_FDCWD, proc, f->dirfd, f->tmp, AT_SYMLINK_FOLLOW) == 0) {
			f->named = true;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int safe_file_commit(struct safe_file *f, const char **ret_step)
{
	const char *step = "fsync";
	int r = 0;

	if (f->fd < 0)
		return -EBADF;
	if (!f->no_sync && fsync(f->fd) < 0)
		r = -errno;
	if (r == 0 && !f->named) {
		step = "link";
		r = link_tmp(f);
	}
	if (r == 0) {
		step = "rename";
		if (renameat(f->dirfd, f->tmp, f->dirfd, f->base) < 0)
			r = -errno;
		else
			f->named = false;
	}
	if (r == 0) {
		step = "fsync of the directory";
		if (!f->no_sync && fsync(f->dirfd) < 0)
			r = -errno;
	}
	if (r < 0 && ret_step)
		*ret_step = step;
	safe_file_abort(f);
	return r;
}

void safe_file_abort(struct safe_file *f)
{
	if (f->named && f->dirfd >= 0)
		unlinkat(f->dirfd, f->tmp, 0);
	f->named = false;
	if (f->fd >= 0)
		close(f->fd);
	if (f->dirfd >= 0)
		close(f->dirfd);
	f->fd = f->dirfd = -1;
}

int safe_open_append(const char *path)
{
	_cleanup_close_ int fd =
		open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK |
				   O_CLOEXEC,
		     MODE);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_uid != geteuid())
		return -EPERM;
	if (st.st_nlink != 1)
		return -EMLINK;
	/* back to blocking writes, O_NONBLOCK only kept a FIFO from blocking the open */
	if (fcntl(fd, F_SETFL, O_APPEND) < 0)
		return -errno;
	return TAKE_FD(fd);
}

int safe_write_file(const char *path, const void *buf, size_t len)
{
	struct safe_file f;
	int r = safe_file_create(path, &f);

	if (r < 0)
		return r;
	f.no_sync = true;
	for (size_t done = 0; done < len;) {
		ssize_t k = write(f.fd, (const char *)buf + done, len - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			r = k < 0 ? -errno : -EIO;
			safe_file_abort(&f);
			return r;
		}
		done += (size_t)k;
	}
	return safe_file_commit(&f, NULL);
}
