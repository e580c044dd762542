/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The order of a checkpoint and of a restart, each in one table. A step is
 * ckpt's own part (the driver function named) and then one op of every
 * kind that has it, in kinds.def order. What each op is for is in kinds.h;
 * DESIGN.md tells the sequence in prose.
 */
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "core/sequence.h"

#include "core/netlock.h"
#include "kinds/mm.h"

/*
 * Checkpoint. Nothing is written before "dump": a refusal at "collect" or
 * "collect end" leaves the tree as it was. The image is complete and
 * fsync'd before a task is killed (CKPT_KILL, at "let go").
 */
const struct ckpt_step ckpt_sequence[CKPT_NSTEPS] = {
	/* the tree runs: with a parent, the pages written since it copied
	 * (mm-dirty.c); under the freeze only what is written after */
	[CKPT_PRE_COPY] = { "pre-copy", mm_pre_copy, NULL, 0, STEP_NONE, STEP_NOT_LIVE, NULL },
	/* what a kind begins beside the hold out and the seize (locks.c:
	 * /proc/locks kept quick to read) */
	[CKPT_BEFORE_SEIZE] = { "before seize", NULL, NULL, KOP(seizing), STEP_ONCE, STEP_NOT_LIVE,
				NULL },
	/* the tree runs: new clients of its listeners held out until it has
	 * accepted what they queued (netdrain.c) */
	[CKPT_HOLD_OUT] = { "hold out", ckpt_netlock_hold, NULL, 0, STEP_NONE, STEP_NOT_LIVE, NULL },
	/* every task and thread of the tree held, ids inside its pid namespace */
	[CKPT_SEIZE] = { "seize", ckpt_seize, NULL, 0, STEP_NONE, 0, NULL },
	/* with a pre-copy: the frozen scan of the pages begun, on a thread of
	 * its own while collect reads /proc (mm-dirty.c); what a kind begins
	 * beside collect (locks.c: /proc/locks read) */
	[CKPT_FROZEN_SCAN] = { "frozen scan", mm_pre_freeze, NULL, KOP(frozen), STEP_ONCE,
			       STEP_NOT_LIVE, NULL },
	/* /proc read, ckpt's scratch mapped, the injected calls every kind needs
	 * (its probe op, seq_ckpt_probe) run as one batch; then what each kind
	 * finds */
	[CKPT_COLLECT] = { "collect", NULL, ckpt_collect_task, KOP(collect), STEP_TASKS,
			   STEP_GATHER, "" },
	/* checks over the whole tree */
	[CKPT_COLLECT_END] = { "collect end", NULL, NULL, KOP(collect_end), STEP_ONCE, STEP_GATHER,
			       NULL },
	/* header and tree record; each task's begin record, then its kinds'
	 * (in a pre-copy round, only the kinds that have a dump_live op) */
	[CKPT_DUMP] = { "dump", ckpt_dump_begin, ckpt_task_begin, KOP(dump), STEP_TASKS, 0, NULL },
	/* what a kind checks once the dump is done (locks.c: /proc/locks) */
	[CKPT_DUMP_END] = { "dump end", NULL, NULL, KOP(dump_end), STEP_ONCE, 0, NULL },
	/* the trailer: the image is complete */
	/* (a tree that runs on has it after "let go": the fsync is not frozen time) */
	[CKPT_IMAGE_END] = { "image end", ckpt_dump_end, NULL, 0, STEP_NONE,
			     STEP_NOT_LIVE | STEP_HELD, NULL },
	/* would a restart by this caller work? (precheck.c, which runs the
	 * kinds' op for each task, and the dry run of CKPT_VERIFY) */
	[CKPT_CHECK_RESTORE] = { "check restore", precheck_restore, NULL, KOP(check_restore),
				 STEP_EACH, STEP_KILL, "a restart would fail: " },
	/* a container: who entered it from outside since the seize, the
	 * moment before the kill (outside.c) */
	[CKPT_LOOK_AGAIN] = { "look again", ctx_look_outside, NULL, 0, STEP_NONE, STEP_KILL, NULL },
	/* the caller names the image; CKPT_KILL: the guardian kills if ckpt dies */
	[CKPT_IMAGE_DONE] = { "image done", ckpt_image_done, NULL, 0, STEP_NONE,
			      STEP_NOT_LIVE | STEP_HELD, NULL },
	/* what collect put in the tasks taken out, while they are held */
	[CKPT_FINISH] = { "finish", NULL, NULL, KOP(finish), STEP_ONCE, STEP_VOID | STEP_ALWAYS,
			  NULL },
	/* the tasks released (or left stopped), or with CKPT_KILL killed */
	[CKPT_LET_GO] = { "let go", ckpt_let_go, NULL, 0, STEP_NONE, STEP_ALWAYS, NULL },
	/* a tree that runs on: its image completed (the trailer, fsync) and
	 * named once it runs again; nothing it does now is in the image */
	[CKPT_IMAGE_END_LATE] = { "image end", ckpt_dump_end, NULL, 0, STEP_NONE,
				  STEP_NOT_LIVE | STEP_RUNS_ON, NULL },
	[CKPT_IMAGE_DONE_LATE] = { "image done", ckpt_image_done, NULL, 0, STEP_NONE,
				   STEP_NOT_LIVE | STEP_RUNS_ON, NULL },
	/* what the dead tree held outside itself, now the image's */
	[CKPT_AFTER_KILL] = { "after kill", NULL, NULL, KOP(after_kill), STEP_ONCE,
			      STEP_VOID | STEP_KILL, NULL },
	/* a migrated tree of ckpt's network namespace: its addresses deleted
	 * here, then its network lock removed (netlock.c) */
	[CKPT_UNLOCK_MOVED] = { "unlock moved", ckpt_netlock_moved, NULL, 0, STEP_NONE, STEP_KILL,
				NULL },
	/* a pre-copy round (CKPT_PRECOPY): the tree runs again; what dump
	 * noted (the pages to send) is read from it and written */
	[CKPT_LIVE] = { "live", NULL, NULL, KOP(dump_live), STEP_TASKS, STEP_LIVE, NULL },
	/* the pre-copy round's trailer */
	[CKPT_LIVE_END] = { "live end", ckpt_dump_end, NULL, 0, STEP_NONE, STEP_LIVE, NULL },
};

