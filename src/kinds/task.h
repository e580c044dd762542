/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_TASK_H
#define CKPT_TASK_H

struct puppet;

/* A new puppet still has ckpt's rseq area registered: drop it before its
 * memory goes. */
int task_rseq_unregister(struct puppet *p) __attribute__((warn_unused_result));

#endif
