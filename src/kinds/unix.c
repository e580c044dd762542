/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unix-domain sockets (AF_UNIX: stream, dgram, seqpacket).
 *
 * A socket has exactly one open file, so one object per socket, found by
 * its inode, holds everything: type, state, bound name, options, file
 * flags, shutdown bits and the receive queue. Peers are linked by inode
 * (UNIX_DIAG_PEER), so the two ends of a connection may belong to
 * different tasks.
 *
 * Checkpoint. What the kernel says of every unix socket of each network
 * namespace of the image is read once (NETLINK_SOCK_DIAG: name, VFS inode, peer,
 * pending connections, queue lengths, shutdown) into a table kept in the
 * objhash under key 0. Each socket is then read through a copy of its fd
 * (pidfd_getfd): options with getsockopt, the bound file with SIOCUNIXFILE,
 * the receive queue with recvmsg(MSG_PEEK) walked by SO_PEEK_OFF (see
 * unix-sk.h): one message per datagram, the sender's name and credentials
 * kept. The fds a queued message carries (SCM_RIGHTS) are saved as the
 * objrefs of their open files, collected by their own kinds through the
 * task (see "fds in flight" below); a sender of the tree is saved by its
 * pid in the image.
 *
 * Connections not yet accepted hold their data in an "embryo" socket that
 * has no file and cannot be peeked. When one of them holds data (or its
 * client has been closed), ckpt accepts every pending connection of that
 * listener itself, reads what each holds, and at once puts an equivalent
 * connection back in its place, in order: a new client socket with the
 * same options, connected by ckpt, sent the same data, installed in the
 * task at every fd of the old client (new inode). This happens in collect,
 * before fdtable lists the fds, whether or not the checkpoint then
 * succeeds.
 *
 * Restart, on ckpt's side, in phases. prepare (before any process):
 * check the links, create the sockets (options set, send buffers raised
 * for the refill), bind the names, listen, make the connections
 * (socketpair, or connect to the restored listener or to a stand-in
 * bound to the accepted side's name, and accept). restore of the first
 * task (its pid now exists, for the credentials of the messages it sent):
 * connect the pending clients in order and send their data, refill the
 * receive queues from the peer side (dgram: from the socket bound to the
 * sender's name, or an unnamed one), each message with the fds it carried
 * (every kind has prepared its objects by then: fd_get gives them) and
 * its credentials, connect the dgram sockets, then put
 * back buffer sizes, SO_PASS*, SO_PEEK_OFF, backlog, shutdown bits and
 * O_NONBLOCK. fdtable then passes the sockets in.
 *
 * Refused: peers (or pending connections, or listeners) outside the
 * image (but see --external unix and --detach-clients below), out-of-band
 * data, eBPF socket filters, a socket of a network namespace the image
 * does not hold (those it holds, a task's or one held by an fd, are read
 * by sock_diag in each, and each socket is made again in its own); fds
 * in flight of a kind tied to a task's fd numbers (epoll) or of no kind,
 * files in flight holding a flock or OFD lock, unix sockets in flight that
 * hold fds in flight themselves; credentials a receiver shows (SO_PASSCRED)
 * of a sender that has exited or is outside a container (restart sends the
 * credentials of such a receiver's messages exactly, or fails). Not
 * reproduced: SO_PEERCRED (ckpt made the connections), a pending error
 * (SO_ERROR cannot be read without clearing it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "kinds/mnt.h"
#include "kinds/netns.h"
#include "kinds/sk-filter.h"
#include "kinds/unix-sk.h"
#include "kinds/unix.h"
#include "unix.pb-c.h"
#include "util/cleanup.h"

/* --- checkpoint ------------------------------------------------------------ */

static void unix_free_obj(void *ptr);

bool unix_fd_claim(const struct fd_info *fi)
{
	return fdtable_sock_proto(fi, "UNIX");
}

struct unix_obj *unix_reg(struct ckpt_ctx *ctx)
{
	struct obj *o = objhash_next_key(&ctx->objs, NULL, KIND_unix, 0);
	return o ? o->ptr : NULL;
}

/* The sockets of one more namespace (fd -1: ckpt's) added to reg's table,
 * tagged with its place in reg's list; fd is the table's if owned. */
static int dump_ns(struct unix_obj *reg, uint32_t id, int fd, bool owned)
{
	struct unix_ns *v = realloc(reg->ns, (reg->nns + 1) * sizeof(*v));
	if (!v) {
		if (owned)
			close(fd);
		return -ENOMEM;
	}
	reg->ns = v;
	reg->ns[reg->nns] = (struct unix_ns){.id = id, .fd = fd, .owned = owned};
	size_t n0 = reg->tab.n;
	int r = unix_table_dump_ns(&reg->tab, fd);
	for (size_t i = n0; i < reg->tab.n; i++)
		reg->tab.v[i].tag = (uint32_t)reg->nns;
	reg->nns++;
	return r;
}

/*
 * The namespaces whose sockets the table holds: ckpt's, a container's own
 * (the root's, which netns.c saves), both the tree's (id 0), then each
 * other one the image holds (a task's that unshared one, saved by netns.c
 * as the tasks are collected), added as they come: a socket's namespace
 * is the one whose dump shows it, whichever task holds it.
 */
static int table_sync(struct ckpt_ctx *ctx, struct unix_obj *reg)
{
	pid_t root = ctx->ntasks ? ctx->tasks[0].pid : 0;
	int r = 0;
	if (!reg->nns)
		r = dump_ns(reg, 0, -1, false);
	if (r >= 0 && reg->nns == 1 && root && !proc_same_netns(root) && netns_saved(ctx, root)) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/net", root);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		r = fd < 0 ? -errno : dump_ns(reg, 0, fd, true);
	}
	uint32_t id;
	int fd;
	for (size_t k = 0; r >= 0 && netns_other(ctx, k, &id, &fd) == 0; k++) {
		bool have = false;
		for (size_t i = 0; i < reg->nns; i++)
			have |= reg->ns[i].id == id;
		if (!have)
			r = dump_ns(reg, id, fd, false);
	}
	return r;
}

int unix_table_again(struct unix_obj *reg)
{
	unix_table_free(&reg->tab);
	for (size_t k = 0; k < reg->nns; k++) {
		size_t n0 = reg->tab.n;
		int r = unix_table_dump_ns(&reg->tab, reg->ns[k].fd);
		for (size_t i = n0; i < reg->tab.n; i++)
			reg->tab.v[i].tag = (uint32_t)k;
		if (r < 0)
			return r;
	}
	return 0;
}

int unix_socket_as(const struct unix_obj *reg, const struct usk *k, int type)
{
	int fd = k->tag < reg->nns ? reg->ns[k->tag].fd : -1;
	return unix_socket_in(fd, AF_UNIX, type, 0);
}

static uint32_t netns_of(const UnixSkEntry *e)
{
	return e->has_netns ? e->netns : 0;
}

bool unix_same_name(const UnixSkEntry *a, const UnixSkEntry *b)
{
	return a->has_name && b->has_name && a->name.len == b->name.len &&
	       !memcmp(a->name.data, b->name.data, a->name.len) &&
	       (!unix_name_abstract(&a->name) || netns_of(a) == netns_of(b));
}

int unix_make_reg(struct ckpt_ctx *ctx, struct unix_obj **ret)
{
	struct unix_obj *u = unix_reg(ctx);
	int r;
	if (u) {
		/* namespaces of the tasks collected since */
		r = table_sync(ctx, u);
		if (r < 0)
			return log_fail(&ctx->log, r,
					"cannot list the unix sockets (sock_diag): %s",
					strerror(-r));
		*ret = u;
		return 0;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->is_reg = true;
	r = table_sync(ctx, u);
	if (r < 0) {
		unix_free_obj(u);
		return log_fail(&ctx->log, r, "cannot list the unix sockets (sock_diag): %s",
				strerror(-r));
	}
	r = objhash_add(&ctx->objs, KIND_unix, 0, 0, u, NULL);
	if (r < 0) {
		unix_free_obj(u);
		return r;
	}
	*ret = u;
	return 0;
}

struct unix_obj *unix_find_obj(struct ckpt_ctx *ctx, uint64_t ino, uint32_t *ret_id)
{
	struct obj *o = ino ? objhash_next_key(&ctx->objs, NULL, KIND_unix, ino) : NULL;
	if (o && ret_id)
		*ret_id = o->id;
	return o ? o->ptr : NULL;
}

/* --- collecting one socket --------------------------------------------- */

/*
 * Without CAP_NET_ADMIN SIOCUNIXFILE fails (EPERM): the file of k's name
 * seen from pid's root (an absolute name) or cwd (a relative one, if the
 * task has not moved since), if it is the socket's (the inode and device
 * sock_diag gives), as an O_PATH fd; else -1 with errno EPERM.
 */
static int file_by_name(pid_t pid, const struct usk *k)
{
	char path[PATH_MAX + 32];
	struct stat st;
	if (!k->has_vfs)
		return errno = EPERM, -1;
	snprintf(path, sizeof(path), "/proc/%d/%s%s", pid, k->name[0] == '/' ? "root" : "cwd/",
		 (const char *)k->name);
	int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == k->vfs_ino &&
	    major(st.st_dev) == (k->vfs_dev >> 20) && minor(st.st_dev) == (k->vfs_dev & 0xfffff))
		return fd;
	if (fd >= 0)
		close(fd);
	return errno = EPERM, -1;
}

/* The bound name, and for a path name the file's path, mode and owner. */
static int read_name(struct ckpt_ctx *ctx, const struct fd_info *fi, int copy, const struct usk *k,
		     struct unix_obj *u)
{
	char buf[PATH_MAX + 16], link[64];
	struct stat st;

	if (!k->namelen)
		return 0;
	memcpy(u->name, k->name, k->namelen);
	u->e.has_name = true;
	u->e.name.data = u->name;
	u->e.name.len = k->namelen;
	if (k->name[0] == 0)
		return 0;
	const char *name = (const char *)u->name; /* NUL-terminated by the kernel */
	_cleanup_close_ int opath = ioctl(copy, SIOCUNIXFILE);
	if (opath < 0 && errno == EPERM)
		opath = file_by_name(fi->pid, k);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", opath);
	ssize_t n = opath >= 0 ? readlink(link, buf, sizeof(buf) - 1) : -1;
	if (n < 0 || fstat(opath, &st) < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (unix socket bound to %s): cannot find its file: %m",
				fi->pid, fi->fd, name);
	buf[n] = 0;
	const char *del = " (deleted)";
	size_t dl = strlen(del);
	if ((size_t)n > dl && !strcmp(buf + n - dl, del) && st.st_nlink == 0) {
		buf[n - dl] = 0;
		u->e.has_path_gone = u->e.path_gone = true;
	}
	if (name[0] == '/' && !u->e.path_gone && mnt_inside(ctx, name, &st))
		snprintf(buf, sizeof(buf), "%s", name); /* the container's path, as bound */
	size_t pl = strlen(buf), nl = strlen(name);
	if (name[0] != '/' && (pl <= nl || buf[pl - nl - 1] != '/' || strcmp(buf + pl - nl, name)))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (unix socket bound to %s): a relative name ckpt "
				"cannot place (its file is %s)",
				fi->pid, fi->fd, name, buf);
	u->path = strdup(buf);
	if (!u->path)
		return -ENOMEM;
	u->e.path = u->path;
	u->e.has_path_mode = u->e.has_path_uid = u->e.has_path_gid = true;
	u->e.path_mode = st.st_mode & 07777;
	u->e.path_uid = st.st_uid;
	u->e.path_gid = st.st_gid;
	return 0;
}

/* State, peer, listener, pending connections. */
static int read_state(struct ckpt_ctx *ctx, const struct fd_info *fi, const struct unix_obj *reg,
		      const struct usk *k, struct unix_obj *u)
{
	UnixSkEntry *e = &u->e;
	if (k->state == K_LISTEN && k->type != SOCK_DGRAM) {
		e->state = UNIX_ST_LISTEN;
		e->has_backlog = true;
		e->backlog = k->wqlen; /* sk_max_ack_backlog */
		if (k->nicons > PENDING_MAX)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (%s): %u pending connections", fi->pid,
					fi->fd, fi->path, k->nicons);
		return 0;
	}
	if (k->type == SOCK_DGRAM) {
		e->state = UNIX_ST_CLOSED;
		e->has_peer = k->has_peer;
		e->peer = k->peer;
		return 0;
	}
	if (k->state == K_CLOSE) {
		e->state = UNIX_ST_CLOSED;
		return 0;
	}
	if (k->state != K_ESTABLISHED)
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (%s): in state %u", fi->pid,
				fi->fd, fi->path, k->state);
	const struct usk *l = k->peer ? NULL : unix_table_listener_of(&reg->tab, k->ino);
	e->state = l ? UNIX_ST_PENDING : UNIX_ST_CONNECTED;
	e->has_listener = l != NULL;
	e->listener = l ? l->ino : 0;
	e->has_peer = !l;
	e->peer = k->peer;
	return 0;
}

