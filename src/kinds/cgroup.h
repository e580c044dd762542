/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_KINDS_CGROUP_H
#define CKPT_KINDS_CGROUP_H

struct rst_ctx;
struct rst_task;

#include <stddef.h>

/*
 * A container's root made in a cgroup namespace of its own: moves the
 * puppet into its saved cgroup and has it unshare CLONE_NEWCGROUP there,
 * before it forks anything (tree.c, as it enters its namespaces).
 */
int cgroup_enter_ns(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));

/* The cgroups a successful restart made, taken over from its context (so
 * they outlive it): removed, children first, by cgroup_remove_made once the
 * restored tree that ckpt waited for has ended. Those still holding a
 * process (a daemon that outlived the root) stay. */
struct cgroup_made {
	char **paths;
	size_t n;
};
void cgroup_take_made(struct rst_ctx *ctx, struct cgroup_made *ret);
void cgroup_remove_made(struct cgroup_made *m);

#endif
