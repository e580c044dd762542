/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Files whose contents only the image can give back: memfds (an fd or a
 * mapping whose link reads "/memfd:NAME (deleted)") and regular files
 * deleted while open or mapped ("/path (deleted)"). Two kinds of object,
 * as for pipes:
 *
 * - the inode (MemfdEntry), one per (dev, ino): name or path, size, mode,
 *   owner, mtime, seals, and its contents: only the data that exists
 *   (SEEK_DATA / SEEK_HOLE on an open file of ckpt's own, so a sparse
 *   memfd stays small), given to the page store (img/pages.h) as extents
 *   of file offsets: MEMFD_CONTENTS records tagged with the inode's objref,
 *   all-zero blocks dropped;
 * - each open file of it (MemfdFileEntry): an fd's open file description
 *   (flags, offset; fds sharing one are found with kcmp, fdobj_same()), or
 *   the access a mapping was made with (one per inode and access, no
 *   offset). A memfd mapped but held by no fd is found through the vma:
 *   the kind claims the vmas of deleted files (vma_claim) for mm, reads
 *   them through /proc/PID/map_files, and maps them at restart from the
 *   open file made for the access (mm_map_file).
 *
 * A memfd is told from a deleted file by its mount: a memfd lives on the
 * kernel's internal shmem mount, which no mountinfo lists. A deleted file
 * that still has another name in the same directory (glibc's sem_open()
 * makes /dev/shm/sem.XXXXXX, links it to sem.NAME and unlinks the first)
 * is not this kind's: it is an ordinary file of that name (file_reg),
 * opened by it at restart. A hugetlb memfd (MFD_HUGETLB, on hugetlbfs) of
 * any page size is saved with its page size (MemfdEntry.huge_page), made
 * with MFD_HUGETLB and filled through a mapping (mm-huge.c); a restart on
 * a machine without huge pages of that size fails at load. Refused:
 * other internal kernel
 * files (secretmem...), a deleted file that still has a name elsewhere
 * (a hard link in another directory), a writable
 * shared mapping of a memfd sealed with F_SEAL_FUTURE_WRITE (the seal
 * would forbid mapping it again).
 *
 * Shared memory of /dev/zero held by an fd ("/dev/zero (deleted)" on the
 * internal shmem mount: opened through map_files) is saved as a deleted
 * file of path "/dev/zero" with dev_zero set, and made at restart as mm's
 * object of that inode (mm_shmem_fd), so its mappings share it again.
 *
 * At restart (prepare, on ckpt's side) a memfd is made with
 * memfd_create(name) -- MFD_ALLOW_SEALING unless its seals were exactly
 * F_SEAL_SEAL (what a memfd made without it has), MFD_EXEC unless it has
 * F_SEAL_EXEC -- its data written, ftruncate'd, chmod'ed, and its seals
 * added last. A deleted file is made as a temporary in its old directory,
 * filled the same way, given its mode, owner and mtime, renamed to its
 * old name when that is free and unlinked, so its fds read "PATH (deleted)"
 * again. Each open file is then opened anew through /proc/self/fd, with its
 * flags and offset, so two open files stay two.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "img/pages.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/memfd.h"
#include "kinds/mm.h"
#include "kinds/mnt.h"
#include "kinds/file-reg.h"
#include "memfd.pb-c.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"

enum {
	MEMFD_ENTRY = REC_TYPE(KID_memfd, 1),
	/* 2 and 3 were contents as data and pages, before the page store */
	MEMFD_FILE = REC_TYPE(KID_memfd, 4),
	MEMFD_CONTENTS = REC_TYPE(KID_memfd, 5), /* page store, tag: the inode's objref */
};

#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#define ALL_SEALS                                                                                  \
	(F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_FUTURE_WRITE |          \
	 F_SEAL_EXEC)
/* open flags an open file keeps; O_CLOEXEC is the fd's */
#define KERNEL_O_LARGEFILE 00100000 /* 0 in x86_64 userspace, set by the kernel */
#define FILE_FLAGS                                                                                 \
	(O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | O_DIRECT | KERNEL_O_LARGEFILE |    \
	 O_NOATIME | O_PATH | O_NOFOLLOW)
#define MFD_NAME_MAX 249	  /* NAME_MAX - strlen("memfd:") */
#define SUFFIX	     " (deleted)"
#define SUFFIX_LEN   10

/* checkpoint: an inode or one open file of it */
struct mfd_obj {
	bool is_file;
	MemfdEntry e;	  /* inode */
	MemfdFileEntry f; /* file */
	char *text;	  /* inode: the name or path e points to */
	uint64_t dev;
	int fd;	   /* inode: ckpt's own open file of it, for reading */
	pid_t pid; /* file: a task holding it... */
	int rfd;   /* ...and its fd there; -1 for a mapping */
};

/* restart */
struct mfd_robj {
	bool is_file;
	MemfdEntry *e;
	MemfdFileEntry *f;
	struct pages_set pages; /* inode: its contents */
	int fd; /* the memfd or file made; a file: the reopened one */
};

static bool is_deleted_path(const char *path)
{
	size_t n = strlen(path);
	return n > SUFFIX_LEN && !strcmp(path + n - SUFFIX_LEN, SUFFIX);
}

static bool memfd_fd_claim(const struct fd_info *fi)
{
	/* an O_PATH fd of it is file_reg's, a path */
	return S_ISREG(fi->st.st_mode) && is_deleted_path(fi->path) && !(fi->fi.flags & O_PATH);
}

/* Whether mount id mnt is one the task sees (in its mountinfo). */
static int mount_visible(pid_t pid, int mnt)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read(pid, "mountinfo", &text, NULL);
	if (r < 0)
		return r;
	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (atoi(l) == mnt)
			return 1;
	return 0;
}

