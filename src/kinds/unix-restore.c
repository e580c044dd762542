/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unix sockets, restart: the sockets made again on ckpt's side, in phases
 * (unix.h, unix.c). */
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
#include <sys/xattr.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "kinds/mnt.h"
#include "kinds/netns.h"
#include "kinds/unix-sk.h"
#include "kinds/unix.h"
#include "unix.pb-c.h"
#include "util/cleanup.h"

/* --- restart: prepare ---------------------------------------------------------- */

struct rst_unix {
	struct rst_ctx *ctx;
	struct unix_robj **v;
	size_t n;
	struct unix_table live; /* ckpt's namespace before anything was made */
	bool have_live;
	int anon; /* an unnamed dgram socket, to send as unnamed senders */
	bool defer_ok; /* bind_all: a name may wait for root ready (u->deferred) */
};

#define RFAIL(st, u, r, fmt, ...)                                                                  \
	log_fail(&(st)->ctx->log, (r), "unix %s socket:[%llu]: " fmt,                              \
		 unix_type_name((u)->e->type), (unsigned long long)(u)->e->ino, ##__VA_ARGS__)

static struct unix_robj *robj_by_ino(struct rst_unix *st, uint64_t ino)
{
	for (size_t i = 0; ino && i < st->n; i++)
		if (st->v[i]->e->ino == ino)
			return st->v[i];
	return NULL;
}

static bool same_name(const UnixSkEntry *a, const ProtobufCBinaryData *n)
{
	return a->has_name && a->name.len == n->len && !memcmp(a->name.data, n->data, n->len);
}

/* The network namespace u was made in: 0 the root's, else NetnsEntry.id */
static uint32_t ns_of(const struct unix_robj *u)
{
	return u->e->has_netns ? u->e->netns : 0;
}

/*
 * A socket (sv NULL) or a socketpair of the network namespace of that id:
 * the root's (0) is where ckpt's thread is while the sockets are made (as
 * before namespaces other than the root's were taken); another is entered
 * for the call, for the socket keeps it and so does an abstract name bound
 * to it. -1 with errno.
 */
static int sock_in(struct rst_unix *st, uint32_t netns, int type, int *sv)
{
	int fd = -1;
	if (netns && (fd = netns_held_fd(st->ctx, netns)) < 0)
		return errno = ENOENT, -1;
	return sv ? unix_socketpair_in(fd, type, sv) : unix_socket_in(fd, AF_UNIX, type, 0);
}

/* The listener of the image bound to u's name (u was accepted from it). */
static struct unix_robj *listener_named(struct rst_unix *st, const struct unix_robj *u)
{
	for (size_t i = 0; u && u->e->has_name && i < st->n; i++)
		if (st->v[i]->e->state == UNIX_ST_LISTEN && st->v[i]->e->type == u->e->type &&
		    st->v[i] != u && unix_same_name(st->v[i]->e, u->e))
			return st->v[i];
	return NULL;
}

static bool pending_has(const UnixSkEntry *l, uint64_t ino)
{
	int seen = 0;
	for (size_t i = 0; i < l->n_pending; i++)
		seen += l->pending[i]->client == ino;
	return seen == 1;
}

/* Resolves and checks the links between sockets: peers, listeners. */
static int link_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		const UnixSkEntry *e = u->e;
		if (robj_by_ino(st, e->ino) != u)
			return RFAIL(st, u, -EINVAL, "defined twice in the image");
		u->peer = e->has_peer ? robj_by_ino(st, e->peer) : NULL;
		u->listener = e->has_listener ? robj_by_ino(st, e->listener) : NULL;
		if (e->has_peer && e->peer && (!u->peer || u->peer->e->type != e->type))
			return RFAIL(st, u, -EINVAL, "its peer is not in the image");
		if (e->state == UNIX_ST_CONNECTED && u->peer &&
		    (u->peer->e->state != UNIX_ST_CONNECTED || u->peer->e->peer != e->ino))
			return RFAIL(st, u, -EINVAL, "its peer is not connected to it");
		if (e->state == UNIX_ST_PENDING &&
		    (!u->listener || u->listener->e->state != UNIX_ST_LISTEN ||
		     u->listener->e->type != e->type || !pending_has(u->listener->e, e->ino)))
			return RFAIL(st, u, -EINVAL, "its listener does not hold it");
		for (size_t j = 0; j < e->n_pending; j++) {
			struct unix_robj *c = robj_by_ino(st, e->pending[j]->client);
			if (e->pending[j]->client &&
			    (!c || c->e->state != UNIX_ST_PENDING || c->e->listener != e->ino))
				return RFAIL(st, u, -EINVAL, "pending connection %zu is not valid",
					     j);
		}
		if (e->type == SOCK_DGRAM && u->peer) {
			const UnixSkEntry *p = u->peer->e;
			u->pair = u->peer != u && p->has_peer && p->peer == e->ino &&
				  (!e->has_name || !p->has_name) && ns_of(u) == ns_of(u->peer);
			if (!u->pair && !p->has_name)
				return RFAIL(st, u, -EINVAL, "connected to an unnamed socket");
		}
	}
	return 0;
}

