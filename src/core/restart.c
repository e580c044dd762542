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
#include <sched.h>
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
#include "core/netlock.h"
#include "core/sequence.h"
#include "kinds/mm.h"
#include "util/cleanup.h"
#include "util/fault.h"
#include "util/features.h"
#include "util/esc.h"
#include "util/rtprio.h"
#include "util/safefile.h"
#include "util/sigfwd.h"

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
	/* the same rule as the regs kind's, up front: nothing is built for an image
	 * whose FPU state this CPU cannot take */
	uint64_t have = features_xcr0();
	if (h->xfeatures & ~have)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"image was made on a CPU with state features %#llx that this CPU "
				"lacks (it has %#llx)",
				(unsigned long long)(h->xfeatures & ~have), (unsigned long long)have);
	if (h->xsave_size != features_xsave_size())
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"image has an FPU state of %u bytes; this CPU's is %u", h->xsave_size,
				features_xsave_size());
	/* informational: what a restart needs of the kernel is checked where it
	 * is used (vDSO layout, features); a different release is only noted */
	if (uname(&u) == 0 && strncmp(u.release, h->kernel_release, sizeof(h->kernel_release))) {
		char rel[ESC_SIZE(sizeof(h->kernel_release))];
		log_warn(&ctx->log, "image was made on kernel %s, this is %s",
			 esc_str(rel, sizeof(rel), h->kernel_release), u.release);
	}
	return 0;
}

static int load_task_begin(struct rst_ctx *ctx, const struct img_record *rec,
			   struct rst_task **cur)
{
	TaskBegin *tb = rctx_unpack(ctx, rec, &task_begin__descriptor);
	if (!tb)
		return -EINVAL;
	pid_t pid = (pid_t)tb->pid;
	task_begin__free_unpacked(tb, NULL);
	struct rst_task *t = tree_find(ctx, pid);
	if (!t || t->zombie)
		return log_fail(&ctx->log, -EINVAL, "record %u: pid %d is not a live task of the tree",
				rec->index, pid);
	if (t->begun)
		return log_fail(&ctx->log, -EINVAL, "record %u: pid %d begins twice", rec->index, pid);
	t->begun = true;
	*cur = t;
	return 0;
}

/* Step "load": the image read, checked and decoded record by record. */
int rst_load_image(struct rst_ctx *ctx)
{
	struct img_error err = { 0 };
	struct img_record rec;
	struct rst_task *cur = NULL;
	int r;

	bool lazy = ctx->flags & RESTART_LAZY;
	/* lazily, a file's pages are read when the server needs them */
	r = lazy && !ctx->key ? img_reader_open_lazy(&ctx->r, ctx->image_fd, &err)
			      : img_reader_open_key(&ctx->r, ctx->image_fd, ctx->key, IMG_KEY_BYTES,
						    &err);
	if (r < 0)
		return image_error(ctx, r, &err);
	log_debug(&ctx->log, "image loaded: %zu bytes", ctx->r.size);
	if (lazy && (r = mm_lazy_image(ctx)) < 0)
		return r;
	if (!lazy && !ctx->key)
		mm_pages_checked_late(ctx);
	r = img_reader_validate(&ctx->r, &err);
	if (r < 0)
		return image_error(ctx, r, &err);
	log_debug(&ctx->log, "frames and checksums are good");
	r = check_header(ctx);
	if (r < 0)
		return r;
	while ((r = img_reader_next(&ctx->r, &rec, &err)) == 0) {
		enum kind k;
		if (rec.flags) { /* ckpt writes none: a forged or newer image */
			r = log_fail(&ctx->log, -EOPNOTSUPP, "record %u at offset %llu: unknown flags %#x",
				     rec.index, (unsigned long long)rec.offset, rec.flags);
		} else if (rec.type == IMG_REC_INDEX) {
			r = 0; /* the reader's (img.h) */
		} else if (rec.type == REC_CORE_TREE) {
			r = tree_load(ctx, &rec);
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
	return 0;
}

/* Step "control": the control socket, its fd number in the puppets above
 * every fd of every task (ctx->max_fd, from the fd table's kind). */
int rst_open_control(struct rst_ctx *ctx)
{
	struct rlimit nofile;
	int max = MAX(2, ctx->max_fd);

	ctx->ctl_remote = max + 1;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && (rlim_t)ctx->ctl_remote >= nofile.rlim_cur)
		return log_fail(&ctx->log, -EMFILE, "the image uses fd %d, above ckpt's open-file "
				"limit %llu", max, (unsigned long long)nofile.rlim_cur);
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ctx->ctl) < 0)
		return log_fail(&ctx->log, -errno, "socketpair: %s", strerror(errno));
	return 0;
}

