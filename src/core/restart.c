/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Restart: read and validate the whole image, open what it needs, then
 * build each process from a bare puppet and release it.
 *
 * Nothing is created before the image has been checked end to end (frames,
 * checksums, trailer, every record decoded and validated by its kind) and
 * every file it names has been opened. From the first process created on,
 * any failure kills every process this restart made: nothing is left half
 * restored.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "kinds/mm.h"
#include "kinds/task.h"
#include "util/cleanup.h"
#include "util/features.h"

#define PID_MAX_LIMIT 4194304

/* kinds every task must have in the image */
static const enum kind required[] = { KIND_task, KIND_mm, KIND_fdtable, KIND_fs,
				      KIND_signals, KIND_creds, KIND_regs };

static void free_robj(int kind, void *ptr)
{
	if (kind >= 0 && kind < KIND_MAX && kinds[kind].ops->free_robj)
		kinds[kind].ops->free_robj(ptr);
}

static int image_error(struct rst_ctx *ctx, int r, const struct img_error *e)
{
	char name[48];
	if (e->index < 0)
		return log_fail(&ctx->log, r, "image header: %s", e->reason);
	return log_fail(&ctx->log, r, "image record %lld (%s) at offset %llu: %s",
			(long long)e->index, rec_type_name(e->type, name, sizeof(name)),
			(unsigned long long)e->offset, e->reason);
}

static int check_header(struct rst_ctx *ctx)
{
	const struct img_header *h = &ctx->r.hdr;
	struct utsname u;

	if (h->arch != 62)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"image is of architecture %u; this machine is x86_64 (62)", h->arch);
	if (h->page_size != 4096)
		return log_fail(&ctx->log, -EOPNOTSUPP, "image has page size %u; this machine 4096",
				h->page_size);
	if (uname(&u) == 0 && strncmp(u.release, h->kernel_release, sizeof(h->kernel_release)))
		log_warn(&ctx->log, "image was made on kernel %.64s, this is %s",
			 h->kernel_release, u.release);
	return 0;
}

static int load_tree(struct rst_ctx *ctx, const struct img_record *rec)
{
	if (ctx->tasks)
		return log_fail(&ctx->log, -EINVAL, "record %u: a second tree", rec->index);
	TreeEntry *tree = rctx_unpack(ctx, rec, &tree_entry__descriptor);
	if (!tree)
		return -EINVAL;
	int r = 0;
	if (tree->n_tasks != 1) {
		r = log_fail(&ctx->log, tree->n_tasks ? -EOPNOTSUPP : -EINVAL,
			     "image holds %zu processes; restoring process trees is not supported "
			     "yet",
			     tree->n_tasks);
		goto out;
	}
	ctx->tasks = calloc(tree->n_tasks, sizeof(*ctx->tasks));
	if (!ctx->tasks) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < tree->n_tasks; i++) {
		const TreeTask *tt = tree->tasks[i];
		struct rst_task *t = &ctx->tasks[i];
		if (!tt->pid || tt->pid >= PID_MAX_LIMIT) {
			r = log_fail(&ctx->log, -EINVAL, "record %u: pid %u is not valid", rec->index,
				     tt->pid);
			goto out;
		}
		t->pid = tt->pid;
		t->ppid = tt->ppid;
		t->pgid = tt->pgid;
		t->sid = tt->sid;
		t->pup.memfd = -1;
		t->ctl_remote = -1;
		if (tt->has_nthreads && tt->nthreads > 1) {
			r = log_fail(&ctx->log, -EOPNOTSUPP,
				     "pid %u has %u threads; not supported yet", tt->pid,
				     tt->nthreads);
			goto out;
		}
	}
	ctx->ntasks = tree->n_tasks;
out:
	tree_entry__free_unpacked(tree, NULL);
	return r;
}

static int load_task_begin(struct rst_ctx *ctx, const struct img_record *rec,
			   struct rst_task **cur)
{
	TaskBegin *tb = rctx_unpack(ctx, rec, &task_begin__descriptor);
	if (!tb)
		return -EINVAL;
	pid_t pid = (pid_t)tb->pid;
	task_begin__free_unpacked(tb, NULL);
	for (size_t i = 0; i < ctx->ntasks; i++) {
		if (ctx->tasks[i].pid == pid) {
			*cur = &ctx->tasks[i];
			return 0;
		}
	}
	return log_fail(&ctx->log, -EINVAL, "record %u: pid %d is not in the tree", rec->index,
			pid);
}