/* A listener's pending connections, with what the swap read of them. */
static int read_pending(struct unix_obj *reg, const struct usk *k, struct unix_obj *u)
{
	if (u->e.state != UNIX_ST_LISTEN || !k->nicons)
		return 0;
	u->pend = calloc(k->nicons, sizeof(*u->pend));
	u->ppend = calloc(k->nicons, sizeof(*u->ppend));
	u->pendq = calloc(k->nicons, sizeof(*u->pendq));
	if (!u->pend || !u->ppend || !u->pendq)
		return -ENOMEM;
	size_t ci = 0;
	for (uint32_t i = 0; i < k->nicons; i++) {
		UnixPending *p = &u->pend[i];
		unix_pending__init(p);
		p->client = k->icons[i];
		while (ci < reg->ncaps && reg->caps[ci].listener != k->ino)
			ci++;
		if (ci < reg->ncaps) { /* read by the swap, in the same order */
			struct capture *c = &reg->caps[ci++];
			if (c->client != k->icons[i])
				return -ESTALE;
			u->pendq[i] = c->q;
			c->q = (struct unix_msgs){0};
			p->n_queue = u->pendq[i].n;
			p->queue = u->pendq[i].v;
		}
		u->ppend[i] = p;
	}
	u->npend = k->nicons;
	u->e.n_pending = k->nicons;
	u->e.pending = u->ppend;
	return 0;
}

