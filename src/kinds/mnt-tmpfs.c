/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The files of a container's own tmpfs (mnt kind, see mnt.c): walked at
 * dump through the root's /proc/PID/root, one TmpfsFile record each (a
 * file of several names once, its other names as links to the first);
 * made again at restart from ckpt's side, owners mapped through the
 * container's id maps. And unix socket names bound in the container's
 * mounts at restart, before the tree is made (mnt_rst_bind_unix, mnt.h):
 * the tmpfs that holds one is made then, detached, and attached to the
 * tree at root ready.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kinds/mnt-int.h"
#include "kinds/mnt.h"
#include "kinds/ns.h"
#include "util/cleanup.h"
#include "util/userns.h"

/* Device nodes a tmpfs may hold: those of a minimal /dev. */
bool mnt_dev_allowed(mode_t mode, dev_t rdev)
{
	unsigned maj = major(rdev), min = minor(rdev);
	return S_ISCHR(mode) && ((maj == 1 && (min == 3 || min == 5 || min == 7 || min == 8 ||
					       min == 9)) ||
				 (maj == 5 && (min == 0 || min == 2)));
}

/* A file of several names seen by the walk: its first name's path. */
struct seen_ino {
	ino_t ino;
	char *path;
};

struct walk {
	struct ckpt_ctx *ctx;
	const MountEntry *m;
	dev_t dev;
	struct seen_ino *inos; /* files with st_nlink > 1 saved so far */
	size_t ninos;
	char path[4096]; /* relative to the tmpfs's root */
};

/* The path a file of several names was first saved by, or NULL (then it
 * is noted with this path: its other names are hard links to it). */