static int load_image(struct rst_ctx *ctx, int fd)
{
	struct img_error err = { 0 };
	struct img_record rec;
	struct rst_task *cur = NULL;
	int r;

	r = img_reader_open(&ctx->r, fd, &err);
	if (r < 0)
		return image_error(ctx, r, &err);
	log_debug(&ctx->log, "image loaded: %zu bytes", ctx->r.size);
	r = img_reader_validate(&ctx->r, &err);
	if (r < 0)
		return image_error(ctx, r, &err);
	log_debug(&ctx->log, "frames and checksums are good");
	r = check_header(ctx);
	if (r < 0)
		return r;
	while ((r = img_reader_next(&ctx->r, &rec, &err)) == 0) {
		enum kind k;
		if (rec.type == REC_CORE_TREE) {
			r = load_tree(ctx, &rec);
		} else if (rec.type == REC_CORE_TASK) {
			r = ctx->tasks ? load_task_begin(ctx, &rec, &cur)
				       : log_fail(&ctx->log, -EINVAL, "record %u: task before the tree",
						  rec.index);
		} else if (!kind_by_rec(rec.type, &k)) {
			r = log_fail(&ctx->log, -EOPNOTSUPP,
				     "record %u at offset %llu: unknown type %#x (an image of a "
				     "newer ckpt?)",
				     rec.index, (unsigned long long)rec.offset, rec.type);
		} else if (!cur) {
			r = log_fail(&ctx->log, -EINVAL, "record %u (%s): outside any task", rec.index,
				     kinds[k].name);
		} else {
			r = kinds[k].ops->load ? kinds[k].ops->load(ctx, cur, &rec) : 0;
		}
		if (r < 0)
			return r;
	}
	if (r != -ENODATA)
		return image_error(ctx, r, &err);
	if (!ctx->ntasks)
		return log_fail(&ctx->log, -EINVAL, "image holds no process");
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct rst_task *t = &ctx->tasks[i];
		for (size_t j = 0; j < ARRAY_SIZE(required); j++)
			if (!t->kstate[required[j]])
				return log_fail(&ctx->log, -EINVAL, "image lacks the %s of pid %d",
						kinds[required[j]].name, t->pid);
		r = mm_check_loaded(ctx, t);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A pid held by a dying zombie frees up soon (pid 1 reaps late here). */
static int wait_pid_free(struct rst_ctx *ctx, pid_t pid)
{
	for (int waited = 0;; waited += 20) {
		_cleanup_free_ char *text = NULL;
		struct proc_status st;
		if (proc_read(pid, "status", &text, NULL) < 0)
			return 0;
		if (proc_parse_status(text, &st) == 0 && st.state != 'Z' && st.state != 'X')
			return log_fail(&ctx->log, -EEXIST,
					"pid %d is in use by '%s'; restore it where the pid is free "
					"(or kill that process)",
					pid, st.name);
		if (waited >= 5000)
			return log_fail(&ctx->log, -EEXIST,
					"pid %d is held by a zombie its parent has not reaped", pid);
		usleep(20000);
	}
}

static int create_task(struct rst_ctx *ctx, struct rst_task *t)
{
	struct rlimit nofile;
	int r;

	t->ctl_remote = MAX(fdtable_max_fd(t) + 1, 3);
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && (rlim_t)t->ctl_remote >= nofile.rlim_cur)
		return log_fail(&ctx->log, -EMFILE,
				"pid %d uses fd %d, above ckpt's open-file limit %llu", t->pid,
				t->ctl_remote - 1, (unsigned long long)nofile.rlim_cur);
	r = wait_pid_free(ctx, t->pid);
	if (r < 0)
		return r;
	r = puppet_spawn(&t->pup, t->pid, ctx->ctl[1], t->ctl_remote);
	if (r == -EEXIST)
		return log_fail(&ctx->log, r, "pid %d is taken", t->pid);
	if (r == -EPERM)
		return log_fail(&ctx->log, r,
				"pid %d: creating a process with a chosen pid needs "
				"CAP_CHECKPOINT_RESTORE (or a user namespace of one's own)",
				t->pid);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot create it: %s", t->pid, strerror(-r));
	t->created = true;
	log_debug(&ctx->log, "pid %d: puppet created", t->pid);

	if ((r = puppet_find_syscall(&t->pup)) < 0)
		return log_fail(&ctx->log, r, "pid %d: no vDSO syscall in the puppet", t->pid);
	if ((r = task_rseq_unregister(&t->pup)) < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot unregister ckpt's rseq: %s", t->pid,
				strerror(-r));
	if ((r = puppet_scratch_map(&t->pup, ctx->scratch_addr, PUPPET_SCRATCH_SIZE)) < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot map the scratch area: %s", t->pid,
				strerror(-r));
	for (int k = 0; k < KIND_MAX; k++) {
		if (!kinds[k].ops->restore)
			continue;
		r = kinds[k].ops->restore(ctx, t);
		if (r < 0) {
			if (!ctx->log.errors)
				log_error(&ctx->log, "pid %d: restoring %s failed: %s", t->pid,
					  kinds[k].name, strerror(-r));
			return r;
		}
		log_debug(&ctx->log, "pid %d: %s restored", t->pid, kinds[k].name);
	}
	puppet_syscall(&t->pup, SYS_close, t->ctl_remote);
	/* the very last injected call: nothing of ckpt stays in the task */
	r = puppet_scratch_unmap(&t->pup);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot unmap the scratch area: %s", t->pid,
				strerror(-r));
	return 0;
}

static void kill_created(struct rst_ctx *ctx)
{
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct rst_task *t = &ctx->tasks[i];
		if (t->created) {
			puppet_kill(&t->pup);
			t->created = false;
		}
	}
}

