/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cwd, root and umask. At restart the directories are opened on ckpt's
 * side (with the caller's rights), passed in, and entered with fchdir; a
 * root other than "/" is entered with chroot(".") from inside it. A cwd or
 * root that was removed (its link reads "PATH (deleted)" and it has no
 * links) is made again and removed once entered (file_reg_deleted_dir).
 * A puppet in its cwd already (its cwd link reads the path and is the same
 * directory: a task forked by a puppet has ckpt's cwd) is not passed it, and
 * gets no umask call if it has the umask: two stops a process fewer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/checks.h"
#include "files.pb-c.h"
#include "kinds/file-reg.h"
#include "kinds/mnt.h"
#include "util/cleanup.h"

enum { FS_ENTRY = REC_TYPE(KID_fs, 1) };

struct fs_ckpt {
	FsEntry e;
	DeletedDir cwd_gone, root_gone;
	char cwd[4096], root[4096];
};

/* The directory at /proc/PID/name; *ret_gone set if it was removed. */
static int read_dir_link(struct ckpt_ctx *ctx, struct task *t, const char *name, char *buf,
			 size_t len, DeletedDir *gone, DeletedDir **ret_gone)
{
	char link[64];
	struct stat st;
	snprintf(link, sizeof(link), "/proc/%d/%s", t->pid, name);
	ssize_t n = readlink(link, buf, len - 1);
	if (n < 0 || stat(link, &st) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot read its %s: %s", t->pid, name,
				strerror(errno));
	buf[n] = '\0';
	if (st.st_nlink || n <= 10 || strcmp(buf + n - 10, " (deleted)"))
		return 0;
	buf[n - 10] = '\0';
	deleted_dir__init(gone);
	gone->mode = st.st_mode;
	gone->uid = st.st_uid;
	gone->gid = st.st_gid;
	*ret_gone = gone;
	return 0;
}

static int fs_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct fs_ckpt *f;
	int r;

	if (t->fs_with) /* saved with the task it is shared with */
		return 0;
	f = task_state(t, KIND_fs, sizeof(*f));
	if (!f)
		return -ENOMEM;
	fs_entry__init(&f->e);
	if ((r = read_dir_link(ctx, t, "cwd", f->cwd, sizeof(f->cwd), &f->cwd_gone,
			       &f->e.cwd_deleted)) < 0 ||
	    (r = read_dir_link(ctx, t, "root", f->root, sizeof(f->root), &f->root_gone,
			       &f->e.root_deleted)) < 0)
		return r;
	f->e.cwd = f->cwd;
	f->e.root = f->root;
	f->e.umask = t->status.umask;
	return 0;
}

static int fs_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct fs_ckpt *f = t->kstate[KIND_fs];
	return f ? ctx_write_msg(ctx, FS_ENTRY, &f->e.base) : 0;
}

const char *fs_entry_invalid(const FsEntry *e)
{
	if (e->cwd[0] != '/' || e->root[0] != '/')
		return "a cwd or root that is not an absolute path";
	if (e->umask > 0777)
		return "a umask above 0777";
	return NULL;
}

static int fs_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	FsEntry *e = rctx_load_one(ctx, t, rec, KIND_fs, FS_ENTRY, &fs_entry__descriptor);
	const char *why = e ? fs_entry_invalid(e) : NULL;
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: fs of pid %d: %s", rec->index,
				t->pid, why);
	return e ? 0 : -EINVAL;
}

/*
 * The puppet is in directory fd (path at) already: its cwd link reads at
 * and is that directory (a task forked by a puppet has ckpt's cwd, most
 * often the program's too). Then nothing is passed nor entered.
 */
