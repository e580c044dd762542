/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kinds/file-reg.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/mm.h"
#include "kinds/mnt.h"
#include "files.pb-c.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"

enum { FILE_REG_ENTRY = REC_TYPE(KID_file_reg, 1) };

/* A file mapped shared up to this size is saved, to be made again if
 * someone removed it before the restart (the JVM that finds another's
 * hsperfdata file stale deletes it). */
#define REMAKE_MAX (1u << 20)

/* A file mapped private up to this size has the crc32c of its contents
 * saved: a restart finding it modified (mtime) checks they are the same. */
#define CRC_MAX (32u << 20)

/* checkpoint: one object */
struct file_obj {
	FileRegEntry e;
	uint8_t *remake;        /* e.remake's bytes */
	DeletedDir gone;        /* e.deleted_dir points here */
	char *path;
	struct fdobj of;        /* a task holding it, its fd there (-1: a mapped file) */
};

/* restart: one object */
struct file_rst {
	FileRegEntry *e;
	int fd;
};

static const char *const mem_devices[] = {
	[3] = "/dev/null", [5] = "/dev/zero", [7] = "/dev/full", [8] = "/dev/random",
	[9] = "/dev/urandom",
};

static bool is_mem_device(const struct stat *st)
{
	unsigned maj = major(st->st_rdev), min = minor(st->st_rdev);
	return S_ISCHR(st->st_mode) && maj == 1 && min < ARRAY_SIZE(mem_devices) &&
	       mem_devices[min];
}

/* Why a mapped file (or exe, cwd) cannot be saved, or NULL. */
static const char *refusal(const char *path, const struct stat *st)
{
	size_t n = strlen(path);
	if (!strcmp(path, "anon_inode:[io_uring]"))
		return "the rings of an io_uring instance: not supported (ckpt does not make "
		       "io_uring instances again: the rings' contents, registered files and "
		       "buffers would be lost, and requests in flight cannot be read from the "
		       "kernel, their submission entries consumed)";
	if (!strncmp(path, "anon_inode:", 11))
		return "mappings of anonymous-inode files are not supported yet";
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !is_mem_device(st))
		return "only regular files can be mapped and restored";
	if (n > 10 && !strcmp(path + n - 10, " (deleted)"))
		return "files that were deleted are not supported yet";
	if (path[0] != '/')
		return "not a file ckpt can reopen by path";
	return NULL;
}

static int add_obj(struct ckpt_ctx *ctx, struct task *t, const char *path, const struct stat *st,
		   uint32_t flags, uint64_t pos, int fd, uint32_t *ret_id)
{
	struct file_obj *f = calloc(1, sizeof(*f));
	struct obj *o;
	int r;

	if (!f || !(f->path = strdup(path))) {
		free(f);
		return -ENOMEM;
	}
	file_reg_entry__init(&f->e);
	f->e.path = f->path;
	f->e.flags = flags;
	f->e.has_pos = fd >= 0; /* opened, not mapped */
	f->e.pos = pos;
	f->e.mode = st->st_mode;
	f->e.has_size = f->e.has_dev = f->e.has_ino = f->e.has_mtime_ns = true;
	f->e.size = st->st_size;
	f->e.dev = st->st_dev;
	f->e.ino = st->st_ino;
	f->e.mtime_ns = st->st_mtim.tv_sec * 1000000000ull + st->st_mtim.tv_nsec;
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		f->e.has_rdev = true;
		f->e.rdev = st->st_rdev;
	}
	f->of = (struct fdobj){ .pid = t->pid, .fd = fd };
	f->e.in_root = f->e.has_in_root = mnt_inside(ctx, path, st);
	r = objhash_add(&ctx->objs, KIND_file_reg, st->st_ino, 0, f, &o);
	if (r < 0) {
		free(f->path);
		free(f);
		return r;
	}
	f->e.id = o->id;
	*ret_id = o->id;
	return 0;
}

static bool file_reg_fd_claim(const struct fd_info *fi)
{
	/* an O_PATH fd is only a path, whatever it leads to (a FIFO, a
	 * socket, a device, a symlink itself with O_NOFOLLOW); message queues
	 * and deleted files are claimed before (fd_claim_rank) */
	if (fi->fi.flags & O_PATH)
		return true;
	return S_ISREG(fi->st.st_mode) || S_ISDIR(fi->st.st_mode) || is_mem_device(&fi->st);
}