/* Is a socket of ckpt's namespace (other than the ones being made) bound
 * to the file st? */
static bool path_in_use(struct rst_unix *st, const struct stat *s)
{
	if (!st->have_live) {
		if (unix_table_dump(&st->live) < 0)
			return true;
		st->have_live = true;
	}
	for (size_t i = 0; i < st->live.n; i++) {
		const struct usk *k = &st->live.v[i];
		if (k->has_vfs && k->vfs_ino == s->st_ino &&
		    (k->vfs_dev >> 20) == major(s->st_dev) &&
		    (k->vfs_dev & 0xfffff) == minor(s->st_dev))
			return true;
	}
	return false;
}

/* Makes room for binding at path: a stale socket file there is removed. */
static int clear_path(struct rst_unix *st, struct unix_robj *u, const char *path)
{
	struct stat s;
	if (lstat(path, &s) < 0)
		return errno == ENOENT ? 0 : RFAIL(st, u, -errno, "cannot look at %s: %m", path);
	if (!S_ISSOCK(s.st_mode))
		return RFAIL(st, u, -EEXIST, "%s exists and is not a socket", path);
	if (path_in_use(st, &s))
		return RFAIL(st, u, -EADDRINUSE, "%s is in use by a live socket", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return RFAIL(st, u, -errno, "cannot remove the stale socket file %s: %m", path);
	return 0;
}

/* bind(2) of a path name as it was given: a relative name from the
 * directory it was resolved in (ckpt's cwd moves there and back). */
static int bind_path(int s, const UnixSkEntry *e)
{
	struct sockaddr_un a;
	socklen_t alen = unix_mkaddr(&a, e->name.data, e->name.len - 1);
	const char *name = (const char *)e->name.data;
	if (name[0] == '/')
		return bind(s, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
	size_t dl = strlen(e->path) - strlen(name) - 1;
	_cleanup_free_ char *dir = strndup(e->path, dl ? dl : 1);
	if (!dir)
		return -ENOMEM;
	_cleanup_close_ int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0 || dfd < 0 || fchdir(dfd) < 0)
		return -errno;
	int r = bind(s, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
	if (fchdir(cwd) < 0)
		abort(); /* ckpt's own cwd is gone: nothing sane is left to do */
	return r;
}

/* Binds s to e's name; u is the socket it is for (messages, opath). */
static int bind_name(struct rst_unix *st, struct unix_robj *u, int s, const UnixSkEntry *e)
{
	if (!e->has_name)
		return 0;
	if (unix_name_abstract(&e->name)) {
		struct sockaddr_un a;
		socklen_t alen = unix_mkaddr(&a, e->name.data, e->name.len);
		if (bind(s, (struct sockaddr *)&a, alen) == 0)
			return 0;
		return RFAIL(st, u, -errno, "cannot bind the abstract name @%.*s: %m",
			     (int)e->name.len - 1, (const char *)e->name.data + 1);
	}
	/* a container's path: through its mounts (1: a path of the host's) */
	int rc = mnt_rst_bind_unix(st->ctx, s, (const char *)e->name.data, e->path,
				   e->has_path_mode ? (int)e->path_mode : -1, e->path_uid,
				   e->path_gid);
	if (rc == 2 && st->defer_ok && s == u->fd) {
		u->deferred = true; /* bound at root ready (unix_root_ready) */
		return 0;
	}
	if (rc == 2)
		return RFAIL(st, u, -EOPNOTSUPP,
			     "cannot bind %s before the container's mounts exist (a tmpfs of a "
			     "container with a user namespace of its own), where a connection "
			     "needs it; not supported yet",
			     e->path);
	if (rc <= 0)
		return rc < 0 ? RFAIL(st, u, rc, "cannot bind %s in the container's mounts: %s",
				      e->path, strerror(-rc))
			      : 0;
	/* bound to a name whose file was renamed since (a JVM's attach
	 * socket: bound as NAME.tmp, renamed to NAME): bound at the name, then
	 * moved where it was */
	const char *name = (const char *)e->name.data;
	bool moved = name[0] == '/' && !e->path_gone && strcmp(name, e->path);
	int r = clear_path(st, u, e->path);
	if (r >= 0 && moved)
		r = clear_path(st, u, name);
	if (r < 0)
		return r;
	r = bind_path(s, e);
	if (r < 0)
		return RFAIL(st, u, r, "cannot bind %s: %s", name, strerror(-r));
	if (moved && rename(name, e->path) < 0) {
		int err = errno;
		unlink(name);
		return RFAIL(st, u, -err, "cannot move %s to %s, where its file was at the "
			     "checkpoint: %s", name, e->path, strerror(err));
	}
	struct stat made;
	if (lstat(e->path, &made) == 0) {
		u->made = true;
		u->made_dev = made.st_dev;
		u->made_ino = made.st_ino;
	}
	if (e->has_path_mode &&
	    (chmod(e->path, e->path_mode) < 0 || lchown(e->path, e->path_uid, e->path_gid) < 0))
		return RFAIL(st, u, -errno, "cannot set the mode and owner of %s: %m", e->path);
	return 0;
}

/* The O_PATH fd of s's socket file (e its entry): SIOCUNIXFILE, or
 * without CAP_NET_ADMIN a container's name by its host path; -1. */
static int sock_file(struct rst_unix *st, int s, const UnixSkEntry *e)
{
	int fd = ioctl(s, SIOCUNIXFILE);
	if (fd < 0 && errno == EPERM && e->path && e->path[0] == '/')
		fd = mnt_rst_unix_file(st->ctx, e->path);
	return fd < 0 ? -1 : fd;
}

/* After bind: the O_PATH fd ckpt reaches it by; unlink if it was gone. */
static int after_bind(struct rst_unix *st, struct unix_robj *u, int s)
{
	if (!u->e->has_name || unix_name_abstract(&u->e->name))
		return 0;
	if (u->opath < 0)
		u->opath = sock_file(st, s, u->e);
	if (u->e->path_gone && unlink(u->e->path) < 0)
		return RFAIL(st, u, -errno, "cannot remove %s, unlinked at checkpoint: %m",
			     u->e->path);
	return 0;
}

static socklen_t robj_addr(const struct unix_robj *u, struct sockaddr_un *a)
{
	const UnixSkEntry *e = u->e;
	if (unix_name_abstract(&e->name))
		return unix_mkaddr(a, e->name.data, e->name.len);
	if (u->opath >= 0)
		return unix_opath_addr(a, u->opath);
	return unix_mkaddr(a, (const uint8_t *)e->path, strlen(e->path) + 1);
}

static int new_socket(struct rst_unix *st, struct unix_robj *u, int *ret)
{
	int s = sock_in(st, ns_of(u), (int)u->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, NULL);
	if (s < 0)
		return RFAIL(st, u, -errno, "cannot make a socket (network namespace %u): %m",
			     ns_of(u));
	int r = unix_opts_apply(s, u->e->opts);
	if (r < 0) {
		close(s);
		return RFAIL(st, u, r, "cannot set its options: %s", strerror(-r));
	}
	*ret = s;
	return 0;
}

/* Phase 1: every socket but the connected stream/seqpacket ones. */
static int create_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r, sv[2];
		if (u->fd >= 0 || u->e->state == UNIX_ST_CONNECTED)
			continue;
		if (!u->pair) {
			if ((r = new_socket(st, u, &u->fd)) < 0)
				return r;
			continue;
		}
		if (sock_in(st, ns_of(u), SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, sv) < 0)
			return RFAIL(st, u, -errno, "cannot make a socketpair: %m");
		u->fd = sv[0];
		u->peer->fd = sv[1];
		if ((r = unix_opts_apply(u->fd, u->e->opts)) < 0 ||
		    (r = unix_opts_apply(u->peer->fd, u->peer->e->opts)) < 0)
			return RFAIL(st, u, r, "cannot set its options: %s", strerror(-r));
	}
	return 0;
}

