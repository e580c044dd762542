/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The unix kind's own header, shared by its files (unix.c says what the
 * kind does): unix.c collects one socket, dumps and loads; unix-flight.c
 * is the swap of pending connections and the fds in flight (checkpoint);
 * unix-peers.c the peers and clients outside the image (checkpoint);
 * unix-restore.c makes the sockets again (restart). unix-sk.c holds the
 * helpers with no knowledge of images or tasks.
 */
#ifndef CKPT_UNIX_H
#define CKPT_UNIX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kinds/kinds.h"
#include "kinds/unix-sk.h"
#include "unix.pb-c.h"

struct ckpt_ctx;
struct rst_ctx;
struct rst_task;
struct task;
struct fd_info;

enum { UNIX_SK_ENTRY = REC_TYPE(KID_unix, 1) };

/* states in the image */
enum {
	UNIX_ST_CLOSED, /* not connected (dgram: may have a peer) */
	UNIX_ST_LISTEN,
	UNIX_ST_CONNECTED, /* stream/seqpacket: peer, or 0 if it was closed */
	UNIX_ST_PENDING,   /* stream/seqpacket: waiting in listener's queue */
	UNIX_ST_MAX,
};
#define PENDING_MAX 4096u
#define TIMEO_MAX   (1000000ull * 86400 * 365 * 100)

/* What the swap read from the connections pending on a listener. */
struct capture {
	uint32_t listener, client; /* client: the new client's inode, 0 if closed */
	struct unix_msgs q;
};

/* fds lent to a task for the time of the checkpoint (see "fds in flight") */
struct lent {
	struct task *t;
	int chan;      /* ckpt's end of a socketpair made in the task */
	int remote[2]; /* the pair's ends in the task */
	int base;      /* lent fds go at base and above: above every fd it had */
	int *fds;
	size_t n, cap;
};

/* A network namespace whose sockets the table holds (a socket's usk tag
 * is its index in the table's list): the tree's (ckpt's, the root's own),
 * then those of other tasks of the image. */
struct unix_ns {
	uint32_t id; /* 0: the tree's, else NetnsEntry.id */
	int fd;	     /* an fd of it; -1: ckpt's */
	bool owned;  /* fd is the table's to close (else the netns kind's) */
};

/* checkpoint object: the table (key 0) or one socket */
struct unix_obj {
	bool is_reg;
	struct unix_table tab; /* is_reg */
	struct unix_ns *ns;    /* is_reg: the namespaces tab holds */
	size_t nns;
	struct capture *caps;
	size_t ncaps;
	struct lent *lent; /* is_reg: per task */
	size_t nlent;
	int depth;	/* is_reg: > 0 while an fd in flight is collected */
	bool carries;	/* a socket whose queues hold fds in flight */
	bool in_flight; /* collected as an fd in flight (fd is a lent one) */
	UnixSkEntry e;
	UnixOpts opts;
	struct unix_msgs queue;
	UnixPending *pend, **ppend;
	struct unix_msgs *pendq;
	size_t npend;
	uint8_t name[NAME_BUF];
	uint8_t ext[NAME_BUF]; /* external: the name it is connected to again */
	char *path;
	pid_t pid;
	int fd;
};

struct sockfd {
	int fd;
	uint32_t ino;
};


struct unix_robj {
	UnixSkEntry *e;
	int fd;	      /* ckpt's socket */
	int tmp_peer; /* a stand-in for a closed peer, until the queue is filled */
	int opath;    /* O_PATH fd of its bound file */
	struct unix_robj *peer, *listener;
	bool pair; /* dgram: made by socketpair with its peer */
	bool made; /* bind made the file made_dev/made_ino at its path */
	bool deferred; /* its name is bound at root ready (unix_root_ready) */
	dev_t made_dev;
	ino_t made_ino;
};

#define REFUSE(ctx, u, fmt, ...)                                                                   \
	log_fail(&(ctx)->log, -EOPNOTSUPP, "pid %d fd %d (unix %s socket:[%llu]%s): " fmt,         \
		 (u)->pid, (u)->fd, unix_type_name((u)->e.type), (unsigned long long)(u)->e.ino,   \
		 (u)->in_flight ? ", in flight" : "", ##__VA_ARGS__)

/* unix.c: is fi a unix socket; the table of sock_diag (key 0), made on
 * first use; the object of the socket of inode ino (NULL: none) */
bool unix_fd_claim(const struct fd_info *fi);
struct unix_obj *unix_reg(struct ckpt_ctx *ctx);
int unix_make_reg(struct ckpt_ctx *ctx, struct unix_obj **ret) __attribute__((warn_unused_result));
struct unix_obj *unix_find_obj(struct ckpt_ctx *ctx, uint64_t ino, uint32_t *ret_id);
/* unix.c: the table read again (every namespace it holds); a socket made in
 * the namespace of a socket of the table (the swap's); do names a and b
 * (of the image's entries) reach the same socket: the same bytes, and an
 * abstract one in the same network namespace */
int unix_table_again(struct unix_obj *reg) __attribute__((warn_unused_result));
int unix_socket_as(const struct unix_obj *reg, const struct usk *k, int type);
bool unix_same_name(const UnixSkEntry *a, const UnixSkEntry *b);

/* unix-flight.c: kind ops collect (the swap) and finish (lent fds taken
 * back); a listener whose pending connections must be swapped; the fds
 * in flight of queue q of u (pend: -1, or the pending connection's index),
 * and the credentials its messages show */
int unix_collect(struct ckpt_ctx *ctx, struct task *t);
void unix_finish(struct ckpt_ctx *ctx);
bool unix_swap_needed(const struct unix_table *tab, const struct usk *l);
int unix_collect_rights(struct ckpt_ctx *ctx, struct task *t, struct unix_obj *reg,
			struct unix_obj *u, struct unix_msgs *q, long pend)
	__attribute__((warn_unused_result));
int unix_fix_creds(struct ckpt_ctx *ctx, struct unix_obj *u, struct unix_msgs *q, bool shown,
		   long pend) __attribute__((warn_unused_result));

/* unix-peers.c: at collect_end, u's peers (outside the image: --external
 * unix, --detach-clients, or refused); a name for messages */
int unix_check_peers(struct ckpt_ctx *ctx, struct unix_obj *u) __attribute__((warn_unused_result));
const char *unix_name_str(const uint8_t *name, size_t len, char *buf, size_t size);

/* unix-restore.c: the kind ops of restart */
int unix_prepare(struct rst_ctx *ctx) __attribute__((warn_unused_result));
int unix_tree_ready(struct rst_ctx *ctx) __attribute__((warn_unused_result));
/* unix-restore.c: root ready, the names that waited for the container's tree */
int unix_root_ready(struct rst_ctx *ctx, struct rst_task *root) __attribute__((warn_unused_result));
int unix_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd) __attribute__((warn_unused_result));
void unix_free_robj(void *ptr);

#endif