static int first_name(struct walk *w, const struct stat *st, const char **ret)
{
	*ret = NULL;
	if (S_ISDIR(st->st_mode) || S_ISSOCK(st->st_mode) || st->st_nlink < 2 ||
	    st->st_dev != w->dev)
		return 0;
	for (size_t i = 0; i < w->ninos; i++)
		if (w->inos[i].ino == st->st_ino) {
			*ret = w->inos[i].path;
			return 0;
		}
	struct seen_ino *n = realloc(w->inos, (w->ninos + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	w->inos = n;
	if (!(n[w->ninos].path = strdup(w->path)))
		return -ENOMEM;
	n[w->ninos++].ino = st->st_ino;
	return 0;
}

/*
 * The data runs of the file fd of size bytes (SEEK_DATA, SEEK_HOLE), as
 * (offset, length) pairs in *ret (malloc'd), *ret_n numbers; a file that
 * changes meanwhile (it should not: the tree is frozen) is read to size.
 */
static int data_runs(int fd, uint64_t size, uint64_t **ret, size_t *ret_n)
{
	uint64_t *runs = NULL;
	size_t n = 0;
	for (off_t off = 0; (uint64_t)off < size;) {
		off_t d = lseek(fd, off, SEEK_DATA), h;
		if (d < 0 && errno == ENXIO)
			break; /* a hole to the end */
		if (d < 0 || (h = lseek(fd, d, SEEK_HOLE)) < 0 || h <= d) {
			free(runs);
			return d < 0 || h < 0 ? -errno : -EIO;
		}
		if ((uint64_t)h > size)
			h = (off_t)size;
		uint64_t *nr = (uint64_t)d < size ? realloc(runs, (n + 2) * sizeof(*nr)) : runs;
		if (!nr) {
			free(runs);
			return -ENOMEM;
		}
		runs = nr;
		if ((uint64_t)d < size) {
			runs[n++] = (uint64_t)d;
			runs[n++] = (uint64_t)(h - d);
		}
		off = h;
	}
	*ret = runs;
	*ret_n = n;
	return 0;
}

/* len bytes at offset off of fd into buf; *got += len. */
static int read_run(int fd, char *buf, uint64_t off, uint64_t len, size_t *got)
{
	for (uint64_t done = 0; done < len;) {
		ssize_t r = pread(fd, buf + done, len - done, (off_t)(off + done));
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += (uint64_t)r;
	}
	*got += len;
	return 0;
}

static int write_file(struct walk *w, int dfd, const char *name, const struct stat *st)
{
	TmpfsFile f;
	_cleanup_free_ char *data = NULL;
	char target[4096];
	tmpfs_file__init(&f);
	f.mount = w->m->id;
	f.path = w->path;
	f.mode = st->st_mode;
	f.uid = ns_uid_inside(w->ctx, st->st_uid);
	f.gid = ns_gid_inside(w->ctx, st->st_gid);
	f.has_atime_ns = f.has_mtime_ns = true;
	f.atime_ns = st->st_atim.tv_sec * 1000000000ull + st->st_atim.tv_nsec;
	f.mtime_ns = st->st_mtim.tv_sec * 1000000000ull + st->st_mtim.tv_nsec;
	const char *first;
	int r = first_name(w, st, &first);
	if (r < 0)
		return r;
	if (first) { /* another name of a file saved before */
		f.link = (char *)first;
	} else if (st->st_dev != w->dev) { /* a mount point: what it is, empty */
		/* owned as its directory is: the container's uid 0 is not
		 * always mapped (bwrap as a user maps only the user's uid in
		 * its sandbox), and a restart that could not chown to it failed
		 * on /dev's "pts" once the original was killed */
		struct stat dst;
		f.mode = S_ISDIR(st->st_mode) ? S_IFDIR | 0755 : S_IFREG | 0644;
		if (fstat(dfd, &dst) < 0)
			return -errno;
		f.uid = ns_uid_inside(w->ctx, dst.st_uid);
		f.gid = ns_gid_inside(w->ctx, dst.st_gid);
	} else if (S_ISLNK(st->st_mode)) {
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		f.target = target;
	} else if (S_ISREG(st->st_mode)) {
		_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		size_t len = 0;
		if (fd < 0)
			return -errno;
		r = data_runs(fd, (uint64_t)st->st_size, &f.extents, &f.n_extents);
		for (size_t k = 1; r >= 0 && k < f.n_extents; k += 2)
			len += (size_t)f.extents[k];
		if (r >= 0 && !(data = malloc(len ? len : 1)))
			r = -ENOMEM;
		for (size_t k = 0, got = 0; r >= 0 && k < f.n_extents; k += 2)
			r = read_run(fd, data + got, f.extents[k], f.extents[k + 1], &got);
		if (r >= 0 && f.n_extents == 2 && f.extents[0] == 0 && len == (size_t)st->st_size)
			f.n_extents = 0; /* no hole: the data from offset 0, as before */
		if (r < 0) {
			free(f.extents);
			return r;
		}
		f.has_data = f.has_size = true;
		f.data.data = (uint8_t *)data;
		f.data.len = len;
		f.size = (uint64_t)st->st_size;
	} else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		if (!mnt_dev_allowed(st->st_mode, st->st_rdev))
			return log_fail(&w->ctx->log, -EOPNOTSUPP,
					"mount %s (tmpfs): the device node '%s' is not one of a "
					"minimal /dev; not supported",
					w->m->point, w->path);
		f.has_rdev = true;
		f.rdev = st->st_rdev;
	} else if (S_ISSOCK(st->st_mode)) {
		return 0; /* a unix socket's name: the unix kind's */
	}
	r = ctx_write_msg(w->ctx, MNT_FILE, &f.base);
	free(f.extents);
	return r;
}

/* Every entry of the directory dfd (at w->path), depth first. */
static int walk_dir(struct walk *w, int dfd, int depth)
{
	_cleanup_closedir_ DIR *d = NULL;
	int dup_fd = dup(dfd);
	if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
		if (dup_fd >= 0)
			close(dup_fd);
		return -errno;
	}
	if (depth > 64)
		return -ELOOP;
	size_t len = strlen(w->path);
	for (struct dirent *de; (de = readdir(d));) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (snprintf(w->path + len, sizeof(w->path) - len, "%s%s", len ? "/" : "",
			     de->d_name) >= (int)(sizeof(w->path) - len))
			return -ENAMETOOLONG;
		int r = write_file(w, dfd, de->d_name, &st);
		if (r >= 0 && S_ISDIR(st.st_mode) && st.st_dev == w->dev) {
			_cleanup_close_ int sub =
				openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = sub < 0 ? -errno : walk_dir(w, sub, depth + 1);
		}
		w->path[len] = '\0';
		if (r < 0)
			return r;
	}
	return 0;
}

