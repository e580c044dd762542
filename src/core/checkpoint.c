/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpoint: collect, then dump.
 *
 * Collect seizes every task of the tree, snapshots what /proc says about it
 * and lets each kind look at its objects. Anything that cannot be saved is
 * found here, before a byte is written, and reported with the pid, fd or
 * address and the reason; the tasks are then released unharmed. Dump writes
 * the image; it is complete and fsync'd before a task is killed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "util/cleanup.h"
#include "util/features.h"

#define COPY_BUF (8u << 20)

static void release_task(struct task *t)
{
	for (int k = 0; k < KIND_MAX; k++) {
		if (kinds[k].ops->free_state && t->kstate[k])
			kinds[k].ops->free_state(t->kstate[k]);
		t->kstate[k] = NULL;
	}
	proc_vmas_free(&t->vmas);
}

static void free_obj(int kind, void *ptr)
{
	if (kind >= 0 && kind < KIND_MAX && kinds[kind].ops->free_obj)
		kinds[kind].ops->free_obj(ptr);
}

/* Why pid cannot be seized, as precisely as /proc tells. */
static int explain_seize(struct ckpt_ctx *ctx, pid_t pid, int r)
{
	struct proc_status st;
	char *text = NULL;

	if (r == -ESRCH && proc_read(pid, "status", &text, NULL) < 0)
		return log_fail(&ctx->log, -ESRCH, "pid %d: no such process", pid);
	if (text || proc_read(pid, "status", &text, NULL) == 0) {
		int pr = proc_parse_status(text, &st);
		free(text);
		if (pr == 0 && st.tracer_pid)
			return log_fail(&ctx->log, -EBUSY,
					"pid %d: already traced by pid %d (a debugger?); ptrace "
					"allows one tracer",
					pid, st.tracer_pid);
		if (pr == 0 && st.state == 'Z')
			return log_fail(&ctx->log, -ESRCH, "pid %d: is a zombie", pid);
	}
	if (r == -EPERM)
		return log_fail(&ctx->log, -EPERM,
				"pid %d: not permitted to ptrace it (other user, or "
				"kernel.yama.ptrace_scope); checkpoint needs ptrace rights",
				pid);
	return log_fail(&ctx->log, r, "pid %d: cannot seize it: %s", pid, strerror(-r));
}

static int snapshot_proc(struct ckpt_ctx *ctx, struct task *t)
{
	_cleanup_free_ char *status = NULL, *stat = NULL, *smaps = NULL;
	int r;

	if ((r = proc_read(t->pid, "status", &status, NULL)) < 0 ||
	    (r = proc_read(t->pid, "stat", &stat, NULL)) < 0 ||
	    (r = proc_read(t->pid, "smaps", &smaps, NULL)) < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read /proc: %s", t->pid, strerror(-r));
	if (proc_parse_status(status, &t->status) < 0 || proc_parse_stat(stat, &t->stat) < 0 ||
	    proc_parse_smaps(smaps, &t->vmas) < 0)
		return log_fail(&ctx->log, -EINVAL, "pid %d: cannot parse /proc", t->pid);
	return 0;
}

/* What this version cannot take, said before seizing anything. */
static int check_shape(struct ckpt_ctx *ctx, pid_t pid)
{
	_cleanup_free_ char *status = NULL, *children = NULL;
	struct proc_status st;
	char name[64];
	int r;

	r = proc_read(pid, "status", &status, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r == -ENOENT ? -ESRCH : r, "pid %d: no such process",
				pid);
	if (proc_parse_status(status, &st) < 0)
		return log_fail(&ctx->log, -EINVAL, "pid %d: cannot parse its status", pid);
	if (st.pid != st.tgid)
		return log_fail(&ctx->log, -EINVAL,
				"pid %d: is a thread of process %d; checkpoint the process", pid,
				st.tgid);
	if (st.state == 'Z')
		return log_fail(&ctx->log, -ESRCH, "pid %d: is a zombie", pid);
	if (!(ctx->flags & CKPT_SUBTREE) && !(st.nspid_n > 1 && st.nspid[st.nspid_n - 1] == 1))
		return log_fail(&ctx->log, -EINVAL,
				"pid %d: is not the init of a pid namespace; checkpointing a plain "
				"process tree needs CKPT_SUBTREE",
				pid);
	if (st.threads > 1)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d (%s): has %u threads; multithreaded processes are not "
				"supported yet",
				pid, st.name, st.threads);
	snprintf(name, sizeof(name), "task/%d/children", pid);
	if (proc_read(pid, name, &children, NULL) == 0 && children[0])
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d (%s): has children (%s); process trees are not supported yet",
				pid, st.name, children);
	return 0;
}

