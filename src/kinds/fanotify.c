/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fanotify groups. A group is an open file description (shared between
 * fds as kcmp says); its fdinfo gives "fanotify flags:F event-flags:E"
 * (the fanotify_init arguments) and one line per mark, newest first:
 *   fanotify ino:I sdev:D mflags:M mask:K ignored_mask:G fhandle-...  inode
 *   fanotify mnt_id:N mflags:M mask:K ignored_mask:G                  mount
 *   fanotify sdev:D mflags:M mask:K ignored_mask:G                    filesystem
 * (numbers in hex; mflags is FAN_MARK_IGNORED_SURV_MODIFY, FAN_MARK_EVICTABLE
 * and FAN_MARK_IGNORE, the flags a mark keeps). Each mark is saved with a
 * path to its object: an inode by its file handle, as inotify watches are
 * found (fsnotify.h); a mount by its mount point in ckpt's mountinfo, which
 * statx must show to be that mount (not covered by another); a filesystem
 * by the root of one of its mounts there.
 *
 * Refused, by pid and fd: queued events (FIONREAD on a copy of the fd:
 * reading them would take them from the task); permission events (a mark
 * asking for them would hold up the restart itself, ckpt opening the files
 * it restores, before the task could answer), and, for a group of a
 * permission class, any task of the system waiting for a permission
 * decision (its wchan; the kernel does not say of which group); a mark
 * whose object has no path any more, a mount of another mount namespace
 * or under another mount, a mount namespace mark; a group held by a task
 * of another user namespace (the group belongs to its creator's: ckpt
 * would make it in its own, where the task may not add mount marks).
 *
 * Whether a group was made without CAP_SYS_ADMIN is not shown either; it
 * is taken to be unprivileged when its flags allow that (a file-handle or
 * mount report mode, no privileged flag) and the task ckpt first finds it
 * in does not have CAP_SYS_ADMIN in its effective set. Such a group hides
 * other processes' pids in its events; at restart it is made with
 * CAP_SYS_ADMIN dropped from ckpt's effective set for the call.
 *
 * Restart: the group is made on ckpt's side by fanotify_init with the same
 * flags and its marks added, oldest first, by path: the mask, then the
 * ignore mask (FAN_MARK_IGNORE or FAN_MARK_IGNORED_MASK, with
 * FAN_MARK_IGNORED_SURV_MODIFY, FAN_MARK_EVICTABLE as saved). The kernel
 * silently skips some of that (an ignore mask that does not survive
 * modification, on a file open for writing), so ckpt reads its fdinfo back
 * and fails the restart naming a mark that did not come out the same. An
 * inode that is not the one of the checkpoint, or another mount at the
 * mount point, is warned about. Once every task is built (restore_end), the
 * events queued meanwhile, ckpt's own work among them, are read off: the
 * group starts empty, as it was saved; events of the downtime are not
 * delivered.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/ctx.h"
#include "fanotify.pb-c.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/fsnotify.h"
#include "util/cleanup.h"

enum { FANOTIFY_ENTRY = REC_TYPE(KID_fanotify, 1) };
enum { MARK_INODE, MARK_MOUNT, MARK_FS, MARK_TYPES };

#ifndef FAN_REPORT_FD_ERROR
#define FAN_REPORT_FD_ERROR 0x00002000
#endif
#ifndef FAN_REPORT_MNT
#define FAN_REPORT_MNT 0x00004000
#endif
#ifndef FAN_PRE_ACCESS
#define FAN_PRE_ACCESS 0x00100000
#endif

/* the kernel's: glibc's O_LARGEFILE is 0 on 64-bit, the kernel adds it there */
#define KERNEL_O_LARGEFILE 0100000

#define FAN_MAX_MARKS (1u << 20)
#define INIT_KNOWN    0x7fffu /* FAN_CLOEXEC .. FAN_REPORT_MNT */
#define INIT_ADMIN                                                                                 \
	(FAN_CLASS_CONTENT | FAN_CLASS_PRE_CONTENT | FAN_REPORT_TID | FAN_REPORT_PIDFD |           \
	 FAN_REPORT_FD_ERROR | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS)
