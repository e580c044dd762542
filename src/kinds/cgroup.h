/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_KINDS_CGROUP_H
#define CKPT_KINDS_CGROUP_H

struct rst_ctx;
struct rst_task;

/*
 * A container's root made in a cgroup namespace of its own: moves the
 * puppet into its saved cgroup and has it unshare CLONE_NEWCGROUP there,
 * before it forks anything (tree.c, as it enters its namespaces).
 */
int cgroup_enter_ns(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));

#endif