/*
 * A stream queue whose messages carry fds comes back as the peek showed
 * it: each message one segment, the plain bytes before an fd-carrying one
 * glued to it (no peek shows where they end, see the README), so a
 * program that read()s exactly those bytes would lose the fds with them.
 * The queue's segments are counted instead by their memory: the sender's
 * SK_MEMINFO_WMEM_ALLOC (sock_diag) is the truesize of the skbs queued
 * here, and a socketpair of ckpt's, sent the messages as the restart
 * sends them, gives what they would take. More in the original means more
 * segments than ckpt would make: refused. With nothing to measure with (a
 * peer that is gone, or whose memory sock_diag does not show), a message
 * carrying fds with more than one byte is refused: it may be glued.
 */
static int check_segments(struct ckpt_ctx *ctx, const struct unix_table *tab, const struct usk *k,
			  struct unix_obj *u)
{
	const struct usk *peer = k->has_peer ? unix_table_find(tab, k->peer) : NULL;
	uint64_t want = 0;
	if (!peer || !peer->has_mem) {
		/* nothing to measure with (the sender is gone): a message with
		 * fds and one byte is one segment (each holds a byte at least);
		 * with more, bytes sent apart before it may be glued to it */
		for (size_t i = 0; i < u->queue.n; i++)
			if (u->queue.rights && u->queue.rights[i] && u->queue.v[i]->data.len > 1)
				return REFUSE(ctx, u,
					      "its queue holds a message of %zu bytes carrying fds, "
					      "and its sender is gone, so ckpt cannot tell whether "
					      "bytes sent apart before it are glued to it (a read() "
					      "of them would drop the fds after restart); not "
					      "supported", u->queue.v[i]->data.len);
		return 0;
	}
	int r = unix_stream_wmem(&u->queue, peer->sndbuf, &want);
	if (r == -EAGAIN)
		return 0;
	if (r < 0)
		return log_fail(&ctx->log, r, "unix socket:[%u]: cannot measure its queue: %s",
				k->ino, strerror(-r));
	if (peer->wmem > want)
		return REFUSE(ctx, u,
			      "its queue holds fds in flight and more segments than a peek shows "
			      "(its sender's queued memory is %u bytes, %llu as ckpt would queue "
			      "it): plain bytes sent apart before a message carrying fds cannot be "
			      "told from it, and a read() of them would drop the fds after restart",
			      peer->wmem, (unsigned long long)want);
	return 0;
}