#define INIT_FID   (FAN_REPORT_FID | FAN_REPORT_DIR_FID | FAN_REPORT_NAME | FAN_REPORT_TARGET_FID)
#define INIT_CLASS (FAN_CLASS_CONTENT | FAN_CLASS_PRE_CONTENT)
#define EVENT_F_KNOWN                                                                              \
	(O_ACCMODE | O_APPEND | O_NONBLOCK | O_SYNC | O_DSYNC | O_CLOEXEC | KERNEL_O_LARGEFILE |   \
	 O_NOATIME)
#define MFLAGS_KNOWN (FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_EVICTABLE | FAN_MARK_IGNORE)
#define MASK_PERM    (FAN_OPEN_PERM | FAN_ACCESS_PERM | FAN_OPEN_EXEC_PERM | FAN_PRE_ACCESS)
/* notification events and the two event flags: what a restored mark may ask for */
#define MASK_KEPT (0x1fffu | FAN_FS_ERROR | FAN_RENAME | FAN_EVENT_ON_CHILD | FAN_ONDIR)
#define DRAIN_MAX 4096 /* reads of the queue in restore_end */

static const unsigned mark_type_flag[MARK_TYPES] = {FAN_MARK_INODE, FAN_MARK_MOUNT,
						    FAN_MARK_FILESYSTEM};
static const char *const mark_type_name[MARK_TYPES] = {"inode", "mount", "filesystem"};

/* one fdinfo mark line, as parsed */
struct raw_mark {
	int type; /* MARK_*, -1 for a mount namespace mark */
	uint64_t ino;
	uint32_t sdev, mnt_id, mflags, mask, ignored;
	struct fsnotify_handle fh;
	bool has_handle;
};

/* checkpoint: one group */
struct fanotify_obj {
	struct fdobj f;
	FanotifyEntry e;
	FanotifyMark *m;
	FanotifyMark **pm;
	size_t cap;
};

/* restart: a group is a struct fdobj_r, its record: */
static const FanotifyEntry *entry(const struct fdobj_r *p)
{
	return p->msg;
}

static bool fanotify_claim(const struct fd_info *fi)
{
	return !strcmp(fi->path, "anon_inode:[fanotify]");
}

static void fanotify_free(void *ptr)
{
	struct fanotify_obj *p = ptr;
	for (size_t i = 0; i < p->e.n_marks; i++) {
		free(p->m[i].path);
		free(p->m[i].handle.data);
	}
	free(p->m);
	free(p->pm);
}

/* "fanotify ino:.. sdev:.. mflags:.. mask:.. ignored_mask:.. [fhandle...]",
 * "fanotify mnt_id:.. ...", "fanotify sdev:.. ...", "fanotify mnt_ns:.. ..." */
static int parse_mark(char *line, struct raw_mark *rm)
{
	unsigned long long ino = 0;
	unsigned bytes = 0, type = 0, n;
	bool ino_seen = false, sdev_seen = false, mnt_seen = false, ns_seen = false;
	const char *hex = NULL;
	int seen = 0;

	memset(rm, 0, sizeof(*rm));
	for (char *save, *tok = strtok_r(line + 9, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		ino_seen |= sscanf(tok, "ino:%llx", &ino) == 1;
		sdev_seen |= sscanf(tok, "sdev:%x", &rm->sdev) == 1;
		mnt_seen |= sscanf(tok, "mnt_id:%x", &rm->mnt_id) == 1;
		ns_seen |= sscanf(tok, "mnt_ns:%u", &n) == 1;
		seen += sscanf(tok, "mflags:%x", &rm->mflags) == 1;
		seen += sscanf(tok, "mask:%x", &rm->mask) == 1;
		seen += sscanf(tok, "ignored_mask:%x", &rm->ignored) == 1;
		sscanf(tok, "fhandle-bytes:%x", &bytes);
		sscanf(tok, "fhandle-type:%x", &type);
		if (!strncmp(tok, "f_handle:", 9))
			hex = tok + 9;
	}
	if (seen != 3 || ino_seen + mnt_seen + ns_seen > 1 || (ino_seen && !sdev_seen) ||
	    (!ino_seen && !mnt_seen && !ns_seen && !sdev_seen))
		return -EINVAL;
	rm->type = ns_seen ? -1 : mnt_seen ? MARK_MOUNT : ino_seen ? MARK_INODE : MARK_FS;
	rm->ino = ino;
	rm->has_handle = hex != NULL;
	return hex ? fsnotify_parse_handle(hex, bytes, (int)type, &rm->fh) : 0;
}

/* Each mark line of an fdinfo text, and its "flags:/event-flags:" line. */
static int parse_fdinfo(char *text, uint32_t *ret_flags, uint32_t *ret_ef,
			int (*each)(void *arg, struct raw_mark *rm), void *arg)
{
	bool head = false;
	int r;

	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (sscanf(line, "fanotify flags:%x event-flags:%x", ret_flags, ret_ef) == 2) {
			head = true;
			continue;
		}
		if (strncmp(line, "fanotify ", 9))
			continue;
		struct raw_mark rm;
		if ((r = parse_mark(line, &rm)) < 0 || (r = each(arg, &rm)) < 0)
			return r;
	}
	return head ? 0 : -EINVAL;
}