/* Phases 2 and 3: names, then listen. */
static int bind_all(struct rst_unix *st)
{
	/* names unlinked at checkpoint first: their path may be another's now */
	st->defer_ok = true;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < st->n; i++) {
			struct unix_robj *u = st->v[i];
			if (u->fd < 0 || !u->e->has_name || u->e->path_gone != (pass == 0))
				continue;
			/* an unlinked name where no one sees it; in place if
			 * ckpt may not make a mount namespace */
			int r = pass == 0 && !unix_name_abstract(&u->e->name)
					? unix_bind_hidden(u->fd, u->e, &u->opath)
					: -EPERM;
			if (r == -EPERM) {
				r = bind_name(st, u, u->fd, u->e);
				if (r == 0 && !u->deferred)
					r = after_bind(st, u, u->fd);
			} else if (r < 0)
				return RFAIL(st, u, r, "cannot bind %s (unlinked at checkpoint) in a "
					     "private mount namespace: %s", u->e->path, strerror(-r));
			if (r < 0)
				return r;
		}
	}
	st->defer_ok = false;
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int bl = (int)MAX(u->e->backlog, u->e->n_pending);
		if (u->e->state == UNIX_ST_LISTEN && !u->deferred && listen(u->fd, bl) < 0)
			return RFAIL(st, u, -errno, "cannot listen: %m");
	}
	return 0;
}

