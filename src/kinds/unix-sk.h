/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Helpers of the unix kind (unix.c), with no knowledge of images or tasks:
 *
 * - the sock_diag table: what NETLINK_SOCK_DIAG says of every unix socket
 *   of a network namespace, read in one dump (several may be added). Embryos (connections
 *   not accepted yet) have no inode and are left out: they are seen
 *   through their listener's icons (the inodes of their clients, 0 for a
 *   client since closed, in accept order).
 * - a receive queue read without taking it out (recvmsg with MSG_PEEK,
 *   walked by SO_PEEK_OFF, which is put back as it was): one message per
 *   datagram, the sender's name and credentials kept.
 * - socket options read and set again; addresses; messages sent again
 *   with the credentials they carried.
 *
 * Functions return 0 or -errno and log nothing.
 */
#ifndef CKPT_UNIX_SK_H
#define CKPT_UNIX_SK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <sys/un.h>

#include "unix.pb-c.h"

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

/* kernel states (include/net/tcp_states.h) and sk_shutdown bits (net/sock.h) */
enum { K_ESTABLISHED = 1, K_CLOSE = 7, K_LISTEN = 10 };
enum { RCV_SHUTDOWN = 1, SEND_SHUTDOWN = 2 };

#define SUN_LEN_MAX sizeof(((struct sockaddr_un *)0)->sun_path)
#define NAME_BUF    (SUN_LEN_MAX + 2)
#define QUEUE_MAX   (64u << 20) /* bytes per queue */
#define MSGS_MAX    (1u << 16)
#define BIG_SNDBUF  (INT_MAX / 4)
#define RIGHTS_MAX  253 /* fds one message may carry (SCM_MAX_FD) */

/* one socket as sock_diag shows it */
struct usk {
	uint32_t ino, peer, rqlen, wqlen, vfs_ino, vfs_dev, nicons, namelen;
	uint8_t type, state, shutdown;
	bool has_peer, has_vfs, has_mem;
	uint32_t wmem, sndbuf;	/* has_mem: SK_MEMINFO_WMEM_ALLOC, _SNDBUF */
	uint8_t name[NAME_BUF]; /* sun_path bytes; a path name ends with its NUL */
	uint32_t *icons;	/* listener: clients of pending connections */
	uint32_t tag;		/* the caller's: which namespace's dump saw it */
};

struct unix_table {
	struct usk *v;
	size_t n, cap;
};

int unix_table_dump(struct unix_table *t) __attribute__((warn_unused_result));
/* ... and those of the network namespace netns_fd refers to (-1: ckpt's),
 * added to t */
int unix_table_dump_ns(struct unix_table *t, int netns_fd) __attribute__((warn_unused_result));
void unix_table_free(struct unix_table *t);
/* socket(2) in the network namespace netns_fd refers to (-1: the calling
 * thread's): made by the thread while it is in there (a socket keeps its
 * namespace, and so does an abstract name bound to it) */
int unix_socket_in(int netns_fd, int domain, int type, int proto);
int unix_socketpair_in(int netns_fd, int type, int sv[2]);
const struct usk *unix_table_find(const struct unix_table *t, uint32_t ino);
/* the listener in whose queue the socket ino waits, or NULL */
const struct usk *unix_table_listener_of(const struct unix_table *t, uint32_t ino);

/* A queue of messages, each malloc'ed with its data; rights[i] (when kept)
 * is [n, fd...] of message i, closed by unix_msgs_free. */
struct unix_msgs {
	UnixMsg **v;
	int **rights;
	size_t n, cap, bytes;
	bool has_rights; /* fds were in flight (kept or closed) */
};

int unix_msgs_add(struct unix_msgs *q, const void *data, size_t len, const void *from,
		  size_t fromlen, const struct ucred *cred, int *rights)
    __attribute__((warn_unused_result));
void unix_msgs_free(struct unix_msgs *q);
/*
 * The sender memory (SK_MEMINFO_WMEM_ALLOC: the skbs' truesize) the
 * messages of q take queued on a stream socket when each is sent by one
 * sendmsg with its kept fds, from a sender whose sk_sndbuf is sndbuf: what
 * the restart makes of q. Measured on a socketpair of ckpt's own.
 * -EAGAIN: they do not fit, or q has messages whose fds were not kept.
 */