/* --- checkpoint: the object of each mark -------------------------------- */

/* The mount point of mount id in ckpt's mountinfo (malloc'd), and its root
 * in the file system. */
static int mount_point(uint32_t id, dev_t *ret_dev, char **ret_path)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read(0, "mountinfo", &text, NULL);
	if (r < 0)
		return r;
	for (char *line = text; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		unsigned mid, ma, mi;
		char root[4096], mnt[4096];
		if (sscanf(line, "%u %*d %u:%u %4095s %4095s", &mid, &ma, &mi, root, mnt) != 5 ||
		    mid != id)
			continue;
		fsnotify_unescape(mnt);
		*ret_dev = makedev(ma, mi);
		*ret_path = strdup(mnt);
		return *ret_path ? 0 : -ENOMEM;
	}
	return -ENOENT;
}

/* The mount id statx gives for path (the mount it resolves to), and
 * whether path is that mount's root. */
static int mount_of(const char *path, uint32_t *ret_id, bool *ret_root, struct stat *ret_st)
{
	struct statx sx;
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID | STATX_BASIC_STATS, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	*ret_id = (uint32_t)sx.stx_mnt_id;
	*ret_root = (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
		    (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
	memset(ret_st, 0, sizeof(*ret_st));
	ret_st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	ret_st->st_ino = sx.stx_ino;
	ret_st->st_mode = sx.stx_mode;
	return 0;
}

/* A mount mark: the mount's mount point, which must resolve to it. */
static const char *find_mount(const struct raw_mark *rm, FanotifyMark *m)
{
	struct stat st;
	uint32_t got;
	bool root;
	dev_t dev;
	int r = mount_point(rm->mnt_id, &dev, &m->path);
	if (r == -ENOMEM)
		return "cannot be looked up: out of memory";
	if (r < 0)
		return "is not in ckpt's mount namespace";
	if (mount_of(m->path, &got, &root, &st) < 0 || got != rm->mnt_id || !root)
		return "is hidden under another mount";
	m->dev = st.st_dev;
	m->has_mnt_id = true;
	m->mnt_id = rm->mnt_id;
	return NULL;
}

/* A filesystem mark: the mount point of one of its mounts in ckpt's
 * mountinfo that is not covered. */
static const char *find_fs(const struct raw_mark *rm, FanotifyMark *m)
{
	_cleanup_free_ char *text = NULL;
	dev_t dev = fsnotify_dev(rm->sdev);
	if (proc_read(0, "mountinfo", &text, NULL) < 0)
		return "cannot be looked up: no mountinfo";
	for (char *line = text; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		unsigned mid, ma, mi;
		uint32_t got;
		bool root;
		struct stat st;
		char mnt[4096];
		if (sscanf(line, "%u %*d %u:%u %*s %4095s", &mid, &ma, &mi, mnt) != 4 ||
		    makedev(ma, mi) != dev)
			continue;
		fsnotify_unescape(mnt);
		if (mount_of(mnt, &got, &root, &st) < 0 || got != mid || st.st_dev != dev)
			continue;
		m->path = strdup(mnt);
		m->dev = dev;
		return m->path ? NULL : "cannot be looked up: out of memory";
	}
	return "has no mount in ckpt's mount namespace";
}

static const char *find_inode(struct task *t, const struct raw_mark *rm, FanotifyMark *m,
			      int *ret_r)
{
	struct stat st;
	*ret_r = rm->has_handle
		     ? fsnotify_resolve(t->pid, &rm->fh, rm->sdev, rm->ino, &m->path, &st)
		     : -EOPNOTSUPP;
	if (*ret_r < 0)
		return fsnotify_why_unresolved(*ret_r);
	m->dev = st.st_dev;
	m->has_ino = m->has_mode = true;
	m->ino = st.st_ino;
	m->mode = st.st_mode;
	m->has_handle = m->has_handle_type = true;
	m->handle_type = (uint32_t)rm->fh.type;
	m->handle.len = rm->fh.bytes;
	m->handle.data = malloc(rm->fh.bytes ? rm->fh.bytes : 1);
	if (!m->handle.data) {
		*ret_r = -ENOMEM;
		return "cannot be saved: out of memory";
	}
	memcpy(m->handle.data, rm->fh.data, rm->fh.bytes);
	return NULL;
}

static const char *mask_refused(const struct raw_mark *rm)
{
	uint32_t both = rm->mask | rm->ignored;
	if (rm->type < 0)
		return "marks of mount namespaces are not supported";
	if (both & MASK_PERM)
		return "permission events are not supported: the restart would wait on them";
	if ((both & ~MASK_KEPT) || (rm->mflags & ~MFLAGS_KNOWN))
		return "unknown mask bits or mark flags";
	if (!both)
		return "a mark with no events";
	return NULL;
}

struct collect_arg {
	struct ckpt_ctx *ctx;
	struct task *t;
	int fd;
	struct fanotify_obj *p;
};

static int grow(struct fanotify_obj *p)
{
	if (p->e.n_marks < p->cap)
		return 0;
	size_t cap = p->cap ? 2 * p->cap : 8;
	FanotifyMark *nm = realloc(p->m, cap * sizeof(*nm));
	if (!nm)
		return -ENOMEM;
	p->m = nm;
	p->cap = cap;
	return 0;
}

/* One mark line at checkpoint: checked, its object found. */
static int collect_mark(void *arg, struct raw_mark *rm)
{
	struct collect_arg *a = arg;
	struct fanotify_obj *p = a->p;
	char what[96];
	const char *why = mask_refused(rm);
	int r = 0;

	if (rm->type == MARK_INODE)
		snprintf(what, sizeof(what), "inode %llu on %u:%u", (unsigned long long)rm->ino,
			 rm->sdev >> 20, rm->sdev & 0xfffff);
	else if (rm->type == MARK_MOUNT)
		snprintf(what, sizeof(what), "mount %u", rm->mnt_id);
	else
		snprintf(what, sizeof(what), "file system %u:%u", rm->sdev >> 20,
			 rm->sdev & 0xfffff);
	if (p->e.n_marks >= FAN_MAX_MARKS)
		why = "too many marks";
	if (!why && (r = grow(p)) < 0)
		return r;
	FanotifyMark *m = why ? NULL : &p->m[p->e.n_marks];
	if (m) {
		fanotify_mark__init(m);
		m->path = NULL;
		p->e.n_marks++;
		m->type = (uint32_t)rm->type;
		m->mflags = rm->mflags;
		m->mask = rm->mask;
		m->ignored_mask = rm->ignored;
		why = rm->type == MARK_INODE   ? find_inode(a->t, rm, m, &r)
		      : rm->type == MARK_MOUNT ? find_mount(rm, m)
					       : find_fs(rm, m);
	}
	if (!why)
		return 0;
	return log_fail(&a->ctx->log, r == -ENOMEM ? r : -EOPNOTSUPP,
			"pid %d fd %d (fanotify): the mark on %s: %s", a->t->pid, a->fd,
			rm->type < 0 ? "a mount namespace" : what, why);
}

/* A task of the system that waits for an answer to a permission event. */
static pid_t perm_waiter(void)
{
	char path[600], buf[64];
	_cleanup_closedir_ DIR *d = opendir("/proc");
	pid_t found = 0;

	for (struct dirent *de; d && !found && (de = readdir(d));) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/task", de->d_name);
		_cleanup_closedir_ DIR *td = opendir(path);
		for (struct dirent *te; td && !found && (te = readdir(td));) {
			snprintf(path, sizeof(path), "/proc/%s/task/%s/wchan", de->d_name,
				 te->d_name);
			_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
			ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
			buf[n > 0 ? n : 0] = '\0';
			if (!strcmp(buf, "fanotify_handle_event") ||
			    !strcmp(buf, "fanotify_get_response"))
				found = atoi(te->d_name);
		}
	}
	return found;
}

/* The user namespace of pid is ckpt's own. */
static bool same_userns(pid_t pid)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	return stat(path, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

/* pid 0: ckpt */
static bool init_userns(void)
{
	_cleanup_free_ char *text = NULL;
	unsigned in, out, count;
	if (proc_read(0, "uid_map", &text, NULL) < 0)
		return false;
	return sscanf(text, "%u %u %u", &in, &out, &count) == 3 && in == 0 && out == 0 &&
	       count == 4294967295u &&
	       !strchr(strchr(text, '\n') ? strchr(text, '\n') + 1 : "", '\n');
}

static int check_group(struct ckpt_ctx *ctx, struct task *t, int fd, struct fanotify_obj *p)
{
	FanotifyEntry *e = &p->e;
	if (!same_userns(t->pid))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (fanotify): the task is in another user namespace; "
				"the group would be made in ckpt's",
				t->pid, fd);
	if ((e->init_flags & ~INIT_KNOWN) || (e->event_f_flags & ~(uint32_t)EVENT_F_KNOWN))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (fanotify): unknown flags %#x event-flags %#x",
				t->pid, fd, e->init_flags, e->event_f_flags);
	pid_t w = (e->init_flags & INIT_CLASS) ? perm_waiter() : 0;
	if (w > 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (fanotify): task %d waits for a permission decision "
				"(of this group?); pending permission events cannot be saved",
				t->pid, fd, w);
	bool may_unpriv =
	    !(e->init_flags & INIT_ADMIN) && (e->init_flags & (INIT_FID | FAN_REPORT_MNT));
	bool admin = t->status.cap_eff & (1ull << CAP_SYS_ADMIN);
	e->unpriv = may_unpriv && (!admin || !init_userns());
	return 0;
}

