/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Namespaces (ns.c): what the other kinds ask of a container's namespaces.
 * A container's namespaces are its root's (every task of it is in them):
 * the ns kind's state and record are the root's.
 */
#ifndef CKPT_KINDS_NS_H
#define CKPT_KINDS_NS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core.pb-c.h"

struct ckpt_ctx;
struct rst_ctx;

/* Checkpoint, once the root is collected: an id as seen from ckpt, as the
 * container sees it (unmapped: 65534; no user namespace of its own: the same). */
uint32_t ns_uid_inside(struct ckpt_ctx *ctx, uint32_t uid);
uint32_t ns_gid_inside(struct ckpt_ctx *ctx, uint32_t gid);
/* A container with a user namespace of its own. */
bool ns_own_userns(struct ckpt_ctx *ctx);
/* The device of the container's own devpts on /dev/pts, 0 if none. */
uint64_t ns_devpts_dev(struct ckpt_ctx *ctx);

/* Checkpoint: the namespace ns/NAME ("mnt", "net") of each of t's threads,
 * by its inode (nsfs has one device: the inode names the namespace), read
 * on every CPU for many: t->nthreads of them, malloc'd (at least one), err
 * the -errno of one that failed; NULL if no memory. */
struct task;
struct ns_thread_ino {
	uint64_t ino;
	int err;
};
struct ns_thread_ino *ns_threads_ino(const struct task *t, const char *name);

/* Restart, once the root's records are loaded: the container's namespaces
 * (NULL for a subtree); its CLONE_NEW* flags (0 for a subtree). */
const NamespacesEntry *ns_rst(struct rst_ctx *ctx);
uint32_t ns_rst_flags(struct rst_ctx *ctx);

#endif