/*
 * Restart. Nothing is made before "prepare" ends: the image is read and
 * checked whole first. From "spawn root" on, a failure kills every process
 * made and calls each kind's restore_abort. A dry run (RESTART_GHOST) stops
 * after "end".
 */
const struct rst_step rst_sequence[RST_NSTEPS] = {
	/* every record decoded by its kind's load (restart.c) */
	[RST_LOAD] = { "load", rst_load_image, 0, STEP_NONE },
	/* every task and thread has what each kind needs of it */
	[RST_CHECK] = { "check", NULL, KOP(loaded), STEP_TASKS },
	/* files and everything else made on ckpt's side */
	[RST_PREPARE] = { "prepare", NULL, KOP(prepare), STEP_ONCE },
	/* the restored connections' packets dropped until they run (netlock.c) */
	[RST_LOCK] = { "network lock", rst_netlock_lock, 0, STEP_NONE },
	/* the control socket, its fd above every fd of the image */
	[RST_CONTROL] = { "control", rst_open_control, 0, STEP_NONE },
	/* the root, in its new namespaces (user namespace maps) */
	[RST_SPAWN_ROOT] = { "spawn root", tree_spawn_root, KOP(root_spawned), STEP_ROOT },
	/* the root takes injected calls, has forked nothing yet: what its
	 * children find (mounts, devpts ptys, cgroup namespace, SysV IPC) */
	[RST_ROOT_READY] = { "root ready", tree_root_ready, KOP(root_ready), STEP_ROOT },
	/* every other task forked by its creator (tree.c), and for each: */
	[RST_CREATE] = { "create tasks", tree_create_tasks, 0, STEP_NONE },
	/* - before it is forked (memory its parent must have first) */
	[RST_FORK] = { "fork", NULL, KOP(before_fork), STEP_EACH },
	/* - right after its setsid(), before it forks (controlling tty) */
	[RST_SESSION] = { "session", NULL, KOP(session), STEP_EACH },
	/* - then, before it forks or gets anything (its network namespace) */
	[RST_FORKED] = { "forked", NULL, KOP(forked), STEP_EACH },
	/* process groups joined (foreground groups) */
	[RST_GROUPS] = { "groups", tree_set_groups, KOP(groups_ready), STEP_ONCE },
	/* threads made; ghosts and zombies exit (whole-tree work: unix queues,
	 * pidfds of dead processes) */
	[RST_TREE_READY] = { "tree ready", tree_create_threads, KOP(tree_ready), STEP_ONCE },
	/* each task's own state */
	[RST_TASK_STATE] = { "task state", NULL, KOP(restore), STEP_TASKS },
	/* nothing of ckpt left in the tasks */
	[RST_CLEAN] = { "clean", rst_clean_tasks, 0, STEP_NONE },
	/* last work on ckpt's side, nothing running yet */
	[RST_END] = { "end", NULL, KOP(restore_end), STEP_ONCE },
	/* a shell job takes ckpt's terminal */
	[RST_BEFORE_RELEASE] = { "before release", NULL, KOP(release), STEP_ONCE },
	/* the tree runs, children first */
	[RST_RELEASE] = { "release", rst_release_tree, 0, STEP_NONE },
	/* the restored sockets run: the restart's lock and the one a
	 * checkpoint --kill left are removed */
	[RST_UNLOCK] = { "network unlock", rst_netlock_open, 0, STEP_NONE },
	/* then (restart.c): each kind's handover, the context freed with every
	 * file of it, the wait (a kind's wait op, or waitpid) unless detached,
	 * handed_back in reverse order; on a failure from "spawn root" on, or
	 * after "end" in a dry run: every process killed, restore_abort */
};