static int read_group(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		      struct fanotify_obj *p)
{
	_cleanup_free_ char *text = NULL;
	struct collect_arg a = {ctx, t, fi->fd, p};
	char name[32];
	int r;

	snprintf(name, sizeof(name), "fdinfo/%d", fi->fd);
	r = proc_read(t->pid, name, &text, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (fanotify): cannot read its fdinfo: %s",
				t->pid, fi->fd, strerror(-r));
	r = parse_fdinfo(text, &p->e.init_flags, &p->e.event_f_flags, collect_mark, &a);
	if (r == -EINVAL)
		return log_fail(&ctx->log, r, "pid %d fd %d (fanotify): cannot parse its fdinfo",
				t->pid, fi->fd);
	return r < 0 ? r : check_group(ctx, t, fi->fd, p);
}

static int fanotify_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			    void *obj)
{
	struct fanotify_obj *p = obj;
	int r = fsnotify_check_queue(ctx, t, fi->fd, "fanotify");
	if (r < 0)
		return r;
	p->e.flags = fi->fi.flags & O_NONBLOCK;
	r = read_group(ctx, t, fi, p);
	if (r >= 0 && p->e.n_marks && !(p->pm = calloc(p->e.n_marks, sizeof(*p->pm))))
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < p->e.n_marks; i++)
		p->pm[i] = &p->m[i];
	p->e.marks = p->pm;
	return r;
}

