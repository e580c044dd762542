/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the fd kinds with one record per open file (eventfd, signalfd,
 * timerfd, pidfd, inotify, fanotify, epoll) have in common:
 *   fdobj_dump(ctx, kind, type, off)   checkpoint: writes every object of
 *                       kind not written yet, as a record of type: the
 *                       protobuf message at offset off in its data
 *   fdobj_register(ctx, rec, kind, id, robj, free_robj)   restart: adds
 *                       robj under the image's object id; an id defined
 *                       twice is refused, and robj freed by free_robj
 *   fdobj_fd(ctx, fd, what, id, ret_fd)   restart, fd_get: ckpt's fd of
 *                       object id, or a failure if it was not made
 */
#ifndef CKPT_FDOBJ_H
#define CKPT_FDOBJ_H

#include <stddef.h>
#include <stdint.h>

struct ckpt_ctx;
struct rst_ctx;
struct img_record;

int fdobj_dump(struct ckpt_ctx *ctx, int kind, uint32_t type, size_t off)
	__attribute__((warn_unused_result));
int fdobj_register(struct rst_ctx *ctx, const struct img_record *rec, int kind, uint32_t id,
		   void *robj, void (*free_robj)(void *)) __attribute__((warn_unused_result));
int fdobj_fd(struct rst_ctx *ctx, int fd, const char *what, uint32_t id, int *ret_fd)
	__attribute__((warn_unused_result));

#endif