/* Root ready: the names bind_all left for the container's tree (a tmpfs
 * of a container with a user namespace of its own), bound there, then
 * listen as bind_all does. */
static int late_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		const UnixSkEntry *e = u->e;
		if (!u->deferred)
			continue;
		int r = mnt_rst_bind_unix_late(st->ctx, u->fd, (const char *)e->name.data, e->path,
					       e->has_path_mode ? (int)e->path_mode : -1,
					       e->path_uid, e->path_gid);
		if (r < 0)
			return RFAIL(st, u, r, "cannot bind %s in the container's mounts: %s",
				     e->path, strerror(-r));
		u->deferred = false;
		struct stat made;
		char via[4200];
		if (mnt_rst_path(st->ctx, e->path, via, sizeof(via)) == 0 && lstat(via, &made) == 0) {
			u->made = true;
			u->made_dev = made.st_dev;
			u->made_ino = made.st_ino;
		}
		if ((r = after_bind(st, u, u->fd)) < 0)
			return r;
		int bl = (int)MAX(e->backlog, e->n_pending);
		if (e->state == UNIX_ST_LISTEN && listen(u->fd, bl) < 0)
			return RFAIL(st, u, -errno, "cannot listen: %m");
	}
	return 0;
}

static int connect_to(int s, const struct unix_robj *to)
{
	struct sockaddr_un a;
	socklen_t alen = robj_addr(to, &a);
	return connect(s, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
}

/* Connects c to listener l and accepts: *ret is the accepted socket. */
static int connect_accept(int c, int lfd, const struct unix_robj *l, int *ret)
{
	int r = connect_to(c, l);
	if (r < 0)
		return r;
	*ret = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	return *ret < 0 ? -errno : 0;
}

/* A stand-in listener bound to a's name (the listener a came from is
 * closed): made, connected to, and closed again. */
static int temp_listener(struct rst_unix *st, struct unix_robj *a, int c)
{
	_cleanup_close_ int l =
	    sock_in(st, ns_of(a), (int)a->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, NULL);
	struct unix_robj tl = {.e = a->e, .opath = -1};
	int r;

	if (l < 0)
		return RFAIL(st, a, -errno, "cannot make a socket: %m");
	if ((r = bind_name(st, a, l, a->e)) < 0)
		return r;
	if (listen(l, 1) < 0)
		return RFAIL(st, a, -errno, "cannot listen: %m");
	if (!unix_name_abstract(&a->e->name))
		tl.opath = sock_file(st, l, a->e);
	r = connect_accept(c, l, &tl, &a->fd);
	if (tl.opath >= 0)
		close(tl.opath);
	if (r < 0)
		return RFAIL(st, a, r, "cannot connect it: %s", strerror(-r));
	return after_bind(st, a, a->fd);
}

/* Phase 4: a connected pair. The side named like a listener (or named at
 * all) is the accepted one; the other connects; a closed peer is a
 * stand-in closed once the queue is filled. */
static int make_conn(struct rst_unix *st, struct unix_robj *x)
{
	struct unix_robj *y = x->peer, *a = x, *c = y, *l = listener_named(st, x);
	int cfd = -1, r;

	if (!l && (l = listener_named(st, y)))
		a = y, c = x;
	else if (!l && !x->e->has_name && y && y->e->has_name)
		a = y, c = x;
	if (!a->e->has_name) { /* neither has a name */
		int sv[2];
		if (y && ns_of(y) != ns_of(x))
			return RFAIL(st, x, -EINVAL,
				     "its unnamed peer is of another network "
				     "namespace");
		if (sock_in(st, ns_of(x), (int)x->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, sv) < 0)
			return RFAIL(st, x, -errno, "cannot make a socketpair: %m");
		x->fd = sv[0];
		*(y ? &y->fd : &x->tmp_peer) = sv[1];
		if ((r = unix_opts_apply(x->fd, x->e->opts)) == 0)
			r = y ? unix_opts_apply(y->fd, y->e->opts)
			      : unix_set_buf(sv[1], true, BIG_SNDBUF);
		return r < 0 ? RFAIL(st, x, r, "cannot set its options: %s", strerror(-r)) : 0;
	}
	if (c) {
		if ((r = new_socket(st, c, &c->fd)) < 0 ||
		    (r = bind_name(st, c, c->fd, c->e)) < 0 || (r = after_bind(st, c, c->fd)) < 0)
			return r;
		cfd = c->fd;
	} else {
		cfd = x->tmp_peer =
		    sock_in(st, ns_of(x), (int)x->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, NULL);
		if (cfd < 0 || unix_set_buf(cfd, true, BIG_SNDBUF) < 0)
			return RFAIL(st, x, -errno, "cannot make a socket: %m");
	}
	if (l && l->deferred)
		return RFAIL(st, a, -EOPNOTSUPP,
			     "cannot connect it through its listener %s before the container's "
			     "mounts exist (a tmpfs of a container with a user namespace of its "
			     "own); not supported yet",
			     l->e->path);
	if (l) {
		r = connect_accept(cfd, l->fd, l, &a->fd);
		if (r < 0)
			return RFAIL(st, a, r, "cannot connect it through its listener: %s",
				     strerror(-r));
		if (a->opath < 0)
			a->opath = l->opath >= 0 ? fcntl(l->opath, F_DUPFD_CLOEXEC, 0) : -1;
	} else if ((r = temp_listener(st, a, cfd)) < 0) {
		return r;
	}
	r = unix_opts_apply(a->fd, a->e->opts);
	return r < 0 ? RFAIL(st, a, r, "cannot set its options: %s", strerror(-r)) : 0;
}

/* Where u is in the image, for messages: "held by pid P fd F". */
static const char *holder(struct rst_unix *st, const struct unix_robj *u, char *buf, size_t len)
{
	snprintf(buf, len, "held by no task");
	for (size_t i = 0; i < st->ctx->nimage; i++) {
		int fd;
		if (fdtable_rst_fd_of(&st->ctx->tasks[i], u->e->id, &fd) == 0) {
			snprintf(buf, len, "held by pid %d fd %d", st->ctx->tasks[i].pid, fd);
			break;
		}
	}
	return buf;
}

/* connect(2) of s to u's external name; a full backlog is waited for a while. */
static int connect_external(int s, const UnixSkEntry *e)
{
	struct sockaddr_un a;
	socklen_t alen = unix_mkaddr(&a, e->external.data, e->external.len);
	for (int tries = 0;; tries++) {
		if (connect(s, (struct sockaddr *)&a, alen) == 0)
			return 0;
		if (errno != EAGAIN || tries == 200)
			return -errno;
		usleep(10000);
	}
}

static int external_fail(struct rst_unix *st, struct unix_robj *u, int r)
{
	char nb[NAME_BUF + 2], hb[64];
	return RFAIL(st, u, r,
		     "%s: cannot connect it again to %s, its peer outside the image (--external "
		     "unix): %s",
		     holder(st, u, hb, sizeof(hb)),
		     unix_name_str(u->e->external.data, u->e->external.len, nb, sizeof(nb)),
		     strerror(-r));
}

/* Phase 5 of prepare: stream and seqpacket sockets whose peer was outside
 * the image connect anew to its name (the server sees a new client);
 * dgram ones see that the name is there (they connect after their queue
 * is refilled, phase 7). */
static int external_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r;
		if (!u->e->has_external)
			continue;
		if (u->e->type == SOCK_DGRAM) {
			_cleanup_close_ int probe =
			    sock_in(st, ns_of(u), SOCK_DGRAM | SOCK_CLOEXEC, NULL);
			if (probe < 0 || (r = connect_external(probe, u->e)) < 0)
				return external_fail(st, u, probe < 0 ? -errno : r);
			continue;
		}
		if ((r = new_socket(st, u, &u->fd)) < 0 ||
		    (r = bind_name(st, u, u->fd, u->e)) < 0 || (r = after_bind(st, u, u->fd)) < 0)
			return r;
		if ((r = connect_external(u->fd, u->e)) < 0)
			return external_fail(st, u, r);
	}
	return 0;
}