/*
 * Step "clean": the control socket closed (where the last batch of "task
 * state" did not, sequence.c) in up to PUPPET_MANY_MAX
 * processes at a time, side by side (each by its stub, its table after its
 * scratch area; their stops overlap), then their scratch areas unmapped,
 * side by side too (each munmap a step, started before any is waited for).
 */
int rst_clean_tasks(struct rst_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nimage;) {
		struct rst_task *ts[PUPPET_MANY_MAX];
		struct puppet *ps[PUPPET_MANY_MAX];
		struct puppet_call c[PUPPET_MANY_MAX], *calls[PUPPET_MANY_MAX];
		size_t ns[PUPPET_MANY_MAX], n = 0;
		uint64_t tables[PUPPET_MANY_MAX];
		int err[PUPPET_MANY_MAX];
		size_t nc = 0;
		for (; i < ctx->nimage && n < PUPPET_MANY_MAX; i++) {
			struct rst_task *t = &ctx->tasks[i];
			if (t->zombie)
				continue;
			ts[n++] = t;
			if (t->ctl_closed) /* by its last batch at "task state" */
				continue;
			ps[nc] = &t->pup;
			c[nc] = PUPPET_CALL(SYS_close, ctx->ctl_remote);
			calls[nc] = &c[nc];
			ns[nc] = 1;
			tables[nc++] = t->pup.scratch + t->pup.scratch_len;
		}
		if (nc)
			puppet_syscalls_many(ps, calls, ns, tables, nc, err);
		/* the last injected call: nothing of ckpt stays in the task */
		for (size_t j = 0; j < n; j++)
			ps[j] = &ts[j]->pup;
		puppet_scratch_unmap_many(ps, n, err);
		for (size_t j = 0; j < n; j++)
			if (err[j] < 0)
				return log_fail(&ctx->log, err[j],
						"pid %d: cannot unmap the scratch area: %s",
						ts[j]->pid, strerror(-err[j]));
	}
	return 0;
}

/*
 * Step "release": the guardian watches every task, then each runs,
 * children first (a parent runs once its children are there); those in a
 * job-control stop, or all with RESTART_FROZEN, stay stopped.
 */
/* A task released with a stop queued has stopped (state T): "restored and
 * running" then means what the image said, also for whoever looks first. */
static void wait_stopped(struct rst_ctx *ctx, int sig)
{
	for (size_t i = 0; i < ctx->nimage; i++) {
		struct rst_task *t = &ctx->tasks[i];
		if (t->zombie || !(t->stopped || sig == SIGSTOP))
			continue;
		for (int waited = 0; waited < 5000; waited++) {
			_cleanup_free_ char *text = NULL;
			struct proc_status st;
			if (proc_read(t->pup.pid, "status", &text, NULL) < 0 ||
			    proc_parse_status(text, &st) < 0 || st.state == 'T' || st.state == 't' ||
			    st.state == 'Z' || st.state == 'X')
				break;
			usleep(1000);
		}
	}
}

/* The signal that stops t as it was stopped: a SIGTSTP the kernel would
 * drop (an orphaned group: its parent outside the image is not the shell
 * it had) becomes SIGSTOP, so that it stops all the same. */
static int stop_signal(const struct rst_task *t)
{
	struct proc_stat st;
	_cleanup_free_ char *text = NULL;
	if (t->stop_sig == SIGSTOP || proc_read(t->pup.pid, "stat", &text, NULL) < 0 ||
	    proc_parse_stat(text, &st) < 0 || proc_pgrp_orphaned(st.pgrp))
		return SIGSTOP;
	return t->stop_sig;
}

