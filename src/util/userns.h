/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_UTIL_USERNS_H
#define CKPT_UTIL_USERNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Writes the id maps of pid's new user namespace: uid_map and gid_map as
 * given when ckpt is root; otherwise (setgroups denied first) the one map
 * an unprivileged user may write, its own id for the single id each map
 * holds (-EDOM, *ret_what "uid_map" or "gid_map", when a map holds
 * several). On failure *ret_what names the file that failed.
 */
int userns_write_maps(pid_t pid, const char *uid_map, const char *gid_map,
		      const char **ret_what) __attribute__((warn_unused_result));
/* The same with the caller's own uid and gid mapped to themselves. */
int userns_map_self(pid_t pid, const char **ret_what) __attribute__((warn_unused_result));

/* Process pid's id map name ("uid_map", "gid_map": its user namespace's,
 * ids outside as ckpt's namespace sees them) into buf, len bytes at
 * most with the NUL; -errno. */
int userns_read_map(pid_t pid, const char *name, char *buf, size_t len);
/* id through map ("inside outside count" lines): an id inside to the one
 * outside (in = false: the other way); -1 if unmapped. */
int64_t userns_map_id(const char *map, uint32_t id, bool in);

/* This thread's effective and permitted capability sets (bit n: cap n). */
int userns_caps(uint64_t *effective, uint64_t *permitted) __attribute__((warn_unused_result));
/* Is cap in this caller's effective set? 1, 0, or -errno. */
int userns_cap_effective(int cap);
/* Has this caller CAP_SYS_ADMIN in its effective set (to make a mount
 * namespace of its own, mount)? */
bool userns_may_mount(void);

/* Can this caller make a user namespace with a pid namespace in it? (a
 * child tries) */
bool userns_can_make(void);

#endif