static int conn_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		if (u->e->state == UNIX_ST_CONNECTED && u->fd < 0 && !u->e->has_external) {
			int r = make_conn(st, u);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/*
 * Sends m again from s (to `to` if not NULL) with the fds it carries, as
 * ckpt holds their objects now (every object is prepared), and its
 * sender's credentials, a sender of the image by the pid it has now;
 * shown: the receiver shows credentials, which must then be exactly those.
 */
static int send_msg(struct rst_unix *st, int s, const UnixMsg *m, uint32_t type, bool shown,
		    const struct sockaddr_un *to, socklen_t tolen)
{
	int rights[1 + RIGHTS_MAX];
	UnixMsg c = *m;

	rights[0] = (int)m->n_fds;
	for (size_t i = 0; i < m->n_fds; i++) {
		int r = fdtable_local_fd(st->ctx, m->fds[i], &rights[1 + i]);
		if (r < 0)
			return r;
	}
	struct rst_task *t = m->has_pid ? tree_find(st->ctx, (pid_t)m->pid) : NULL;
	if (t && t->pup.pid > 0)
		c.pid = (uint32_t)t->pup.pid;
	unsigned fl = (type == SOCK_STREAM ? UNIX_SEND_STREAM : 0) | (shown ? UNIX_SEND_STRICT : 0);
	return unix_send(s, &c, m->n_fds ? rights : NULL, to, tolen, fl);
}

/* Does u show the credentials of what it receives? */
static bool shows_creds(const struct unix_robj *u)
{
	return u->e->opts->passcred || u->e->opts->passpidfd;
}

static int msg_fail(struct rst_unix *st, struct unix_robj *u, int r, const char *what, size_t i,
		    const UnixMsg *m)
{
	if ((r == -ESRCH || r == -EPERM) && m->has_pid)
		return RFAIL(st, u, r,
			     "cannot put %s %zu back with its credentials (pid %u uid %u gid %u, "
			     "shown by SO_PASSCRED): %s",
			     what, i, m->pid, m->uid, m->gid, strerror(-r));
	return RFAIL(st, u, r, "cannot put %s %zu back: %s%s", what, i, strerror(-r),
		     r == -EAGAIN ? " (more than net.unix.max_dgram_qlen?)" : "");
}

/* The messages v, sent again from s; u is the receiver. */
static int send_queue(struct rst_unix *st, struct unix_robj *u, int s, UnixMsg **v, size_t n,
		      bool shown, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		int r = send_msg(st, s, v[i], u->e->type, shown, NULL, 0);
		if (r < 0)
			return msg_fail(st, u, r, what, i, v[i]);
	}
	return 0;
}