static bool in_it_already(const struct rst_task *t, int fd, const char *at)
{
	char link[64], now[4200];
	struct stat a, b;
	snprintf(link, sizeof(link), "/proc/%d/cwd", t->pup.pid);
	ssize_t n = readlink(link, now, sizeof(now) - 1);
	if (n <= 0)
		return false;
	now[n] = '\0';
	return !strcmp(now, at) && fstat(fd, &a) == 0 && stat(link, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* umask (if not negative), unless the puppet has it already. A process
 * whose calls are queued (rst_calls) queues it: a call in a batch it runs
 * anyway costs less than reading its status to know (nothing after fs
 * makes a file in it) */
static int set_umask(struct rst_ctx *ctx, struct rst_task *t, long umask)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status st;
	if (umask >= 0 && rst_calls_queued(ctx, t)) {
		struct puppet_call c = PUPPET_CALL(SYS_umask, umask);
		static const char *const what[] = { "umask" };
		return rst_calls(ctx, t, &c, what, NULL, 1);
	}
	if (umask < 0 || (proc_read(t->pup.pid, "status", &text, NULL) == 0 &&
			  strstr(text, "\nUmask:") && proc_parse_status(text, &st) == 0 &&
			  st.umask == (uint32_t)umask))
		return 0;
	long r = puppet_syscall(&t->pup, SYS_umask, umask);
	return r < 0 ? log_fail(&ctx->log, (int)r, "pid %d: umask failed: %s", t->pid,
				strerror((int)-r))
		     : 0;
}

/* Opens dir on ckpt's side (made again if it was removed: gone) and makes
 * the puppet fchdir into it; umask too (if not negative), in the same
 * batch as the fchdir and the close: two stops, not four. */
static int enter_dir(struct rst_ctx *ctx, struct rst_task *t, const char *dir,
		     const DeletedDir *gone, long umask)
{
	_cleanup_close_ int fd = -1;
	char in_root[4200]; /* a container with a root of its own: through its tree */
	const char *at = mnt_rst_path(ctx, dir, in_root, sizeof(in_root)) < 0 ? dir : in_root;
	if (gone) {
		int r = file_reg_deleted_dir(ctx, at, gone, O_PATH, &fd);
		if (r < 0)
			return r;
	} else if ((fd = open(at, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot open directory '%s': %s", t->pid,
				dir, strerror(errno));
	if (!gone && in_it_already(t, fd, at))
		return set_umask(ctx, t, umask);
	int rfd = puppet_send_fd(&t->pup, ctx->ctl[0], ctx->ctl_remote, fd);
	if (rfd < 0)
		return log_fail(&ctx->log, rfd, "pid %d: cannot pass '%s': %s", t->pid, dir,
				strerror(-rfd));
	struct puppet_call c[3] = { PUPPET_CALL(SYS_fchdir, rfd), PUPPET_CALL(SYS_close, rfd),
				    PUPPET_CALL(SYS_umask, umask) };
	long r = puppet_syscalls(&t->pup, c, umask < 0 ? 2 : 3);
	if (r >= 0)
		r = c[0].ret;
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d: cannot enter '%s': %s", t->pid, dir,
				strerror((int)-r));
	return 0;
}

static int fs_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	FsEntry *e = t->kstate[KIND_fs];
	int r;

	if (!e)
		return 0;
	if (strcmp(e->root, "/")) {
		r = enter_dir(ctx, t, e->root, e->root_deleted, -1);
		if (r < 0)
			return r;
		uint64_t dot = puppet_scratch_put(&t->pup, 0, ".", 2);
		long c = puppet_syscall(&t->pup, SYS_chroot, dot);
		if (c < 0)
			return log_fail(&ctx->log, (int)c, "pid %d: chroot to '%s' failed: %s",
					t->pid, e->root, strerror((int)-c));
	}
	return enter_dir(ctx, t, e->cwd, e->cwd_deleted, (long)e->umask);
}

static const ProtobufCMessageDescriptor *fs_descriptor(uint32_t sub)
{
	return sub == REC_SUB(FS_ENTRY) ? &fs_entry__descriptor : NULL;
}

/* Every process has its own, or its parent's (CLONE_FS). */
static int fs_loaded(struct rst_ctx *ctx, struct rst_task *t)
{
	return t->fs_with ? 0 : rst_require(ctx, t, KIND_fs);
}

const struct kind_ops fs_ops = {
	.collect = fs_collect,
	.dump = fs_dump,
	.load = fs_load,
	.loaded = fs_loaded,
	.restore = fs_restore,
	.free_state = free,
	.descriptor = fs_descriptor,
};
