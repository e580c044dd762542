/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Regular files, directories and character devices as shared objects:
 * fdtable finds them through fd_claim, mm's mapped ones through vma_claim,
 * and the file is written once, before the first record that uses it.
 *
 * Identity at checkpoint: an fd's open file is the same object as another
 * fd's when kcmp says so (fdobj.c) (dup, inheritance: one offset); a
 * mapped file is the same object as another mapping of the same inode with
 * the same access. At restart each object is opened once, on ckpt's side,
 * with the caller's rights, and checked to be the file that was saved.
 */
#ifndef CKPT_FILE_REG_H
#define CKPT_FILE_REG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "files.pb-c.h"

struct ckpt_ctx;
struct rst_ctx;
struct stat;
struct task;

/* A file by path as the task sees it through link (e.g. "map_files/a-b",
 * "exe", "cwd"), opened with flags at restart. */
int file_reg_collect_path(struct ckpt_ctx *ctx, struct task *t, const char *link, int flags,
			  const char *what, uint32_t *ret_id) __attribute__((warn_unused_result));

/* The same for a mapped file known by path (as the task sees it), st its
 * stat: a deleted file that still has this other name (memfd.c). */
int file_reg_collect_named(struct ckpt_ctx *ctx, struct task *t, const char *path,
			   const struct stat *st, int flags, const char *what, uint32_t *ret_id)
	__attribute__((warn_unused_result));

/*
 * Restart: a directory removed while a task still had it (an fd, its cwd
 * or root): made again at path, or at a free name beside it when path
 * exists again, given its mode and owner, opened with flags into *ret_fd
 * and removed, so that it reads "PATH (deleted)" as before. Fails naming
 * path when its parent directory is gone.
 */
int file_reg_deleted_dir(struct rst_ctx *ctx, const char *path, const DeletedDir *d,
			 int flags, int *ret_fd) __attribute__((warn_unused_result));

/* Restart: the fd ckpt holds for object id (opened in prepare). */
int file_reg_fd(struct rst_ctx *ctx, uint32_t id, int *ret_fd) __attribute__((warn_unused_result));
/* Restart: the saved path of object id, for messages. */
const char *file_reg_path(struct rst_ctx *ctx, uint32_t id);

#endif
