/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Network namespaces (netns.c, its restart in netns-rst.c): a tree's own
 * network namespace, its root's, saved and made again. What other kinds
 * ask of it, and the restart ops netns.c registers.
 */
#ifndef CKPT_KINDS_NETNS_H
#define CKPT_KINDS_NETNS_H

#include <stdbool.h>
#include <sys/types.h>

#include "kinds/kinds.h"

struct ckpt_ctx;
struct rst_ctx;
struct rst_task;

/* Checkpoint, once the root is collected: is pid's network namespace one
 * the image holds (ckpt's own, or the root's, which this kind saves)? */
bool netns_saved(struct ckpt_ctx *ctx, pid_t pid);

/* netns-rst.c */
int netns_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec);
int netns_prepare(struct rst_ctx *ctx);
int netns_root_spawned(struct rst_ctx *ctx, struct rst_task *root);
void netns_free_rstate(void *state);

#endif
