/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pidfds. One object per open file description (fds that share one are
 * found with kcmp(KCMP_FILE)): the task it refers to, from "Pid:" in
 * /proc/PID/fdinfo (a pid in ckpt's pid namespace, saved as the image
 * names the task: inside a container, the pid the tasks see), and its
 * flags, PIDFD_NONBLOCK (O_NONBLOCK) and PIDFD_THREAD (O_EXCL).
 *
 * - A pidfd of a task of the image is made at restart by pidfd_open() on
 *   the restored task, on ckpt's side, once every task exists (the first
 *   fd_get): the pid ckpt sees for it, so the same call works for a
 *   container. A zombie of the image is a zombie again, so a pidfd of it
 *   reaps it with its status.
 * - A pidfd of a process outside the image, or of one in a pid namespace
 *   ckpt cannot see ("Pid: 0"), is refused.
 * - A pidfd of a process already reaped ("Pid: -1") is remade as a pidfd
 *   of a helper that ckpt forks, opens and lets exit with the same wait
 *   status (PIDFD_GET_INFO's PIDFD_INFO_EXIT says it, when the kernel
 *   kept it; else the helper exits 0), then reaps: it refers to a dead
 *   process, whose pid is free, as the original does. A status with a
 *   core dump is refused (the helper cannot dump core).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "pidfd.pb-c.h"
#include "util/cleanup.h"
#include "util/kernel.h"

enum { PIDFD_ENTRY = REC_TYPE(KID_pidfd, 1) };

/* PIDFD_GET_INFO (6.13) and PIDFD_THREAD (6.9), newer than the headers */
struct pidfd_info_k {
	uint64_t mask, cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define PIDFD_GET_INFO_K  _IOWR(0xFF, 11, struct pidfd_info_k)
#define PIDFD_INFO_EXIT_K (1ull << 3)
#define PIDFD_THREAD_K	  O_EXCL
#define PIDFD_FLAGS	  (O_NONBLOCK | PIDFD_THREAD_K)

struct pidfd_obj {
	PidfdEntry e;
	pid_t pid; /* a task holding it, and its fd, for kcmp */
	int fd;
};

struct pidfd_robj {
	PidfdEntry *e;
	int fd; /* ckpt's pidfd */
};

static bool pidfd_fd_claim(const struct fd_info *fi)
{
	return !strcmp(fi->path, "anon_inode:[pidfd]");
}

/* "Pid:" of the fdinfo: > 0 a task, 0 not visible here, -1 reaped. */
static int read_target(struct task *t, int fd, long *ret)
{
	_cleanup_free_ char *text = NULL;
	char name[32];

	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	int r = proc_read(t->pid, name, &text, NULL);
	if (r < 0)
		return r;
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char *end;
		if (strncmp(p, "Pid:", 4))
			continue;
		long v = strtol(p + 4, &end, 10);
		if (end == p + 4 || v < -1)
			return -EINVAL;
		*ret = v;
		return 0;
	}
	return -EINVAL;
}

/* The task of the image whose pid (in ckpt's namespace) is pid. */
static struct task *image_task(struct ckpt_ctx *ctx, pid_t pid, bool thread)
{
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (t->pid == pid)
			return t;
		for (size_t j = 0; thread && j < t->nthreads; j++)
			if (t->threads[j].pid == pid)
				return &t->threads[j];
	}
	return NULL;
}

/* A reaped process: its wait status, if the kernel kept it. */
static int dead_status(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		       PidfdEntry *e)
{
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fi->fd);
	if (copy < 0)
		return log_fail(&ctx->log, copy, "pid %d fd %d (pidfd): cannot take a copy: %s",
				t->pid, fi->fd, strerror(-copy));
	struct pidfd_info_k info = {.mask = PIDFD_INFO_EXIT_K};
	if (ioctl(copy, PIDFD_GET_INFO_K, &info) < 0 || !(info.mask & PIDFD_INFO_EXIT_K))
		return 0; /* an older kernel, or none kept: the helper exits 0 */
	int st = info.exit_code;
	if (WCOREDUMP(st))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (pidfd): refers to a process that was killed by "
				"signal %d with a core dump; ckpt cannot make a dead process with "
				"that status",
				t->pid, fi->fd, WTERMSIG(st));
	e->has_exit_status = true;
	e->exit_status = (uint32_t)st;
	return 0;
}