/* An open directory since removed: its path without " (deleted)". */
static int collect_deleted_dir(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			       uint32_t *ret_id)
{
	char path[4096];
	snprintf(path, sizeof(path), "%.*s", (int)(strlen(fi->path) - 10), fi->path);
	if (path[0] != '/')
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): not a directory ckpt can make again by path",
				t->pid, fi->fd, fi->path);
	struct obj *o = fdobj_find(ctx, KIND_file_reg, fi->st.st_ino,
				   offsetof(struct file_obj, of), t->pid, fi->fd);
	if (o) {
		*ret_id = o->id;
		return 0;
	}
	int r = add_obj(ctx, t, path, &fi->st, fi->fi.flags & ~O_CLOEXEC, fi->fi.pos, fi->fd,
			ret_id);
	if (r < 0)
		return r;
	struct file_obj *f = objhash_find(&ctx->objs, *ret_id)->ptr;
	deleted_dir__init(&f->gone);
	f->gone.mode = fi->st.st_mode;
	f->gone.uid = fi->st.st_uid;
	f->gone.gid = fi->st.st_gid;
	f->e.deleted_dir = &f->gone;
	return 0;
}

/* The pid of a "/proc/PID" or "/proc/PID/..." path, 0 for any other path. */
static pid_t proc_path_pid(const char *path)
{
	if (strncmp(path, "/proc/", 6) || path[6] < '1' || path[6] > '9')
		return 0;
	char *end;
	long pid = strtol(path + 6, &end, 10);
	return (*end == '/' || !*end) && pid > 0 && pid < (1 << 22) ? (pid_t)pid : 0;
}

/* Is the image pid (as the tasks' procfs shows it) a task of the image? */
static bool pid_in_image(struct ckpt_ctx *ctx, pid_t vpid)
{
	for (size_t i = 0; i < ctx->ntasks; i++) {
		const struct task *t = &ctx->tasks[i];
		if (t->vpid == vpid && !t->zombie)
			return true;
		for (size_t j = 0; j < t->nthreads; j++)
			if (t->threads[j].vpid == vpid)
				return true;
	}
	return false;
}

static int file_reg_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			       uint32_t *ret_id)
{
	size_t n = strlen(fi->path);
	bool gone_dir = S_ISDIR(fi->st.st_mode) && fi->st.st_nlink == 0 && n > 10 &&
			!strcmp(fi->path + n - 10, " (deleted)");

	if (gone_dir)
		return collect_deleted_dir(ctx, t, fi, ret_id);
	if (n > 10 && !strcmp(fi->path + n - 10, " (deleted)"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): open files that were deleted are not supported yet",
				t->pid, fi->fd, fi->path);
	if (fi->path[0] != '/')
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): not a file ckpt can reopen by path", t->pid,
				fi->fd, fi->path);
	if ((fi->fi.flags & O_PATH) && !S_ISREG(fi->st.st_mode) && !S_ISDIR(fi->st.st_mode) &&
	    !S_ISLNK(fi->st.st_mode) && !S_ISFIFO(fi->st.st_mode) && !S_ISSOCK(fi->st.st_mode) &&
	    !S_ISCHR(fi->st.st_mode) && !S_ISBLK(fi->st.st_mode))
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (%s): O_PATH fd of an "
				"unknown file type", t->pid, fi->fd, fi->path);
	/* the same open file as one seen before? (dup, fork) */
	struct obj *o = fdobj_find(ctx, KIND_file_reg, fi->st.st_ino,
				   offsetof(struct file_obj, of), t->pid, fi->fd);
	if (o) {
		*ret_id = o->id;
		return 0;
	}
	pid_t proc_pid = proc_path_pid(fi->path);
	if (proc_pid && !pid_in_image(ctx, proc_pid))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a /proc file of a process outside the image",
				t->pid, fi->fd, fi->path);
	int r = add_obj(ctx, t, fi->path, &fi->st, fi->fi.flags & ~O_CLOEXEC, fi->fi.pos, fi->fd,
			ret_id);
	if (r >= 0 && proc_pid) {
		struct file_obj *f = objhash_find(&ctx->objs, *ret_id)->ptr;
		f->e.has_proc_pid = true;
		f->e.proc_pid = proc_pid;
	}
	return r;
}