/* Phase 5: the pending connections of each listener, in order. */
static int pending_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *l = st->v[i];
		for (size_t j = 0; j < l->e->n_pending; j++) {
			const UnixPending *p = l->e->pending[j];
			struct unix_robj *c = robj_by_ino(st, p->client);
			_cleanup_close_ int tmp = -1;
			int s = c ? c->fd : -1, r = 0;
			if (!c) { /* its client was closed: a stand-in, closed after */
				s = tmp =
				    sock_in(st, ns_of(l),
					    (int)l->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, NULL);
				r = s < 0 ? -errno : unix_set_buf(s, true, BIG_SNDBUF);
			}
			if (r == 0)
				r = connect_to(s, l);
			if (r < 0)
				return RFAIL(st, l, r, "cannot remake pending connection %zu: %s",
					     j, strerror(-r));
			char what[64];
			snprintf(what, sizeof(what), "pending connection %zu's message", j);
			r = send_queue(st, l, s, p->queue, p->n_queue, shows_creds(l), what);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* The socket to send a datagram from, as the sender named in m. */
static int dgram_sender(struct rst_unix *st, struct unix_robj *u, const UnixMsg *m, int *ret,
			int *ret_tmp)
{
	*ret_tmp = -1;
	if (!m->has_from && ns_of(u)) { /* an unnamed one of u's namespace */
		int s = sock_in(st, ns_of(u), SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NULL);
		if (s < 0 || unix_set_buf(s, true, BIG_SNDBUF) < 0) {
			int e = -errno;
			if (s >= 0)
				close(s);
			return RFAIL(st, u, e, "cannot make a socket: %s", strerror(-e));
		}
		*ret = *ret_tmp = s;
		return 0;
	}
	if (!m->has_from) {
		if (st->anon < 0) {
			st->anon = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
			if (st->anon < 0 || unix_set_buf(st->anon, true, BIG_SNDBUF) < 0)
				return RFAIL(st, u, -errno, "cannot make a socket: %m");
		}
		*ret = st->anon;
		return 0;
	}
	for (size_t i = 0; i < st->n; i++) {
		const UnixSkEntry *e = st->v[i]->e;
		if (e->type == SOCK_DGRAM && same_name(e, &m->from) && st->v[i]->fd >= 0 &&
		    (m->from.data[0] || ns_of(st->v[i]) == ns_of(u))) {
			*ret = st->v[i]->fd;
			return 0;
		}
	}
	if (m->from.data[0]) /* a path: refused at checkpoint */
		return RFAIL(st, u, -EINVAL, "a queued message from %.*s, not in the image",
			     (int)m->from.len, (const char *)m->from.data);
	/* an abstract sender since closed: a stand-in bound to its name */
	struct sockaddr_un a;
	socklen_t alen = unix_mkaddr(&a, m->from.data, m->from.len);
	int s = sock_in(st, ns_of(u), SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NULL);
	if (s < 0 || unix_set_buf(s, true, BIG_SNDBUF) < 0 ||
	    bind(s, (struct sockaddr *)&a, alen) < 0) {
		int e = -errno;
		if (s >= 0)
			close(s);
		return RFAIL(st, u, e, "cannot send as @%.*s: %s", (int)m->from.len - 1,
			     (const char *)m->from.data + 1, strerror(-e));
	}
	*ret = *ret_tmp = s;
	return 0;
}

static int fill_dgram(struct rst_unix *st, struct unix_robj *u)
{
	struct sockaddr_un to;
	if (!u->e->n_queue)
		return 0;
	if (!u->pair && !u->e->has_name)
		return RFAIL(st, u, -EINVAL, "an unnamed socket holding queued messages");
	socklen_t tolen = u->pair ? 0 : robj_addr(u, &to);
	for (size_t i = 0; i < u->e->n_queue; i++) {
		const UnixMsg *m = u->e->queue[i];
		int s = u->pair ? u->peer->fd : -1, tmp = -1, r = 0;
		if (!u->pair)
			r = dgram_sender(st, u, m, &s, &tmp);
		if (r < 0)
			return r;
		r = send_msg(st, s, m, SOCK_DGRAM, shows_creds(u), u->pair ? NULL : &to, tolen);
		if (tmp >= 0)
			close(tmp);
		if (r < 0)
			return msg_fail(st, u, r, "queued message", i, m);
	}
	return 0;
}

/* Phase 6: the receive queues, sent again from the peer's side. */
static int fill_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r = 0;
		if (u->e->type == SOCK_DGRAM) {
			r = fill_dgram(st, u);
		} else if (u->e->state == UNIX_ST_CONNECTED) {
			int from = u->peer ? u->peer->fd : u->tmp_peer;
			r = send_queue(st, u, from, u->e->queue, u->e->n_queue, shows_creds(u),
				       "queued message");
		}
		if (u->tmp_peer >= 0) { /* its peer was closed */
			close(u->tmp_peer);
			u->tmp_peer = -1;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Phase 7: dgram connect()s, once the queues are full. */
static int dgram_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r = 0;
		if (u->e->type != SOCK_DGRAM || u->pair || (!u->e->has_peer && !u->e->has_external))
			continue;
		if (u->e->has_external) {
			if ((r = connect_external(u->fd, u->e)) < 0)
				return external_fail(st, u, r);
			continue;
		}
		if (u->peer) {
			r = connect_to(u->fd, u->peer);
		} else { /* connected to a socket since closed */
			_cleanup_close_ int tmp =
			    sock_in(st, ns_of(u), SOCK_DGRAM | SOCK_CLOEXEC, NULL);
			struct sockaddr_un a = {.sun_family = AF_UNIX};
			socklen_t alen = sizeof(sa_family_t);
			if (tmp < 0 || bind(tmp, (struct sockaddr *)&a, alen) < 0 ||
			    getsockname(tmp, (struct sockaddr *)&a, &(socklen_t){sizeof(a)}) < 0)
				r = -errno;
			alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 6);
			if (r == 0 && connect(u->fd, (struct sockaddr *)&a, alen) < 0)
				r = -errno;
		}
		if (r < 0)
			return RFAIL(st, u, r, "cannot connect it to its peer: %s", strerror(-r));
	}
	return 0;
}