/* --- restart --------------------------------------------------------- */

static const char *invalid_mark(const FanotifyMark *m)
{
	uint32_t both = m->mask | m->ignored_mask;
	if (m->type >= MARK_TYPES)
		return "a mark of an unknown type";
	if ((both & ~MASK_KEPT) || !both || (m->mflags & ~MFLAGS_KNOWN))
		return "a mark with no events, or unknown mask bits or flags";
	if ((m->mflags & FAN_MARK_EVICTABLE) && m->type != MARK_INODE)
		return "an evictable mark not on an inode";
	if (m->path[0] != '/')
		return "a mark has no absolute path";
	if (m->type == MARK_MOUNT && !m->has_mnt_id)
		return "a mount mark without its mount id";
	if (m->type == MARK_INODE && (!m->has_ino || !m->has_mode))
		return "an inode mark without its inode";
	if (m->type == MARK_INODE && !S_ISDIR(m->mode) && !S_ISREG(m->mode) && !S_ISLNK(m->mode) &&
	    !S_ISCHR(m->mode) && !S_ISBLK(m->mode) && !S_ISFIFO(m->mode) && !S_ISSOCK(m->mode))
		return "an inode mark has no file type";
	if (m->has_handle && m->handle.len > FSNOTIFY_HANDLE_MAX)
		return "a file handle is too long";
	return NULL;
}

