/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Open files of namespaces: what open("/proc/PID/ns/net") gives, the fd
 * setns() takes ("net:[4026531840]" in /proc/PID/fd). One object per open
 * file (kcmp finds the fds that share one). The namespace is named by a
 * task of the image that is in it (the first whose /proc/PID/ns/NAME has
 * the same inode) or, when none is, by ckpt's own (a subtree holding the
 * host's namespace); a namespace of neither is refused.
 *
 * At restart the file is opened on the first fd_get, when every task
 * exists: /proc/PID/ns/NAME of the restored task (a container's fresh
 * namespaces, or the namespaces a subtree is restored into), or ckpt's
 * /proc/self/ns/NAME.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "nsfile.pb-c.h"
#include "util/cleanup.h"

enum { NSFILE_ENTRY = REC_TYPE(KID_nsfile, 1) };
/* what open() adds on 64-bit; glibc's O_LARGEFILE is 0 there */
#define KERNEL_O_LARGEFILE 0100000

/* the files of /proc/PID/ns, and the prefix each one's link shows */
static const struct {
	const char *name, *link;
} nsfiles[] = {
	{ "cgroup", "cgroup" }, { "ipc", "ipc" },   { "mnt", "mnt" },
	{ "net", "net" },       { "pid", "pid" },   { "pid_for_children", "pid" },
	{ "time", "time" },     { "time_for_children", "time" }, { "user", "user" },
	{ "uts", "uts" },
};

struct nsfile_obj {
	NsFileEntry e;
	pid_t pid; /* a task holding it, and its fd, for kcmp */
	int fd;
};

struct nsfile_robj {
	NsFileEntry *e;
	int fd;
};

/* "net:[4026531840]": the index of its type in nsfiles[], or -1 */
static int link_type(const char *path)
{
	const char *colon = strchr(path, ':');
	size_t n = strlen(path);
	if (!colon || colon[1] != '[' || n < 4 || path[n - 1] != ']')
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(nsfiles); i++)
		if (strlen(nsfiles[i].link) == (size_t)(colon - path) &&
		    !strncmp(path, nsfiles[i].link, (size_t)(colon - path)))
			return (int)i;
	return -1;
}

static bool nsfile_fd_claim(const struct fd_info *fi)
{
	return S_ISREG(fi->st.st_mode) && fi->path[0] != '/' && link_type(fi->path) >= 0;
}

static bool same_inode(pid_t pid, const char *name, const struct stat *want)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, name);
	return stat(path, &st) == 0 && st.st_ino == want->st_ino && st.st_dev == want->st_dev;
}

/* Which namespace file, of which task of the image (or ckpt's), it is. */
static int identify(struct ckpt_ctx *ctx, const struct fd_info *fi, NsFileEntry *e)
{
	int type = link_type(fi->path);
	const char *link = nsfiles[type].link;
	for (size_t k = 0; k < ARRAY_SIZE(nsfiles); k++) {
		if (strcmp(nsfiles[k].link, link))
			continue;
		for (size_t i = 0; i < ctx->ntasks; i++) {
			const struct task *t = &ctx->tasks[i];
			if (t->zombie || !same_inode(t->pid, nsfiles[k].name, &fi->st))
				continue;
			e->name = (char *)nsfiles[k].name;
			e->has_pid = true;
			e->pid = t->vpid;
			return 0;
		}
		if (same_inode(getpid(), nsfiles[k].name, &fi->st)) {
			e->name = (char *)nsfiles[k].name;
			e->has_caller = e->caller = true;
			return 0;
		}
	}
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d fd %d (%s): a namespace no process of the image is in", fi->pid,
			fi->fd, fi->path);
}

static int nsfile_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			     uint32_t *ret_id)
{
	struct obj *o;
	for (o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_nsfile, fi->st.st_ino));) {
		struct nsfile_obj *n = o->ptr;
		if (syscall(SYS_kcmp, n->pid, t->pid, KCMP_FILE, n->fd, fi->fd) == 0) {
			*ret_id = o->id;
			return 0;
		}
	}
	struct nsfile_obj *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	ns_file_entry__init(&n->e);
	n->e.flags = fi->fi.flags & ~O_CLOEXEC;
	n->pid = t->pid;
	n->fd = fi->fd;
	int r = identify(ctx, fi, &n->e);
	if (r >= 0)
		r = objhash_add(&ctx->objs, KIND_nsfile, fi->st.st_ino, 0, n, &o);
	if (r < 0) {
		free(n);
		return r;
	}
	n->e.id = o->id;
	*ret_id = o->id;
	return 0;
}

static int nsfile_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, KIND_nsfile, NSFILE_ENTRY, offsetof(struct nsfile_obj, e));
}

/* --- restart --------------------------------------------------------- */

static void nsfile_free_robj(void *ptr);

static bool known_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(nsfiles); i++)
		if (!strcmp(nsfiles[i].name, name))
			return true;
	return false;
}

static int nsfile_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != NSFILE_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown nsfile subtype", rec->index);
	struct nsfile_robj *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->fd = -1;
	n->e = rctx_unpack(ctx, rec, &ns_file_entry__descriptor);
	if (!n->e || !known_name(n->e->name) || n->e->has_pid == n->e->caller ||
	    (n->e->flags & ~(uint32_t)(O_ACCMODE | O_NONBLOCK | KERNEL_O_LARGEFILE))) {
		nsfile_free_robj(n);
		return log_fail(&ctx->log, -EINVAL, "record %u: namespace file entry is not valid",
				rec->index);
	}
	return fdobj_register(ctx, rec, KIND_nsfile, n->e->id, n, nsfile_free_robj);
}

static int nsfile_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct nsfile_robj *n = robj;
	if (n->fd < 0) {
		char path[64];
		const struct rst_task *to = n->e->has_pid ? tree_find(ctx, n->e->pid) : NULL;
		if (n->e->has_pid && (!to || to->zombie))
			return log_fail(&ctx->log, -EINVAL, "namespace file %u: its task %d is not "
					"in the image", n->e->id, n->e->pid);
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", to ? to->pup.pid : getpid(),
			 n->e->name);
		n->fd = open(path, (int)(n->e->flags & ~(uint32_t)KERNEL_O_LARGEFILE) | O_CLOEXEC);
		if (n->fd < 0)
			return log_fail(&ctx->log, -errno, "namespace file %u: cannot open %s: %m",
					n->e->id, path);
	}
	return fdobj_fd(ctx, n->fd, "namespace file", n->e->id, ret_fd);
}

static void nsfile_free_robj(void *ptr)
{
	struct nsfile_robj *n = ptr;
	if (!n)
		return;
	if (n->fd >= 0)
		close(n->fd);
	if (n->e)
		ns_file_entry__free_unpacked(n->e, NULL);
	free(n);
}

static const ProtobufCMessageDescriptor *nsfile_descriptor(uint32_t sub)
{
	return sub == REC_SUB(NSFILE_ENTRY) ? &ns_file_entry__descriptor : NULL;
}

const struct kind_ops nsfile_ops = {
	.fd_claim = nsfile_fd_claim,
	.fd_claim_rank = 2, /* before file_reg, which would take them for regular files */
	.fd_collect = nsfile_fd_collect,
	.fd_get = nsfile_fd_get,
	.dump = nsfile_dump,
	.load = nsfile_load,
	.free_obj = free,
	.free_robj = nsfile_free_robj,
	.descriptor = nsfile_descriptor,
};