int rst_release_tree(struct rst_ctx *ctx)
{
	int sig = (ctx->flags & RESTART_FROZEN) ? SIGSTOP : 0;
	int r = 0;
	/* the puppets die with ckpt while held (PTRACE_O_EXITKILL), but the
	 * released ones would run on: until the restart is complete, the
	 * guardian kills them all if ckpt dies */
	for (size_t i = 0; r >= 0 && i < ctx->ntasks; i++)
		if (ctx->tasks[i].pup.held)
			r = puppet_guard_watch(ctx->watch, ctx->tasks[i].pup.pid);
	if (r >= 0 && ctx->init.held)
		r = puppet_guard_watch(ctx->watch, ctx->init.pid);
	if (r < 0)
		return log_fail(&ctx->log, r, "the guardian process cannot watch the tree: %s",
				strerror(-r));
	/* complete only once those let go in a call are in it again */
	struct puppet_asleep asleep = {0};
	for (size_t i = ctx->nimage; i-- > 0;) {
		struct rst_task *t = &ctx->tasks[i];
		if (t->zombie)
			continue;
		int stop = t->stopped ? stop_signal(t) : sig;
		for (size_t j = 0; j < t->nthreads; j++) {
			int e = puppet_release(&t->threads[j].pup, stop);
			if (e < 0 && r >= 0)
				r = log_fail(&ctx->log, e, "thread %d: cannot release it: %s",
					     t->threads[j].pid, strerror(-e));
			if (!stop)
				puppet_asleep_add(&asleep, &t->threads[j].pup);
		}
		int e = puppet_release(&t->pup, stop);
		if (e < 0 && r >= 0)
			r = log_fail(&ctx->log, e, "pid %d: cannot release it: %s", t->pid,
				     strerror(-e));
		if (!stop)
			puppet_asleep_add(&asleep, &t->pup);
	}
	if (r >= 0) {
		wait_stopped(ctx, sig);
		ctx_wait_asleep(&ctx->log, &asleep);
	} else {
		free(asleep.tasks);
	}
	return r < 0 ? r : tree_release_init(ctx);
}

/*
 * Kills every process made so far, children first, and has each one
 * reaped by its parent puppet while that is still held (an injected
 * wait4), so that no zombie is left for init to reap late.
 */
static void kill_created(struct rst_ctx *ctx)
{
	for (size_t i = ctx->ntasks; i-- > 0;) {
		struct rst_task *t = &ctx->tasks[i];
		for (size_t j = 0; j < t->nthreads; j++) {
			if (t->threads[j].created)
				puppet_kill(&t->threads[j].pup);
			t->threads[j].created = false;
		}
		if (!t->created)
			continue;
		puppet_kill(&t->pup);
		t->created = false;
		struct rst_task *p = t->parent >= 0 ? &ctx->tasks[t->parent] : NULL;
		if (p && p->pup.held)
			puppet_syscall(&p->pup, SYS_wait4, t->pid, 0, __WALL, 0);
	}
	/* ckpt's init, last: its namespace goes with it */
	if (ctx->init.pid > 0)
		puppet_kill(&ctx->init);
	for (int k = 0; k < KIND_MAX; k++)
		if (kinds[k].ops->restore_abort)
			kinds[k].ops->restore_abort(ctx);
}

/* A new file renamed over path: a symlink planted there is never followed. */
static int write_pidfile(struct rst_ctx *ctx, const char *path, pid_t pid)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", pid);
	int r = safe_write_file(path, buf, (size_t)n);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot write pidfile '%s': %s", path, strerror(-r));
	return 0;
}

static void free_task(struct rst_task *t)
{
	for (int k = 0; k < KIND_MAX; k++)
		if (t->kstate[k] && kinds[k].ops->free_rstate)
			kinds[k].ops->free_rstate(t->kstate[k]);
	puppet_forget(&t->pup);
}

/* The context freed, and ckpt's thread back at the caller's priority. */
static void free_ctx(struct rst_ctx *ctx)
{
	rst_netlock_unlock(ctx, false); /* the restart's own, if still there */
	puppet_guard_done(ctx->watch); /* waited for last: its exit overlaps the rest */
	rtprio_restore(&ctx->prio);
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct rst_task *t = &ctx->tasks[i];
		for (size_t j = 0; j < t->nthreads; j++)
			free_task(&t->threads[j]);
		free_task(t);
	}
	puppet_forget(&ctx->init);
	arena_free(&ctx->msgs);
	free(ctx->sched_start);
	free(ctx->limits_start);
	free(ctx->sig_had);
	for (size_t i = 0; ctx->cg_before && i < ctx->ntasks; i++)
		free(ctx->cg_before[i]);
	free(ctx->cg_before);
	free(ctx->tasks);
	free(ctx->by_pid);
	objhash_free(&ctx->objs, free_robj);
	img_reader_close(&ctx->r);
	for (int i = 0; i < 2; i++)
		if (ctx->ctl[i] >= 0)
			close(ctx->ctl[i]);
	puppet_guard_end(ctx->watch);
	ctx->watch = NULL;
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
	if ((flags & RESTART_VERIFY) && !(flags & RESTART_GHOST))
		return log_fail(&ctx->log, -EINVAL, "RESTART_VERIFY goes with RESTART_GHOST");
	if ((flags & RESTART_FORWARD_SIGNALS) && (flags & RESTART_DETACH))
		return log_fail(&ctx->log, -EINVAL,
				"RESTART_FORWARD_SIGNALS needs a restart that waits (not RESTART_DETACH)");
	if (pid != 0)
		return log_fail(&ctx->log, -EINVAL,
				"restart pid must be 0: processes get the pids of the image");
	return 0;
}

