/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Open files of namespaces: what open("/proc/PID/ns/net") gives, the fd
 * setns() takes ("net:[4026531840]" in /proc/PID/fd). One object per open
 * file (fdobj.c finds the fds that share one). The namespace is named by a
 * task of the image that is in it (the first whose /proc/PID/ns/NAME has
 * the same inode) or, when none is, by ckpt's own (a subtree holding the
 * host's namespace); a network namespace of neither is saved by the netns
 * kind (netns_hold: NsFileEntry.netns, its id), any other refused.
 *
 * At restart the file is opened on the first fd_get, when every task
 * exists: /proc/PID/ns/NAME of the restored task (a container's fresh
 * namespaces, or the namespaces a subtree is restored into), or ckpt's
 * /proc/self/ns/NAME, or the held network namespace the netns kind made.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/netns.h"
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
	struct fdobj f;
	NsFileEntry e;
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

static bool nsfile_claim(const struct fd_info *fi)
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
	if (!strcmp(link, "net")) { /* saved by the netns kind, once */
		e->name = (char *)nsfiles[type].name;
		e->has_netns = true;
		return netns_hold(ctx, fi->pid, fi->fd, &e->netns);
	}
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d fd %d (%s): a namespace no process of the image is in", fi->pid,
			fi->fd, fi->path);
}

static int nsfile_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			  void *obj)
{
	struct nsfile_obj *n = obj;
	(void)t;
	n->e.flags = fi->fi.flags & ~O_CLOEXEC;
	return identify(ctx, fi, &n->e);
}

/* --- restart --------------------------------------------------------- */

static bool known_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(nsfiles); i++)
		if (!strcmp(nsfiles[i].name, name))
			return true;
	return false;
}

static const char *nsfile_invalid(struct rst_ctx *ctx, const void *msg)
{
	const NsFileEntry *e = msg;
	(void)ctx;
	if (!known_name(e->name) || (e->has_pid + e->caller + e->has_netns) != 1 ||
	    (e->has_netns && strcmp(e->name, "net")))
		return "no namespace, or more than one of a task, ckpt's and a network namespace";
	return e->flags & ~(uint32_t)(O_ACCMODE | O_NONBLOCK | KERNEL_O_LARGEFILE) ? "unknown flags"
										      : NULL;
}

/* Opened at the first fd_get, every task there. */
static int nsfile_open(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *n = obj;
	const NsFileEntry *e = n->msg;
	char path[64];
	if (e->has_netns) { /* made at prepare by the netns kind */
		int held = netns_held_fd(ctx, e->netns);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", held);
		n->fd = held < 0 ? -1 : open(path, (int)(e->flags & ~(uint32_t)KERNEL_O_LARGEFILE) |
							   O_CLOEXEC);
		if (n->fd < 0)
			return log_fail(&ctx->log, held < 0 ? -EINVAL : -errno, "namespace file %u: "
					"its network namespace %u is not in the image", n->id, e->netns);
		return 0;
	}
	const struct rst_task *to = e->has_pid ? tree_find(ctx, e->pid) : NULL;
	if (e->has_pid && (!to || to->zombie))
		return log_fail(&ctx->log, -EINVAL, "namespace file %u: its task %d is not in the "
				"image", n->id, e->pid);
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", to ? to->pup.pid : getpid(), e->name);
	n->fd = open(path, (int)(e->flags & ~(uint32_t)KERNEL_O_LARGEFILE) | O_CLOEXEC);
	if (n->fd < 0)
		return log_fail(&ctx->log, -errno, "namespace file %u: cannot open %s: %m", n->id,
				path);
	return 0;
}

static const struct fdobj_ops nsfile_file = {
	.kind = KIND_nsfile,
	.name = "namespace file",
	.type = NSFILE_ENTRY,
	.msg = &ns_file_entry__descriptor,
	.size = sizeof(struct nsfile_obj),
	.msg_off = offsetof(struct nsfile_obj, e),
	.id_off = offsetof(NsFileEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = nsfile_claim,
	.collect = nsfile_collect,
	.invalid = nsfile_invalid,
	.open = nsfile_open,
	.late = true,
};

static int nsfile_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &nsfile_file);
}

static const ProtobufCMessageDescriptor *nsfile_descriptor(uint32_t sub)
{
	return sub == REC_SUB(NSFILE_ENTRY) ? &ns_file_entry__descriptor : NULL;
}

const struct kind_ops nsfile_ops = {
	.file = &nsfile_file,
	.fd_claim_rank = 2, /* before file_reg, which would take them for regular files */
	.dump = nsfile_dump,
	.load = fdobj_load,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = nsfile_descriptor,
};
