/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cgroup v2 helpers shared by the cgroup kind and `ckpt run`. Paths named
 * "rel" are relative to the caller's cgroup namespace root and start with
 * '/' ("/" is the root itself); the directory of one is the cgroup2 mount
 * (cg_mount) followed by rel. Every function returns 0 or -errno and does
 * not log.
 */
#ifndef CKPT_UTIL_CGROUP_H
#define CKPT_UTIL_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CG_PATH_MAX 4096

/* The mount point of a cgroup2 file system whose root is the caller's
 * cgroup namespace root (/proc/self/mountinfo); -ENOENT if none. */
int cg_mount(char *buf, size_t len) __attribute__((warn_unused_result));
/* The cgroup v2 path in the text of a /proc/PID/cgroup ("0::PATH" line);
 * -ENOENT if it has none. */
int cg_v2_path(const char *text, char *buf, size_t len) __attribute__((warn_unused_result));
/* Is rel a clean absolute path: '/', no empty, "." or ".." components? */
bool cg_path_ok(const char *rel);
/* Is name one of the limit files ckpt saves (memory.max, cpu.max,
 * pids.max, hugetlb.2MB.max, cgroup.max.depth...)? */
bool cg_limit_name_ok(const char *name);
/* The limit files ckpt saves, in the order they are set, for a loop over
 * the fixed ones (hugetlb files are found by cg_limit_name_ok). */
extern const char *const cg_limit_names[];
extern const size_t cg_nlimit_names;
/* Reads mnt/rel/file into buf (the trailing newline dropped). */
int cg_read(const char *mnt, const char *rel, const char *file, char *buf, size_t len)
    __attribute__((warn_unused_result));
/* Writes value into mnt/rel/file. */
int cg_write(const char *mnt, const char *rel, const char *file, const char *value)
    __attribute__((warn_unused_result));
/* Enables the controller of a limit file name (the part before the first
 * '.'; "cgroup." needs none) in the subtree_control of every ancestor of
 * rel, from the mount's root down, where it is not yet. On failure
 * ret_where (CG_PATH_MAX) names the cgroup that refused. */
int cg_enable_for(const char *mnt, const char *rel, const char *limit, char *ret_where)
    __attribute__((warn_unused_result));
/* Does mnt/rel hold no process (cgroup.procs empty)? -errno if unreadable. */
int cg_is_empty(const char *mnt, const char *rel) __attribute__((warn_unused_result));

#endif
