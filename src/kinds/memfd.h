/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* memfds and deleted files (memfd.c): what other kinds ask of it. */
#ifndef CKPT_KINDS_MEMFD_H
#define CKPT_KINDS_MEMFD_H

#include <stdint.h>

struct ckpt_ctx;
struct task;

/* Checkpoint: the deleted file or memfd t reaches through /proc/PID/LINK
 * ("exe", "map_files/A-B"), saved with its contents, to be opened with
 * flags at restart; its objref, a memfd object (fdtable_local_fd gives
 * ckpt's fd of it at restart). One still linked in its directory is an
 * ordinary file of that name (file_reg). */
int memfd_collect_path(struct ckpt_ctx *ctx, struct task *t, const char *link, int flags,
		       const char *what, uint32_t *ret_id) __attribute__((warn_unused_result));

#endif