static int write_pidfile(struct rst_ctx *ctx, const char *path, pid_t pid)
{
	char buf[32], tmp[4096];
	int n = snprintf(buf, sizeof(buf), "%d\n", pid);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, n) != n || rename(tmp, path) < 0)
		return log_fail(&ctx->log, -errno, "cannot write pidfile '%s': %s", path,
				strerror(errno));
	return 0;
}

static void free_ctx(struct rst_ctx *ctx)
{
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct rst_task *t = &ctx->tasks[i];
		for (int k = 0; k < KIND_MAX; k++)
			if (t->kstate[k] && kinds[k].ops->free_rstate)
				kinds[k].ops->free_rstate(t->kstate[k]);
		puppet_forget(&t->pup);
	}
	free(ctx->tasks);
	objhash_free(&ctx->objs, free_robj);
	img_reader_close(&ctx->r);
	for (int i = 0; i < 2; i++)
		if (ctx->ctl[i] >= 0)
			close(ctx->ctl[i]);
}

static int check_flags(struct rst_ctx *ctx, pid_t pid, unsigned long flags)
{
	if (flags & ~RESTART_FLAGS_ALL)
		return log_fail(&ctx->log, -EINVAL, "unknown restart flags %#lx",
				flags & ~RESTART_FLAGS_ALL);
	if (flags & RESTART_TASKSELF)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"RESTART_TASKSELF (restoring on top of the caller) is not supported "
				"yet");
	if (flags & RESTART_KEEP_LSM)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"RESTART_KEEP_LSM: images do not carry security labels yet");
	if ((flags & RESTART_FROZEN) && (flags & RESTART_GHOST))
		return log_fail(&ctx->log, -EINVAL, "RESTART_FROZEN and RESTART_GHOST exclude each other");
	if (pid != 0)
		return log_fail(&ctx->log, -EINVAL,
				"restart pid must be 0: processes get the pids of the image");
	return 0;
}

int ckpt_restart_opts(pid_t pid, int fd, struct ckpt_opts *o)
{
	struct rst_ctx ctx = { .ctl = { -1, -1 } };
	int r;

	log_init(&ctx.log, o ? o->logfd : -1, o && o->log_level ? o->log_level : CKPT_LOG_INFO,
		 o ? o->errbuf : NULL, o ? o->errbuf_len : 0, "restart");
	if (!o || o->size < sizeof(*o))
		return log_fail(&ctx.log, -EINVAL, "bad restart options");
	r = check_flags(&ctx, pid, o->flags);
	if (r < 0)
		return r;
	ctx.flags = o->flags;
	if (o->flags & RESTART_CONN_RESET)
		log_info(&ctx.log, "RESTART_CONN_RESET: no TCP connections are saved by this version");

	log_debug(&ctx.log, "reading the image");
	r = objhash_init(&ctx.objs);
	if (r >= 0)
		r = load_image(&ctx, fd);
	for (int k = 0; r >= 0 && k < KIND_MAX; k++)
		if (kinds[k].ops->prepare)
			r = kinds[k].ops->prepare(&ctx);
	if (r >= 0 && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ctx.ctl) < 0)
		r = log_fail(&ctx.log, -errno, "socketpair: %s", strerror(errno));
	if (r < 0)
		goto out;
	log_info(&ctx.log, "image validated: %zu process(es)", ctx.ntasks);

	for (size_t i = 0; r >= 0 && i < ctx.ntasks; i++)
		r = create_task(&ctx, &ctx.tasks[i]);
	if (r < 0 || (o->flags & RESTART_GHOST)) {
		kill_created(&ctx);
		if (r >= 0)
			log_info(&ctx.log, "dry run: built and torn down");
		goto out;
	}

	pid_t root = ctx.tasks[0].pid;
	int sig = (o->flags & RESTART_FROZEN) ? SIGSTOP : 0;
	for (size_t i = 0; i < ctx.ntasks; i++) {
		int e = puppet_release(&ctx.tasks[i].pup,
				       task_stopped(&ctx.tasks[i]) ? SIGSTOP : sig);
		if (e < 0 && r >= 0)
			r = log_fail(&ctx.log, e, "pid %d: cannot release it: %s", ctx.tasks[i].pid,
				     strerror(-e));
	}
	if (r < 0) {
		kill_created(&ctx);
		goto out;
	}
	log_info(&ctx.log, "pid %d: restored and running%s", root, sig ? " (stopped)" : "");
	if (o->pidfile && (r = write_pidfile(&ctx, o->pidfile, root)) < 0) {
		kill_created(&ctx);
		goto out;
	}
	r = root;
	if (!(o->flags & RESTART_DETACH)) {
		int status;
		while (waitpid(root, &status, 0) < 0) {
			if (errno != EINTR) {
				status = 0;
				break;
			}
		}
		o->wait_status = status;
	}
out:
	free_ctx(&ctx);
	return r;
}

int ckpt_restart(pid_t pid, int fd, unsigned long flags, int logfd)
{
	struct ckpt_opts o = { .size = sizeof(o), .flags = flags, .logfd = logfd };
	return ckpt_restart_opts(pid, fd, &o);
}