/* The receive queue; its fds in flight are kept (keep) for unix_collect_rights. */
static int read_queue(struct ckpt_ctx *ctx, const struct fd_info *fi, int copy, const struct usk *k,
		      struct unix_obj *u, bool keep, const struct unix_table *tab)
{
	uint32_t st = u->e.state;
	if (st == UNIX_ST_LISTEN || (k->type != SOCK_DGRAM && st == UNIX_ST_CLOSED))
		return 0;
	int r = unix_peek_queue(copy, k->type, k->shutdown, keep, &u->queue);
	if (r == -ENOBUFS)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a queued message carries more control data "
				"than ckpt reads (fds in flight would be lost); not supported",
				fi->pid, fi->fd, fi->path);
	if (r == -EBADMSG)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): its queue holds out-of-band data or more than "
				"a peek shows; not supported yet",
				fi->pid, fi->fd, fi->path);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (%s): cannot read its queue: %s",
				fi->pid, fi->fd, fi->path, r == -EFBIG ? "too big" : strerror(-r));
	u->e.n_queue = u->queue.n;
	u->e.queue = u->queue.v;
	if (k->type == SOCK_STREAM && keep && u->queue.has_rights)
		return check_segments(ctx, tab, k, u);
	return 0;
}

/* Credentials and fds in flight of the queues read: a socket collected as
 * an fd in flight itself (depth > 0) may have none (-ELOOP, logged by the
 * socket that carries it). */