/* What the image holds, for the caller (none when res is NULL). */
static void fill_result(struct rst_ctx *ctx, struct ckpt_result *res, uint64_t t0)
{
	if (!res)
		return;
	*res = (struct ckpt_result){ .processes = ctx->nimage, .memory_bytes = ctx->mem_bytes,
				     .image_bytes = ctx->r.size, .warnings = ctx->log.warnings,
				     .elapsed_us = now_us() - t0 };
	for (size_t i = 0; i < ctx->nimage; i++)
		res->threads += ctx->tasks[i].zombie ? 0 : 1 + ctx->tasks[i].nthreads;
}

/* What the kinds keep past the context, once the tree runs (handover). */
struct kept {
	void *state[KIND_MAX];
};

static void hand_over(struct rst_ctx *ctx, struct kept *kept)
{
	for (int k = 0; k < KIND_MAX; k++)
		kept->state[k] = kinds[k].ops->handover ? kinds[k].ops->handover(ctx) : NULL;
}

/*
 * Waits for the restored tree (child: the root, or ckpt's init) through
 * the first kind that kept something and waits, or plainly; then every
 * kind undoes what it kept, last kind first.
 */
static int wait_tree(struct kept *kept, pid_t child, bool detached)
{
	int status = 0;
	for (int k = 0; !detached && k <= KIND_MAX; k++) {
		if (k == KIND_MAX) {
			while (waitpid(child, &status, 0) < 0 && errno == EINTR)
				;
			break;
		}
		if (kept->state[k] && kinds[k].ops->wait) {
			if (kinds[k].ops->wait(kept->state[k], child, &status) < 0)
				status = 0;
			break;
		}
	}
	/* undone in reverse kinds.def order: the terminal is ckpt's again
	 * before the cgroups are removed (which may wait for them to empty) */
	for (int k = KIND_MAX; k-- > 0;)
		if (kinds[k].ops->handed_back)
			kinds[k].ops->handed_back(kept->state[k], detached);
	return status;
}

/* Options and flags into the context; the guardian started. */
static int open_ctx(struct rst_ctx *ctx, pid_t pid, int fd, struct ckpt_opts *o)
{
	log_init(&ctx->log, o ? o->logfd : -1, o && o->log_level ? o->log_level : CKPT_LOG_INFO,
		 o ? o->errbuf : NULL, o ? o->errbuf_len : 0, "restart");
	int r = o ? opts_key(o, &ctx->key) : -EINVAL;
	if (r == -E2BIG)
		return log_fail(&ctx->log, r, "options of a newer ckpt (a struct ckpt_opts of %zu "
				"bytes with options this one lacks)", o->size);
	if (r < 0)
		return log_fail(&ctx->log, -EINVAL, "bad restart options (or a key that is not %d bytes)",
				CKPT_KEY_BYTES);
	if (o->size >= offsetof(struct ckpt_opts, n_inherit_fds) + sizeof(size_t) &&
	    o->n_inherit_fds) {
		if (!o->inherit_fds || o->n_inherit_fds > 1024)
			return log_fail(&ctx->log, -EINVAL, "bad inherit_fds (%zu of them)",
					o->n_inherit_fds);
		ctx->inherit = o->inherit_fds;
		ctx->ninherit = o->n_inherit_fds;
	}
	if (o->flags & RESTART_PLAIN_PARENTS) {
		if (o->size < offsetof(struct ckpt_opts, parent) + sizeof(o->parent) || !o->parent)
			return log_fail(&ctx->log, -EINVAL, "RESTART_PLAIN_PARENTS needs the "
					"parents' directory in ckpt_opts.parent");
		ctx->parents_dir = o->parent;
	}
	r = check_flags(ctx, pid, o->flags);
	if (r < 0)
		return r;
	ctx->flags = o->flags;
	/* the puppets forked from ckpt never touch the messages; the lazy
	 * server, forked too, keeps ckpt's memory */
	ctx->msgs.dontfork = !(o->flags & RESTART_LAZY);
	ctx->pidns = o->flags & RESTART_PIDNS;
	ctx->image_fd = fd;
	/* forked now, while ckpt is small */
	r = puppet_guard_start(&ctx->watch);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot start the guardian process: %s", strerror(-r));
	/* RESTART_CONN_RESET (--tcp-close) stays in ctx->flags for the inet kind:
	 * established connections come back closed, listeners live */
	if (o->flags & RESTART_CONN_RESET)
		log_info(&ctx->log, "RESTART_CONN_RESET: established TCP connections come back reset");
	return objhash_init(&ctx->objs);
}

