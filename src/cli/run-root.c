/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt run --root DIR: the container's own root file system. In the
 * container's new (private) mount namespace, before the exec: DIR is bound
 * on itself (its own mount, without what is mounted under it on the host),
 * or with --overlay an overlay of the given directories is mounted on it,
 * gets a minimal /dev on a tmpfs (null, zero, full, random, urandom, tty as
 * device nodes, or bound from the host's where mknod is not allowed; ptmx a
 * link to the devpts of its own on /dev/pts; /dev/shm a tmpfs, /dev/mqueue
 * the mqueue of its ipc namespace), /proc of its pid namespace, /sys
 * read-only (none in a user namespace of its own), then each --bind and --tmpfs, and pivot_root makes it "/"
 * (the host's tree is unmounted from the container's view). Mount points
 * missing in DIR are made (directories, or empty files for a bound file).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli/cli.h"

/* The message of a failure: what, on which path. */
struct run_why {
	char *buf;
	size_t len;
};

static int failed(struct run_why *w, const char *what, const char *path)
{
	int e = errno;
	snprintf(w->buf, w->len, "%s '%s': %s", what, path, strerror(e));
	return -e;
}

/* out = a + b; -1 (ENAMETOOLONG) if it does not fit. */
static int join(char *out, size_t len, const char *a, const char *b, int blen)
{
	int n = snprintf(out, len, "%s%.*s", a, blen, b);
	if (n >= 0 && (size_t)n < len)
		return 0;
	errno = ENAMETOOLONG;
	return -1;
}

/* mkdir -p of path (absolute). */
static int make_dirs(const char *path, mode_t mode)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -1;
		if (!c)
			return 0;
		*s = c;
	}
}

/* The mount point for a bind of src: a directory, or an empty file. */
static int make_point(const char *target, const char *src)
{
	struct stat st;
	if (lstat(target, &st) == 0)
		return 0;
	if (stat(src, &st) < 0)
		return -1;
	if (S_ISDIR(st.st_mode))
		return make_dirs(target, 0755);
	char parent[4096];
	snprintf(parent, sizeof(parent), "%s", target);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (make_dirs(parent, 0755) < 0)
			return -1;
	}
	int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* The flags a read-only remount of a bind must keep (locked ones in a
 * user namespace). */
static unsigned long kept_flags(const char *path)
{
	struct statvfs v;
	unsigned long f = 0;
	if (statvfs(path, &v) < 0)
		return 0;
	f |= (v.f_flag & ST_NOSUID) ? MS_NOSUID : 0;
	f |= (v.f_flag & ST_NODEV) ? MS_NODEV : 0;
	f |= (v.f_flag & ST_NOEXEC) ? MS_NOEXEC : 0;
	f |= (v.f_flag & ST_NOATIME) ? MS_NOATIME : 0;
	f |= (v.f_flag & ST_NODIRATIME) ? MS_NODIRATIME : 0;
	f |= (v.f_flag & ST_RELATIME) ? MS_RELATIME : 0;
	return f;
}

static int bind_one(const char *spec, const char *root, struct run_why *w)
{
	char src[4096], target[4096];
	const char *colon = strchr(spec, ':');
	const char *ro = strchr(colon + 1, ':');
	if (join(src, sizeof(src), "", spec, (int)(colon - spec)) < 0 ||
	    join(target, sizeof(target), root, colon + 1,
		 (int)(ro ? (size_t)(ro - colon - 1) : strlen(colon + 1))) < 0)
		return failed(w, "--bind", spec);
	if (make_point(target, src) < 0)
		return failed(w, "making the mount point of --bind", target);
	if (mount(src, target, NULL, MS_BIND, NULL) < 0)
		return failed(w, "--bind", src);
	if (ro && mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(target),
			NULL) < 0)
		return failed(w, "making --bind read-only", src);
	return 0;
}

static int tmpfs_one(const char *spec, const char *root, struct run_why *w)
{
	char target[4096], data[128];
	const char *colon = strchr(spec, ':');
	if (join(target, sizeof(target), root, spec,
		 (int)(colon ? (size_t)(colon - spec) : strlen(spec))) < 0 ||
	    join(data, sizeof(data), colon ? "mode=1777," : "mode=1777", colon ? colon + 1 : "",
		 colon ? (int)strlen(colon + 1) : 0) < 0)
		return failed(w, "--tmpfs", spec);
	if (make_dirs(target, 0755) < 0)
		return failed(w, "making the mount point of --tmpfs", target);
	if (mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, data) < 0)
		return failed(w, "--tmpfs", target);
	return 0;
}

/* A device node of /dev: made, or bound from the host's. */
static int dev_node(const char *dev, const char *name, unsigned maj, unsigned min)
{
	char path[4096], host[64];
	if (join(path, sizeof(path), dev, name, (int)strlen(name)) < 0)
		return -1;
	if (mknod(path, S_IFCHR | 0666, makedev(maj, min)) == 0)
		return chmod(path, 0666);
	if (errno != EPERM)
		return -1;
	snprintf(host, sizeof(host), "/dev/%s", name);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return -1;
	close(fd);
	return mount(host, path, NULL, MS_BIND, NULL);
}