/*
 * Where a step's time went: each kind's ops of the step, added up over the
 * tasks, for the debug line "... step NAME: done in N us (kind N, ...)"
 * that the migration's breakdown (bench/migrate.py --timing) reads. Kinds
 * under 200 us are left out.
 */
struct step_times {
	uint64_t us[KIND_MAX];
};

static void times_add(struct step_times *st, int k, uint64_t t0)
{
	if (st)
		st->us[k] += now_us() - t0;
}

static void times_log(struct ckpt_log *log, const char *what, const char *name, uint64_t t0,
		      const struct step_times *st)
{
	char kinds_[512] = "";
	size_t n = 0;
	if (log->fd < 0 || log->level < CKPT_LOG_DEBUG)
		return;
	for (int k = 0; st && k < KIND_MAX && n < sizeof(kinds_); k++)
		if (st->us[k] >= 200) {
			int w = snprintf(kinds_ + n, sizeof(kinds_) - n, "%s%s %llu", n ? ", " : "",
					 kinds[k].name, (unsigned long long)st->us[k]);
			n += w > 0 ? (size_t)w : 0;
		}
	log_debug(log, "%s step %s: done in %llu us%s%s%s", what, name,
		  (unsigned long long)(now_us() - t0), n ? " (" : "", kinds_, n ? ")" : "");
}

typedef int (*op_once_fn)(struct rst_ctx *ctx);
typedef int (*op_task_fn)(struct rst_ctx *ctx, struct rst_task *t);

/* The op at offset off of a kind's ops, of the type the step calls. */
static op_task_fn task_op(const struct kind_ops *ops, size_t off)
{
	op_task_fn fn;
	memcpy(&fn, (const char *)ops + off, sizeof(fn));
	return fn;
}

static op_once_fn once_op(const struct kind_ops *ops, size_t off)
{
	op_once_fn fn;
	memcpy(&fn, (const char *)ops + off, sizeof(fn));
	return fn;
}