int file_reg_collect_path(struct ckpt_ctx *ctx, struct task *t, const char *link, int flags,
			  const char *what, uint32_t *ret_id)
{
	char full[128], path[4096];
	struct stat st;
	ssize_t n;

	if (link[0] == '/') { /* a path already (a mapping, map_files not readable) */
		char seen[4200];
		snprintf(path, sizeof(path), "%s", link);
		if (stat(mnt_seen(ctx, path, seen, sizeof(seen)), &st) < 0)
			return log_fail(&ctx->log, -errno, "pid %d %s (%s): cannot inspect: %s",
					t->pid, what, path, strerror(errno));
	} else {
		snprintf(full, sizeof(full), "/proc/%d/%s", t->pid, link);
		n = readlink(full, path, sizeof(path) - 1);
		if (n < 0 || stat(full, &st) < 0)
			return log_fail(&ctx->log, -errno, "pid %d %s: cannot inspect: %s", t->pid,
					what, strerror(errno));
		path[n] = '\0';
	}
	return file_reg_collect_named(ctx, t, path, &st, flags, what, ret_id);
}

int file_reg_collect_named(struct ckpt_ctx *ctx, struct task *t, const char *path,
			   const struct stat *st, int flags, const char *what, uint32_t *ret_id)
{
	const char *no = refusal(path, st);
	if (no)
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d %s (%s): %s", t->pid, what, path,
				no);

	for (struct obj *o = NULL;
	     (o = objhash_next_key(&ctx->objs, o, KIND_file_reg, st->st_ino));) {
		struct file_obj *f = o->ptr;
		if (f->of.fd < 0 && f->e.dev == st->st_dev && f->e.flags == (uint32_t)flags &&
		    !strcmp(f->path, path)) {
			*ret_id = o->id;
			return 0;
		}
	}
	return add_obj(ctx, t, path, st, flags, 0, -1, ret_id);
}

static int file_reg_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_file_reg, o));) {
		if (o->dumped)
			continue;
		struct file_obj *f = o->ptr;
		int r = ctx_write_msg(ctx, FILE_REG_ENTRY, &f->e.base);
		if (r < 0)
			return r;
		o->dumped = true;
	}
	return 0;
}

/* --- restart --------------------------------------------------------- */

static int file_reg_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != FILE_REG_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown file_reg subtype %u",
				rec->index, REC_SUB(rec->type));
	FileRegEntry *e = rctx_unpack(ctx, rec, &file_reg_entry__descriptor);
	if (!e)
		return -EINVAL;
	struct file_rst *f = calloc(1, sizeof(*f));
	if (!f) {
		file_reg_entry__free_unpacked(e, NULL);
		return -ENOMEM;
	}
	f->e = e;
	f->fd = -1;
	uint32_t id = e->id; /* e is freed on failure */
	int r = objhash_add(&ctx->objs, KIND_file_reg, e->ino, id, f, NULL);
	if (r < 0) {
		file_reg_entry__free_unpacked(e, NULL);
		free(f);
		return log_fail(&ctx->log, -EINVAL, "record %u: file object %u %s", rec->index, id,
				r == -EEXIST ? "is defined twice" : "cannot be added");
	}
	if (!e->path[0] || e->path[0] != '/')
		return log_fail(&ctx->log, -EINVAL, "record %u: file object %u has no absolute path",
				rec->index, e->id);
	if (e->has_remake && (!S_ISREG(e->mode) || e->remake.len > REMAKE_MAX ||
			      !e->has_size || e->remake.len != e->size))
		return log_fail(&ctx->log, -EINVAL, "record %u: file object %u: its saved contents "
				"are not valid", rec->index, e->id);
	return 0;
}

int file_reg_deleted_dir(struct rst_ctx *ctx, const char *path, const DeletedDir *d, int flags,
			 int *ret_fd)
{
	char tmp[4096];
	const char *name = path;
	if (mkdir(path, 0700) < 0 && errno == EEXIST) {
		for (int i = 0; i < 100; i++) {
			snprintf(tmp, sizeof(tmp), "%s.ckpt-%d-%d", path, (int)getpid(), i);
			if (mkdir(tmp, 0700) == 0 || errno != EEXIST)
				break;
		}
		name = tmp;
	}
	if (access(name, F_OK) < 0)
		return log_fail(&ctx->log, -errno,
				"directory '%s' (deleted): cannot make it again to open it: %m", path);
	int fd = open(name, flags | O_DIRECTORY | O_CLOEXEC);
	int r = fd < 0 ? -errno : 0;
	if (r == 0 && (chown(name, d->uid, d->gid) < 0 || chmod(name, d->mode & 07777) < 0))
		r = -errno;
	rmdir(name);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return log_fail(&ctx->log, r, "directory '%s' (deleted): cannot make it again: %s",
				path, strerror(-r));
	}
	*ret_fd = fd;
	return 0;
}

