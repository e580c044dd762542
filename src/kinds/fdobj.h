/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Open files: what every fd kind has in common.
 *
 * Identity. An open file (a struct file of the kernel) is an object of the
 * hash, found by (kind, key): the key is a hint (an inode number, an
 * eventfd id), several open files may share one, and kcmp(KCMP_FILE) on a
 * task's fd that holds each tells them apart. That check is made here and
 * nowhere else: fdobj_same() for two fds, fdobj_find() for "the object of
 * kind under key that is this fd's open file" (a binary search of the key's
 * open files in the order kcmp gives them: many open files of one inode,
 * such as /dev/null opened by every worker, cost log2(n) calls each,
 * where asking each in turn made 10,000 of them take 114 s). An object that stands for
 * something else than an open file (a pipe's buffer, a pty pair, a queue,
 * an inode) has fd -1 in its struct fdobj and is never found that way.
 *
 * A kind with one record per open file (eventfd, signalfd, timerfd, pidfd,
 * nsfile, inotify, fanotify, epoll) describes itself by one const struct
 * fdobj_ops (its .file in kind_ops) and lets this file do the rest:
 *   checkpoint: fdobj_collect(), the find-or-add (fdtable asks it), and
 *               fdobj_dump(), every object not written yet;
 *   restart:    fdobj_load() (kind_ops.load), fdobj_prepare() (one loop: the
 *               kind's open() for each object), fdobj_get() (kind_ops.fd_get:
 *               ckpt's fd, made then for a "late" kind), fdobj_free_obj()
 *               and fdobj_free_robj() (kind_ops.free_obj, .free_robj).
 * The kinds with several sorts of object under one kind keep their own
 * fd_collect: pipe, fifo, file_reg and mqueue find open files with
 * fdobj_find() (and prepare with fdobj_prepare()); tty and memfd, whose
 * objects name their holder otherwise, ask fdobj_same(); unix needs no
 * kcmp (a socket has one open file: its inode is its identity).
 *
 * Lifetime, the one rule: an object belongs to whoever made it until
 * objhash_add() takes it, and to the hash from then on; the hash frees it
 * (kind_ops.free_obj/free_robj) at the end, never the kind. The maker that
 * fails before the add frees what it made and touches it no more, which
 * here means: fdobj_collect() frees a refused object with ops->free, and
 * fdobj_load() frees a record that is not valid or whose id is taken,
 * after reading the id it logs. A kind's hooks therefore never free the
 * object they are given, and never keep a pointer to a record they did not
 * add.
 */
#ifndef CKPT_FDOBJ_H
#define CKPT_FDOBJ_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ckpt_ctx;
struct rst_ctx;
struct rst_task;
struct task;
struct fd_info;
struct obj;
struct objhash;
struct img_record;
struct fdobj_ops;

/* Checkpoint: the open file an object of the hash stands for. */
struct fdobj {
	const struct fdobj_ops *ops; /* a table-driven kind's; NULL for the others */
	pid_t pid;                   /* a task of the image that holds it... */
	int fd;                      /* ...at this fd; -1: not an open file */
};

/* Restart: the head of a table-driven kind's object. */
struct fdobj_r {
	const struct fdobj_ops *ops;
	void *msg;   /* the record, unpacked; freed with the object */
	uint32_t id;
	int fd;      /* ckpt's fd of the open file; -1 until it is made */
};

/*
 * What a table-driven kind provides. Its checkpoint object is a struct
 * fdobj followed (at msg_off) by its message, whose uint32 id is at id_off;
 * its restart object is rsize bytes that begin with a struct fdobj_r.
 */
struct fdobj_ops {
	int kind;
	const char *name;  /* in messages: "pid 42 fd 3 (eventfd): ..." */
	uint32_t type;     /* the record of one object */
	const ProtobufCMessageDescriptor *msg;
	size_t size, msg_off, id_off, rsize;
	/* checkpoint */
	bool (*claim)(const struct fd_info *fi);
	/* the key of t's fd (NULL: its inode number) */
	int (*key)(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		   uint64_t *ret_key);
	/* fills in a new object (zeroed, its message initialised, its struct
	 * fdobj set) from t's fd, or refuses it (logged): it is then freed */
	int (*collect)(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi, void *obj);
	void (*free)(void *obj); /* what collect allocated in obj (may be NULL) */
	/* restart: why the record is not valid, or NULL */
	const char *(*invalid)(struct rst_ctx *ctx, const void *msg);
	/* makes r->fd: in prepare, or at the first fd_get if late (once every
	 * task exists); obj is its struct fdobj_r; NULL: the kind makes it */
	int (*open)(struct rst_ctx *ctx, void *obj);
	bool late;
};

/* Is pid_a's fd_a the same open file as pid_b's fd_b? */
bool fdobj_same(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b);
/* The object of kind under key whose open file (the struct fdobj at off
 * in it) is pid's fd, or NULL; log2 of the key's objects in kcmp calls. */
struct obj *fdobj_find(struct ckpt_ctx *ctx, int kind, uint64_t key, size_t off, pid_t pid,
		       int fd);
/* Checkpoint's end: what fdobj_find keeps to find fds fast (ctx->fdobj_index). */
struct fdobj_index;
void fdobj_index_free(struct fdobj_index *x);

/* Checkpoint, fdtable: the objref of t's fd, found or collected. */
int fdobj_collect(struct ckpt_ctx *ctx, const struct fdobj_ops *ops, struct task *t,
		  const struct fd_info *fi, uint32_t *ret_id) __attribute__((warn_unused_result));
/* Writes every object of the kind not written yet, in id order. */
int fdobj_dump(struct ckpt_ctx *ctx, const struct fdobj_ops *ops)
	__attribute__((warn_unused_result));
void fdobj_free_obj(void *obj);

/* Restart: kind_ops.load, .fd_get, .free_robj of a table-driven kind. */
int fdobj_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
	__attribute__((warn_unused_result));
int fdobj_get(struct rst_ctx *ctx, void *robj, int *ret_fd) __attribute__((warn_unused_result));
void fdobj_free_robj(void *robj);
/* The one prepare loop: open(ctx, obj) for every object of kind, in id
 * order; fdobj_prepare_all: a table-driven kind's ops->open, unless late. */
int fdobj_prepare(struct rst_ctx *ctx, int kind, int (*open)(struct rst_ctx *ctx, void *obj))
	__attribute__((warn_unused_result));
int fdobj_prepare_all(struct rst_ctx *ctx, const struct fdobj_ops *ops)
	__attribute__((warn_unused_result));
/* restart, for a kind's own loader: adds robj under the image's id; an id
 * defined twice is refused and robj freed by free_robj */
int fdobj_register(struct rst_ctx *ctx, const struct img_record *rec, int kind, uint32_t id,
		   void *robj, void (*free_robj)(void *)) __attribute__((warn_unused_result));
/* ckpt's fd of object id named what, or a failure if it was not made */
int fdobj_fd(struct rst_ctx *ctx, int fd, const char *what, uint32_t id, int *ret_fd)
	__attribute__((warn_unused_result));

#endif