/* Phase 8: buffer sizes, SO_PEEK_OFF, backlog, shutdown, O_NONBLOCK. */
static int finish_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		const UnixSkEntry *e = u->e;
		int r = unix_opts_finish(u->fd, e->opts);
		if (r == 0 && e->state == UNIX_ST_LISTEN && listen(u->fd, (int)e->backlog) < 0)
			r = -errno;
		if (r == 0)
			r = unix_shut(u->fd, e->shutdown);
		if (r == 0 && !(e->flags & O_NONBLOCK) &&
		    fcntl(u->fd, F_SETFL, fcntl(u->fd, F_GETFL) & ~O_NONBLOCK) < 0)
			r = -errno;
		if (r < 0)
			return RFAIL(st, u, r, "cannot set its final state: %s", strerror(-r));
		if (u->opath >= 0) {
			close(u->opath);
			u->opath = -1;
		}
	}
	return 0;
}

/* Removes the socket file bind made for u, if it is still that file. */
static void unmake_file(const struct unix_robj *u)
{
	struct stat s;
	if (u->made && lstat(u->e->path, &s) == 0 && s.st_dev == u->made_dev &&
	    s.st_ino == u->made_ino)
		unlink(u->e->path);
}

typedef int (*phase_fn)(struct rst_unix *st);

