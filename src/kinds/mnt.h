/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A container's mount tree (mnt.c): what the file kinds ask of it. Only a
 * container with a root of its own (ckpt run --root) has one; for any
 * other image these say "no tree" and paths are the host's.
 */
#ifndef CKPT_KINDS_MNT_H
#define CKPT_KINDS_MNT_H

#include <stdbool.h>
#include <stddef.h>

struct ckpt_ctx;
struct rst_ctx;
struct stat;

/* Checkpoint, once the root is collected: has the container a root (a
 * mount tree) of its own? */
bool mnt_own_root(struct ckpt_ctx *ctx);
/* A plain tree's or a container's root (pid) in a mount namespace of its
 * own on ckpt's root: are its copies of ckpt's mounts slaves of them
 * (else private), and are they also shared, each in a peer group of the
 * namespace's own? Refused, naming the mount, where two flags for the
 * whole tree cannot say how its copies propagate (one still in a peer
 * group of ckpt's, mixed ones). 1, both false: a root of its own. */
int mnt_subtree_prop(struct ckpt_ctx *ctx, pid_t pid, bool *ret_slave, bool *ret_shared)
	__attribute__((warn_unused_result));
/* Checkpoint, once the root is collected: does path, as the container's
 * tasks see it, lead through its root to the file st (so that a restart
 * opens it through the new tree)? False without a tree of its own. */
bool mnt_inside(struct ckpt_ctx *ctx, const char *path, const struct stat *st);
/* Checkpoint: path as the container's tasks see it, as ckpt can open it
 * (buf: through the root's /proc/PID/root), or path itself without a tree. */
const char *mnt_seen(struct ckpt_ctx *ctx, const char *path, char *buf, size_t len);

/* Checkpoint, before --kill: a unix socket's path name. 0: not the
 * container's (the host's checks apply: no tree, or a host-rooted
 * container's name on none of its own mounts); 1: the container's, which
 * a restart binds through its mounts; -EOPNOTSUPP: the container's, and a
 * restart could not (a tmpfs's needs root and no user namespace of its
 * own); on a bind of the host's, without root or in a user namespace of
 * its own, -EACCES where ckpt may not create files in the host's
 * directory, -EPERM where the file's owner (uid, gid as ckpt sees them)
 * is not ckpt's; 2: on a tmpfs of a container with a user namespace of
 * its own, bound at root ready (nothing may connect to it at prepare). */
int mnt_unix_name(struct ckpt_ctx *ctx, const char *path, uid_t uid, gid_t gid);

/* Restart, at prepare: binds unix socket s to name (as bind(2) was given
 * it; path its file's absolute path, both the container's) through the
 * container's mounts, before they are made: in a thread of its own mount
 * namespace, the mount that holds path (a bind of the host's, or a tmpfs
 * made here and later attached to the tree) is mounted at its point of an
 * empty scaffold and the thread chroots into it. mode < 0: leave the
 * file's mode and owner. 1 where the name is not the container's (no
 * tree, or a host-rooted container's name on none of its own mounts): the
 * caller binds it by its host path. 2 where it must wait for the tree
 * (a tmpfs's in a container with a user namespace of its own, whose tmpfs
 * belongs to it): mnt_rst_bind_unix_late then. -EOPNOTSUPP where the
 * name's mount is not one of those. */
int mnt_rst_bind_unix(struct rst_ctx *ctx, int s, const char *name, const char *path, int mode,
		      unsigned uid, unsigned gid) __attribute__((warn_unused_result));

/* Restart, from root ready on (the tree made): binds s to name in the
 * root's namespaces (user and mount: a child process enters them, "/" and
 * the cwd are then the container's root), mode and owner (ids as ckpt
 * sees them, mapped inside) as mnt_rst_bind_unix. */
int mnt_rst_bind_unix_late(struct rst_ctx *ctx, int s, const char *name, const char *path,
			   int mode, unsigned uid, unsigned gid) __attribute__((warn_unused_result));

/* Restart, once a name of the container is bound: an O_PATH fd of its
 * socket file, by its host path on a bind of the host's, else through the
 * root's /proc/PID/root (for a caller without CAP_NET_ADMIN, where
 * SIOCUNIXFILE fails); -errno, -EOPNOTSUPP for a name on no mount of the
 * container. */
int mnt_rst_unix_file(struct rst_ctx *ctx, const char *path) __attribute__((warn_unused_result));

/* A path inside the container: absolute (rel: relative), no "." or ".." parts. */
bool mnt_clean_path(const char *p, bool rel);

/* Restart: the image has a mount tree, made at "root ready". */
bool mnt_rst_tree(struct rst_ctx *ctx);
/* Restart, from "root ready" on: path of the container as ckpt opens it
 * (through the root's /proc/PID/root); -ENOENT without a tree. */
int mnt_rst_path(struct rst_ctx *ctx, const char *path, char *buf, size_t len)
	__attribute__((warn_unused_result));

#endif
