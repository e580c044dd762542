/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A kind is one sort of kernel object. It lives in one file with its
 * collect, dump, load and restore side by side, in one const struct
 * kind_ops, registered by one line in kinds.def.
 *
 * The order of checkpoint and of restart is two tables of steps in
 * src/core/sequence.c (ckpt_sequence, rst_sequence): at each step ckpt
 * does its own part, then calls the step's op of every kind that has one,
 * in kinds.def order. An op runs "for each task" over every process of the
 * image (parents first) and, when the kind is per_thread, each of its
 * threads after it. Any op may be NULL.
 *
 * Checkpoint steps:
 *   seize            (ckpt) every task and thread of the tree held
 *   probe(ctx, t)    (at collect, for each task before its kinds' collect)
 *                    the injected calls collect will need, asked by
 *                    task_probe_call (outputs in task_probe_area); ckpt
 *                    runs them as one batch per task
 *   collect(ctx, t)  for each task: look at the object, decide whether it
 *                    can be saved; a refusal logs "pid P fd F (kind): why"
 *                    and returns -EOPNOTSUPP. Nothing is written here.
 *   collect_end(ctx) every task collected: checks that need the whole tree
 *                    (a pipe's other end...)
 *   dump(ctx, t)     for each task, after its task-begin record: the kind's
 *                    records (the tree record comes first)
 *   check_restore(ctx, t)  CKPT_KILL, the image complete, the tree alive
 *                    and held (precheck.c): would a restart by ckpt's caller,
 *                    on this machine, get back what t holds (ctx->caller
 *                    says what that caller can do)? A no is logged "pid P fd
 *                    F (kind): why" and returns -EPERM (or another -errno);
 *                    the tree is then not killed.
 *   finish(ctx)      after dump, or after a failure, while the tasks are
 *                    still held: take out of them what collect put in
 *   after_kill(ctx)  CKPT_KILL, every task killed and gone: release what the
 *                    tree held outside itself that the image now holds (a
 *                    restart on this host must find it free); failures are
 *                    warnings
 *   dump_live(ctx, t) a pre-copy round (CKPT_PRECOPY), the tree released:
 *                    the kind's records read from the running task. In such
 *                    a round only kinds with this op take part in "dump"
 *
 * Restart steps (a failure at any step after "spawn root" kills every
 * process made, then calls restore_abort):
 *   load(rctx, t, rec)   each record of the image, decoded and validated
 *                        into t->kstate[kind], before any process exists;
 *                        records of a kind may come several times
 *   loaded(rctx, t)      for each task and thread, the image read: does t
 *                        have what the kind needs (rst_require())?
 *   prepare(rctx)        open files and anything else done on ckpt's side
 *   spawn root           (ckpt) the root exists, a bare puppet
 *   root_spawned(rctx, root)  before anything is injected in it (the maps of
 *                        its user namespace)
 *   root_ready(rctx, root)    it can run injected calls and has forked
 *                        nothing: what its children will inherit or find
 *                        (its namespaces' contents, devpts ptys, cgroup
 *                        namespace, SysV IPC objects)
 *   before_fork(rctx, t) t is about to be forked by its creator (memory the
 *                        parent must have before, for t to keep it)
 *   session(rctx, t)     t has just called setsid(), before it forks (its
 *                        controlling terminal)
 *   forked(rctx, t)      t (not a ghost, not a zombie) has just been made
 *                        (after setsid), before it forks or gets anything
 *                        (its network namespace)
 *   groups_ready(rctx)   every task and process group exists (foreground
 *                        groups)
 *   tree_ready(rctx)     every process and thread exists, ghosts gone, all
 *                        bare: whole-tree work that needs the tasks
 *                        (unix queues, pidfds of dead processes)
 *   restore(rctx, t)     for each task: turn the puppet into what the image
 *                        says
 *   restore_end(rctx)    every task restored, none running yet
 *   release(rctx)        just before the tasks are let go (a shell job takes
 *                        ckpt's terminal)
 *   handover(rctx)       the tree runs: what the kind keeps past the restart
 *                        context (freed next, with every file of it); NULL
 *                        for nothing
 *   wait(kept, child, &status)  ckpt waits for the tree (not RESTART_DETACH):
 *                        the first kind that kept something and has a wait
 *                        op waits; otherwise a plain waitpid
 *   handed_back(kept, detached) the wait is over (or skipped): undo and free
 *                        (last kind first)
 *   restore_abort(rctx)  the restart failed (or was a dry run) once
 *                        processes existed, and they are killed: remove what
 *                        the kind made outside them (cgroups)
 *   free_state, free_rstate   free t->kstate[kind] at checkpoint, at restart
 *                        (state may be NULL); free_obj, free_robj: the
 *                        kind's objects in the objhash
 *
 * Kinds of open files also have (see fdtable.c):
 *   fd_claim(fi)        is the file behind this fd one of mine? Kinds are
 *                       asked by fd_claim_rank (lowest first; 0: after the
 *                       ranked ones, in kinds.def order), the first yes wins
 *   fd_collect(ctx, t, fi, &id)  the objref of its open file (shared ones
 *                       found with kcmp), or a refusal as for collect
 *   fd_get(rctx, robj, &fd)      restart: the fd ckpt holds for the object
 *   file                a kind with one record per open file: its table
 *                       (fdobj.h), which stands for fd_claim and fd_collect
 * Kinds of memory areas (mm.c asks those with vma_claim, lowest vma_prio
 * first; the first that says yes owns the vma, and the image records its
 * id in VmaEntry.owner):
 *   vma_claim(pv)       is this vma (of /proc/PID/smaps) one of mine?
 *   vma_collect(ctx, t, pv, v)  fill the image's VmaEntry v (its VMA_*
 *                       kind, its object), or refuse as collect does
 *   vma_check(rctx, t, e)  after load: the vmas of e that I own are valid
 *   vma_map(rctx, t, v)  map v in the puppet at v->start (mm writes the
 *                       pages it saved, and sets the final protection of
 *                       anonymous and file vmas, afterwards)
 */
#ifndef CKPT_KINDS_H
#define CKPT_KINDS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "img/img.h"

struct ckpt_ctx;
struct rst_ctx;
struct task;
struct rst_task;
struct fd_info;
struct fdobj_ops;
struct proc_vma;
struct VmaEntry;
struct MmEntry;

enum kind {
#define KIND(name, id, desc) KIND_##name,
#include "kinds/kinds.def"
#undef KIND
	KIND_MAX,
};

struct kind_ops {
	/* checkpoint */
	int (*probe)(struct ckpt_ctx *ctx, struct task *t);
	/* the tree about to be seized, and just frozen (before collect):
	 * work of the kind's own thread beside seize and collect (neither
	 * in a pre-copy round) */
	int (*seizing)(struct ckpt_ctx *ctx);
	int (*frozen)(struct ckpt_ctx *ctx);
	int (*collect)(struct ckpt_ctx *ctx, struct task *t);
	int (*collect_end)(struct ckpt_ctx *ctx);
	int (*dump)(struct ckpt_ctx *ctx, struct task *t);
	/* checks that waited beside the dump: a refusal still leaves the
	 * tree as it was (the image is not named) */
	int (*dump_end)(struct ckpt_ctx *ctx);
	int (*check_restore)(struct ckpt_ctx *ctx, struct task *t);
	void (*finish)(struct ckpt_ctx *ctx);
	void (*after_kill)(struct ckpt_ctx *ctx);
	/* a pre-copy round (CKPT_PRECOPY): only kinds with this op dump, and
	 * this op runs for each task once the tree runs again */
	int (*dump_live)(struct ckpt_ctx *ctx, struct task *t);
	/* restart, in the order of rst_sequence */
	int (*load)(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec);
	int (*loaded)(struct rst_ctx *ctx, struct rst_task *t);
	int (*prepare)(struct rst_ctx *ctx);
	int (*root_spawned)(struct rst_ctx *ctx, struct rst_task *root);
	int (*root_ready)(struct rst_ctx *ctx, struct rst_task *root);
	int (*before_fork)(struct rst_ctx *ctx, struct rst_task *t);
	int (*session)(struct rst_ctx *ctx, struct rst_task *t);
	int (*forked)(struct rst_ctx *ctx, struct rst_task *t);
	int (*groups_ready)(struct rst_ctx *ctx);
	int (*tree_ready)(struct rst_ctx *ctx);
	int (*restore)(struct rst_ctx *ctx, struct rst_task *t);
	int (*restore_end)(struct rst_ctx *ctx);
	int (*release)(struct rst_ctx *ctx);
	void *(*handover)(struct rst_ctx *ctx);
	int (*wait)(void *kept, pid_t child, int *ret_status);
	void (*handed_back)(void *kept, bool detached);
	void (*restore_abort)(struct rst_ctx *ctx);
	/* freeing */
	void (*free_state)(void *state);
	void (*free_rstate)(void *state);
	void (*free_obj)(void *obj);
	void (*free_robj)(void *obj);
	/* open files */
	bool (*fd_claim)(const struct fd_info *fi);
	int (*fd_collect)(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			  uint32_t *ret_id);
	int (*fd_get)(struct rst_ctx *ctx, void *robj, int *ret_fd);
	const struct fdobj_ops *file;
	bool (*vma_claim)(const struct proc_vma *pv);
	int (*vma_collect)(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
			   struct VmaEntry *v);
	int (*vma_check)(struct rst_ctx *ctx, struct rst_task *t, const struct MmEntry *e);
	int (*vma_map)(struct rst_ctx *ctx, struct rst_task *t, const struct VmaEntry *v);
	/* the order in which vma kinds are asked to claim (lower first),
	 * independent of kinds.def order (which only breaks ties) */
	uint8_t vma_prio;
	/* the protobuf message of a record subtype, for inspect; NULL for
	 * raw records */
	const struct ProtobufCMessageDescriptor *(*descriptor)(uint32_t subtype);
	/* fd_claim order: 1 is asked first; 0 after every ranked kind */
	unsigned fd_claim_rank;
	/* state each thread has of its own (registers, mask, creds...): the
	 * kind also runs for every thread; the others run for processes only */
	bool per_thread;
};

/* name, image id and description come from kinds.def */
struct kind_info {
	const char *name;
	uint32_t id;
	const char *desc;
	const struct kind_ops *ops;
};

enum kind_id {
#define KIND(name, id, desc) KID_##name = id,
#include "kinds/kinds.def"
#undef KIND
};

#define KIND(name, id, desc) extern const struct kind_ops name##_ops;
#include "kinds/kinds.def"
#undef KIND

extern const struct kind_info kinds[KIND_MAX];

#define REC_TYPE(kind_id, sub) (((uint32_t)(kind_id) << 8) | (sub))
#define REC_KIND_ID(type) ((type) >> 8)
#define REC_SUB(type) ((type)&0xff)

/* core records use kind id 0 */
enum {
	REC_CORE_TREE = REC_TYPE(0, 1),
	REC_CORE_TASK = REC_TYPE(0, 2),
};

/* The kind whose id is REC_KIND_ID(type), or NULL. */
const struct kind_info *kind_by_rec(uint32_t type, enum kind *ret_kind);
/* "mm/2" style name of a record type, for messages */
const char *rec_type_name(uint32_t type, char *buf, size_t len);
/* The kinds with an fd_claim op, in the order they are asked; their number. */
size_t kind_claim_order(enum kind order[KIND_MAX]);

#endif
