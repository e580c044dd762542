/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The order of a checkpoint and of a restart: two tables of steps
 * (sequence.c), each step ckpt's own part followed by one op of every kind
 * that has it, in kinds.def order. kinds.h says what each op is for; the
 * drivers (checkpoint.c, restart.c, tree.c) only run the tables.
 */
#ifndef CKPT_SEQUENCE_H
#define CKPT_SEQUENCE_H

#include <stddef.h>

#include "core/ctx.h"

/* Over whom a step calls the kinds' op. */
enum step_over {
	STEP_NONE,  /* ckpt's part only */
	STEP_ONCE,  /* op(ctx) */
	STEP_ROOT,  /* op(ctx, root) */
	STEP_TASKS, /* op(ctx, t) for each process of the image, parents first, each
		     * kind in turn; then, for the per_thread kinds, each thread */
	STEP_EACH,  /* op(ctx, t) for one task, run by the step above it at the
		     * point it names (seq_rst_task) */
};

/* offsetof an op in struct kind_ops, for the tables */
#define KOP(name) offsetof(struct kind_ops, name)

enum rst_step_id {
	RST_LOAD,
	RST_CHECK,
	RST_PREPARE,
	RST_LOCK,
	RST_CONTROL,
	RST_SPAWN_ROOT,
	RST_ROOT_READY,
	RST_CREATE,
	RST_FORK,
	RST_SESSION,
	RST_FORKED,
	RST_GROUPS,
	RST_TREE_READY,
	RST_TASK_STATE,
	RST_CLEAN,
	RST_END,
	RST_BEFORE_RELEASE,
	RST_RELEASE,
	RST_UNLOCK,
	RST_NSTEPS,
};

struct rst_step {
	const char *name;
	/* ckpt's part, before the kinds' (may be NULL) */
	int (*run)(struct rst_ctx *ctx);
	size_t op;
	enum step_over over;
};

extern const struct rst_step rst_sequence[RST_NSTEPS];

/* Runs the steps first..last in order; stops at the first failure. */
int seq_rst_run(struct rst_ctx *ctx, enum rst_step_id first, enum rst_step_id last)
	__attribute__((warn_unused_result));
/* A STEP_EACH step's op of every kind, for t. */
int seq_rst_task(struct rst_ctx *ctx, enum rst_step_id s, struct rst_task *t)
	__attribute__((warn_unused_result));

/* The drivers' parts of the restart steps (restart.c, tree.c). */
int rst_load_image(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int rst_open_control(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int tree_spawn_root(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int tree_root_ready(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int tree_create_tasks(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int tree_set_groups(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int tree_create_threads(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int rst_clean_tasks(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int rst_release_tree(struct rst_ctx *ctx) __attribute__((warn_unused_result));

enum ckpt_step_id {
	CKPT_PRE_COPY,
	CKPT_BEFORE_SEIZE,
	CKPT_HOLD_OUT,
	CKPT_SEIZE,
	CKPT_FROZEN_SCAN,
	CKPT_COLLECT,
	CKPT_COLLECT_END,
	CKPT_DUMP,
	CKPT_DUMP_END,
	CKPT_IMAGE_END,
	CKPT_CHECK_RESTORE,
	CKPT_LOOK_AGAIN,
	CKPT_IMAGE_DONE,
	CKPT_FINISH,
	CKPT_LET_GO,
	CKPT_IMAGE_END_LATE,
	CKPT_IMAGE_DONE_LATE,
	CKPT_AFTER_KILL,
	CKPT_UNLOCK_MOVED,
	CKPT_LIVE,
	CKPT_LIVE_END,
	CKPT_NSTEPS,
};

struct ckpt_step {
	const char *name;
	/* ckpt's part, before the kinds' (may be NULL) */
	int (*run)(struct ckpt_ctx *ctx);
	/* STEP_TASKS: ckpt's part for each task and thread, before its kinds' ops */
	int (*run_task)(struct ckpt_ctx *ctx, struct task *t);
	size_t op;
	enum step_over over;
	unsigned when;
	/* a kind's failure, logged when nothing else was: "pid P: kind: <why>error" */
	const char *why;
};

/* ckpt_step.when: the op returns nothing and cannot fail; the step runs
 * even after a failure; only with CKPT_KILL; a refusal does not end the
 * step: every one is reported (log_gathers). */
#define STEP_VOID 1u
#define STEP_ALWAYS 2u
#define STEP_KILL 4u
#define STEP_GATHER 8u
/* only in a pre-copy round (CKPT_PRECOPY); not in one */
#define STEP_LIVE 16u
#define STEP_NOT_LIVE 32u
/* only when the tree is killed or left frozen (CKPT_KILL, CKPT_LEAVE_FROZEN);
 * only when it runs on after the checkpoint (neither) */
#define STEP_HELD 64u
#define STEP_RUNS_ON 128u

extern const struct ckpt_step ckpt_sequence[CKPT_NSTEPS];

/* Runs the checkpoint sequence: the first failure, the steps marked
 * STEP_ALWAYS run anyway (ctx->failed says whether one came before). */
int seq_ckpt_run(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
/* A STEP_EACH step's op of every kind, for each task and thread. */
int seq_ckpt_tasks(struct ckpt_ctx *ctx, enum ckpt_step_id s) __attribute__((warn_unused_result));

/* The drivers' parts of the checkpoint steps (checkpoint.c, precheck.c). */
int ckpt_seize(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
int ckpt_collect_task(struct ckpt_ctx *ctx, struct task *t) __attribute__((warn_unused_result));
int ckpt_run_probes(struct ckpt_ctx *ctx, struct task *t) __attribute__((warn_unused_result));
/* The probes of t's threads, run side by side (probe.c) */
void ckpt_probe_threads(struct ckpt_ctx *ctx, struct task *t,
			int (*prepare)(struct ckpt_ctx *ctx, struct task *th));
/* Step "collect", for t once its scratch area is mapped: every kind's probe
 * op (the calls its collect needs), then those calls run as one batch. */
int seq_ckpt_probe(struct ckpt_ctx *ctx, struct task *t) __attribute__((warn_unused_result));
/* The same without the run: every kind's probe op only. */
int seq_ckpt_probe_ops(struct ckpt_ctx *ctx, struct task *t) __attribute__((warn_unused_result));
/* The probes of n <= PUPPET_MANY_MAX processes (each with its scratch area
 * and stub), run side by side (probe.c) */
void ckpt_probe_procs(struct ckpt_ctx *ctx, struct task *const *ts, size_t n);
int ckpt_dump_begin(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
int ckpt_task_begin(struct ckpt_ctx *ctx, struct task *t) __attribute__((warn_unused_result));
int ckpt_dump_end(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
/* precheck.c: with CKPT_KILL, the image complete and the tree still held:
 * would a restart by this caller work (and, with CKPT_VERIFY, does a dry
 * run of the image work)? A refusal returns < 0 and nothing is killed. */
int precheck_restore(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
int ckpt_image_done(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
int ckpt_let_go(struct ckpt_ctx *ctx);

#endif