/* The mount id of ckpt's own fd. */
static int mount_of(int fd)
{
	_cleanup_free_ char *text = NULL;
	struct proc_fdinfo fi;
	char name[32];
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	int r = proc_read(0, name, &text, NULL);
	if (r >= 0)
		r = proc_parse_fdinfo(text, &fi);
	return r < 0 ? r : fi.mnt_id;
}

/* The device of an ordinary memfd: the kernel's internal shmem mount. */
static int memfd_dev(uint64_t *ret)
{
	struct stat st;
	_cleanup_close_ int fd = memfd_create("ckpt-probe", MFD_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	*ret = st.st_dev;
	return 0;
}

static struct mfd_obj *find_inode(struct ckpt_ctx *ctx, uint64_t dev, uint64_t ino)
{
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_memfd, ino));) {
		struct mfd_obj *m = o->ptr;
		if (!m->is_file && m->dev == dev)
			return m;
	}
	return NULL;
}

/*
 * Why the file open as ckpt's fd (path as the task sees it, " (deleted)"
 * at its end) cannot be saved, or NULL; *ret_memfd says what it is.
 */
static const char *judge(struct task *t, int fd, const char *path, const struct stat *st,
			 bool *ret_memfd, uint64_t *ret_huge, int *ret_err)
{
	int mnt = mount_of(fd);
	int visible = mnt < 0 ? mnt : mount_visible(t->pid, mnt);
	uint64_t dev = 0;

	*ret_err = 0;
	if (visible < 0) {
		*ret_err = visible;
		return "cannot read its mount";
	}
	if (!S_ISREG(st->st_mode))
		return "only regular files that were deleted can be saved";
	struct statfs sfs;
	*ret_huge = 0;
	if (!visible && fstatfs(fd, &sfs) == 0 && sfs.f_type == HUGETLBFS_MAGIC) {
		/* a hugetlb memfd (mm-huge.c); anonymous hugetlb memory is
		 * mm's, only reached here through an fd of map_files */
		if (strncmp(path, "/memfd:", 7))
			return "hugetlb memory (a MAP_HUGETLB mapping) held by an fd: not supported";
		const char *no = mm_huge_refusal((uint64_t)sfs.f_bsize);
		if (no)
			return no;
		*ret_huge = (uint64_t)sfs.f_bsize;
	}
	*ret_memfd = !visible && !strncmp(path, "/memfd:", 7);
	if (*ret_memfd) {
		if (!*ret_huge && (*ret_err = memfd_dev(&dev)) < 0)
			return "cannot make a memfd to compare it with";
		if (!*ret_huge && dev != st->st_dev)
			return "a memfd on an unknown internal filesystem: not supported";
		if (strlen(path) - 7 - SUFFIX_LEN > MFD_NAME_MAX)
			return "its name is too long for a memfd";
		return NULL;
	}
	if (!visible)
		return "an internal kernel file, not on a filesystem ckpt can recreate it on";
	if (path[0] != '/')
		return "not a file ckpt can recreate by path";
	if (st->st_nlink)
		return "it was deleted but still has another name (a hard link), not in its "
		       "directory; not supported yet";
	return NULL;
}

/* Shared memory of /dev/zero held by an fd: "/dev/zero (deleted)" on the
 * internal shmem mount (where memfds live). */
static bool is_dev_zero(pid_t pid, int fd, const char *path, const struct stat *st)
{
	uint64_t dev = 0;
	return !strcmp(path, "/dev/zero (deleted)") && S_ISREG(st->st_mode) && mount_of(fd) >= 0 &&
	       mount_visible(pid, mount_of(fd)) == 0 && memfd_dev(&dev) == 0 &&
	       dev == st->st_dev;
}

/*
 * Another name of the deleted file at path ("DIR/NAME (deleted)", st its
 * stat, still linked): a regular file of the same inode in DIR, put in
 * buf. Returns 1 if found, 0 if not (or DIR cannot be read).
 */
static int other_name(const char *path, const struct stat *st, char *buf, size_t size)
{
	size_t n = strlen(path);
	if (path[0] != '/' || !S_ISREG(st->st_mode) || !st->st_nlink || n <= SUFFIX_LEN)
		return 0;
	const char *slash = memrchr(path, '/', n - SUFFIX_LEN);
	size_t dlen = slash == path ? 1 : (size_t)(slash - path);
	if (dlen + 2 > size)
		return 0;
	memcpy(buf, path, dlen);
	buf[dlen] = '\0';
	_cleanup_closedir_ DIR *d = opendir(buf);
	if (!d)
		return 0;
	int found = 0;
	for (struct dirent *de; !found && (de = readdir(d));) {
		struct stat s;
		if (fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0 ||
		    s.st_dev != st->st_dev || s.st_ino != st->st_ino || !S_ISREG(s.st_mode))
			continue;
		int w = snprintf(buf + dlen, size - dlen, "%s%s", dlen > 1 ? "/" : "", de->d_name);
		found = w > 0 && (size_t)w < size - dlen;
	}
	return found;
}

