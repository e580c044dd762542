/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A kind is one sort of kernel object. It lives in one file with its
 * collect, dump, load and restore side by side, in one const struct
 * kind_ops, registered by one line in kinds.def.
 *
 * Checkpoint, for every task, kind by kind in kinds.def order:
 *   collect(ctx, t)   look at the object, decide whether it can be saved;
 *                     a refusal logs "pid P fd F (kind): why" and returns
 *                     -EOPNOTSUPP. Nothing is written in this phase.
 *   dump(ctx, t)      write the kind's records (after every task collected).
 *   finish(ctx)       after dump, or after a failure, while the tasks are
 *                     still held: take out of them what collect put in.
 *   after_kill(ctx)   CKPT_KILL, the image complete and every task killed
 *                     and gone: release what the tree held outside itself
 *                     that would outlive it and that the image now holds
 *                     (a restart on this host must find it free). The
 *                     kstates are still there; failures are warnings.
 * Restart:
 *   load(rctx, t, rec)  decode and validate one record of the kind into
 *                       t->kstate[kind]; runs for the whole image before any
 *                       process exists. Records of a kind may come several
 *                       times (a subtype each).
 *   prepare(rctx)       after load, before processes: open files and
 *                       anything else done on ckpt's side (may be NULL).
 *   restore(rctx, t)    turn the puppet into what the image says.
 *   restore_end(rctx)   every task restored, none running yet: last work
 *                       on ckpt's side (may be NULL).
 *   restore_abort(rctx) the restart failed (or was a dry run) once processes
 *                       existed, and they are killed: remove what the kind
 *                       made outside them (cgroups).
 *   free_state, free_rstate   free t->kstate[kind] at checkpoint, at restart
 *                       (state may be NULL).
 *   free_obj, free_robj  free the kind's objects in the objhash.
 * Kinds of open files also have (see fdtable.c, which asks them in order):
 *   fd_claim(fi)        is the file behind this fd one of mine?
 *   fd_collect(ctx, t, fi, &id)  the objref of its open file (shared ones
 *                       found with kcmp), or a refusal as for collect
 *   fd_get(rctx, robj, &fd)      restart: the fd ckpt holds for the object
 *   collect_end(ctx)    after every task is collected: checks that need the
 *                       whole tree (a pipe's other end...)
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
 * Before CKPT_KILL kills the tree (precheck.c), the image complete:
 *   check_restore(ctx, t)  with the tree alive and held: would a restart by
 *                       ckpt's caller, on this machine, get back what t holds
 *                       (ctx->caller says what that caller can do)? A no is
 *                       logged "pid P fd F (kind): why" and returns -EPERM
 *                       (or another -errno); the tree is then not killed.
 * Any op may be NULL. A thread (t->leader set) is given only to the kinds
 * marked per_thread, after its process.
 */
#ifndef CKPT_KINDS_H
#define CKPT_KINDS_H

#include <stdbool.h>
#include <stdint.h>

#include "img/img.h"

struct ckpt_ctx;
struct rst_ctx;
struct task;
struct rst_task;
struct fd_info;
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
	int (*collect)(struct ckpt_ctx *ctx, struct task *t);
	int (*dump)(struct ckpt_ctx *ctx, struct task *t);
	int (*load)(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec);
	int (*prepare)(struct rst_ctx *ctx);
	int (*restore)(struct rst_ctx *ctx, struct rst_task *t);
	int (*restore_end)(struct rst_ctx *ctx);
	void (*free_state)(void *state);
	void (*free_rstate)(void *state);
	/* free an object this kind put in the objhash: at checkpoint, at restart */
	void (*free_obj)(void *obj);
	void (*free_robj)(void *obj);
	bool (*fd_claim)(const struct fd_info *fi);
	int (*fd_collect)(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			  uint32_t *ret_id);
	int (*fd_get)(struct rst_ctx *ctx, void *robj, int *ret_fd);
	int (*collect_end)(struct ckpt_ctx *ctx);
	void (*finish)(struct ckpt_ctx *ctx);
	void (*after_kill)(struct ckpt_ctx *ctx);
	/* restart failed or was a dry run, every process made killed: undo
	 * what the kind made outside the tasks (may be NULL) */
	void (*restore_abort)(struct rst_ctx *ctx);
	int (*check_restore)(struct ckpt_ctx *ctx, struct task *t);
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

_Static_assert(KIND_MAX <= 64, "rst_task.done_kinds holds a bit per kind");
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

#endif