/* A small file mapped shared, gone since the checkpoint: made again, new
 * (O_EXCL: nothing in its place is replaced), with the saved bytes. */
static int remake(struct rst_ctx *ctx, const FileRegEntry *e, const char *path)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				      e->mode & 07777);
	if (fd < 0 || write(fd, e->remake.data, e->remake.len) != (ssize_t)e->remake.len ||
	    (e->has_remake_uid && fchown(fd, e->remake_uid, e->remake_gid) < 0) ||
	    fchmod(fd, e->mode & 07777) < 0) {
		int err = errno;
		if (fd >= 0)
			unlink(path);
		return log_fail(&ctx->log, -err, "file '%s': gone, and it cannot be made again: %s",
				e->path, strerror(err));
	}
	log_info(&ctx->log, "file '%s': gone since the checkpoint; made again from the image",
		 e->path);
	return 0;
}

static int open_one(struct rst_ctx *ctx, struct file_rst *f, const char *path)
{
	const FileRegEntry *e = f->e;
	int flags = (int)(e->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC)) | O_CLOEXEC | O_NOCTTY;
	struct stat st;

	if (S_ISDIR(e->mode))
		flags |= O_DIRECTORY;
	if (flags & O_PATH) /* only O_PATH's own flags; a symlink itself */
		flags &= O_PATH | O_CLOEXEC | O_NOCTTY | O_DIRECTORY | O_NOFOLLOW;
	if ((flags & O_PATH) && S_ISLNK(e->mode))
		flags |= O_NOFOLLOW;
	if (e->deleted_dir) {
		int r = file_reg_deleted_dir(ctx, path, e->deleted_dir, flags & ~O_CLOEXEC, &f->fd);
		if (r < 0)
			return r;
	} else {
		f->fd = open(path, flags);
		if (f->fd < 0 && errno == ENOENT && e->has_remake && remake(ctx, e, path) == 0)
			f->fd = open(path, flags);
	}
	if (f->fd < 0)
		return log_fail(&ctx->log, -errno, "file '%s': cannot open: %s", e->path,
				strerror(errno));
	if (fstat(f->fd, &st) < 0)
		return -errno;
	if ((st.st_mode & S_IFMT) != (e->mode & S_IFMT))
		return log_fail(&ctx->log, -ESTALE, "file '%s': is no longer the same type of file",
				e->path);
	if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && e->has_rdev && st.st_rdev != e->rdev)
		return log_fail(&ctx->log, -ESTALE, "file '%s': device number changed", e->path);
	if (e->has_pos && e->pos && S_ISREG(st.st_mode) && !(flags & O_PATH) &&
	    lseek(f->fd, (off_t)e->pos, SEEK_SET) < 0)
		return log_fail(&ctx->log, -errno, "file '%s': cannot seek to %llu: %s", e->path,
				(unsigned long long)e->pos, strerror(errno));
	return 0;
}

/* The crc32c of the first size bytes of fd; -errno. */
static int64_t file_crc(int fd, uint64_t size)
{
	_cleanup_free_ uint8_t *buf = malloc(1 << 20);
	uint32_t crc = 0;
	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; off < size;) {
		ssize_t n = pread(fd, buf, MIN((uint64_t)1 << 20, size - off), (off_t)off);
		if (n <= 0)
			return n < 0 ? -errno : -ESTALE;
		crc = img_crc32c(crc, buf, (size_t)n);
		off += (uint64_t)n;
	}
	return crc;
}

/*
 * A mapped file must still be the file that was mapped: a different size
 * is refused (pages would move or vanish); a different mtime, since
 * rewriting the same bytes (or touch) changes it too, is refused only when
 * the contents saved as a crc differ (pages a private mapping never wrote
 * would show other bytes), and reported otherwise; a file mapped private
 * with no crc (over CRC_MAX, or unreadable then) is refused unless
 * RESTART_CHANGED_FILES; one mapped shared only is reported.
 */