/* Runs the phases over every socket of the image; on failure removes the
 * socket files made. */
static int run_phases(struct rst_ctx *ctx, const phase_fn *phases, size_t n)
{
	struct rst_unix st = {.ctx = ctx, .anon = -1};
	int r = 0;

	size_t count = 0;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));)
		count++;
	st.v = calloc(count + 1, sizeof(*st.v));
	if (!st.v)
		return -ENOMEM;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));)
		st.v[st.n++] = o->ptr;
	for (size_t i = 0; st.n && r == 0 && i < n; i++)
		r = phases[i](&st);
	for (size_t i = 0; r < 0 && i < st.n; i++)
		unmake_file(st.v[i]);
	if (st.anon >= 0)
		close(st.anon);
	unix_table_free(&st.live);
	free(st.v);
	return r;
}

/* RESTART_VERIFY, a dry run beside the live original: names are checked,
 * not bound (the original holds them), nothing connects to anything (an
 * external peer would see a client); each socket is a bare one of its type,
 * for the fd tables. */
static int verify_all(struct rst_unix *st)
{
	char why[PATH_MAX + 128];
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r = unix_name_bindable(u->e, why, sizeof(why));
		if (r < 0)
			return RFAIL(st, u, r, "%s", why);
		if (u->e->has_external && !unix_name_abstract(&u->e->external)) {
			struct stat s;
			const char *p = (const char *)u->e->external.data;
			if (stat(p, &s) < 0 || !S_ISSOCK(s.st_mode))
				return RFAIL(st, u, -ECONNREFUSED, "its peer outside the image, %s, "
					     "is not there", p);
		}
		if (u->fd < 0 && (r = new_socket(st, u, &u->fd)) < 0)
			return r;
	}
	return 0;
}

/* Before any process exists: the sockets, their names and connections. */
int unix_prepare(struct rst_ctx *ctx)
{
	static const phase_fn phases[] = {link_all, create_all, bind_all, conn_all, external_all};
	static const phase_fn verify[] = {link_all, verify_all};
	if (ctx->flags & RESTART_VERIFY)
		return run_phases(ctx, verify, ARRAY_SIZE(verify));
	return run_phases(ctx, phases, ARRAY_SIZE(phases));
}

/* Once the processes exist (their pids are what queued messages name as
 * their senders): the queues, then the final state. */
int unix_root_ready(struct rst_ctx *ctx, struct rst_task *root)
{
	static const phase_fn phases[] = {late_all};
	(void)root;
	return run_phases(ctx, phases, ARRAY_SIZE(phases));
}

int unix_tree_ready(struct rst_ctx *ctx)
{
	static const phase_fn phases[] = {pending_all, fill_all, dgram_all, finish_all};
	if (ctx->flags & RESTART_VERIFY)
		return 0;
	return run_phases(ctx, phases, ARRAY_SIZE(phases));
}

int unix_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct unix_robj *u = robj;
	if (u->fd < 0)
		return log_fail(&ctx->log, -EINVAL, "unix socket:[%llu] was not made",
				(unsigned long long)u->e->ino);
	*ret_fd = u->fd;
	return 0;
}

void unix_free_robj(void *ptr)
{
	struct unix_robj *u = ptr;
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	if (u->tmp_peer >= 0)
		close(u->tmp_peer);
	if (u->opath >= 0)
		close(u->opath);
	unix_sk_entry__free_unpacked(u->e, NULL);
	free(u);
}

