/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Files ckpt creates (the image, the pidfile) and files it appends to (the
 * log), made so that a user who controls the directory cannot point them at
 * somebody else's file.
 *
 * A new file is written unnamed (O_TMPFILE in the target's directory), then
 * given a fresh unique name with linkat() and renamed over the final name,
 * after an fsync of the file and followed by one of the directory. The final
 * name is thus replaced only by a complete file, never written through (a
 * symlink planted there is replaced, not followed), and a writer killed at
 * any point leaves nothing behind, except in the instant between linkat()
 * and rename(). Where the filesystem has no O_TMPFILE, the unique temporary
 * name is created directly with O_CREAT|O_EXCL|O_NOFOLLOW; then a writer
 * killed before the rename leaves that temporary file (".NAME.XXXXXX").
 * Every file is made mode 0600.
 *
 * Nothing here logs: errors are -errno, and safe_file_commit() says which
 * step failed through *ret_step.
 */
#ifndef CKPT_SAFEFILE_H
#define CKPT_SAFEFILE_H

#include <stdbool.h>
#include <limits.h>
#include <stddef.h>

struct safe_file {
	int fd;                  /* write the content here */
	int dirfd;               /* the target's directory */
	bool named;              /* tmp exists in dirfd (fallback, or linked) */
	bool no_sync;            /* commit without fsync (a pidfile need not be durable) */
	char base[NAME_MAX + 1]; /* final name in dirfd */
	char tmp[NAME_MAX + 1];  /* unique temporary name, once it exists */
};

/* Opens an unnamed (or uniquely named) file in path's directory for path. */
int safe_file_create(const char *path, struct safe_file *ret) __attribute__((warn_unused_result));
/* The same; SAFE_NO_TMPFILE takes the fallback path (for tests). */
#define SAFE_NO_TMPFILE 0x1
int safe_file_create_flags(const char *path, int flags, struct safe_file *ret)
	__attribute__((warn_unused_result));
/*
 * fsyncs the file, names it and renames it over the final name, fsyncs the
 * directory, closes everything. On failure *ret_step names the step and
 * nothing is left behind.
 */
int safe_file_commit(struct safe_file *f, const char **ret_step)
	__attribute__((warn_unused_result));
/* Drops the file (unlinks the temporary name, if any) and closes. Idempotent. */
void safe_file_abort(struct safe_file *f);

/* The whole of buf as the new content of path, by the protocol above but
 * without fsync: for small files that need not survive a crash (pidfiles),
 * and must appear without delay. */
int safe_write_file(const char *path, const void *buf, size_t len)
	__attribute__((warn_unused_result));

/*
 * Opens path to append to it: never through a symlink, and only if it is a
 * regular file owned by the caller with one link (a new one is made 0600).
 * -ELOOP for a symlink, -EPERM for a file that is not ours, -EMLINK for a
 * hard-linked one, -EINVAL for anything but a regular file.
 */
int safe_open_append(const char *path) __attribute__((warn_unused_result));

#endif