static int describe(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi, PidfdEntry *e)
{
	long target;
	int r = read_target(t, fi->fd, &target);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (pidfd): cannot read its fdinfo",
				t->pid, fi->fd);
	e->flags = fi->fi.flags & PIDFD_FLAGS;
	if (target == -1)
		return dead_status(ctx, t, fi, e);
	if (target == 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (pidfd): refers to a process in a pid namespace ckpt "
				"cannot see, outside the image",
				t->pid, fi->fd);
	struct task *to = image_task(ctx, (pid_t)target, e->flags & PIDFD_THREAD_K);
	if (!to)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (pidfd): refers to pid %ld, which is outside the "
				"image",
				t->pid, fi->fd, target);
	e->has_pid = true;
	e->pid = (uint32_t)to->vpid;
	return 0;
}

static int pidfd_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			    uint32_t *ret_id)
{
	struct obj *o;
	for (o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_pidfd, fi->st.st_ino));) {
		struct pidfd_obj *p = o->ptr;
		if (syscall(SYS_kcmp, p->pid, t->pid, KCMP_FILE, p->fd, fi->fd) == 0) {
			*ret_id = o->id;
			return 0;
		}
	}
	struct pidfd_obj *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pidfd_entry__init(&p->e);
	p->pid = t->pid;
	p->fd = fi->fd;
	int r = describe(ctx, t, fi, &p->e);
	if (r >= 0)
		r = objhash_add(&ctx->objs, KIND_pidfd, fi->st.st_ino, 0, p, &o);
	if (r < 0) {
		free(p);
		return r;
	}
	p->e.id = o->id;
	*ret_id = o->id;
	return 0;
}

static int pidfd_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, KIND_pidfd, PIDFD_ENTRY, offsetof(struct pidfd_obj, e));
}

/* --- restart --------------------------------------------------------- */

/* A wait status a helper can end with: an exit, or death by a signal whose
 * default action is to terminate, without a core dump. */
static bool status_valid(uint32_t st)
{
	if (st & ~0xffffu)
		return false;
	if (WIFEXITED(st))
		return true;
	if (!WIFSIGNALED(st) || WCOREDUMP(st))
		return false;
	int sig = WTERMSIG(st);
	return sig >= 1 && sig <= 64 && sig != SIGCHLD && sig != SIGCONT && sig != SIGSTOP &&
	       sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU && sig != SIGURG &&
	       sig != SIGWINCH;
}

static const char *invalid(struct rst_ctx *ctx, const PidfdEntry *e)
{
	if (e->flags & ~(uint32_t)PIDFD_FLAGS)
		return "unknown flags";
	if (e->has_pid) {
		struct rst_task *to = tree_find(ctx, (pid_t)e->pid);
		if (!to)
			return "it refers to a pid the tree lacks";
		if (to->leader && !(e->flags & PIDFD_THREAD_K))
			return "it refers to a thread but is not a PIDFD_THREAD pidfd";
		if (e->has_exit_status)
			return "a live task with an exit status";
	}
	if (e->has_exit_status && !status_valid(e->exit_status))
		return "the exit status is not one a process can end with";
	return NULL;
}

static void pidfd_free_robj(void *ptr);

static int pidfd_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != PIDFD_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown pidfd subtype", rec->index);
	PidfdEntry *e = rctx_unpack(ctx, rec, &pidfd_entry__descriptor);
	if (!e)
		return -EINVAL;
	const char *why = invalid(ctx, e);
	struct pidfd_robj *p = why ? NULL : calloc(1, sizeof(*p));
	if (!p) {
		pidfd_entry__free_unpacked(e, NULL);
		return why ? log_fail(&ctx->log, -EINVAL, "record %u: pidfd entry: %s", rec->index,
				      why)
			   : -ENOMEM;
	}
	p->e = e;
	p->fd = -1;
	return fdobj_register(ctx, rec, KIND_pidfd, e->id, p, pidfd_free_robj);
}

/* The pid of ckpt's pid as its own (innermost) pid namespace has it, or -1. */
static pid_t helper_vpid(pid_t pid)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status st;
	if (proc_read(pid, "status", &text, NULL) < 0 || proc_parse_status(text, &st) < 0)
		return -1;
	return st.nspid_n ? st.nspid[st.nspid_n - 1] : pid;
}