/*
 * The inode object of the file ckpt holds as fd (an open file of its own,
 * with its own offset), made on first sight; fd is taken either way.
 */
static int get_inode(struct ckpt_ctx *ctx, struct task *t, const char *where, const char *path,
		     int fd, struct mfd_obj **ret)
{
	_cleanup_close_ int own = fd;
	struct stat st;
	bool memfd = false;
	uint64_t huge = 0;
	int err;

	if (fstat(own, &st) < 0)
		return log_fail(&ctx->log, -errno, "pid %d %s (%s): cannot stat it: %s", t->pid,
				where, path, strerror(errno));
	if ((*ret = find_inode(ctx, st.st_dev, st.st_ino)))
		return 0;
	bool dev_zero = is_dev_zero(t->pid, own, path, &st);
	const char *no = dev_zero ? NULL : judge(t, own, path, &st, &memfd, &huge, &err);
	if (no)
		return log_fail(&ctx->log, err ? err : -EOPNOTSUPP, "pid %d %s (%s): %s%s%s",
				t->pid, where, path, no, err ? ": " : "",
				err ? strerror(-err) : "");

	struct mfd_obj *m = calloc(1, sizeof(*m));
	size_t n = strlen(path) - SUFFIX_LEN;
	if (!m || !(m->text = memfd ? strndup(path + 7, n - 7) : strndup(path, n))) {
		free(m);
		return -ENOMEM;
	}
	memfd_entry__init(&m->e);
	/* its path is the container's: made through its tree at restart */
	m->e.in_root = m->e.has_in_root = !memfd && !dev_zero && mnt_own_root(ctx);
	if (memfd) {
		m->e.name = m->text;
		m->e.has_seals = m->e.has_mfd_flags = true;
		int seals = fcntl(own, F_GET_SEALS);
		if (seals < 0) {
			int e = -errno;
			free(m->text);
			free(m);
			return log_fail(&ctx->log, e, "pid %d %s (%s): cannot read its seals: %s",
					t->pid, where, path, strerror(-e));
		}
		m->e.seals = (uint32_t)seals;
		m->e.mfd_flags = m->e.seals != F_SEAL_SEAL ? MFD_ALLOW_SEALING : 0;
		m->e.has_huge_page = huge != 0;
		m->e.huge_page = huge;
	} else {
		m->e.path = m->text;
		m->e.has_dev_zero = m->e.dev_zero = dev_zero;
	}
	m->e.ino = st.st_ino;
	m->e.has_dev = m->e.has_uid = m->e.has_gid = m->e.has_mtime_ns = true;
	m->e.dev = m->dev = st.st_dev;
	m->e.size = (uint64_t)st.st_size;
	m->e.mode = st.st_mode;
	m->e.uid = st.st_uid;
	m->e.gid = st.st_gid;
	m->e.mtime_ns = st.st_mtim.tv_sec * 1000000000ull + st.st_mtim.tv_nsec;
	m->fd = TAKE_FD(own);
	m->rfd = -1;
	struct obj *o;
	int r = objhash_add(&ctx->objs, KIND_memfd, st.st_ino, 0, m, &o);
	if (r < 0) {
		close(m->fd);
		free(m->text);
		free(m);
		return r;
	}
	m->e.id = o->id;
	*ret = m;
	return 0;
}

static int add_file(struct ckpt_ctx *ctx, const struct mfd_obj *ino, uint32_t flags, bool opened,
		    uint64_t pos, pid_t pid, int rfd, uint32_t *ret_id)
{
	struct mfd_obj *f = calloc(1, sizeof(*f));
	struct obj *o;
	if (!f)
		return -ENOMEM;
	f->is_file = true;
	memfd_file_entry__init(&f->f);
	f->f.memfd_id = ino->e.id;
	f->f.flags = flags;
	f->f.has_pos = opened;
	f->f.pos = pos;
	f->dev = ino->dev;
	f->fd = -1;
	f->pid = pid;
	f->rfd = rfd;
	int r = objhash_add(&ctx->objs, KIND_memfd, ino->e.ino, 0, f, &o);
	if (r < 0) {
		free(f);
		return r;
	}
	f->f.id = o->id;
	*ret_id = o->id;
	return 0;
}

/* An open file of ckpt's own on the file ckpt holds as fd (its own offset). */
static int reopen_ro(int fd)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int r = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	return r < 0 ? -errno : r;
}

static int memfd_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			    uint32_t *ret_id)
{
	uint32_t flags = fi->fi.flags & ~(O_CLOEXEC | O_DIRECTORY | O_TMPFILE);
	struct mfd_obj *ino;
	char where[32];

	/* deleted, but linked in its directory: an ordinary file of that name */
	char name[sizeof(fi->path)];
	if (other_name(fi->path, &fi->st, name, sizeof(name))) {
		_cleanup_free_ struct fd_info *alt = malloc(sizeof(*alt));
		if (!alt)
			return -ENOMEM;
		*alt = *fi;
		memcpy(alt->path, name, sizeof(name));
		return file_reg_ops.fd_collect(ctx, t, alt, ret_id);
	}

	/* the same open file as one seen before? (dup, fork) */
	for (struct obj *o = NULL;
	     (o = objhash_next_key(&ctx->objs, o, KIND_memfd, fi->st.st_ino));) {
		struct mfd_obj *f = o->ptr;
		if (f->is_file && fdobj_same(f->pid, f->rfd, t->pid, fi->fd)) {
			*ret_id = o->id;
			return 0;
		}
	}
	if (flags & ~FILE_FLAGS)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): open flags %#o are not supported yet", t->pid,
				fi->fd, fi->path, flags & ~FILE_FLAGS);
	snprintf(where, sizeof(where), "fd %d", fi->fd);
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fi->fd);
	int own = copy < 0 ? copy : reopen_ro(copy);
	if (own < 0)
		return log_fail(&ctx->log, own, "pid %d fd %d (%s): cannot open it: %s", t->pid,
				fi->fd, fi->path, strerror(-own));
	int r = get_inode(ctx, t, where, fi->path, own, &ino);
	if (r < 0)
		return r;
	return add_file(ctx, ino, flags, true, fi->fi.pos, t->pid, fi->fd, ret_id);
}