int mnt_dump_tmpfs(struct ckpt_ctx *ctx, const struct mnt_ckpt *s, size_t i)
{
	struct walk w = { .ctx = ctx, .m = s->ptrs[i], .dev = s->devs[i] };
	char via[4200];
	struct stat st;
	snprintf(via, sizeof(via), "/proc/%d/root%s", s->pid, w.m->point);
	_cleanup_close_ int fd = open(via, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = fd < 0 || fstat(fd, &st) < 0 ? -errno : 0;
	if (r >= 0 && st.st_dev != w.dev)
		r = -EBUSY; /* another mount over it */
	if (r >= 0)
		r = write_file(&w, fd, ".", &st);
	if (r >= 0)
		r = walk_dir(&w, fd, 0);
	for (size_t k = 0; k < w.ninos; k++)
		free(w.inos[k].path);
	free(w.inos);
	if (r < 0 && !ctx->log.errors)
		log_error(&ctx->log, "pid %d: mount %s (tmpfs): cannot save its files%s%s: %s",
			  s->pid, w.m->point, w.path[0] ? " at " : "", w.path, strerror(-r));
	return r;
}


static int64_t outside(const char *map, uint32_t id)
{
	return userns_map_id(map, id, true);
}

/*
 * The directory that holds path (relative to the tmpfs's root top), an
 * O_PATH fd, found without following any symlink or leaving the tmpfs (the
 * image's own symlinks must not lead ckpt's writes elsewhere); *ret_name
 * the last component ("." for the root itself).
 */
static int parent_of(int top, const char *path, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	*ret_name = !path[0] ? "." : slash ? slash + 1 : path;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	long fd = syscall(SYS_openat2, top, dir, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/* One file of a tmpfs, made from ckpt's side under the tmpfs's root top. */
static int make_file(const TmpfsFile *f, int top, const struct idmaps *ids)
{
	int64_t uid = outside(ids->uid, f->uid), gid = outside(ids->gid, f->gid);
	const char *name;
	if (uid < 0 || gid < 0)
		return -EOVERFLOW;
	_cleanup_close_ int dfd = parent_of(top, f->path, &name);
	if (dfd < 0)
		return dfd;
	if (f->link) { /* another name of a file made before */
		const char *oname;
		_cleanup_close_ int ofd = parent_of(top, f->link, &oname);
		if (ofd < 0)
			return ofd;
		return linkat(ofd, oname, dfd, name, 0) < 0 ? -errno : 0;
	}
	mode_t perm = f->mode & 07777;
	int r = 0;
	switch (f->mode & S_IFMT) {
	case S_IFDIR:
		r = f->path[0] && mkdirat(dfd, name, 0700) < 0 ? -errno : 0;
		break;
	case S_IFLNK:
		r = symlinkat(f->target, dfd, name) < 0 ? -errno : 0;
		break;
	case S_IFIFO:
	case S_IFCHR:
		r = mknodat(dfd, name, f->mode & (S_IFMT | 07777), (dev_t)f->rdev) < 0 ? -errno : 0;
		break;
	case S_IFREG: {
		_cleanup_close_ int fd =
			openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		/* each data run at its offset (one from 0 without extents): holes stay */
		size_t from = 0;
		for (size_t k = 0; k < (f->n_extents ? f->n_extents : 2); k += 2) {
			uint64_t at = f->n_extents ? f->extents[k] : 0;
			size_t len = f->n_extents ? (size_t)f->extents[k + 1] : f->data.len;
			for (size_t done = 0; done < len;) {
				ssize_t w = pwrite(fd, f->data.data + from + done, len - done,
						   (off_t)(at + done));
				if (w < 0)
					return -errno;
				done += (size_t)w;
			}
			from += len;
		}
		if (ftruncate(fd, (off_t)f->size) < 0)
			return -errno;
		break;
	}
	}
	if (r >= 0 && fchownat(dfd, name, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r >= 0 && !S_ISLNK(f->mode) && fchmodat(dfd, name, perm, 0) < 0)
		r = -errno;
	return r;
}

/* The files of the tmpfs m, at via; their times last, children first. */
static int fill_tmpfs_at(struct rst_ctx *ctx, const struct mnt_rst *s, const MountEntry *m,
			 int dfd, const struct idmaps *ids);

int mnt_fill_tmpfs(struct rst_ctx *ctx, const struct mnt_rst *s, const MountEntry *m,
		      const char *via)
{
	_cleanup_close_ int dfd = open(via, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct idmaps ids;
	pid_t pid = ctx->tasks[0].pup.pid;
	if (dfd < 0)
		return log_fail(&ctx->log, -errno, "mount %s (tmpfs): cannot open it: %m", m->point);
	if (userns_read_map(pid, "uid_map", ids.uid, sizeof(ids.uid)) < 0 ||
	    userns_read_map(pid, "gid_map", ids.gid, sizeof(ids.gid)) < 0)
		return log_fail(&ctx->log, -EIO, "pid %d: cannot read its id maps", pid);
	return fill_tmpfs_at(ctx, s, m, dfd, &ids);
}

static int fill_tmpfs_at(struct rst_ctx *ctx, const struct mnt_rst *s, const MountEntry *m,
			 int dfd, const struct idmaps *ids)
{
	for (size_t i = 0; i < s->nfiles; i++) {
		const TmpfsFile *f = s->files[i];
		int r = f->mount == m->id ? make_file(f, dfd, ids) : 0;
		if (r < 0)
			return log_fail(&ctx->log, r, "mount %s (tmpfs): cannot make '%s': %s",
					m->point, f->path, strerror(-r));
	}
	for (size_t i = s->nfiles; i-- > 0;) {
		const TmpfsFile *f = s->files[i];
		struct timespec ts[2] = { { (time_t)(f->atime_ns / 1000000000),
					    (long)(f->atime_ns % 1000000000) },
					  { (time_t)(f->mtime_ns / 1000000000),
					    (long)(f->mtime_ns % 1000000000) } };
		const char *name;
		_cleanup_close_ int pfd = f->mount == m->id ? parent_of(dfd, f->path, &name) : -1;
		if (pfd >= 0)
			utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW);
	}
	return 0;
}


/* --- unix socket names in the container (restart, at prepare) --------- */

/* A tmpfs's per-mount flags as fsmount(2) takes them (ro: at root ready). */
static unsigned int mount_attrs(uint32_t flags)
{
	return ((flags & MS_NOSUID) ? MOUNT_ATTR_NOSUID : 0) |
	       ((flags & MS_NODEV) ? MOUNT_ATTR_NODEV : 0) |
	       ((flags & MS_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0) |
	       ((flags & MS_NOATIME) ? MOUNT_ATTR_NOATIME : 0) |
	       ((flags & MS_STRICTATIME) ? MOUNT_ATTR_STRICTATIME : 0) |
	       ((flags & MS_NODIRATIME) ? MOUNT_ATTR_NODIRATIME : 0);
}

/* Tmpfs i made now, detached (fsopen, fsmount) and filled from the image:
 * attached to the tree at root ready (attach_early). */
static int make_early(struct rst_ctx *ctx, struct mnt_rst *s, size_t i)
{
	const MountEntry *m = s->tree->mounts[i];
	if (s->early[i] >= 0)
		return 0;
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	_cleanup_free_ char *copy = m->data ? strdup(m->data) : NULL;
	if (fs < 0)
		return -errno;
	for (char *save = NULL, *o = copy ? strtok_r(copy, ",", &save) : NULL; o;
	     o = strtok_r(NULL, ",", &save)) {
		char *v = strchr(o, '=');
		if (v)
			*v++ = '\0';
		if (syscall(SYS_fsconfig, fs, v ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, o, v,
			    0) < 0)
			return -errno;
	}
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	int mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, mount_attrs(m->flags));
	if (mfd < 0)
		return -errno;
	struct idmaps ids = { "0 0 4294967295", "0 0 4294967295" };
	int r = fill_tmpfs_at(ctx, s, m, mfd, &ids);
	if (r < 0) {
		close(mfd);
		return r;
	}
	s->early[i] = mfd;
	return 0;
}

struct sock_bind {
	const struct mnt_rst *s;
	const MountEntry *m; /* the mount that holds the name */
	int early;           /* its tmpfs (or its origin's), made at prepare; or -1 */
	int sock, mode;
	unsigned uid, gid;
	const char *name, *path;
	bool userns; /* in sock_bind_userns's child */
	int r;
};

static int mkdir_p(char *path)
{
	for (char *p = path + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = '\0';
		int r = mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
		*p = c;
		if (r < 0 || !c)
			return r;
	}
}

/* In a thread of its own fs and mount namespace (see mnt.h), or a child
 * process of its own user namespace too (sock_bind_userns). */
static int sock_bind_in(struct sock_bind *b)
{
	const MountEntry *m = b->m;
	char at[4200], base[4096];
	const char *top = "/tmp";
	if ((!b->userns && unshare(CLONE_FS | CLONE_NEWNS) < 0) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	/* a copy of the mount that holds the name, taken before the scaffold
	 * covers /tmp (where its source may be) */
	const char *below = m->has_from && m->source[0] ? m->source + 1 : "";
	_cleanup_close_ int c =
		m->bind ? (int)syscall(SYS_open_tree, AT_FDCWD, m->source,
				       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)
			: (int)syscall(SYS_open_tree, b->early, below,
				       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
					       (below[0] ? 0 : AT_EMPTY_PATH));
	if (c < 0 || mount("ckpt", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		return -errno;
	snprintf(at, sizeof(at), "%s%s", top, strcmp(m->point, "/") ? m->point : "");
	int r = mkdir_p(at);
	if (r < 0)
		return r;
	if (syscall(SYS_move_mount, c, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return -errno;
	/* a relative name was bound from the directory its path starts with */
	size_t nl = strlen(b->name), pl = strlen(b->path);
	snprintf(base, sizeof(base), "%.*s", pl > nl + 1 ? (int)(pl - nl - 1) : 1, b->path);
	struct stat st;
	if (chroot(top) < 0 || chdir(b->name[0] == '/' ? "/" : base) < 0)
		return -errno;
	if (lstat(b->path, &st) == 0 && (!S_ISSOCK(st.st_mode) || unlink(b->path) < 0))
		return -EEXIST; /* a stale socket file goes; anything else stays */
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (nl >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, b->name, nl);
	if (bind(b->sock, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
							      nl + 1)) < 0)
		return -errno;
	if (b->mode >= 0 && (chmod(b->path, (mode_t)b->mode & 07777) < 0 ||
			     lchown(b->path, b->uid, b->gid) < 0))
		return -errno;
	return 0;
}

static void *sock_bind_thread(void *arg)
{
	struct sock_bind *b = arg;
	b->r = sock_bind_in(b);
	return NULL;
}

/* A child's end: its -errno result as its exit status. */
static void __attribute__((noreturn)) child_exit(int r)
{
	_exit(r < 0 && -r < 256 ? -r : r < 0 ? EIO : 0);
}

/* child_exit's result back: 0 or -errno. */
static int child_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : write(fd, s, strlen(s));
	int r = n == (ssize_t)strlen(s) ? 0 : -errno;
	if (fd >= 0)
		close(fd);
	return r;
}

/*
 * Without root (or CAP_SYS_ADMIN), a name on a bind of the host's: the
 * same, in a child process (a thread may not change its user namespace)
 * that unshares a user namespace mapping 0 to ckpt's ids and a mount
 * namespace; the socket's file is then made by ckpt's ids in the host's
 * directory, and its mode set. The owner must be ckpt's (mnt_unix_name).
 */
static int sock_bind_userns(struct sock_bind *b)
{
	char uid_map[32], gid_map[32];
	snprintf(uid_map, sizeof(uid_map), "0 %u 1", (unsigned)geteuid());
	snprintf(gid_map, sizeof(gid_map), "0 %u 1", (unsigned)getegid());
	if (b->mode >= 0 && (b->uid != geteuid() || b->gid != getegid()))
		return -EPERM;
	b->uid = b->gid = 0; /* ckpt's ids, as the child sees them */
	b->userns = true;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) { /* only system calls from here: the parent has threads */
		int r = unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0 ? -errno : 0;
		if (r >= 0)
			r = write_str("/proc/self/setgroups", "deny");
		if (r >= 0)
			r = write_str("/proc/self/uid_map", uid_map);
		if (r >= 0)
			r = write_str("/proc/self/gid_map", gid_map);
		if (r >= 0)
			r = sock_bind_in(b);
		child_exit(r);
	}
	return child_wait(pid);
}

size_t mnt_mount_of_path(const MountTree *tree, const char *path)
{
	size_t best = tree->n_mounts, blen = 0;
	const char *slash = strrchr(path, '/');
	char dir[4096];
	snprintf(dir, sizeof(dir), "%.*s", slash && slash != path ? (int)(slash - path) : 1, path);
	for (size_t i = 0; i < tree->n_mounts; i++) {
		const char *p = tree->mounts[i]->point;
		if (mnt_has_prefix_dir(dir, p) && (best == tree->n_mounts || strlen(p) >= blen)) {
			best = i;
			blen = strlen(p);
		}
	}
	return best;
}

int mnt_rst_unix_file(struct rst_ctx *ctx, const char *path)
{
	struct mnt_rst *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_mnt] : NULL;
	size_t i = s && s->tree && path[0] == '/' ? mnt_mount_of_path(s->tree, path) : 0;
	if (!s || !s->tree || path[0] != '/' || i == s->tree->n_mounts)
		return -EOPNOTSUPP;
	const MountEntry *m = s->tree->mounts[i];
	char host[8400];
	struct stat st;
	if (!m->bind) { /* bound at root ready: through the made tree */
		int r = ctx->tasks[0].pup.pid > 0 ? mnt_rst_path(ctx, path, host, sizeof(host))
						   : -EOPNOTSUPP;
		if (r < 0)
			return r;
	} else
		snprintf(host, sizeof(host), "%s%s", m->source,
			 path + (strcmp(m->point, "/") ? strlen(m->point) : 0));
	int fd = open(host, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))) {
		close(fd);
		return -ENOTSOCK;
	}
	return fd < 0 ? -errno : fd;
}

int mnt_rst_bind_unix_late(struct rst_ctx *ctx, int sock, const char *name, const char *path,
			   int mode, unsigned uid, unsigned gid)
{
	pid_t root = ctx->tasks[0].pup.pid;
	char upath[64], mpath[64], base[4096];
	struct idmaps ids;
	int64_t iu = 0, ig = 0;
	if (mode >= 0 && (userns_read_map(root, "uid_map", ids.uid, sizeof(ids.uid)) < 0 ||
			  userns_read_map(root, "gid_map", ids.gid, sizeof(ids.gid)) < 0 ||
			  (iu = userns_map_id(ids.uid, uid, false)) < 0 || (ig = userns_map_id(ids.gid, gid, false)) < 0))
		return -EOVERFLOW;
	snprintf(upath, sizeof(upath), "/proc/%d/ns/user", (int)root);
	snprintf(mpath, sizeof(mpath), "/proc/%d/ns/mnt", (int)root);
	size_t nl = strlen(name), pl = strlen(path);
	snprintf(base, sizeof(base), "%.*s", pl > nl + 1 ? (int)(pl - nl - 1) : 1, path);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (nl >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, name, nl);
	_cleanup_close_ int ufd = open(upath, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int mfd = open(mpath, O_RDONLY | O_CLOEXEC);
	if (ufd < 0 || mfd < 0)
		return -errno;
	bool own_userns = ns_rst_flags(ctx) & CLONE_NEWUSER;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) { /* system calls only: the parent has threads */
		struct stat st;
		int r = 0;
		/* into the container's namespaces: "/" and cwd are its root */
		if ((own_userns && setns(ufd, CLONE_NEWUSER) < 0) || setns(mfd, CLONE_NEWNS) < 0 ||
		    chdir(name[0] == '/' ? "/" : base) < 0)
			r = -errno;
		else if (lstat(path, &st) == 0 && (!S_ISSOCK(st.st_mode) || unlink(path) < 0))
			r = -EEXIST;
		else if (bind(sock, (struct sockaddr *)&a,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + nl + 1)) < 0 ||
			 (mode >= 0 && (chmod(path, (mode_t)mode & 07777) < 0 ||
					lchown(path, (uid_t)iu, (gid_t)ig) < 0)))
			r = -errno;
		child_exit(r);
	}
	return child_wait(pid);
}

int mnt_rst_bind_unix(struct rst_ctx *ctx, int sock, const char *name, const char *path, int mode,
		      unsigned uid, unsigned gid)
{
	struct mnt_rst *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_mnt] : NULL;
	if (!s || !s->tree)
		return 1; /* no tree: the host's path */
	if (path[0] != '/' || !mnt_clean_path(path, false))
		return -EOPNOTSUPP;
	size_t i = mnt_mount_of_path(s->tree, path);
	if (i == s->tree->n_mounts)
		return s->tree->host_root ? 1 : -EOPNOTSUPP; /* on none of its own mounts */
	struct sock_bind b = { .s = s, .m = s->tree->mounts[i], .early = -1, .sock = sock,
			       .mode = mode, .uid = uid, .gid = gid, .name = name, .path = path };
	if (!b.m->bind) {
		size_t o = b.m->has_from ? mnt_find_index(s->tree, mnt_find_mount(s, b.m->from)) : i;
		if (o == s->tree->n_mounts || strcmp(s->tree->mounts[o]->fstype, "tmpfs"))
			return -EOPNOTSUPP;
		if (ns_rst_flags(ctx) & CLONE_NEWUSER)
			return 2; /* its tmpfs must be the user namespace's: at root ready */
		int r = make_early(ctx, s, o);
		if (r < 0)
			return r;
		b.early = s->early[o];
	}
	if (b.m->bind && !userns_may_mount())
		return sock_bind_userns(&b);
	pthread_t th;
	if (pthread_create(&th, NULL, sock_bind_thread, &b) != 0)
		return -EAGAIN;
	pthread_join(th, NULL);
	return b.r;
}