static int collect(struct ckpt_ctx *ctx, pid_t pid)
{
	struct task *t;
	int r;

	r = check_shape(ctx, pid);
	if (r < 0)
		return r;
	ctx->tasks = calloc(1, sizeof(*ctx->tasks));
	if (!ctx->tasks)
		return -ENOMEM;
	t = &ctx->tasks[0];
	t->pid = pid;
	t->pup.memfd = -1;
	r = puppet_seize(&t->pup, pid);
	if (r < 0)
		return explain_seize(ctx, pid, r);
	ctx->ntasks = 1;
	log_info(&ctx->log, "pid %d: seized", pid);

	r = snapshot_proc(ctx, t);
	if (r < 0)
		return r;
	if (t->status.threads > 1)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: started a thread while being seized", pid);
	r = puppet_find_syscall(&t->pup);
	if (r < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: has no vDSO to run system calls from; not supported", pid);
	r = puppet_scratch_map(&t->pup, 0, PUPPET_SCRATCH_SIZE);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot map a scratch area in it: %s", pid,
				strerror(-r));
	for (int k = 0; k < KIND_MAX; k++) {
		if (!kinds[k].ops->collect)
			continue;
		r = kinds[k].ops->collect(ctx, t);
		if (r < 0) {
			if (ctx->log.errors == 0)
				log_error(&ctx->log, "pid %d: %s: %s", pid, kinds[k].name,
					  strerror(-r));
			return r;
		}
	}
	for (int k = 0; k < KIND_MAX; k++) {
		r = kinds[k].ops->collect_end ? kinds[k].ops->collect_end(ctx) : 0;
		if (r < 0)
			return r;
	}
	return 0;
}