static int read_rights(struct ckpt_ctx *ctx, struct task *t, struct unix_obj *reg,
		       const struct usk *k, struct unix_obj *u)
{
	bool shown = u->opts.passcred || u->opts.passpidfd;
	int r = unix_fix_creds(ctx, u, &u->queue, shown, -1);
	u->carries = u->queue.has_rights;
	for (size_t i = 0; r == 0 && u->pendq && i < u->npend; i++) {
		r = unix_fix_creds(ctx, u, &u->pendq[i], shown, (long)i);
		u->carries |= u->pendq[i].has_rights;
	}
	if (r < 0)
		return r;
	if (reg->depth > 0) {
		bool read = false; /* the swap read its pending connections */
		for (size_t i = 0; i < reg->ncaps; i++)
			read |= reg->caps[i].listener == k->ino;
		if (k->state == K_LISTEN && !read && unix_swap_needed(&reg->tab, k))
			return REFUSE(ctx, u,
				      "a listener whose pending connections hold data, "
				      "held by no task; not supported");
		return u->carries ? -ELOOP : 0;
	}
	r = unix_collect_rights(ctx, t, reg, u, &u->queue, -1);
	for (size_t i = 0; r == 0 && u->pendq && i < u->npend; i++)
		r = unix_collect_rights(ctx, t, reg, u, &u->pendq[i], (long)i);
	return r;
}

