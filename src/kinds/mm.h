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

/* After load: the task has a whole address space. */
int mm_check_loaded(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));

#endif