/* One kind's op of step s for t: logged with the kind's name on failure. */
static int call_task(struct rst_ctx *ctx, enum rst_step_id s, int k, struct rst_task *t,
		     struct step_times *times)
{
	op_task_fn fn = task_op(kinds[k].ops, rst_sequence[s].op);
	if (!fn || (t->leader && !kinds[k].ops->per_thread))
		return 0;
	uint64_t t0 = now_us();
	int r = fn(ctx, t);
	times_add(times, k, t0);
	if (r < 0 && !ctx->log.errors)
		log_error(&ctx->log, "%s %d: restoring %s failed%s%s: %s",
			  t->leader ? "thread" : "pid", t->pid, kinds[k].name,
			  s == RST_TASK_STATE ? "" : " at step ",
			  s == RST_TASK_STATE ? "" : rst_sequence[s].name, strerror(-r));
	return r;
}

static int rst_task_timed(struct rst_ctx *ctx, enum rst_step_id s, struct rst_task *t,
			  struct step_times *times)
{
	for (int k = 0; k < KIND_MAX; k++) {
		int r = call_task(ctx, s, k, t, times);
		if (r < 0)
			return r;
	}
	return 0;
}

int seq_rst_task(struct rst_ctx *ctx, enum rst_step_id s, struct rst_task *t)
{
	return rst_task_timed(ctx, s, t, NULL);
}

/*
 * A process's threads n at a time: at "task state", their calls queued
 * and run side by side at the end (core/calls.c), one stop each.
 */