static int read_socket(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		       struct unix_obj *reg, const struct usk *k, struct unix_obj *u)
{
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fi->fd);
	bool filter = false;
	int r;

	if (copy < 0)
		return log_fail(&ctx->log, copy, "pid %d fd %d (%s): cannot take a copy: %s",
				fi->pid, fi->fd, fi->path, strerror(-copy));
	r = unix_opts_read(copy, &u->opts, &filter);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (%s): cannot read its options: %s",
				fi->pid, fi->fd, fi->path, strerror(-r));
	if (filter)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): an eBPF socket filter is attached (SO_ATTACH_BPF); "
				"not supported yet",
				fi->pid, fi->fd, fi->path);
	u->e.opts = &u->opts;
	if ((r = read_name(ctx, fi, copy, k, u)) < 0 || (r = read_state(ctx, fi, reg, k, u)) < 0 ||
	    (r = read_queue(ctx, fi, copy, k, u, reg->depth == 0, &reg->tab)) < 0)
		return r;
	r = read_pending(reg, k, u);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (%s): its pending connections changed",
				fi->pid, fi->fd, fi->path);
	return read_rights(ctx, t, reg, k, u);
}

/* A socket sock_diag has not shown yet: of the namespace of a task the
 * collect has not met (a child's, held by its parent)? That namespace is
 * saved now and its sockets read into the table. */
static int ns_of_later_task(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			    struct unix_obj **reg)
{
	uint32_t id;
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fi->fd);
	if (copy < 0 || netns_of_sock_task(ctx, copy, &id) < 0)
		return 0; /* no: refused as sock_diag does not show it */
	return unix_make_reg(ctx, reg);
}

static int unix_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   uint32_t *ret_id)
{
	uint32_t ino = (uint32_t)fi->st.st_ino;
	struct unix_obj *reg, *u;
	struct obj *o;
	int r;

	if (unix_find_obj(ctx, ino, ret_id))
		return 0;
	if ((r = unix_make_reg(ctx, &reg)) < 0)
		return r;
	const struct usk *k = unix_table_find(&reg->tab, ino);
	if (!k && (r = ns_of_later_task(ctx, t, fi, &reg)) < 0)
		return r;
	if (!k)
		k = unix_table_find(&reg->tab, ino);
	if (!k || (k->type != SOCK_STREAM && k->type != SOCK_DGRAM && k->type != SOCK_SEQPACKET))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a unix socket sock_diag does not show (%s)",
				fi->pid, fi->fd, fi->path,
				k ? "of an unknown type"
				  : "made in a network namespace the image does not hold?");
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	unix_sk_entry__init(&u->e);
	u->e.ino = ino;
	u->e.type = k->type;
	/* the namespace it was made in, whichever task holds it */
	u->e.netns = k->tag < reg->nns ? reg->ns[k->tag].id : 0;
	u->e.has_netns = u->e.netns != 0;
	u->e.flags = fi->fi.flags & O_NONBLOCK;
	u->e.has_shutdown = k->shutdown != 0;
	u->e.shutdown = k->shutdown & 3;
	u->pid = t->pid;
	u->fd = fi->fd;
	u->in_flight = reg->depth > 0;
	/* by value: collecting the sockets it carries (SCM_RIGHTS) may dump
	 * another namespace's, growing reg->tab, which k points into */
	const struct usk own = *k;
	r = read_socket(ctx, t, fi, reg, &own, u);
	if (r == 0)
		r = objhash_add(&ctx->objs, KIND_unix, ino, 0, u, &o);
	if (r < 0) {
		unix_free_obj(u);
		return r;
	}
	u->e.id = o->id;
	*ret_id = o->id;
	return 0;
}

static int unix_collect_end(struct ckpt_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		if (((struct unix_obj *)o->ptr)->is_reg)
			continue;
		int r = unix_check_peers(ctx, o->ptr);
		if (r < 0)
			return r;
	}
	return 0;
}

static int unix_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		if (o->dumped)
			continue;
		struct unix_obj *u = o->ptr;
		o->dumped = true;
		if (u->is_reg)
			continue;
		int r = ctx_write_msg(ctx, UNIX_SK_ENTRY, &u->e.base);
		if (r < 0)
			return r;
	}
	return 0;
}