/* A deleted file or memfd by path as the task sees it through link
 * ("map_files/a-b", "exe"), to be opened with flags (O_RDONLY, O_RDWR) at
 * restart (memfd.h). */
int memfd_collect_path(struct ckpt_ctx *ctx, struct task *t, const char *link, int flags,
			      const char *what, uint32_t *ret_id)
{
	char full[128], path[4096], where[96];
	struct mfd_obj *ino;

	snprintf(full, sizeof(full), "/proc/%d/%s", t->pid, link);
	if (!strncmp(link, "map_files/", 10))
		snprintf(where, sizeof(where), "%s %s", what, link + 10);
	else
		snprintf(where, sizeof(where), "%s", what);
	ssize_t n = readlink(full, path, sizeof(path) - 1);
	int fd = n < 0 ? -1 : open(full, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return log_fail(&ctx->log, -errno, "pid %d %s: cannot open it: %s", t->pid, where,
				strerror(errno));
	path[n] = '\0';
	if (!is_deleted_path(path)) {
		close(fd);
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d %s (%s): not a deleted file",
				t->pid, where, path);
	}
	/* deleted, but linked in its directory: an ordinary file of that name */
	struct stat st;
	char name[4096];
	if (fstat(fd, &st) == 0 && other_name(path, &st, name, sizeof(name))) {
		close(fd);
		return file_reg_collect_named(ctx, t, name, &st, flags, where, ret_id);
	}
	int r = get_inode(ctx, t, where, path, fd, &ino);
	if (r < 0)
		return r;
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_memfd, ino->e.ino));) {
		struct mfd_obj *f = o->ptr;
		if (f->is_file && f->rfd < 0 && f->f.memfd_id == ino->e.id &&
		    f->f.flags == (uint32_t)flags) {
			*ret_id = o->id;
			return 0;
		}
	}
	return add_file(ctx, ino, (uint32_t)flags, false, 0, t->pid, -1, ret_id);
}

/*
 * A shared writable mapping of a memfd sealed with F_SEAL_FUTURE_WRITE
 * (mapped before the seal) could not be mapped again: refused.
 */
static int memfd_collect_end(struct ckpt_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_memfd, o));) {
		struct obj *io;
		struct mfd_obj *f = o->ptr;
		if (!f->is_file || f->rfd >= 0 || (f->f.flags & O_ACCMODE) != O_RDWR ||
		    objhash_get(&ctx->objs, f->f.memfd_id, KIND_memfd, &io) < 0)
			continue;
		const struct mfd_obj *m = io->ptr;
		if (m->e.has_seals && (m->e.seals & F_SEAL_FUTURE_WRITE))
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d mapping (memfd:%s): mapped shared and writable, then "
			    "sealed with F_SEAL_FUTURE_WRITE; not supported yet",
			    f->pid, m->text);
	}
	return 0;
}

/* --- dump: the contents -------------------------------------------------- */

/* The page store's reader: bytes of the file at the extents' offsets;
 * zeros where it has shrunk since (it reads as zeros anyway). */
static int read_contents(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	const struct mfd_obj *m = arg;
	for (size_t i = 0; i < n; i++) {
		uint64_t done = 0;
		while (done < x[i].len) {
			ssize_t got = pread(m->fd, dst + done, x[i].len - done,
					    (off_t)(x[i].off + done));
			if (got < 0)
				return -errno;
			if (got == 0) {
				memset(dst + done, 0, x[i].len - done);
				break;
			}
			done += (uint64_t)got;
		}
		dst += x[i].len;
	}
	return 0;
}

