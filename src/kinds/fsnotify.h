/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the fsnotify kinds (inotify, fanotify) share: the object a watch or
 * inode mark is on, as its fdinfo line shows it ("ino:I sdev:D ...
 * fhandle-bytes:B fhandle-type:T f_handle:HEX", numbers in hex; sdev is the
 * device as the kernel encodes it, major << 20 | minor), and the way back
 * from it to a path.
 *
 * fsnotify_resolve() opens the handle with open_by_handle_at through each
 * mount of that device the task has (those of the whole file system first)
 * and takes the path the opened file has for ckpt, if lstat shows it to be
 * the same inode on the same device. Opening a mount's root for that is an
 * open of a directory: a watch on it that asks for opens of directories
 * sees ckpt's.
 */
#ifndef CKPT_FSNOTIFY_H
#define CKPT_FSNOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define FSNOTIFY_HANDLE_MAX 128 /* MAX_HANDLE_SZ */

struct fsnotify_handle {
	unsigned bytes;
	int type;
	uint8_t data[FSNOTIFY_HANDLE_MAX];
};

/* The device of an fdinfo "sdev:" */
dev_t fsnotify_dev(uint32_t kdev);

/* "f_handle:" hex of bytes bytes into ret; -EINVAL if it does not fit. */
int fsnotify_parse_handle(const char *hex, unsigned bytes, int type, struct fsnotify_handle *ret)
    __attribute__((warn_unused_result));

/*
 * The path (malloc'd) and lstat of inode ino on kdev, found by its handle
 * through the mounts of task pid. -ENOENT: no mount gives a path to it
 * (deleted?); -EPERM: open_by_handle_at is not allowed; -ENOMEM.
 */
int fsnotify_resolve(pid_t pid, const struct fsnotify_handle *fh, uint32_t kdev, uint64_t ino,
		     char **ret_path, struct stat *ret_st) __attribute__((warn_unused_result));

/* Why fsnotify_resolve failed, for "the watched object ... %s";
 * -EOPNOTSUPP: fdinfo showed no handle. */
const char *fsnotify_why_unresolved(int r);

/*
 * Checkpoint: the events queued, unread, in the instance at fd of t (kind
 * names it in messages: "inotify", "fanotify"). They cannot be read
 * without taking them from the process: refused (-EOPNOTSUPP), or with
 * CKPT_DROP_EVENTS saved without them, with a warning that says how many
 * bytes of events the image lacks.
 */
struct ckpt_ctx;
struct task;
int fsnotify_check_queue(struct ckpt_ctx *ctx, struct task *t, int fd, const char *kind)
	__attribute__((warn_unused_result));

/* "\040" and friends in a mountinfo path, in place */
void fsnotify_unescape(char *s);

#endif