static void unix_free_obj(void *ptr)
{
	struct unix_obj *u = ptr;
	if (!u)
		return;
	unix_table_free(&u->tab);
	for (size_t i = 0; i < u->nns; i++)
		if (u->ns[i].owned)
			close(u->ns[i].fd);
	free(u->ns);
	for (size_t i = 0; i < u->nlent; i++) {
		if (u->lent[i].chan >= 0)
			close(u->lent[i].chan);
		free(u->lent[i].fds);
	}
	free(u->lent);
	for (size_t i = 0; i < u->ncaps; i++)
		unix_msgs_free(&u->caps[i].q);
	free(u->caps);
	unix_msgs_free(&u->queue);
	unix_opts_free(&u->opts);
	for (size_t i = 0; u->pendq && i < u->npend; i++)
		unix_msgs_free(&u->pendq[i]);
	free(u->pendq);
	free(u->pend);
	free(u->ppend);
	free(u->path);
	free(u);
}

/* A connected socket of the same path name as u (accepted from u, or
 * bound to it): made at prepare, before the name can be (mnt_unix_name 2) */
static bool accepted_from(struct ckpt_ctx *ctx, const struct unix_obj *u)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		const struct unix_obj *v = o->ptr;
		if (v != u && !v->is_reg && v->e.state == UNIX_ST_CONNECTED &&
		    unix_same_name(&v->e, &u->e))
			return true;
	}
	return false;
}

/* Before --kill: could this caller bind the names again? (sockets held by t) */
static int unix_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	char why[PATH_MAX + 128];
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		struct unix_obj *u = o->ptr;
		if (u->is_reg || u->pid != t->pid)
			continue;
		int r = mnt_unix_name(ctx, u->e.path, u->e.path_uid, u->e.path_gid);
		if (r == 2 && accepted_from(ctx, u))
			r = -EBUSY;
		if (r < 0)
			snprintf(why, sizeof(why), "cannot bind %s again in the container's root%s",
				 u->e.path,
				 r == -EBUSY ? ": a connection accepted from it needs the name "
					       "before the container's tmpfs exists (a user "
					       "namespace of its own); not supported yet"
				 : r == -EACCES ? ": cannot create files in its host directory"
				 : r == -EPERM ? ": cannot give its file back its owner (only root can)"
					       : " (through this mount only root can, without a "
						 "user namespace)");
		if (r == 0)
			r = unix_name_bindable(&u->e, why, sizeof(why));
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d fd %d (unix socket:[%llu]): %s", t->pid,
					u->fd, (unsigned long long)u->e.ino, why);
	}
	return 0;
}

/* --- restart: load ------------------------------------------------------------- */


static bool valid_msgs(UnixMsg **v, size_t n, uint32_t type, size_t *bytes)
{
	if (n > MSGS_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		*bytes += v[i]->data.len;
		if (v[i]->has_from &&
		    (type != SOCK_DGRAM || !v[i]->from.len || v[i]->from.len > SUN_LEN_MAX))
			return false;
		if (v[i]->n_fds > RIGHTS_MAX)
			return false;
		for (size_t j = 0; j < v[i]->n_fds; j++)
			if (!v[i]->fds[j])
				return false;
	}
	return *bytes <= QUEUE_MAX;
}

static bool valid_name(const UnixSkEntry *e)
{
	if (!e->has_name)
		return !e->path;
	if (!e->name.len || e->name.len > SUN_LEN_MAX + 1)
		return false;
	if (unix_name_abstract(&e->name))
		return e->name.len <= SUN_LEN_MAX && !e->path;
	/* a path: NUL-terminated, with its absolute file path */
	const char *n = (const char *)e->name.data;
	return n[e->name.len - 1] == 0 && strlen(n) == e->name.len - 1 && e->path &&
	       e->path[0] == '/' && strlen(e->path) < PATH_MAX;
}

static bool valid_opts(const UnixOpts *o)
{
	return o && o->sndbuf <= INT_MAX && o->rcvbuf <= INT_MAX &&
	       (!o->has_peek_off || o->peek_off >= -1) && (!o->has_rcvlowat || o->rcvlowat >= 0) &&
	       o->rcvtimeo_us < TIMEO_MAX && o->sndtimeo_us < TIMEO_MAX && o->priority <= INT_MAX &&
	       (!o->has_filter || sk_filter_ok(o->filter.len));
}