static int check_mapped(struct rst_ctx *ctx, struct file_rst *f)
{
	struct stat st;
	if (fstat(f->fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	uint64_t mtime = st.st_mtim.tv_sec * 1000000000ull + st.st_mtim.tv_nsec;
	if ((uint64_t)st.st_size != f->e->size)
		return log_fail(&ctx->log, -ESTALE,
				"file '%s': its size changed since the checkpoint (%llu, was %llu); "
				"a mapped file must be the same",
				f->e->path, (unsigned long long)st.st_size,
				(unsigned long long)f->e->size);
	if (mtime == f->e->mtime_ns)
		return 0;
	if (!f->e->has_content_crc && !f->e->mapped_private) {
		/* mapped shared only: it shows the file as it is now */
		log_warn(&ctx->log, "file '%s': modified since the checkpoint (same size)",
			 f->e->path);
		return 0;
	}
	if (!f->e->has_content_crc) {
		if (ctx->flags & RESTART_CHANGED_FILES) {
			log_warn(&ctx->log, "file '%s': modified since the checkpoint (same size), "
				 "accepted: a private mapping of it may show new bytes where the "
				 "process never wrote", f->e->path);
			return 0;
		}
		return log_fail(&ctx->log, -ESTALE,
				"file '%s': modified since the checkpoint (same size, another "
				"mtime), and its contents were not kept to compare (over %u MiB): "
				"a private mapping of it could show new bytes where the process "
				"never wrote (restart --accept-changed-files takes it as it is "
				"now)", f->e->path, CRC_MAX >> 20);
	}
	int64_t crc = file_crc(f->fd, f->e->size);
	if (crc < 0)
		return log_fail(&ctx->log, (int)crc, "file '%s': cannot read it to compare: %s",
				f->e->path, strerror((int)-crc));
	if ((uint32_t)crc != f->e->content_crc)
		return log_fail(
		    &ctx->log, -ESTALE,
		    "file '%s': its contents changed since the checkpoint (same size); "
		    "a private mapping of it would show the new bytes where the process "
		    "never wrote",
		    f->e->path);
	log_info(&ctx->log, "file '%s': modified since the checkpoint, same contents", f->e->path);
	return 0;
}

/*
 * A file of /proc/PID, opened when first asked for (every task exists
 * then): a container's through its own procfs (its root's /proc), a
 * subtree's through ckpt's by the pid ckpt sees for the task.
 */
static int open_proc(struct rst_ctx *ctx, struct file_rst *f)
{
	const FileRegEntry *e = f->e;
	const struct rst_task *to = tree_find(ctx, e->proc_pid);
	char path[4096];
	if (!to || to->zombie)
		return log_fail(&ctx->log, -EINVAL, "file '%s': its process is not in the image",
				e->path);
	const char *rest = strchr(e->path + 6, '/');
	if (ctx->root_clone)
		snprintf(path, sizeof(path), "/proc/%d/root%s", ctx->tasks[0].pup.pid, e->path);
	else
		snprintf(path, sizeof(path), "/proc/%d%s", to->pup.pid, rest ? rest : "");
	return open_one(ctx, f, path);
}

/* A file of a container's own root, through its new mount tree. */
static int open_in_root(struct rst_ctx *ctx, struct file_rst *f)
{
	char path[4200];
	int r = mnt_rst_path(ctx, f->e->path, path, sizeof(path));
	if (r < 0)
		return log_fail(&ctx->log, -EINVAL, "file '%s': of a container's root, but the "
				"image has no mount tree", f->e->path);
	r = open_one(ctx, f, path);
	if (r >= 0 && !f->e->has_pos)
		r = check_mapped(ctx, f);
	return r;
}

static int prepare_one(struct rst_ctx *ctx, void *obj)
{
	struct file_rst *f = obj;
	/* its process, or its container's mounts, do not exist yet */
	if (f->e->has_proc_pid || f->e->in_root)
		return 0;
	int r = open_one(ctx, f, f->e->path);
	/* an opened file may have changed, a mapped one may not */
	if (r >= 0 && !f->e->has_pos)
		r = check_mapped(ctx, f);
	return r;
}

static int file_reg_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare(ctx, KIND_file_reg, prepare_one);
}

int file_reg_fd(struct rst_ctx *ctx, uint32_t id, int *ret_fd)
{
	struct obj *o;
	int r = objhash_get(&ctx->objs, id, KIND_file_reg, &o);
	if (r < 0)
		return log_fail(&ctx->log, -EINVAL, "image refers to file object %u, which %s", id,
				r == -ENOENT ? "it does not define" : "is not a file");
	struct file_rst *f = o->ptr;
	if (f->fd < 0)
		return -EBADF;
	*ret_fd = f->fd;
	return 0;
}

static int file_reg_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct file_rst *f = robj;
	if (f->fd < 0 && (f->e->has_proc_pid || f->e->in_root)) {
		int r = f->e->has_proc_pid ? open_proc(ctx, f) : open_in_root(ctx, f);
		if (r < 0)
			return r;
	}
	if (f->fd < 0)
		return -EBADF;
	*ret_fd = f->fd;
	return 0;
}