int unix_stream_wmem(const struct unix_msgs *q, uint32_t sndbuf, uint64_t *ret)
    __attribute__((warn_unused_result));

/*
 * Reads the receive queue of s (of type, with shutdown bits) into q
 * without taking it out; fds in flight are kept in q->rights if keep, else
 * closed (q->has_rights says there were some). -EBADMSG: the queue holds
 * what a peek does not show (out-of-band data); -EFBIG: too big;
 * -ENOBUFS (keep): a message's control data did not fit (fds cut off).
 */
int unix_peek_queue(int s, int type, uint8_t shutdown, bool keep, struct unix_msgs *q)
    __attribute__((warn_unused_result));

/* Options: *ret_filter says a socket filter is attached. */
int unix_opts_read(int s, UnixOpts *o, bool *ret_ebpf) __attribute__((warn_unused_result));
void unix_opts_free(UnixOpts *o);
/* On a new socket: all but what unix_opts_finish sets; raises the send
 * buffer meanwhile, so that queues can be refilled. */
int unix_opts_apply(int s, const UnixOpts *o) __attribute__((warn_unused_result));
/* At the end: buffer sizes, SO_PASS*, SO_PEEK_OFF. */
int unix_opts_finish(int s, const UnixOpts *o) __attribute__((warn_unused_result));
/* A buffer size as getsockopt says it (the kernel doubles what is set). */
int unix_set_buf(int s, bool snd, uint32_t val) __attribute__((warn_unused_result));

static inline bool unix_name_abstract(const ProtobufCBinaryData *n)
{
	return n->len && n->data[0] == 0;
}
socklen_t unix_mkaddr(struct sockaddr_un *a, const uint8_t *name, size_t len);
/* "/proc/self/fd/N" of an O_PATH fd of a bound file: how ckpt reaches a
 * path socket, even one whose file was unlinked or whose name is long */
socklen_t unix_opath_addr(struct sockaddr_un *a, int opath);
const char *unix_type_name(uint32_t type);

/* Sends m again (to addr if not NULL), with the fds in rights ([n, fd...],
 * NULL: none) and the credentials it carried (m->pid as ckpt sees it): the
 * sender's pid if it still exists, else ckpt's, and none if ckpt may not
 * speak for it; UNIX_SEND_STRICT: exactly those, or -ESRCH / -EPERM (the
 * receiver shows them). UNIX_SEND_STREAM: a stream, sent in parts. */
enum { UNIX_SEND_STREAM = 1, UNIX_SEND_STRICT = 2 };
int unix_send(int s, const UnixMsg *m, const int *rights, const struct sockaddr_un *addr,
	      socklen_t alen, unsigned flags) __attribute__((warn_unused_result));
/* shutdown(2) for sk_shutdown bits */
int unix_shut(int s, uint32_t bits) __attribute__((warn_unused_result));

/*
 * Could this process bind e's name at restart, the socket that holds it now
 * gone (the original killed)? A path name: its directory writable and
 * searchable, nothing but a socket file at the path, and the saved owner
 * one this process may give. 0, or -errno with the reason in why.
 */
int unix_name_bindable(const UnixSkEntry *e, char *why, size_t len);

/*
 * Binds s to the path name of e that was unlinked at checkpoint (its path
 * may hold another file now, its directory may be gone) without touching
 * the file system anyone sees: from a thread in a private mount namespace,
 * chrooted into a tmpfs where the path's directories are made anew; the
 * file is unlinked there again (it keeps its path), and *ret_opath is an
 * O_PATH fd of it (SIOCUNIXFILE) to reach the socket by. -EPERM when this
 * process may not make a mount namespace: the caller binds in place.
 */
int unix_bind_hidden(int s, const UnixSkEntry *e, int *ret_opath) __attribute__((warn_unused_result));

#ifndef SIOCUNIXFILE
#define SIOCUNIXFILE (SIOCPROTOPRIVATE + 0) /* an O_PATH fd of a socket's file */
#endif

#endif