static const char *fanotify_invalid(struct rst_ctx *ctx, const void *msg)
{
	const FanotifyEntry *e = msg;
	(void)ctx;
	if (e->flags & ~(uint32_t)O_NONBLOCK)
		return "unknown flags";
	if ((e->init_flags & ~INIT_KNOWN) || (e->init_flags & INIT_CLASS) == INIT_CLASS)
		return "unknown init flags";
	if ((e->event_f_flags & ~(uint32_t)EVENT_F_KNOWN) || (e->event_f_flags & O_ACCMODE) == 3)
		return "unknown event flags";
	if (e->unpriv &&
	    ((e->init_flags & INIT_ADMIN) || !(e->init_flags & (INIT_FID | FAN_REPORT_MNT))))
		return "an unprivileged group with flags it cannot have";
	if (e->n_marks > FAN_MAX_MARKS)
		return "too many marks";
	for (size_t i = 0; i < e->n_marks; i++) {
		const char *why = invalid_mark(e->marks[i]);
		if (why)
			return why;
	}
	return NULL;
}

static int make_group(struct rst_ctx *ctx, const FanotifyEntry *e)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct saved[2], less[2];

	if (syscall(SYS_capget, &h, saved) < 0)
		return log_fail(&ctx->log, -errno, "fanotify: capget: %s", strerror(errno));
	bool admin = (saved[0].effective & (1u << CAP_SYS_ADMIN)) && init_userns();
	if (!e->unpriv && !admin)
		return log_fail(
		    &ctx->log, -EPERM,
		    "fanotify group %u: it was made with CAP_SYS_ADMIN, which ckpt does "
		    "not have in the initial user namespace",
		    e->id);
	memcpy(less, saved, sizeof(less));
	less[0].effective &= ~(1u << CAP_SYS_ADMIN);
	bool drop = e->unpriv && (saved[0].effective & (1u << CAP_SYS_ADMIN));
	if (drop && syscall(SYS_capset, &h, less) < 0)
		return log_fail(&ctx->log, -errno, "fanotify: capset: %s", strerror(errno));
	int fd = fanotify_init(e->init_flags, e->event_f_flags);
	int err = errno;
	if (drop && syscall(SYS_capset, &h, saved) < 0) {
		if (fd >= 0)
			close(fd);
		return log_fail(&ctx->log, -errno, "fanotify: cannot take CAP_SYS_ADMIN back: %s",
				strerror(errno));
	}
	if (fd < 0)
		return log_fail(&ctx->log, -err, "fanotify group %u: fanotify_init(%#x, %#x): %s",
				e->id, e->init_flags, e->event_f_flags, strerror(err));
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* The object at m->path is still of the kind the mark was on. */
static int check_object(struct rst_ctx *ctx, const FanotifyMark *m)
{
	struct stat st;
	uint32_t mnt;
	bool root;
	int r = mount_of(m->path, &mnt, &root, &st);
	if (r < 0)
		return log_fail(&ctx->log, r, "fanotify %s mark: cannot find '%s': %s",
				mark_type_name[m->type], m->path, strerror(-r));
	if (m->type == MARK_INODE && (st.st_mode & S_IFMT) != (m->mode & S_IFMT))
		return log_fail(&ctx->log, -ESTALE,
				"fanotify inode mark: '%s' is no longer the same type of file",
				m->path);
	if (m->type == MARK_INODE && (st.st_ino != m->ino || st.st_dev != m->dev))
		log_warn(&ctx->log,
			 "fanotify inode mark: '%s' is another file than at the "
			 "checkpoint",
			 m->path);
	if (m->type == MARK_MOUNT && !root)
		return log_fail(&ctx->log, -ESTALE,
				"fanotify mount mark: '%s' is no longer a "
				"mount point",
				m->path);
	if (m->type == MARK_MOUNT && mnt != m->mnt_id)
		log_warn(&ctx->log,
			 "fanotify mount mark: '%s' is another mount than at the "
			 "checkpoint",
			 m->path);
	if (m->type == MARK_FS && st.st_dev != m->dev)
		log_warn(&ctx->log,
			 "fanotify filesystem mark: '%s' is on another file system "
			 "than at the checkpoint",
			 m->path);
	return 0;
}

