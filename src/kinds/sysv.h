/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV shm attachments, between mm and sysv.c. A vma that maps a SysV
 * segment is a VMA_SYSV_SHM of the image with the segment's shmid; the
 * segment itself (contents included) is sysv.c's, made before mm restores
 * the first task, and attached by an injected shmat at the vma's address.
 * An attachment is whole: a run of vmas of one segment from offset 0 to its
 * end (several when parts were mprotect'ed), the first one made by shmat.
 */
#ifndef CKPT_SYSV_H
#define CKPT_SYSV_H

#include <stdbool.h>
#include <stddef.h>

#include "mm.pb-c.h"

struct ckpt_ctx;
struct rst_ctx;
struct task;
struct rst_task;
struct proc_vma;

/* The vma maps a SysV shm segment ("/SYSV%08x (deleted)", shared). */
bool sysv_vma_is_shm(const struct proc_vma *pv);

/* Checkpoint: makes v the attachment of the segment pv maps (which the
 * kind's collect has found and checked), or refuses. */
int sysv_collect_vma(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, VmaEntry *v)
    __attribute__((warn_unused_result));

/* Restart, after load: every VMA_SYSV_SHM of e is part of a whole
 * attachment of a segment of the image. */
int sysv_check_vmas(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
    __attribute__((warn_unused_result));

/* Restart: maps v in t (shmat for the first vma of an attachment), with
 * its protection and mlock. */
int sysv_shm_attach(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
    __attribute__((warn_unused_result));

#endif