/* The minimal /dev of the root at dev. */
static int make_dev(const char *dev, const char *pts, struct run_why *w)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = { { "null", 1, 3 },	   { "zero", 1, 5 },	{ "full", 1, 7 },
		      { "random", 1, 8 }, { "urandom", 1, 9 }, { "tty", 5, 0 } };
	static const char *const links[][2] = { { "pts/ptmx", "ptmx" },
						{ "/proc/self/fd", "fd" },
						{ "/proc/self/fd/0", "stdin" },
						{ "/proc/self/fd/1", "stdout" },
						{ "/proc/self/fd/2", "stderr" } };
	char path[4096], pre[4096];
	if (join(pre, sizeof(pre), dev, "/", 1) < 0)
		return failed(w, "--root", dev);
	if (make_dirs(dev, 0755) < 0 ||
	    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k") < 0)
		return failed(w, "mounting a tmpfs on", dev);
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		if (dev_node(pre, nodes[i].name, nodes[i].maj, nodes[i].min) < 0)
			return failed(w, "making the device", nodes[i].name);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		if (join(path, sizeof(path), pre, links[i][1], (int)strlen(links[i][1])) < 0 ||
		    symlink(links[i][0], path) < 0)
			return failed(w, "making the link", path);
	}
	if (join(path, sizeof(path), dev, "/pts", 4) < 0 || mkdir(path, 0755) < 0 || mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, pts) < 0)
		return failed(w, "mounting a devpts of its own on", path);
	if (join(path, sizeof(path), dev, "/shm", 4) < 0 || mkdir(path, 01777) < 0 ||
	    mount("shm", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=65536k") < 0)
		return failed(w, "mounting a tmpfs on", path);
	if (join(path, sizeof(path), dev, "/mqueue", 7) < 0 || mkdir(path, 0755) < 0 ||
	    mount("mqueue", path, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return failed(w, "mounting the mqueue of its ipc namespace on", path);
	return 0;
}

/* --overlay L1[:L2...],UPPER,WORK on root, each directory by its absolute
 * path (a checkpoint reads them back from mountinfo). */
static int mount_overlay(const char *spec, const char *root, struct run_why *w)
{
	char data[3 * PATH_MAX + 64], one[PATH_MAX], abs[PATH_MAX];
	size_t n = 0;
	const char *p = spec;
	for (int part = 0; part < 3; part++) {
		size_t k = strcspn(p, part == 0 ? ":," : ",");
		n += (size_t)snprintf(data + n, sizeof(data) - n, "%s",
				      part == 1 ? ",upperdir=" : part == 2 ? ",workdir=" : "lowerdir=");
		for (;;) {
			if (join(one, sizeof(one), "", p, (int)k) < 0 || !realpath(one, abs))
				return failed(w, "--overlay", one);
			if (n + strlen(abs) + 2 >= sizeof(data)) {
				errno = ENAMETOOLONG;
				return failed(w, "--overlay", spec);
			}
			n += (size_t)snprintf(data + n, sizeof(data) - n, "%s", abs);
			p += k;
			if (part || *p != ':')
				break;
			data[n++] = ':';
			k = strcspn(++p, ":,");
		}
		p += *p == ',';
	}
	data[n] = '\0';
	if (mount("overlay", root, "overlay", 0, data) < 0)
		return failed(w, "mounting the overlay on", root);
	return 0;
}

int run_root(const struct cli_args *a, bool userns, const char *pts, char *why, size_t len)
{
	struct run_why w = { why, len };
	char root[PATH_MAX], path[PATH_MAX + 16];
	if (a->overlay && make_dirs(a->root, 0755) < 0)
		return failed(&w, "--root", a->root);
	if (!realpath(a->root, root))
		return failed(&w, "--root", a->root);
	int r = a->overlay ? mount_overlay(a->overlay, root, &w) : 0;
	if (r < 0)
		return r;
	if (!a->overlay && mount(root, root, NULL, MS_BIND, NULL) < 0)
		return failed(&w, "binding the root", root);
	if (join(path, sizeof(path), root, "/dev", 4) < 0)
		return failed(&w, "--root", root);
	r = make_dev(path, pts, &w);
	if (r < 0)
		return r;
	if (join(path, sizeof(path), root, "/proc", 5) < 0)
		return failed(&w, "--root", root);
	if (make_dirs(path, 0555) < 0 ||
	    mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return failed(&w, "mounting /proc on", path);
	if (join(path, sizeof(path), root, "/sys", 4) < 0)
		return failed(&w, "--root", root);
	/* sysfs is its network namespace's: in a user namespace of its own
	 * (not root) the container has none, and /sys stays empty */
	if (make_dirs(path, 0555) < 0 ||
	    (mount("sysfs", path, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 &&
	     (errno != EPERM || !userns)))
		return failed(&w, "mounting /sys on", path);
	for (int i = 0; i < a->binds.n; i++)
		if ((r = bind_one(a->binds.v[i], root, &w)) < 0)
			return r;
	for (int i = 0; i < a->tmpfs.n; i++)
		if ((r = tmpfs_one(a->tmpfs.v[i], root, &w)) < 0)
			return r;
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return failed(&w, "pivot_root into", root);
	return 0;
}