const char *file_reg_path(struct rst_ctx *ctx, uint32_t id)
{
	struct obj *o;
	if (objhash_get(&ctx->objs, id, KIND_file_reg, &o) < 0)
		return "?";
	return ((struct file_rst *)o->ptr)->e->path;
}

static const ProtobufCMessageDescriptor *file_reg_descriptor(uint32_t sub)
{
	return sub == REC_SUB(FILE_REG_ENTRY) ? &file_reg_entry__descriptor : NULL;
}

static void file_reg_free_obj(void *ptr)
{
	struct file_obj *f = ptr;
	if (f) {
		free(f->path);
		free(f->remake);
		free(f);
	}
}

static void file_reg_free_robj(void *ptr)
{
	struct file_rst *f = ptr;
	if (f) {
		if (f->fd >= 0)
			close(f->fd);
		if (f->e)
			file_reg_entry__free_unpacked(f->e, NULL);
		free(f);
	}
}

/* Before --kill: could this caller open again, with the same access, every
 * file t holds first? (restart opens them on ckpt's side, as the caller) */
static int file_reg_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_file_reg, o));) {
		struct file_obj *f = o->ptr;
		if (f->of.pid != t->pid)
			continue;
		int acc = (int)(f->e.flags & O_ACCMODE), mode = R_OK;
		if (f->e.flags & O_PATH)
			mode = F_OK;
		else if (acc == O_WRONLY)
			mode = W_OK;
		else if (acc == O_RDWR)
			mode = R_OK | W_OK;
		/* a removed directory is made again: its parent must let us */
		char parent[4096];
		const char *path = f->path;
		if (f->e.deleted_dir) {
			snprintf(parent, sizeof(parent), "%s", f->path);
			char *slash = strrchr(parent, '/');
			if (slash)
				slash[slash == parent] = '\0';
			path = parent;
			mode = W_OK | X_OK;
		}
		/* a file of a container's root: through it (the tree is made again) */
		char via[4200];
		if (f->e.in_root) {
			snprintf(via, sizeof(via), "/proc/%d/root%s", ctx->tasks[0].pid, path);
			path = via;
		}
		if (faccessat(AT_FDCWD, path, mode, AT_EACCESS) == 0)
			continue;
		int e = errno;
		char where[32] = "mapping";
		if (f->of.fd >= 0)
			snprintf(where, sizeof(where), "fd %d", f->of.fd);
		return log_fail(&ctx->log, -e,
				"pid %d %s (%s): a restart by uid %u could not open it again %s: %s",
				t->pid, where, f->path, (unsigned)geteuid(),
				f->e.deleted_dir ? "(a removed directory, made again in its parent)"
				: mode == W_OK	 ? "for writing"
				: mode == F_OK	 ? "(O_PATH)"
				: mode == R_OK	 ? "for reading"
						 : "for reading and writing",
				strerror(e));
	}
	return 0;
}

/* --- mappings ------------------------------------------------------------ */

/* A mapping of a file that is still there (deleted ones are memfd.c's);
 * anonymous memory is claimed first, by mm. An anon_inode mapping (an
 * io_uring ring...) is refused by file_reg_collect_path, naming it. */
static bool file_reg_vma_claim(const struct proc_vma *pv)
{
	return pv->path[0] && !pv->deleted;
}

/* A small regular file mapped shared: its bytes, read once, through the
 * mapping's link (the file mapped, whatever its name now). */
static int keep_contents(struct ckpt_ctx *ctx, struct task *t, const char *link, uint32_t id)
{
	struct obj *o;
	struct file_obj *f = objhash_get(&ctx->objs, id, KIND_file_reg, &o) == 0 ? o->ptr : NULL;
	if (!f || f->remake || !S_ISREG(f->e.mode) || f->e.size > REMAKE_MAX)
		return 0;
	_cleanup_close_ int fd = open(link, O_RDONLY | O_CLOEXEC); /* a /proc link */
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size != f->e.size)
		return 0; /* not kept: a restart then needs the file, as for any other */
	f->remake = malloc(f->e.size ? f->e.size : 1);
	if (!f->remake)
		return -ENOMEM;
	ssize_t n = pread(fd, f->remake, f->e.size, 0);
	if (n != (ssize_t)f->e.size) {
		free(f->remake);
		f->remake = NULL;
		return 0;
	}
	f->e.has_remake = f->e.has_remake_uid = f->e.has_remake_gid = true;
	f->e.remake = (ProtobufCBinaryData){ .len = f->e.size, .data = f->remake };
	f->e.remake_uid = st.st_uid;
	f->e.remake_gid = st.st_gid;
	log_debug(&ctx->log, "pid %d: file '%s' (mapped shared, %llu bytes) kept in the image",
		  t->pid, f->path, (unsigned long long)f->e.size);
	return 0;
}

