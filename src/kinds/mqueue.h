/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_MQUEUE_H
#define CKPT_MQUEUE_H

#include <stdbool.h>

struct fd_info;

/* Is the fd an open POSIX message queue? (regular files on the mqueue
 * file system: the kinds of regular files leave them to mqueue.c) */
bool mqueue_fd_is_queue(const struct fd_info *fi);

#endif