static int dump_data(struct ckpt_ctx *ctx, const struct mfd_obj *m)
{
	struct pages_writer pw;
	uint64_t pos = 0;
	int r = ctx_pages_writer(ctx, &pw, MEMFD_CONTENTS, m->e.id, read_contents, (void *)m);

	while (r >= 0 && pos < m->e.size) {
		off_t data = lseek(m->fd, (off_t)pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;
		off_t hole = data < 0 ? -1 : lseek(m->fd, data, SEEK_HOLE);
		if (hole < 0) {
			r = log_fail(&ctx->log, -errno, "file '%s': cannot find its data: %s",
				     m->text, strerror(errno));
			break;
		}
		hole = MIN((uint64_t)hole, m->e.size);
		if ((uint64_t)data >= (uint64_t)hole)
			break;
		r = pages_add(&pw, (uint64_t)data, (uint64_t)(hole - data));
		pos = (uint64_t)hole;
	}
	if (r >= 0)
		r = pages_flush(&pw);
	if (r < 0 && r != -ENOMEM && pw.w)
		r = log_fail(&ctx->log, r, "file '%s': cannot %s: %s", m->text,
			     pw.read_failed ? "read it" : "write its contents to the image",
			     strerror(-r));
	pages_writer_release(&pw);
	return r;
}

static int memfd_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	/* inodes with their contents first, then their open files */
	for (int pass = 0; pass < 2; pass++) {
		for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_memfd, o));) {
			if (o->dumped)
				continue;
			struct mfd_obj *m = o->ptr;
			int r = 0;
			if (pass == 0 && !m->is_file) {
				r = ctx_write_msg(ctx, MEMFD_ENTRY, &m->e.base);
				if (r >= 0)
					r = dump_data(ctx, m);
			} else if (pass == 1 && m->is_file) {
				r = ctx_write_msg(ctx, MEMFD_FILE, &m->f.base);
			} else {
				continue;
			}
			if (r < 0)
				return r;
			o->dumped = true;
		}
	}
	return 0;
}

/* --- restart: load ------------------------------------------------------- */

static const char *robj_name(const struct mfd_robj *m)
{
	return m->e->name ? m->e->name : m->e->path;
}

static bool entry_valid(const MemfdEntry *e)
{
	if (!e->name == !e->path || (e->mode & ~(uint32_t)(S_IFMT | 07777)) || !S_ISREG(e->mode))
		return false;
	/* a container's path is walked through /proc/ROOT/root: no ".." */
	if (e->in_root && (e->name || e->dev_zero || !mnt_clean_path(e->path, false)))
		return false;
	if (e->name)
		return strlen(e->name) <= MFD_NAME_MAX && !(e->seals & ~(uint32_t)ALL_SEALS) &&
		       (!e->has_huge_page ||
			(mm_huge_size_ok(e->huge_page) && e->size % e->huge_page == 0)) &&
		       !(e->mfd_flags & ~MFD_ALLOW_SEALING) && e->size <= INT64_MAX;
	if (e->dev_zero)
		return !strcmp(e->path, "/dev/zero") && !e->has_seals && e->size <= INT64_MAX;
	size_t n = strlen(e->path);
	return e->path[0] == '/' && n > 1 && n < 4096 && e->path[n - 1] != '/' && !e->has_seals &&
	       e->size <= INT64_MAX;
}

static struct mfd_robj *inode_of(struct rst_ctx *ctx, uint32_t id)
{
	struct obj *o;
	if (objhash_get(&ctx->objs, id, KIND_memfd, &o) < 0)
		return NULL;
	struct mfd_robj *m = o->ptr;
	return m->is_file ? NULL : m;
}

/* A page store record of an inode's contents: inside its size. */
static int load_contents(struct rst_ctx *ctx, const struct img_record *rec)
{
	struct pages_chunk c;
	struct mfd_robj *m = NULL;
	int r = pages_parse(rec, &c);
	if (r >= 0)
		m = inode_of(ctx, c.tag > UINT32_MAX ? 0 : (uint32_t)c.tag);
	if (r >= 0 && !m)
		r = -EINVAL;
	if (r >= 0)
		r = pages_set_add(&m->pages, &c, 0, m->e->size);
	if (r < 0)
		return log_fail(&ctx->log, r, "record %u (memfd/contents): %s", rec->index,
				r == -EINVAL ? "damaged, out of order or outside its memfd object"
					     : pages_strerror(r));
	ctx->data_bytes += c.bytes;
	return 0;
}

static int load_obj(struct rst_ctx *ctx, const struct img_record *rec, bool is_file)
{
	struct mfd_robj *m = calloc(1, sizeof(*m));
	uint32_t id = 0;
	uint64_t key = 0;
	bool ok;

	if (!m)
		return -ENOMEM;
	m->fd = -1;
	m->is_file = is_file;
	if (is_file) {
		m->f = rctx_unpack(ctx, rec, &memfd_file_entry__descriptor);
		struct mfd_robj *ino = m->f ? inode_of(ctx, m->f->memfd_id) : NULL;
		ok = ino && !(m->f->flags & ~(uint32_t)FILE_FLAGS);
		if (ok) {
			id = m->f->id;
			key = ino->e->ino;
		}
	} else {
		m->e = rctx_unpack(ctx, rec, &memfd_entry__descriptor);
		ok = m->e && entry_valid(m->e);
		if (ok) {
			id = m->e->id;
			key = m->e->ino;
		}
	}
	if (ok && !is_file && m->e->has_huge_page) {
		char what[80];
		snprintf(what, sizeof(what), "memfd '%s'", robj_name(m));
		int r = mm_huge_avail(&ctx->log, m->e->huge_page, what);
		if (r < 0) {
			memfd_entry__free_unpacked(m->e, NULL);
			free(m);
			return r;
		}
	}
	if (ok && objhash_add(&ctx->objs, KIND_memfd, key, id, m, NULL) == 0)
		return 0;
	if (m->f)
		memfd_file_entry__free_unpacked(m->f, NULL);
	if (m->e)
		memfd_entry__free_unpacked(m->e, NULL);
	free(m);
	return log_fail(&ctx->log, -EINVAL, "record %u: %s is not valid or defined twice",
			rec->index, is_file ? "memfd open file" : "memfd entry");
}