/* A regular file mapped private, up to CRC_MAX: the crc32c of its
 * contents, once per file object, read through the mapping's link. */
static int keep_crc(struct ckpt_ctx *ctx, const char *link, uint32_t id)
{
	struct obj *o;
	struct file_obj *f = objhash_get(&ctx->objs, id, KIND_file_reg, &o) == 0 ? o->ptr : NULL;
	if (f && S_ISREG(f->e.mode))
		f->e.has_mapped_private = f->e.mapped_private = true;
	if (!f || f->e.has_content_crc || !S_ISREG(f->e.mode) || f->e.size > CRC_MAX)
		return 0;
	_cleanup_close_ int fd = open(link, O_RDONLY | O_CLOEXEC); /* a /proc link */
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size != f->e.size)
		return 0; /* not kept: a changed mtime is then only reported */
	int64_t crc = file_crc(fd, f->e.size);
	if (crc == -ENOMEM)
		return -ENOMEM;
	if (crc >= 0) {
		f->e.has_content_crc = true;
		f->e.content_crc = (uint32_t)crc;
	}
	return 0;
}

/*
 * The mapped files a task's vmas were found to be by map_files (a stat and
 * a readlink each): a later vma of the same file (the same device, inode,
 * deletion and maps path), in the task or in a child of it, takes the
 * path and stat found without asking again. The path is what ckpt sees
 * (maps shows the same, relative to ckpt's root), whichever task maps it;
 * a forked child maps its parent's files at the same places: 3 files, 6
 * calls, a child of the benchmark's tree. Found by a hash of device and
 * inode (a list looked through made 4,000 mapped files of one process 30%
 * slower to collect than asking map_files each time).
 */
struct file_reg_seen {
	uint32_t dev_major, dev_minor;
	uint64_t ino;
	bool deleted;
	char *maps_path, *path;
	struct stat st;
};

struct file_reg_files {
	struct file_reg_seen *v;
	size_t n, cap;
	uint32_t *slot; /* open addressing: an index of v plus one, 0 empty */
	size_t nslot;   /* a power of two, at least twice n */
};

static size_t seen_hash(uint32_t major, uint32_t minor, uint64_t ino, size_t nslot)
{
	uint64_t h = (ino ^ (uint64_t)major << 44 ^ (uint64_t)minor << 24) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & (nslot - 1);
}

/* v[i] into the slots, or the slots made again twice as many; -ENOMEM */
static int seen_index(struct file_reg_files *l, size_t i)
{
	if (2 * (i + 1) > l->nslot) {
		size_t nslot = l->nslot ? 2 * l->nslot : 16;
		uint32_t *slot = calloc(nslot, sizeof(*slot));
		if (!slot)
			return -ENOMEM;
		free(l->slot);
		l->slot = slot;
		l->nslot = nslot;
		for (size_t j = 0; j < i; j++)
			(void)seen_index(l, j);
	}
	const struct file_reg_seen *f = &l->v[i];
	size_t k = seen_hash(f->dev_major, f->dev_minor, f->ino, l->nslot);
	while (l->slot[k])
		k = (k + 1) & (l->nslot - 1);
	l->slot[k] = (uint32_t)i + 1;
	return 0;
}

static void file_reg_free_state(void *state)
{
	struct file_reg_files *l = state;
	for (size_t i = 0; l && i < l->n; i++) {
		free(l->v[i].maps_path);
		free(l->v[i].path);
	}
	if (l) {
		free(l->v);
		free(l->slot);
	}
	free(l);
}

static const struct file_reg_seen *seen_file(const struct file_reg_files *l,
					     const struct proc_vma *pv)
{
	if (!l || !l->nslot)
		return NULL;
	size_t k = seen_hash(pv->dev_major, pv->dev_minor, pv->ino, l->nslot);
	for (; l->slot[k]; k = (k + 1) & (l->nslot - 1)) {
		const struct file_reg_seen *f = &l->v[l->slot[k] - 1];
		if (f->dev_major == pv->dev_major && f->dev_minor == pv->dev_minor &&
		    f->ino == pv->ino && f->deleted == pv->deleted &&
		    !strcmp(f->maps_path, pv->path))
			return f;
	}
	return NULL;
}