static int add_mark(struct rst_ctx *ctx, int fd, const FanotifyMark *m)
{
	unsigned base = mark_type_flag[m->type] | FAN_MARK_DONT_FOLLOW;
	unsigned add = FAN_MARK_ADD | base | (m->mflags & FAN_MARK_EVICTABLE);
	unsigned ign = ((m->mflags & FAN_MARK_IGNORE) ? FAN_MARK_IGNORE : FAN_MARK_IGNORED_MASK) |
		       (m->mflags & FAN_MARK_IGNORED_SURV_MODIFY);
	/* the ignore flags stick to a mark whose ignore mask is empty again */
	bool ign_flags = m->mflags & (FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY);
	uint32_t imask = m->ignored_mask ? m->ignored_mask : FAN_OPEN;
	const char *what = NULL;
	int r = check_object(ctx, m);

	if (r < 0)
		return r;
	if (m->mask && fanotify_mark(fd, add, m->mask, AT_FDCWD, m->path) < 0)
		what = "its mask";
	else if ((m->ignored_mask || ign_flags) &&
		 fanotify_mark(fd, add | ign, imask, AT_FDCWD, m->path) < 0)
		what = "its ignore mask";
	else if (!m->ignored_mask && ign_flags &&
		 fanotify_mark(fd, FAN_MARK_REMOVE | base | ign, imask, AT_FDCWD, m->path) < 0)
		what = "its ignore flags";
	if (what)
		return log_fail(&ctx->log, -errno, "fanotify %s mark on '%s': cannot set %s: %s",
				mark_type_name[m->type], m->path, what, strerror(errno));
	return 0;
}

struct verify_arg {
	const FanotifyEntry *e;
	size_t n;
	const char *bad; /* the path of the first mark not the same */
};

static int verify_mark(void *arg, struct raw_mark *rm)
{
	struct verify_arg *a = arg;
	const FanotifyMark *m = a->n < a->e->n_marks ? a->e->marks[a->n] : NULL;
	if (!a->bad && (!m || rm->type != (int)m->type || rm->mflags != m->mflags ||
			rm->mask != m->mask || rm->ignored != m->ignored_mask))
		a->bad = m ? m->path : "(a mark too many)";
	a->n++;
	return 0;
}

/* Reads the group's fdinfo back: the same flags, the same marks in order. */
static int verify(struct rst_ctx *ctx, const struct fdobj_r *p)
{
	_cleanup_free_ char *text = NULL;
	struct verify_arg a = {entry(p), 0, NULL};
	uint32_t flags = 0, ef = 0;
	char name[32];

	snprintf(name, sizeof(name), "fdinfo/%d", p->fd);
	int r = proc_read(0, name, &text, NULL);
	if (r >= 0)
		r = parse_fdinfo(text, &flags, &ef, verify_mark, &a);
	if (r < 0)
		return log_fail(&ctx->log, r, "fanotify group %u: cannot read its fdinfo back",
				entry(p)->id);
	if (flags != entry(p)->init_flags || ef != entry(p)->event_f_flags)
		return log_fail(&ctx->log, -EIO,
				"fanotify group %u: made with flags %#x event-flags %#x, not "
				"%#x %#x",
				entry(p)->id, flags, ef, entry(p)->init_flags, entry(p)->event_f_flags);
	if (!a.bad && a.n != entry(p)->n_marks)
		a.bad = "(a mark missing)";
	if (a.bad)
		return log_fail(&ctx->log, -EIO,
				"fanotify group %u: the mark on '%s' did not come out as saved "
				"(an ignore mask that does not survive modification, on a file "
				"open for writing, is not set by the kernel)",
				entry(p)->id, a.bad);
	return 0;
}