static int memfd_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	switch (rec->type) {
	case MEMFD_ENTRY:
	case MEMFD_FILE:
		return load_obj(ctx, rec, rec->type == MEMFD_FILE);
	case MEMFD_CONTENTS:
		return load_contents(ctx, rec);
	default:
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown memfd subtype %u",
				rec->index, REC_SUB(rec->type));
	}
}

/* --- restart: make --------------------------------------------------------- */

struct fill_job {
	const struct mfd_robj *m;
	struct progress *progress; /* restart's: these bytes count in it */
	uint8_t *map;              /* hugetlb: the file mapped (no write() there) */
};

static int put_extent(void *arg, uint64_t off, const uint8_t *src, uint64_t len)
{
	const struct fill_job *j = arg;
	const struct mfd_robj *m = j->m;
	if (j->map) {
		if (off > m->e->size || len > m->e->size - off)
			return -EFBIG;
		memcpy(j->map + off, src, len);
		return 0;
	}
	for (uint64_t done = 0; done < len;) {
		ssize_t n = pwrite(m->fd, src + done, len - done, (off_t)(off + done));
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

static int put_chunk(void *arg, const struct pages_chunk *c, uint64_t *ret_off)
{
	const struct fill_job *j = arg;
	*ret_off = c->x[0].off;
	int r = pages_chunk_each(c, put_extent, (void *)j);
	if (r >= 0)
		progress_add(j->progress, c->bytes);
	return r;
}

/* Writes the saved contents into m->fd and gives it its size. */
static int fill(struct rst_ctx *ctx, struct mfd_robj *m)
{
	uint64_t off = 0;
	struct fill_job j = { .m = m, .progress = &ctx->progress };
	bool huge = m->e->has_huge_page;
	/* hugetlbfs has no write(): sized first, written through a mapping
	 * (which takes its huge pages from the pool) */
	if (huge && ftruncate(m->fd, (off_t)m->e->size) < 0)
		return log_fail(&ctx->log, -errno, "file '%s': cannot set its size to %llu: %s",
				robj_name(m), (unsigned long long)m->e->size, strerror(errno));
	if (huge && m->e->size && m->pages.n) {
		void *p = mmap(NULL, m->e->size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
		if (p == MAP_FAILED)
			return log_fail(&ctx->log, -errno, "hugetlb memfd '%s': cannot map it to fill "
					"it: %s", robj_name(m), strerror(errno));
		j.map = p;
	}
	int r = pages_set_apply(&m->pages, 1, put_chunk, &j, &off);
	if (j.map)
		munmap(j.map, m->e->size);
	if (r < 0)
		return log_fail(&ctx->log, r, "file '%s': cannot write its contents near %llu: %s",
				robj_name(m), (unsigned long long)off, pages_strerror(r));
	if (!huge && ftruncate(m->fd, (off_t)m->e->size) < 0)
		return log_fail(&ctx->log, -errno, "file '%s': cannot set its size to %llu: %s",
				robj_name(m), (unsigned long long)m->e->size, strerror(errno));
	return 0;
}

/*
 * Filled: ckpt's fd of the inode becomes read-only, so that no write access
 * of ckpt's is left on it. A deleted program (a task's exe) can be set as
 * a task's exe file then (PR_SET_MM_MAP denies write access to it, EACCES
 * while any fd may write). The open files of the image are opened anew
 * from it, with their own flags.
 */
static int drop_write(struct rst_ctx *ctx, struct mfd_robj *m)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", m->fd);
	int ro = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (ro < 0)
		return log_fail(&ctx->log, -errno, "file '%s': cannot open it read-only: %s",
				robj_name(m), strerror(errno));
	close(m->fd);
	m->fd = ro;
	return 0;
}

static int make_memfd(struct rst_ctx *ctx, struct mfd_robj *m)
{
	const MemfdEntry *e = m->e;
	unsigned flags = MFD_CLOEXEC | (e->mfd_flags & MFD_ALLOW_SEALING);
	if (e->has_huge_page) /* mm-huge.c */
		flags |= MFD_HUGETLB | ((unsigned)__builtin_ctzll(e->huge_page) << MAP_HUGE_SHIFT);
	bool exec = !(e->seals & F_SEAL_EXEC);

	m->fd = memfd_create(e->name, flags | (exec ? MFD_EXEC : 0));
	if (m->fd < 0 && errno == EINVAL && exec) /* a kernel before MFD_EXEC (6.3) */
		m->fd = memfd_create(e->name, flags);
	if (m->fd < 0)
		return log_fail(&ctx->log, -errno, "memfd '%s': cannot make it: %s", e->name,
				strerror(errno));
	int r = fill(ctx, m);
	if (r < 0)
		return r;
	if (fchmod(m->fd, e->mode & 07777) < 0)
		return log_fail(&ctx->log, -errno, "memfd '%s': cannot set its mode %o: %s",
				e->name, e->mode & 07777, strerror(errno));
	int now = fcntl(m->fd, F_GET_SEALS);
	uint32_t add = e->seals & ~(uint32_t)(now < 0 ? 0 : now);
	if (add && fcntl(m->fd, F_ADD_SEALS, add) < 0)
		return log_fail(&ctx->log, -errno, "memfd '%s': cannot add seals %#x: %s", e->name,
				add, strerror(errno));
	now = fcntl(m->fd, F_GET_SEALS);
	if (now < 0 || (uint32_t)now != e->seals)
		return log_fail(&ctx->log, -EINVAL, "memfd '%s': has seals %#x, the image says %#x",
				e->name, now, e->seals);
	return drop_write(ctx, m);
}

/* Shared memory of /dev/zero: the object mm maps (the same inode at
 * checkpoint), filled here, so the fd and the mappings share it again. */
static int make_dev_zero(struct rst_ctx *ctx, struct mfd_robj *m)
{
	int fd;
	int r = mm_shmem_fd(ctx, m->e->ino, m->e->size, &fd);
	if (r < 0)
		return r;
	m->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (m->fd < 0)
		return log_fail(&ctx->log, -errno, "/dev/zero shared memory: cannot take an fd: %s",
				strerror(errno));
	return fill(ctx, m);
}

/* Mode, owner and mtime of a remade deleted file. */
static int set_attrs(struct rst_ctx *ctx, struct mfd_robj *m)
{
	const MemfdEntry *e = m->e;
	if (e->has_uid && e->has_gid && fchown(m->fd, e->uid, e->gid) < 0)
		log_warn(&ctx->log, "deleted file '%s': cannot give it owner %u:%u: %s", e->path,
			 e->uid, e->gid, strerror(errno));
	if (fchmod(m->fd, e->mode & 07777) < 0)
		return log_fail(&ctx->log, -errno, "deleted file '%s': cannot set its mode %o: %s",
				e->path, e->mode & 07777, strerror(errno));
	if (e->has_mtime_ns) {
		struct timespec ts[2] = {
		    {.tv_nsec = UTIME_OMIT},
		    {.tv_sec = (time_t)(e->mtime_ns / 1000000000ull),
		     .tv_nsec = (long)(e->mtime_ns % 1000000000ull)},
		};
		if (futimens(m->fd, ts) < 0)
			log_warn(&ctx->log, "deleted file '%s': cannot set its mtime: %s", e->path,
				 strerror(errno));
	}
	return 0;
}

/*
 * The open files of deleted file m opened with O_NOFOLLOW, opened again
 * while it still has a name (name in dfd) with their flags: through
 * /proc/self/fd, O_NOFOLLOW would refuse the magic link, and without it
 * the flag (which F_GETFL shows) would be lost.
 */
static int open_nofollow(struct rst_ctx *ctx, struct mfd_robj *m, int dfd, const char *name)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_memfd, o));) {
		struct mfd_robj *f = o->ptr;
		if (!f->is_file || f->fd >= 0 || f->f->memfd_id != m->e->id ||
		    !(f->f->flags & O_NOFOLLOW))
			continue;
		f->fd = openat(dfd, name, (int)(f->f->flags & FILE_FLAGS) | O_CLOEXEC | O_NOCTTY);
		if (f->fd < 0)
			return log_fail(&ctx->log, -errno, "deleted file '%s': cannot open it again "
					"(flags %#o): %s", m->e->path, f->f->flags, strerror(errno));
	}
	return 0;
}