static int run_threads(struct rst_ctx *ctx, enum rst_step_id s, struct rst_task *t,
		       struct step_times *times)
{
	for (size_t j = 0; j < t->nthreads; j += PUPPET_MANY_MAX) {
		struct rst_task *ts[PUPPET_MANY_MAX];
		size_t n = t->nthreads - j < PUPPET_MANY_MAX ? t->nthreads - j : PUPPET_MANY_MAX, k = 0;
		for (size_t i = 0; i < n; i++) {
			ts[i] = &t->threads[j + i];
			/* the vDSO may have moved with the leader's mm */
			ts[i]->pup.syscall_ip = t->pup.syscall_ip;
		}
		bool queued = s == RST_TASK_STATE && rst_calls_begin(ctx, ts, n);
		int r = 0;
		for (; r >= 0 && k < n; k++)
			r = rst_task_timed(ctx, s, ts[k], times);
		if (queued) {
			int e = rst_calls_end(ctx, r >= 0);
			r = r < 0 ? r : e;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Does another task share t's fd table (CLONE_FILES)? */
static bool table_shared(const struct rst_ctx *ctx, const struct rst_task *t)
{
	if (t->files_with)
		return true;
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (ctx->tasks[i].files_with == t->pid)
			return true;
	return false;
}

/*
 * The control socket closed by t's queued batch, its last at "task
 * state" (nothing after it passes t a fd), rather than by a stop of its
 * own at "clean". Not where another task shares its fd table: that one
 * may still take fds through it.
 */
static int close_control(struct rst_ctx *ctx, struct rst_task *t)
{
	if (!rst_calls_queued(ctx, t) || table_shared(ctx, t))
		return 0;
	struct puppet_call c = PUPPET_CALL(SYS_close, ctx->ctl_remote);
	static const char *const what[] = { NULL }; /* as at "clean": not checked */
	int r = rst_calls(ctx, t, &c, what, NULL, 1);
	t->ctl_closed = r >= 0;
	return r;
}

/*
 * At "task state", processes without threads up to PUPPET_MANY_MAX at a
 * time: each one's kinds run in turn as before, but the calls they queue
 * (rst_calls: task's, creds') are run at the end, every process's batch
 * side by side (core/calls.c), one stop each on whichever core is free,
 * where each process took a stop for each of those kinds' batches, one
 * process after the other. Processes are independent after their fork:
 * nothing of one process's restore reads what another's queued calls do.
 * Returns how many tasks from i it restored (at least one), or -errno.
 */
static int run_procs(struct rst_ctx *ctx, size_t i, struct step_times *times)
{
	struct rst_task *ts[PUPPET_MANY_MAX];
	size_t n = 0, k = 0;
	for (size_t j = i; j < ctx->nimage && n < PUPPET_MANY_MAX; j++) {
		struct rst_task *t = &ctx->tasks[j];
		if (t->nthreads)
			break;
		if (!t->zombie)
			ts[n++] = t;
		k++;
	}
	if (!n || !rst_calls_begin_procs(ctx, ts, n))
		return 0;
	int r = 0;
	for (size_t j = 0; r >= 0 && j < n; j++)
		r = rst_task_timed(ctx, RST_TASK_STATE, ts[j], times);
	for (size_t j = 0; r >= 0 && j < n; j++)
		r = close_control(ctx, ts[j]);
	int e = rst_calls_end(ctx, r >= 0);
	r = r < 0 ? r : e;
	return r < 0 ? r : (int)k;
}

/* STEP_TASKS: each process, all kinds; then its threads, the per_thread kinds. */
static int run_tasks(struct rst_ctx *ctx, enum rst_step_id s, struct step_times *times)
{
	for (size_t i = 0; i < ctx->nimage; i++) {
		struct rst_task *t = &ctx->tasks[i];
		int r = s == RST_TASK_STATE && !t->nthreads ? run_procs(ctx, i, times) : 0;
		if (r < 0)
			return r;
		if (r > 0) {
			i += (size_t)r - 1;
			continue;
		}
		if (t->zombie)
			continue;
		r = rst_task_timed(ctx, s, t, times);
		if (r >= 0)
			r = run_threads(ctx, s, t, times);
		if (r < 0)
			return r;
	}
	return 0;
}

static int run_step(struct rst_ctx *ctx, enum rst_step_id s, struct step_times *times)
{
	const struct rst_step *st = &rst_sequence[s];
	int r = st->run ? st->run(ctx) : 0;
	if (r < 0)
		return r;
	switch (st->over) {
	case STEP_ONCE:
		for (int k = 0; r >= 0 && k < KIND_MAX; k++) {
			op_once_fn fn = once_op(kinds[k].ops, st->op);
			uint64_t t0 = now_us();
			r = fn ? fn(ctx) : 0;
			if (fn)
				times_add(times, k, t0);
		}
		return r;
	case STEP_ROOT:
		return rst_task_timed(ctx, s, &ctx->tasks[0], times);
	case STEP_TASKS:
		return run_tasks(ctx, s, times);
	default: /* STEP_EACH: run by the step above; STEP_NONE */
		return 0;
	}
}

int seq_rst_run(struct rst_ctx *ctx, enum rst_step_id first, enum rst_step_id last)
{
	for (int s = first; s <= (int)last; s++) {
		struct step_times times = { 0 };
		uint64_t t0 = now_us();
		int r = run_step(ctx, s, &times);
		if (r < 0)
			return r;
		if (rst_sequence[s].name[0])
			times_log(&ctx->log, "restart", rst_sequence[s].name, t0, &times);
	}
	return 0;
}

typedef int (*ck_once_fn)(struct ckpt_ctx *ctx);
typedef void (*ck_void_fn)(struct ckpt_ctx *ctx);
typedef int (*ck_task_fn)(struct ckpt_ctx *ctx, struct task *t);

static int ckpt_task(struct ckpt_ctx *ctx, enum ckpt_step_id s, struct task *t,
		     struct step_times *times)
{
	const struct ckpt_step *st = &ckpt_sequence[s];
	int r = st->run_task ? st->run_task(ctx, t) : 0, first = 0;
	for (int k = 0; r >= 0 && k < KIND_MAX; k++) {
		ck_task_fn fn;
		memcpy(&fn, (const char *)kinds[k].ops + st->op, sizeof(fn));
		if (!fn || (t->leader && !kinds[k].ops->per_thread))
			continue;
		if (s == CKPT_DUMP && (ctx->flags & CKPT_PRECOPY) && !kinds[k].ops->dump_live)
			continue;
		uint64_t t0 = now_us();
		r = fn(ctx, t);
		times_add(times, k, t0);
		if (r < 0 && st->why && !ctx->log.errors)
			log_error(&ctx->log, "%s %d: %s: %s%s", t->leader ? "thread" : "pid", t->pid,
				  kinds[k].name, st->why, strerror(-r));
		/* a refusal while gathering: the next kinds look too */
		if (log_gathers(&ctx->log, r)) {
			first = first ? first : r;
			r = 0;
		}
	}
	return r < 0 ? r : first;
}

int seq_ckpt_probe_ops(struct ckpt_ctx *ctx, struct task *t)
{
	for (int k = 0; k < KIND_MAX; k++) {
		ck_task_fn fn = kinds[k].ops->probe;
		if (!fn || (t->leader && !kinds[k].ops->per_thread))
			continue;
		int r = fn(ctx, t);
		if (r < 0)
			return r;
	}
	return 0;
}

int seq_ckpt_probe(struct ckpt_ctx *ctx, struct task *t)
{
	int r = seq_ckpt_probe_ops(ctx, t);
	return r < 0 ? r : ckpt_run_probes(ctx, t);
}

/* A task's first failure ends its part of the step; a refusal while
 * gathering lets the next task go on. */
static int ckpt_tasks_timed(struct ckpt_ctx *ctx, enum ckpt_step_id s, struct step_times *times)
{
	int first = 0;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (t->zombie)
			continue;
		int r = ckpt_task(ctx, s, t, times);
		for (size_t j = 0; r >= 0 && j < t->nthreads; j++)
			r = ckpt_task(ctx, s, &t->threads[j], times);
		if (r < 0 && !log_gathers(&ctx->log, r))
			return r;
		if (r < 0 && !first)
			first = r;
	}
	return first;
}

int seq_ckpt_tasks(struct ckpt_ctx *ctx, enum ckpt_step_id s)
{
	return ckpt_tasks_timed(ctx, s, NULL);
}

static int ckpt_once(struct ckpt_ctx *ctx, const struct ckpt_step *st, struct step_times *times)
{
	int first = 0;
	for (int k = 0; k < KIND_MAX; k++) {
		const char *at = (const char *)kinds[k].ops + st->op;
		uint64_t t0 = now_us();
		if (st->when & STEP_VOID) {
			ck_void_fn fn;
			memcpy(&fn, at, sizeof(fn));
			if (fn) {
				fn(ctx);
				times_add(times, k, t0);
			}
			continue;
		}
		ck_once_fn fn;
		memcpy(&fn, at, sizeof(fn));
		int r = fn ? fn(ctx) : 0;
		if (fn)
			times_add(times, k, t0);
		if (r < 0 && !log_gathers(&ctx->log, r))
			return r;
		if (r < 0 && !first)
			first = r;
	}
	return first;
}

int seq_ckpt_run(struct ckpt_ctx *ctx)
{
	for (int s = 0; s < CKPT_NSTEPS; s++) {
		const struct ckpt_step *st = &ckpt_sequence[s];
		if ((ctx->failed && !(st->when & STEP_ALWAYS)) ||
		    ((st->when & STEP_KILL) && !(ctx->flags & CKPT_KILL)) ||
		    ((st->when & STEP_LIVE) && !(ctx->flags & CKPT_PRECOPY)) ||
		    ((st->when & STEP_NOT_LIVE) && (ctx->flags & CKPT_PRECOPY)) ||
		    ((st->when & STEP_HELD) && !(ctx->flags & (CKPT_KILL | CKPT_LEAVE_FROZEN))) ||
		    ((st->when & STEP_RUNS_ON) && (ctx->flags & (CKPT_KILL | CKPT_LEAVE_FROZEN))))
			continue;
		struct step_times times = { 0 };
		uint64_t t0 = now_us();
		ctx->log.gather = st->when & STEP_GATHER;
		int r = st->run ? st->run(ctx) : 0;
		if (r >= 0 && st->over == STEP_ONCE)
			r = ckpt_once(ctx, st, &times);
		else if (r >= 0 && st->over == STEP_TASKS)
			r = ckpt_tasks_timed(ctx, s, &times);
		ctx->log.gather = false;
		if (r < 0 && !ctx->failed)
			ctx->failed = r;
		if (r < 0)
			log_debug(&ctx->log, "checkpoint step %s: failed", st->name);
		else
			times_log(&ctx->log, "checkpoint", st->name, t0, &times);
	}
	return ctx->failed;
}