/* The image read and checked, everything on ckpt's side made, the restored
 * connections locked. */
static int read_image(struct rst_ctx *ctx)
{
	log_debug(&ctx->log, "reading the image");
	int r = seq_rst_run(ctx, RST_LOAD, RST_LOCK);
	if (r < 0)
		return r;
	log_info(&ctx->log, "image validated: %zu process(es)", ctx->ntasks);
	return 0;
}

/* The tree released and running; with a pidfile, named there. */
static int run_tree(struct rst_ctx *ctx, const struct ckpt_opts *o, pid_t root)
{
	int r = seq_rst_run(ctx, RST_BEFORE_RELEASE, RST_UNLOCK);
	/* every task runs: the restart is complete and the guardian is told
	 * so before anyone else is (it is waited for in free_ctx, after
	 * ckpt's own teardown, which its exit overlaps) */
	int e = puppet_guard_done(ctx->watch);
	if (e < 0 && r >= 0)
		r = log_fail(&ctx->log, e, "the guardian process could not watch the tree: %s",
			     strerror(-e));
	if (r >= 0)
		log_info(&ctx->log, "pid %d: restored and running%s", root,
			 (o->flags & RESTART_FROZEN) ? " (stopped)" : "");
	if (r >= 0 && o->pidfile)
		r = write_pidfile(ctx, o->pidfile, root);
	if (r < 0)
		kill_created(ctx);
	return r;
}

/* RESTART_FROZEN: the processes a caller continuing the tree leaves in
 * their job-control stop (ckpt_opts.stopped). */
static void tell_stopped(const struct rst_ctx *ctx, struct ckpt_opts *o)
{
	if (!(o->flags & RESTART_FROZEN) ||
	    o->size < offsetof(struct ckpt_opts, n_stopped) + sizeof(o->n_stopped))
		return;
	o->n_stopped = 0;
	for (size_t i = 0; i < ctx->nimage; i++) {
		const struct rst_task *t = &ctx->tasks[i];
		if (t->zombie || !t->stopped)
			continue;
		if (o->stopped && o->n_stopped < o->stopped_max)
			o->stopped[o->n_stopped] = t->pup.pid;
		o->n_stopped++;
	}
}

/*
 * While it makes a tree of little memory, ckpt's thread runs on one CPU,
 * and the puppets, which inherit its affinity, with it: a stop is then a
 * switch on that CPU rather than a wakeup of the other one (an IPI to an
 * idle virtual CPU here): a tree of 100 small processes spent about half
 * its "task state" so. The sched kind gives every task its own affinity
 * (within ckpt's from before: ctx->affinity), and ckpt takes its own back
 * before the release. Not where pages are written by two threads (a
 * process with 4 MiB of them or more, see pages_set_apply; or as much of
 * files' and segments' data), nor with a helper of ckpt's that outlives
 * the making (the lazy server, ckpt's init of RESTART_PIDNS).
 */
#define PIN_MAX_BYTES (4ull << 20)
static void pin_cpu(struct rst_ctx *ctx)
{
	if ((ctx->flags & (RESTART_LAZY | RESTART_PIDNS)) || ctx->data_bytes >= PIN_MAX_BYTES ||
	    mm_largest_pages(ctx) >= PIN_MAX_BYTES)
		return;
	cpu_set_t *all = malloc(sizeof(*all)), one;
	int cpu = sched_getcpu();
	if (!all || cpu < 0 || sched_getaffinity(0, sizeof(*all), all) < 0 || CPU_COUNT(all) < 2 ||
	    !CPU_ISSET(cpu, all)) {
		free(all);
		return;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one) < 0) {
		free(all);
		return;
	}
	ctx->affinity = all;
	log_debug(&ctx->log, "ckpt's thread on CPU %d while it makes the tree", cpu);
}