/*
 * A deleted file: made as a temporary in its directory, filled, renamed to
 * its old name if that is free (so its link reads "PATH (deleted)"), then
 * unlinked. Nothing is left in the directory, whatever happens.
 */
static int make_deleted(struct rst_ctx *ctx, struct mfd_robj *m)
{
	const char *path = m->e->path;
	_cleanup_free_ char *d = strdup(path), *b = strdup(path);
	char tmp[96], via[4200];
	int r;

	if (!d || !b)
		return -ENOMEM;
	const char *dir = dirname(d), *base = basename(b);
	/* a container's: through its restored tree (/proc/ROOT/root/DIR) */
	if (m->e->in_root && (r = mnt_rst_path(ctx, dir, via, sizeof(via))) < 0)
		return log_fail(&ctx->log, r,
				"deleted file '%s': cannot recreate it before the container's "
				"mounts are made: %s", path, strerror(-r));
	_cleanup_close_ int dfd = open(m->e->in_root ? via : dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return log_fail(&ctx->log, -errno,
				"deleted file '%s': cannot recreate it, its directory '%s' %s: %s",
				path, dir, errno == ENOENT ? "is gone" : "cannot be opened",
				strerror(errno));
	for (int i = 0; m->fd < 0 && i < 100; i++) {
		snprintf(tmp, sizeof(tmp), ".ckpt-%d-%u-%d", getpid(), m->e->id, i);
		m->fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600);
		if (m->fd < 0 && errno != EEXIST)
			break;
	}
	if (m->fd < 0)
		return log_fail(&ctx->log, -errno,
				"deleted file '%s': cannot create a file in '%s': %s", path, dir,
				strerror(errno));
	const char *name = tmp;
	r = fill(ctx, m);
	if (r >= 0)
		r = set_attrs(ctx, m);
	if (r >= 0 && renameat2(dfd, tmp, dfd, base, RENAME_NOREPLACE) == 0)
		name = base;
	else if (r >= 0)
		log_info(&ctx->log, "deleted file '%s': %s; it reads as '%s/%s (deleted)' now",
			 path, errno == EEXIST ? "a file has its name again" : strerror(errno), dir,
			 tmp);
	if (r >= 0)
		r = open_nofollow(ctx, m, dfd, name);
	if (r >= 0)
		r = drop_write(ctx, m);
	if (unlinkat(dfd, name, 0) < 0 && r >= 0)
		r = log_fail(&ctx->log, -errno, "deleted file '%s': cannot unlink it again: %s",
			     path, strerror(errno));
	return r;
}