static int fanotify_open(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *p = obj;
	int r = p->fd = make_group(ctx, entry(p));
	/* fdinfo lists the newest first: the oldest is added first */
	for (size_t i = entry(p)->n_marks; r >= 0 && i-- > 0;)
		r = add_mark(ctx, p->fd, entry(p)->marks[i]);
	if (r >= 0)
		r = verify(ctx, p);
	if (r >= 0)
		log_debug(&ctx->log, "fanotify group %u: %zu marks", p->id, entry(p)->n_marks);
	return r;
}

static const struct fdobj_ops fanotify_file = {
	.kind = KIND_fanotify,
	.name = "fanotify",
	.type = FANOTIFY_ENTRY,
	.msg = &fanotify_entry__descriptor,
	.size = sizeof(struct fanotify_obj),
	.msg_off = offsetof(struct fanotify_obj, e),
	.id_off = offsetof(FanotifyEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = fanotify_claim,
	.collect = fanotify_collect,
	.free = fanotify_free,
	.invalid = fanotify_invalid,
	.open = fanotify_open,
};

static int fanotify_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &fanotify_file);
}

static int fanotify_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &fanotify_file);
}

/* Closes the fds a read of events gave ckpt: the files', the pidfds. */
static void close_event_fds(const char *buf, ssize_t n)
{
	const struct fanotify_event_metadata *m = (const void *)buf;
	for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
		if (m->fd >= 0)
			close(m->fd);
		for (size_t off = m->metadata_len;
		     off + sizeof(struct fanotify_event_info_header) <= m->event_len;) {
			const struct fanotify_event_info_header *h =
			    (const void *)((const char *)m + off);
			if (h->len < sizeof(*h))
				break;
			if (h->info_type == FAN_EVENT_INFO_TYPE_PIDFD &&
			    off + sizeof(struct fanotify_event_info_pidfd) <= m->event_len) {
				const struct fanotify_event_info_pidfd *pi = (const void *)h;
				if (pi->pidfd >= 0)
					close(pi->pidfd);
			}
			off += h->len;
		}
	}
}

/* Every task is built: what the groups caught meanwhile is read off. */
static int fanotify_restore_end(struct rst_ctx *ctx)
{
	static_assert(sizeof(long) == 8, "fanotify events are read as 8-byte aligned");
	long buf[8192];
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_fanotify, o));) {
		struct fdobj_r *p = o->ptr;
		size_t total = 0;
		ssize_t n = 0;
		if (fcntl(p->fd, F_SETFL, O_NONBLOCK) < 0)
			return -errno;
		for (int i = 0; i < DRAIN_MAX && ((n = read(p->fd, buf, sizeof(buf))) > 0 ||
						  (n < 0 && errno != EAGAIN));
		     i++) {
			if (n > 0)
				close_event_fds((const char *)buf, n), total += (size_t)n;
		}
		log_debug(&ctx->log, "fanotify group %u: %zu bytes of events read off", entry(p)->id,
			  total);
		if (!(entry(p)->flags & O_NONBLOCK) && fcntl(p->fd, F_SETFL, 0) < 0)
			return -errno;
	}
	return 0;
}

static const ProtobufCMessageDescriptor *fanotify_descriptor(uint32_t sub)
{
	return sub == REC_SUB(FANOTIFY_ENTRY) ? &fanotify_entry__descriptor : NULL;
}

const struct kind_ops fanotify_ops = {
	.file = &fanotify_file,
	.dump = fanotify_dump,
	.load = fdobj_load,
	.prepare = fanotify_prepare,
	.restore_end = fanotify_restore_end,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = fanotify_descriptor,
};