/* pv's file as t or its parent found it, or NULL */
static const struct file_reg_seen *same_file(struct ckpt_ctx *ctx, const struct task *t,
					     const struct proc_vma *pv)
{
	const struct file_reg_seen *f = seen_file(t->kstate[KIND_file_reg], pv);
	const struct task *parent = f ? NULL : ctx_find_task(ctx, t->stat.ppid);
	return f ? f : parent ? seen_file(parent->kstate[KIND_file_reg], pv) : NULL;
}

static void remember_file(struct task *t, const struct proc_vma *pv, const char *path,
			  const struct stat *st)
{
	struct file_reg_files *l = task_state(t, KIND_file_reg, sizeof(*l));
	if (!l || seen_file(l, pv))
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct file_reg_seen *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	struct file_reg_seen f = { pv->dev_major, pv->dev_minor, pv->ino, pv->deleted,
				   strdup(pv->path), strdup(path), *st };
	if (!f.maps_path || !f.path) {
		free(f.maps_path);
		free(f.path);
		return;
	}
	l->v[l->n] = f;
	/* not found again if it cannot be indexed: asked of map_files again */
	if (seen_index(l, l->n) == 0)
		l->n++;
	else
		free(f.maps_path), free(f.path);
}

static int file_reg_vma_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
				VmaEntry *v)
{
	char link[64], full[96], what[48], path[4096];
	struct stat st;
	int flags = mm_vma_flags(pv);
	int r;

	mm_vma_link(pv, link, sizeof(link));
	snprintf(what, sizeof(what), "vma %llx-%llx", (unsigned long long)pv->start,
		 (unsigned long long)pv->end);
	v->kind = VMA_KIND__VMA_FILE;
	v->has_file_id = true;
	/* map_files needs CAP_CHECKPOINT_RESTORE: without it, the path maps
	 * shows, if it is still the file mapped (same inode) */
	snprintf(full, sizeof(full), "/proc/%d/%s", t->pid, link);
	const struct file_reg_seen *seen = same_file(ctx, t, pv);
	if (seen) {
		r = file_reg_collect_named(ctx, t, seen->path, &seen->st, flags, what, &v->file_id);
		goto keep;
	}
	int sr = stat(full, &st);
	if (sr < 0 && errno == EPERM) {
		char seen[4200];
		if (stat(mnt_seen(ctx, pv->path, seen, sizeof(seen)), &st) < 0 ||
		    st.st_ino != pv->ino)
			return log_fail(&ctx->log, -EPERM,
					"pid %d vma %llx-%llx (%s): the mapped file cannot be "
					"identified without CAP_CHECKPOINT_RESTORE",
					t->pid, (unsigned long long)pv->start,
					(unsigned long long)pv->end, pv->path);
		return file_reg_collect_path(ctx, t, pv->path, flags, what, &v->file_id);
	}
	ssize_t n = sr == 0 ? readlink(full, path, sizeof(path) - 1) : -1;
	if (n >= 0) { /* the stat above was map_files' */
		path[n] = '\0';
		r = file_reg_collect_named(ctx, t, path, &st, flags, what, &v->file_id);
		if (r >= 0)
			remember_file(t, pv, path, &st);
	} else {
		r = file_reg_collect_path(ctx, t, link, flags, what, &v->file_id);
	}
keep:
	if (r < 0)
		return r;
	return pv->shared ? keep_contents(ctx, t, full, v->file_id)
			  : keep_crc(ctx, full, v->file_id);
}

static int file_reg_vma_check(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
{
	return mm_check_file_vmas(ctx, t, e, KID_file_reg);
}

const struct kind_ops file_reg_ops = {
	.check_restore = file_reg_check_restore,
	.dump = file_reg_dump,
	.load = file_reg_load,
	.prepare = file_reg_prepare,
	.fd_claim = file_reg_fd_claim,
	.fd_claim_rank = 4, /* after the kinds of special regular files */
	.fd_collect = file_reg_fd_collect,
	.fd_get = file_reg_fd_get,
	.free_obj = file_reg_free_obj,
	.free_robj = file_reg_free_robj,
	.free_state = file_reg_free_state,
	.descriptor = file_reg_descriptor,
	.vma_claim = file_reg_vma_claim,
	.vma_collect = file_reg_vma_collect,
	.vma_check = file_reg_vma_check,
	.vma_map = mm_map_file,
	.vma_prio = 30, /* any path: after the kinds of special files */
};