static void fill_header(struct img_header *h)
{
	struct utsname u;
	struct timespec ts;

	*h = (struct img_header){ .arch = 62, .page_size = 4096 };
	h->xfeatures = features_xcr0();
	h->xsave_size = features_xsave_size();
	if (uname(&u) == 0)
		snprintf(h->kernel_release, sizeof(h->kernel_release), "%s", u.release);
	clock_gettime(CLOCK_REALTIME, &ts);
	h->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int dump_tree(struct ckpt_ctx *ctx)
{
	TreeEntry tree = TREE_ENTRY__INIT;
	TreeTask tt[ctx->ntasks], *ptt[ctx->ntasks];

	for (size_t i = 0; i < ctx->ntasks; i++) {
		const struct task *t = &ctx->tasks[i];
		tree_task__init(&tt[i]);
		tt[i].pid = t->pid;
		tt[i].ppid = t->stat.ppid;
		tt[i].pgid = t->stat.pgrp;
		tt[i].sid = t->stat.session;
		tt[i].has_nthreads = true;
		tt[i].nthreads = t->status.threads;
		ptt[i] = &tt[i];
	}
	tree.tasks = ptt;
	tree.n_tasks = ctx->ntasks;
	return ctx_write_msg(ctx, REC_CORE_TREE, &tree.base);
}

static int dump(struct ckpt_ctx *ctx, int fd)
{
	struct img_header h;
	int r;

	fill_header(&h);
	r = img_writer_init(&ctx->w, fd, &h);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot write the image: %s", strerror(-r));
	ctx->bufsize = COPY_BUF;
	ctx->buf = aligned_alloc(4096, ctx->bufsize);
	if (!ctx->buf)
		return -ENOMEM;
	r = dump_tree(ctx);
	for (size_t i = 0; r >= 0 && i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		TaskBegin tb = TASK_BEGIN__INIT;
		tb.pid = t->pid;
		r = ctx_write_msg(ctx, REC_CORE_TASK, &tb.base);
		for (int k = 0; r >= 0 && k < KIND_MAX; k++)
			if (kinds[k].ops->dump)
				r = kinds[k].ops->dump(ctx, t);
	}
	if (r < 0)
		return r;
	r = img_writer_finish(&ctx->w);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot complete the image: %s", strerror(-r));
	log_info(&ctx->log, "image complete: %llu records, %llu bytes",
		 (unsigned long long)ctx->w.records, (unsigned long long)ctx->w.offset);
	return 0;
}

/* Waits until pid is gone (reaped by its parent), up to timeout_ms. */
static bool wait_gone(pid_t pid, int timeout_ms)
{
	char path[32];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	for (int waited = 0; waited < timeout_ms; waited += 10) {
		if (stat(path, &st) < 0)
			return true;
		usleep(10000);
	}
	return stat(path, &st) < 0;
}

static void finish_tasks(struct ckpt_ctx *ctx, bool ok)
{
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (!t->pup.held)
			continue;
		int e = puppet_scratch_unmap(&t->pup);
		if (e < 0)
			log_warn(&ctx->log, "pid %d: cannot unmap ckpt's scratch area: %s", t->pid,
				 strerror(-e));
		if (ok && (ctx->flags & CKPT_KILL)) {
			puppet_kill(&t->pup);
			continue;
		}
		/* a task that was stopped stays stopped */
		int sig = (ok && (ctx->flags & CKPT_LEAVE_FROZEN)) || t->pup.group_stopped ? SIGSTOP
											     : 0;
		e = puppet_release(&t->pup, sig);
		if (e < 0)
			log_warn(&ctx->log, "pid %d: releasing it failed: %s", t->pid, strerror(-e));
	}
	if (!ok || !(ctx->flags & CKPT_KILL))
		return;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		pid_t pid = ctx->tasks[i].pid;
		if (!wait_gone(pid, 10000))
			log_warn(&ctx->log,
				 "pid %d: killed, but its parent has not reaped it yet; its pid "
				 "stays taken until then",
				 pid);
	}
}

int ckpt_checkpoint_opts(pid_t pid, int fd, struct ckpt_opts *o)
{
	struct ckpt_ctx ctx = { 0 };
	int r;

	log_init(&ctx.log, o ? o->logfd : -1, o && o->log_level ? o->log_level : CKPT_LOG_INFO,
		 o ? o->errbuf : NULL, o ? o->errbuf_len : 0, "checkpoint");
	if (!o || o->size < sizeof(*o) || (o->flags & ~CKPT_FLAGS_ALL))
		return log_fail(&ctx.log, -EINVAL, "unknown checkpoint flags or options");
	if (pid <= 0)
		return log_fail(&ctx.log, -EINVAL, "pid %d: not a valid pid", pid);
	if (pid == getpid())
		return log_fail(&ctx.log, -EINVAL, "pid %d: ckpt cannot checkpoint itself", pid);
	if ((o->flags & CKPT_KILL) && (o->flags & CKPT_LEAVE_FROZEN))
		return log_fail(&ctx.log, -EINVAL, "CKPT_KILL and CKPT_LEAVE_FROZEN exclude each other");
	ctx.flags = o->flags;
	r = objhash_init(&ctx.objs);
	if (r < 0)
		return r;

	r = collect(&ctx, pid);
	if (r >= 0)
		r = dump(&ctx, fd);
	finish_tasks(&ctx, r >= 0);
	if (r >= 0)
		log_info(&ctx.log, "pid %d: checkpoint done%s", pid,
			 (o->flags & CKPT_KILL) ? ", killed" : "");

	for (size_t i = 0; i < ctx.ntasks; i++)
		release_task(&ctx.tasks[i]);
	free(ctx.tasks);
	free(ctx.buf);
	objhash_free(&ctx.objs, free_obj);
	return r < 0 ? r : 0;
}

int ckpt_checkpoint(pid_t pid, int fd, unsigned long flags, int logfd)
{
	struct ckpt_opts o = { .size = sizeof(o), .flags = flags, .logfd = logfd };
	return ckpt_checkpoint_opts(pid, fd, &o);
}
