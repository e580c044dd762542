/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_TASK_H
#define CKPT_TASK_H

#include <stdbool.h>

struct puppet;
struct rst_task;

/* The task was in a job-control stop: it is restored stopped. */
bool task_stopped(struct rst_task *t);

/* A new puppet still has ckpt's rseq area registered: drop it before its
 * memory goes. */
int task_rseq_unregister(struct puppet *p) __attribute__((warn_unused_result));

#endif
