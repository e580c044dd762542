/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The mnt kind's own parts, shared by mnt.c (the mount tree) and
 * mnt-tmpfs.c (each tmpfs's files, and unix socket names bound in the
 * container's mounts at restart). Not for other kinds: they use mnt.h.
 */
#ifndef CKPT_KINDS_MNT_INT_H
#define CKPT_KINDS_MNT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/ctx.h"
#include "mnt.pb-c.h"

enum { MNT_TREE = REC_TYPE(KID_mnt, 1), MNT_FILE = REC_TYPE(KID_mnt, 2) };

struct mnt_ckpt {
	MountTree tree;
	MountEntry *ents;
	MountEntry **ptrs;
	dev_t *devs;            /* each mount's device (its tmpfs to walk) */
	HostMountFlags *hflags; /* tree.host_flags */
	HostMountFlags **hptrs;
	char **strs;            /* strings made here, freed with the state */
	size_t nstrs;
	pid_t pid;              /* the root, whose /proc/PID/root the tree is seen through */
};

struct mnt_rst {
	MountTree *tree;
	TmpfsFile **files;
	size_t nfiles;
	int *early; /* per mount: a tmpfs made and filled at prepare, detached
		     * (fsmount), for the unix sockets bound on it; or -1 */
};

/* The container's ids as ckpt sees them (uid_map, gid_map text). */
struct idmaps {
	char uid[512], gid[512];
};

/* mnt.c */
/* Is path dir or below it? ("/" holds everything) */
bool mnt_has_prefix_dir(const char *path, const char *dir);
const MountEntry *mnt_find_mount(const struct mnt_rst *s, uint32_t id);
/* e's index in tree, n_mounts if it is not there. */
size_t mnt_find_index(const MountTree *tree, const MountEntry *e);

/* mnt-tmpfs.c */
/* Device nodes a tmpfs may hold: those of a minimal /dev. */
bool mnt_dev_allowed(mode_t mode, dev_t rdev);
/* The mount of tree whose point holds path's directory (the last of those
 * with the longest point: a later one is on top); n_mounts if none. */
size_t mnt_mount_of_path(const MountTree *tree, const char *path);
/* Checkpoint, dump: the files of tmpfs s->ptrs[i], one TmpfsFile record each. */
int mnt_dump_tmpfs(struct ckpt_ctx *ctx, const struct mnt_ckpt *s, size_t i)
	__attribute__((warn_unused_result));
/* Restart: the files of tmpfs m, made through via (the puppet's view). */
int mnt_fill_tmpfs(struct rst_ctx *ctx, const struct mnt_rst *s, const MountEntry *m,
		   const char *via) __attribute__((warn_unused_result));

#endif
