/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_FDTABLE_H
#define CKPT_FDTABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util/proc.h"

struct ckpt_ctx;
struct rst_ctx;
struct rst_task;
struct task;

/* What fdtable learned of one fd, for the fd kinds to judge. */
struct fd_info {
	pid_t pid;
	int fd;
	char path[4096];        /* readlink of /proc/PID/fd/FD */
	struct stat st;         /* stat of it: the open file's inode */
	struct proc_fdinfo fi;
	char sockproto[32];     /* a socket's system.sockprotoname, read once */
	bool sockproto_read;
	/* ckpt's copy of the fd (pidfd_getfd through one pidfd a table), made
	 * by fdtable's walk of a table and closed by it after the fd's kind
	 * collected it; -1 elsewhere. A kind that keeps one dups it
	 * (fdtable_copy). */
	int copy;
};

/* A copy of fi's fd in ckpt, to keep: a dup of fi->copy when fdtable has
 * one, else pidfd_getfd; -errno. */
int fdtable_copy(struct task *t, const struct fd_info *fi) __attribute__((warn_unused_result));

/*
 * Checkpoint, for open files collected outside a task's table (unix.c's
 * fds in flight, lent to a task for the look): what fdtable learns of fd
 * of t, and the kind whose fd_claim takes it (-EOPNOTSUPP, logged as for
 * any fd of a table, when none does); its fd_collect is the caller's.
 */
/* Is fi a socket whose protocol name (system.sockprotoname: "UNIX",
 * "NETLINK", "TCP"...) begins with proto? */
bool fdtable_sock_proto(const struct fd_info *fi, const char *proto);

int fdtable_inspect_fd(struct ckpt_ctx *ctx, struct task *t, int fd, struct fd_info *fi)
	__attribute__((warn_unused_result));
int fdtable_claim(struct ckpt_ctx *ctx, const struct fd_info *fi, int *ret_kind)
	__attribute__((warn_unused_result));
int fdtable_collect_file(struct ckpt_ctx *ctx, int kind, struct task *t, const struct fd_info *fi,
			 uint32_t *ret_id) __attribute__((warn_unused_result));

/* The fd numbers pid has open, ascending (the fd table's listing of
 * /proc/PID/fd); *ret_fds is malloc'ed, NULL when there are none. */
int fdtable_list(pid_t pid, int **ret_fds, size_t *ret_n) __attribute__((warn_unused_result));

/* Checkpoint: what the fds of t link to (readlink of /proc/PID/fd/FD),
 * ascending, read once a task by the first pass that asks (the network
 * lock's, at the freeze) and kept for the others (unix's, the dirty
 * tracking's) instead of a walk of /proc each. A frozen tree's fds do not
 * change, but ckpt's own injections do: a pass that runs after those
 * reads /proc itself. -errno. */
struct fd_link {
	int fd;
	char *link;
};
int fdtable_links(struct task *t, const struct fd_link **ret, size_t *ret_n)
	__attribute__((warn_unused_result));

/* Checkpoint, once fdtable collected t (collect_end): each fd of its
 * table it looked at, ascending, with the inode of the open file (stat)
 * and the "lock:" lines of its fdinfo, NULL when it had none; -ENOENT if
 * fdtable did not walk t's table (it shares another task's). For the
 * locks kind, which would otherwise read every fdinfo again. */
struct fdtable_seen {
	int fd;
	dev_t dev;
	ino_t ino;
	char *locks;
};
int fdtable_seen(struct task *t, const struct fdtable_seen **ret, size_t *ret_n)
	__attribute__((warn_unused_result));

/* Restart: the fd ckpt holds for the open-file object id, of any fd kind. */
int fdtable_local_fd(struct rst_ctx *ctx, uint32_t id, int *ret_fd)
	__attribute__((warn_unused_result));

/*
 * For kinds whose objects name other fds of a task (epoll watches):
 * checkpoint, once fdtable has collected t (collect_end): the objref of
 * the open file at fd; restart, once the image is loaded: the same from
 * the task's fd table, and the lowest fd that holds object id.
 * -ENOENT when there is none.
 */
int fdtable_file_id(struct task *t, int fd, uint32_t *ret_id) __attribute__((warn_unused_result));
/* Checkpoint, after collect: the objref at the first fd of any task of the
 * image for which match(pid, fd, arg) is true; -ENOENT when none is. */
int fdtable_find_file(struct ckpt_ctx *ctx, bool (*match)(pid_t pid, int fd, void *arg),
		      void *arg, uint32_t *ret_id) __attribute__((warn_unused_result));
int fdtable_rst_file_id(struct rst_task *t, int fd, uint32_t *ret_id)
	__attribute__((warn_unused_result));
int fdtable_rst_fd_of(struct rst_task *t, uint32_t id, int *ret_fd)
	__attribute__((warn_unused_result));

#endif
