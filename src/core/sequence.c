/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The order of a checkpoint and of a restart, each in one table. A step is
 * ckpt's own part (the driver function named) and then one op of every
 * kind that has it, in kinds.def order. What each op is for is in kinds.h;
 * DESIGN.md tells the sequence in prose.
 */
#include <string.h>

#include "core/sequence.h"

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
};

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
static int call_task(struct rst_ctx *ctx, enum rst_step_id s, int k, struct rst_task *t)
{
	op_task_fn fn = task_op(kinds[k].ops, rst_sequence[s].op);
	if (!fn || (t->leader && !kinds[k].ops->per_thread))
		return 0;
	int r = fn(ctx, t);
	if (r < 0 && !ctx->log.errors)
		log_error(&ctx->log, "%s %d: %s (%s) failed: %s", t->leader ? "thread" : "pid",
			  t->pid, kinds[k].name, rst_sequence[s].name, strerror(-r));
	return r;
}

int seq_rst_task(struct rst_ctx *ctx, enum rst_step_id s, struct rst_task *t)
{
	for (int k = 0; k < KIND_MAX; k++) {
		int r = call_task(ctx, s, k, t);
		if (r < 0)
			return r;
	}
	return 0;
}

/* STEP_TASKS: each process, all kinds; then its threads, the per_thread kinds. */
static int run_tasks(struct rst_ctx *ctx, enum rst_step_id s)
{
	for (size_t i = 0; i < ctx->nimage; i++) {
		struct rst_task *t = &ctx->tasks[i];
		if (t->zombie)
			continue;
		int r = seq_rst_task(ctx, s, t);
		for (size_t j = 0; r >= 0 && j < t->nthreads; j++) {
			/* the vDSO may have moved with the leader's mm */
			t->threads[j].pup.syscall_ip = t->pup.syscall_ip;
			r = seq_rst_task(ctx, s, &t->threads[j]);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int run_step(struct rst_ctx *ctx, enum rst_step_id s)
{
	const struct rst_step *st = &rst_sequence[s];
	int r = st->run ? st->run(ctx) : 0;
	if (r < 0)
		return r;
	switch (st->over) {
	case STEP_ONCE:
		for (int k = 0; r >= 0 && k < KIND_MAX; k++) {
			op_once_fn fn = once_op(kinds[k].ops, st->op);
			r = fn ? fn(ctx) : 0;
		}
		return r;
	case STEP_ROOT:
		return seq_rst_task(ctx, s, &ctx->tasks[0]);
	case STEP_TASKS:
		return run_tasks(ctx, s);
	default: /* STEP_EACH: run by the step above; STEP_NONE */
		return 0;
	}
}

int seq_rst_run(struct rst_ctx *ctx, enum rst_step_id first, enum rst_step_id last)
{
	for (int s = first; s <= (int)last; s++) {
		int r = run_step(ctx, s);
		if (r < 0)
			return r;
		if (rst_sequence[s].name[0])
			log_debug(&ctx->log, "restart step %s: done", rst_sequence[s].name);
	}
	return 0;
}
