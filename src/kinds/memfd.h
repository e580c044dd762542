/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfds and regular files deleted while open or mapped: files whose
 * contents only the image can give back (memfd.c). mm asks here for a
 * mapping of one; the object it gets is an open file of the memfd kind,
 * which fdtable_local_fd() resolves at restart like any fd's.
 */
#ifndef CKPT_MEMFD_H
#define CKPT_MEMFD_H

#include <stdint.h>

struct ckpt_ctx;
struct task;

/* A deleted file or memfd by path as the task sees it through link
 * ("map_files/a-b"), to be opened with flags (O_RDONLY, O_RDWR) at restart;
 * the same signature as file_reg_collect_path(). */
int memfd_collect_path(struct ckpt_ctx *ctx, struct task *t, const char *link, int flags,
		       const char *what, uint32_t *ret_id) __attribute__((warn_unused_result));

#endif