/* external: a name as in name, a path absolute; stream and seqpacket:
 * connected, with nothing queued (only the outside peer could send it) */
static bool valid_external(const UnixSkEntry *e)
{
	const ProtobufCBinaryData *n = &e->external;
	if (!e->has_external)
		return true;
	if (!n->len || n->len > SUN_LEN_MAX || e->has_peer || e->has_listener)
		return false;
	if (e->type != SOCK_DGRAM && (e->state != UNIX_ST_CONNECTED || e->n_queue))
		return false;
	if (n->data[0] == 0)
		return n->len > 1;
	const char *p = (const char *)n->data;
	return p[0] == '/' && p[n->len - 1] == 0 && strlen(p) == n->len - 1;
}

static bool valid_entry(const UnixSkEntry *e)
{
	size_t bytes = 0;
	bool conn = e->type != SOCK_DGRAM;

	if (e->type != SOCK_STREAM && e->type != SOCK_DGRAM && e->type != SOCK_SEQPACKET)
		return false;
	if (e->state >= UNIX_ST_MAX || (!conn && e->state != UNIX_ST_CLOSED) || !e->ino ||
	    e->ino > UINT32_MAX || (e->flags & ~O_NONBLOCK) || e->shutdown > 3 ||
	    (conn && e->has_peer && e->peer == e->ino))
		return false;
	if (!valid_name(e) || !valid_opts(e->opts) || e->backlog > (1u << 20) ||
	    (e->state == UNIX_ST_LISTEN && !e->has_name))
		return false;
	if (e->has_listener != (e->state == UNIX_ST_PENDING) ||
	    (e->has_peer && conn && e->state != UNIX_ST_CONNECTED) ||
	    (e->state == UNIX_ST_CONNECTED && !e->has_peer && !e->has_external))
		return false;
	if (!valid_external(e))
		return false;
	if (e->n_queue && conn && e->state != UNIX_ST_CONNECTED)
		return false;
	if (!valid_msgs(e->queue, e->n_queue, e->type, &bytes))
		return false;
	if (e->n_pending && (e->state != UNIX_ST_LISTEN || e->n_pending > PENDING_MAX))
		return false;
	for (size_t i = 0; i < e->n_pending; i++) {
		size_t pb = 0;
		if (!valid_msgs(e->pending[i]->queue, e->pending[i]->n_queue, e->type, &pb))
			return false;
	}
	return true;
}

static int unix_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != UNIX_SK_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown unix subtype", rec->index);
	struct unix_robj *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->fd = u->tmp_peer = u->opath = -1;
	u->e = rctx_unpack(ctx, rec, &unix_sk_entry__descriptor);
	if (!u->e || !valid_entry(u->e)) {
		if (u->e)
			unix_sk_entry__free_unpacked(u->e, NULL);
		free(u);
		return log_fail(&ctx->log, -EINVAL, "record %u: unix socket entry is not valid",
				rec->index);
	}
	if (objhash_add(&ctx->objs, KIND_unix, u->e->ino, u->e->id, u, NULL) < 0) {
		uint32_t id = u->e->id;
		unix_sk_entry__free_unpacked(u->e, NULL);
		free(u);
		return log_fail(&ctx->log, -EINVAL, "record %u: object %u defined twice",
				rec->index, id);
	}
	return 0;
}

static const ProtobufCMessageDescriptor *unix_descriptor(uint32_t sub)
{
	return sub == REC_SUB(UNIX_SK_ENTRY) ? &unix_sk_entry__descriptor : NULL;
}

const struct kind_ops unix_ops = {
    .collect = unix_collect,
    .fd_claim = unix_fd_claim,
    .fd_collect = unix_fd_collect,
    .fd_get = unix_fd_get,
    .collect_end = unix_collect_end,
    .finish = unix_finish,
    .check_restore = unix_check_restore,
    .dump = unix_dump,
    .load = unix_load,
    .prepare = unix_prepare,
    .tree_ready = unix_tree_ready,
    .root_ready = unix_root_ready,
    .free_obj = unix_free_obj,
    .free_robj = unix_free_robj,
    .descriptor = unix_descriptor,
};