static int open_file(struct rst_ctx *ctx, struct mfd_robj *f)
{
	struct mfd_robj *ino = inode_of(ctx, f->f->memfd_id);
	char path[64];

	if (!ino || ino->fd < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ino->fd);
	/* one with O_NOFOLLOW was opened by its name (make_deleted): a magic
	 * link of /proc is never followed with it */
	if (f->fd < 0)
		f->fd = open(path, (int)(f->f->flags & FILE_FLAGS) | O_CLOEXEC | O_NOCTTY);
	if (f->fd < 0)
		return log_fail(&ctx->log, -errno,
				"file '%s': cannot open it again (flags %#o): %s", robj_name(ino),
				f->f->flags, strerror(errno));
	if (f->f->has_pos && f->f->pos && !(f->f->flags & O_PATH) &&
	    lseek(f->fd, (off_t)f->f->pos, SEEK_SET) < 0)
		return log_fail(&ctx->log, -errno, "file '%s': cannot seek to %llu: %s",
				robj_name(ino), (unsigned long long)f->f->pos, strerror(errno));
	f->e = ino->e; /* for messages; owned by the inode */
	return 0;
}

/* m (an inode or an open file of one) is a container's deleted file */
static bool in_root(struct rst_ctx *ctx, const struct mfd_robj *m)
{
	const struct mfd_robj *ino = m->is_file ? inode_of(ctx, m->f->memfd_id) : m;
	return ino && ino->e->in_root;
}

static int memfd_prepare(struct rst_ctx *ctx)
{
	for (int pass = 0; pass < 2; pass++) {
		for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_memfd, o));) {
			struct mfd_robj *m = o->ptr;
			int r = 0;
			if (in_root(ctx, m))
				continue; /* made on first use, through the container's tree */
			if (pass == 0 && !m->is_file)
				r = m->e->name	   ? make_memfd(ctx, m)
				    : m->e->dev_zero ? make_dev_zero(ctx, m)
						     : make_deleted(ctx, m);
			else if (pass == 1 && m->is_file)
				r = open_file(ctx, m);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int memfd_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct mfd_robj *m = robj;
	if (m->is_file && m->fd < 0 && in_root(ctx, m)) { /* from root ready on */
		struct mfd_robj *ino = inode_of(ctx, m->f->memfd_id);
		int r = ino->fd < 0 ? make_deleted(ctx, ino) : 0;
		if (r < 0 || (r = open_file(ctx, m)) < 0)
			return r;
	}
	if (!m->is_file || m->fd < 0)
		return log_fail(&ctx->log, -EINVAL,
				"an fd or vma refers to a memfd object, not an open file of it");
	*ret_fd = m->fd;
	return 0;
}

static void memfd_free_obj(void *ptr)
{
	struct mfd_obj *m = ptr;
	if (!m)
		return;
	if (!m->is_file && m->fd >= 0)
		close(m->fd);
	free(m->text);
	free(m);
}

static void memfd_free_robj(void *ptr)
{
	struct mfd_robj *m = ptr;
	if (!m)
		return;
	if (m->fd >= 0)
		close(m->fd);
	pages_set_release(&m->pages);
	if (m->f)
		memfd_file_entry__free_unpacked(m->f, NULL);
	else if (m->e)
		memfd_entry__free_unpacked(m->e, NULL);
	free(m);
}

static const ProtobufCMessageDescriptor *memfd_descriptor(uint32_t sub)
{
	switch (sub) {
	case REC_SUB(MEMFD_ENTRY):
		return &memfd_entry__descriptor;
	case REC_SUB(MEMFD_FILE):
		return &memfd_file_entry__descriptor;
	default:
		return NULL; /* MEMFD_CONTENTS: raw */
	}
}

/* --- mappings ------------------------------------------------------------ */

/* A mapping of a memfd or of a deleted file. */
static bool memfd_vma_claim(const struct proc_vma *pv)
{
	return pv->path[0] && pv->deleted;
}

static int memfd_vma_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
			     VmaEntry *v)
{
	char link[64];
	mm_vma_link(pv, link, sizeof(link));
	v->kind = VMA_KIND__VMA_FILE;
	v->has_file_id = true;
	return memfd_collect_path(ctx, t, link, mm_vma_flags(pv), "mapping", &v->file_id);
}

static int memfd_vma_check(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
{
	return mm_check_file_vmas(ctx, t, e, KID_memfd);
}

const struct kind_ops memfd_ops = {
    .fd_claim = memfd_fd_claim,
    .fd_claim_rank = 3, /* deleted regular files, before file_reg */
    .fd_collect = memfd_fd_collect,
    .fd_get = memfd_fd_get,
    .collect_end = memfd_collect_end,
    .dump = memfd_dump,
    .load = memfd_load,
    .prepare = memfd_prepare,
    .free_obj = memfd_free_obj,
    .free_robj = memfd_free_robj,
    .descriptor = memfd_descriptor,
    .vma_claim = memfd_vma_claim,
    .vma_collect = memfd_vma_collect,
    .vma_check = memfd_vma_check,
    .vma_map = mm_map_file,
    .vma_prio = 20, /* before file_reg; after sysv, whose segments read deleted */
};
