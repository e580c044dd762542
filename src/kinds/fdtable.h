/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_FDTABLE_H
#define CKPT_FDTABLE_H

struct rst_task;

/* The highest fd the image gives the task, -1 if none. */
int fdtable_max_fd(struct rst_task *t);

#endif
