/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_MM_H
#define CKPT_MM_H

struct rst_ctx;
struct rst_task;

/*
 * The region at rst_ctx.scratch_addr, free in every image: the puppet's
 * scratch area at its start, the vDSO passing through its second half.
 */
#define MM_SCRATCH_REGION (1u << 20)

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ckpt_ctx;
struct task;
struct MmEntry;
struct VmaEntry;

/*
 * mm-cow.c. At checkpoint: marks the vmas of t (entry e) that share pages
 * copy-on-write with its parent (entry pe); ret_bufs[i] gets the run list
 * of vma i to free.
 */
int mm_cow_find(struct ckpt_ctx *ctx, struct task *t, struct MmEntry *e,
		const struct MmEntry *pe, pid_t parent, uint64_t **ret_bufs)
	__attribute__((warn_unused_result));
/* The page at addr of v is the parent's (inherited): not saved here. */
bool mm_cow_skip(const struct VmaEntry *v, uint64_t addr);
/* -EINVAL if v's inherited runs are not valid. */
int mm_cow_validate(const struct VmaEntry *v);

struct proc_vma;
struct rst_ctx;

/*
 * For the kinds of file mappings (file_reg, memfd): at checkpoint, the
 * "map_files/START-END" link of pv and the open flags a mapping like pv
 * needs; at restart, vma_map and vma_check of a file mapping whose
 * VmaEntry.file_id is an object fdtable_local_fd() resolves.
 */
void mm_vma_link(const struct proc_vma *pv, char *buf, size_t size);
int mm_vma_flags(const struct proc_vma *pv);
int mm_map_file(struct rst_ctx *ctx, struct rst_task *t, const struct VmaEntry *v)
	__attribute__((warn_unused_result));
int mm_check_file_vmas(struct rst_ctx *ctx, struct rst_task *t, const struct MmEntry *e,
		       uint32_t owner) __attribute__((warn_unused_result));

/* Restart: t keeps memory from its fork (it must be forked by its parent,
 * after the parent's memory is restored). */
bool mm_inherits(const struct rst_task *t);

/*
 * mm-lazy.c: RESTART_LAZY. Private anonymous memory is filled on first
 * touch (userfaultfd) and in the background by a server process of ckpt's
 * that outlives the restart; DESIGN.md, "Lazy restart".
 */
struct mm_rst;
struct mm_rec;
struct img_record;
/* At load, before the records are checked: refuses what --lazy cannot
 * serve and leaves the page records' checksums for later. */
int mm_lazy_image(struct rst_ctx *ctx) __attribute__((warn_unused_result));
/* At load: one more page record of m. */
int mm_lazy_note(struct rst_ctx *ctx, struct mm_rst *m, const struct img_record *rec)
	__attribute__((warn_unused_result));
/* -EBADMSG if the record's data is not what its checksum says. */
int mm_lazy_check_rec(const struct mm_rec *r) __attribute__((warn_unused_result));
/* At prepare: the server forked (ctx->lazy). */
int mm_lazy_start(struct rst_ctx *ctx) __attribute__((warn_unused_result));
/* A userfaultfd of t's (ret_fd, ckpt's copy) with its private anonymous
 * vmas registered (ret_reg: per vma, to free). */
int mm_lazy_uffd(struct rst_ctx *ctx, struct rst_task *t, int *ret_fd, bool **ret_reg)
	__attribute__((warn_unused_result));
/* Hands t's userfaultfd and registered vmas to the server. */
int mm_lazy_give(struct rst_ctx *ctx, struct rst_task *t, int fd, const bool *reg)
	__attribute__((warn_unused_result));
/* The tree runs: the server finishes on its own (handover op). */
void *mm_lazy_handover(struct rst_ctx *ctx);
/* The restart failed: the server and its guard end. */
void mm_lazy_abort(struct rst_ctx *ctx);

/* After load: the task has a whole address space. */
int mm_check_loaded(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));

#endif