static void unpin_cpu(struct rst_ctx *ctx)
{
	if (ctx->affinity)
		(void)sched_setaffinity(0, sizeof(*ctx->affinity), ctx->affinity);
	free(ctx->affinity);
	ctx->affinity = NULL;
}

int ckpt_restart_opts(pid_t pid, int fd, struct ckpt_opts *o)
{
	struct rst_ctx ctx = { .ctl = { -1, -1 }, .init = { .memfd = -1 }, .max_fd = -1 };
	struct kept kept;
	uint64_t t0 = now_us();

	int r = open_ctx(&ctx, pid, fd, o);
	progress_init(&ctx.progress, o, CKPT_PHASE_RESTART, t0);
	if (r >= 0)
		r = read_image(&ctx);
	if (r < 0) {
		free_ctx(&ctx);
		return r;
	}
	ctx.progress.total = ctx.mem_bytes + ctx.data_bytes;
	pin_cpu(&ctx);
	r = seq_rst_run(&ctx, RST_CONTROL, RST_END);
	unpin_cpu(&ctx);
	progress_end(&ctx.progress);
	if (r >= 0)
		fill_result(&ctx, opts_result(o), t0);
	if (r < 0 || (o->flags & RESTART_GHOST)) {
		kill_created(&ctx);
		if (r >= 0)
			log_info(&ctx.log, "dry run: built and torn down");
		free_ctx(&ctx);
		return r;
	}
	/* as seen from here: a container's root is pid 1 only inside */
	pid_t root = ctx.tasks[0].pup.pid;
	/* from the release on, a signal to pass on is held until forwarding
	 * starts (before, one that came in between ended ckpt, the restored
	 * tree running on without it) */
	struct sigfwd fwd = { 0 };
	if ((o->flags & RESTART_FORWARD_SIGNALS) && (r = sigfwd_hold(&fwd)) < 0)
		log_warn(&ctx.log, "signals sent to ckpt will not reach pid %d: %s", root,
			 strerror(-r));
	r = run_tree(&ctx, o, root);
	if (r < 0) {
		sigfwd_stop(&fwd);
		free_ctx(&ctx);
		return r;
	}
	tell_stopped(&ctx, o);
	struct ckpt_result *res = opts_result(o);
	if (res) {
		res->root = root;
		res->elapsed_us = now_us() - t0;
		res->warnings = ctx.log.warnings;
	}
	CKPT_FAULT(CKPT_FAULT_RUNNING);
	/* under ckpt's init, the init is our child and ends with the root */
	pid_t child = ctx.pidns ? ctx.init.pid : root;
	hand_over(&ctx, &kept);
	/* after the hand-over (the lazy server's commit): a caller that dies
	 * in its callback (SIGPIPE) leaves the tree running */
	if (o->size >= offsetof(struct ckpt_opts, running_arg) + sizeof(void *) && o->running)
		o->running(o->running_arg, root);
	if (fwd.held && (r = sigfwd_start(&fwd, root)) < 0) {
		log_warn(&ctx.log, "signals sent to ckpt will not reach pid %d: %s", root,
			 strerror(-r));
		sigfwd_stop(&fwd);
	}
	/* ckpt lets go of every file first: a restored reader must see EOF
	 * when its writers close, not wait on ckpt's copy */
	free_ctx(&ctx);
	int status = wait_tree(&kept, child, o->flags & RESTART_DETACH);
	sigfwd_stop(&fwd);
	if (!(o->flags & RESTART_DETACH))
		o->wait_status = status;
	return root;
}

/*
 * Not exported: what the fuzzer drives. Reads, checks and loads every
 * record of the image as a restart would, then frees it all; no process,
 * file or namespace is touched.
 */
int rst_load_only(int fd, char *errbuf, size_t errbuf_len)
{
	struct rst_ctx ctx = { .ctl = { -1, -1 }, .init = { .memfd = -1 }, .image_fd = fd };
	int r;

	log_init(&ctx.log, -1, CKPT_LOG_INFO, errbuf, errbuf_len, "restart");
	r = objhash_init(&ctx.objs);
	if (r >= 0)
		r = seq_rst_run(&ctx, RST_LOAD, RST_CHECK);
	free_ctx(&ctx);
	return r;
}

int ckpt_restart(pid_t pid, int fd, unsigned long flags, int logfd)
{
	struct ckpt_opts o = { .size = sizeof(o), .flags = flags, .logfd = logfd };
	return ckpt_restart_opts(pid, fd, &o);
}