/*
 * A pidfd of a process that has ended with the image's status and been
 * reaped: a helper forked by t (a bare puppet still, so in the restored
 * pid namespace), opened, made to exit (exit signal 0: t is sent no
 * SIGCHLD) and reaped by an injected wait4 in t.
 */
static int make_dead(struct rst_ctx *ctx, struct rst_task *t, struct pidfd_robj *p)
{
	int want = p->e->has_exit_status ? (int)p->e->exit_status : 0, st = -1;
	struct puppet h;
	int r = puppet_clone(&t->pup, &h, 0, 0, 0);
	if (r < 0)
		return log_fail(&ctx->log, r, "pidfd %u: pid %d cannot fork a helper: %s", p->e->id,
				t->pid, strerror(-r));
	pid_t hpid = h.pid, hvpid = helper_vpid(hpid);
	p->fd = (int)syscall(SYS_pidfd_open, hpid, p->e->flags);
	int err = errno;
	r = puppet_exit(&h, want);
	if (r < 0) {
		puppet_kill(&h);
		return log_fail(&ctx->log, r, "pidfd %u: the helper cannot exit: %s", p->e->id,
				strerror(-r));
	}
	long w = hvpid > 0 ? puppet_syscall(&t->pup, SYS_wait4, hvpid, t->pup.scratch, __WALL, 0)
			   : -ESRCH;
	if (w != hvpid || puppet_read(&t->pup, t->pup.scratch, &st, sizeof(st)) < 0)
		return log_fail(&ctx->log, w < 0 ? (int)w : -ECHILD,
				"pidfd %u: pid %d cannot reap the helper %d", p->e->id, t->pid,
				hpid);
	if (p->fd < 0)
		return log_fail(&ctx->log, -err, "pidfd %u: cannot open a pidfd of the helper: %s",
				p->e->id, strerror(err));
	if (st != want)
		return log_fail(&ctx->log, -EIO,
				"pidfd %u: the helper ended with status %#x, not %#x", p->e->id, st,
				want);
	return 0;
}

/* Once the tree is made, the root, still a bare puppet, makes the dead
 * processes' pidfds. */
static int pidfd_tree_ready(struct rst_ctx *ctx)
{
	struct rst_task *t = &ctx->tasks[0];
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_pidfd, o));) {
		struct pidfd_robj *p = o->ptr;
		if (p->e->has_pid || p->fd >= 0)
			continue;
		int r = make_dead(ctx, t, p);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Every task exists by the time fdtable asks: a pidfd of the one it names. */
static int pidfd_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct pidfd_robj *p = robj;
	if (p->fd < 0 && p->e->has_pid) {
		struct rst_task *to = tree_find(ctx, (pid_t)p->e->pid);
		if (!to || !to->pup.pid)
			return log_fail(&ctx->log, -ESRCH, "pidfd %u: pid %u was not made",
					p->e->id, p->e->pid);
		p->fd = (int)syscall(SYS_pidfd_open, to->pup.pid, p->e->flags);
		if (p->fd < 0)
			return log_fail(&ctx->log, -errno, "pidfd %u: pidfd_open of pid %u: %s",
					p->e->id, p->e->pid, strerror(errno));
	}
	return fdobj_fd(ctx, p->fd, "pidfd", p->e->id, ret_fd);
}

static void pidfd_free_robj(void *ptr)
{
	struct pidfd_robj *p = ptr;
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->e)
		pidfd_entry__free_unpacked(p->e, NULL);
	free(p);
}

static const ProtobufCMessageDescriptor *pidfd_descriptor(uint32_t sub)
{
	return sub == REC_SUB(PIDFD_ENTRY) ? &pidfd_entry__descriptor : NULL;
}

const struct kind_ops pidfd_ops = {
    .fd_claim = pidfd_fd_claim,
    .fd_collect = pidfd_fd_collect,
    .fd_get = pidfd_fd_get,
    .dump = pidfd_dump,
    .load = pidfd_load,
    .tree_ready = pidfd_tree_ready,
    .free_obj = free,
    .free_robj = pidfd_free_robj,
    .descriptor = pidfd_descriptor,
};
