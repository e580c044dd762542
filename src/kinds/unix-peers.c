/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unix sockets, checkpoint: peers and clients outside the image (unix.h,
 * unix.c). */
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
#include "kinds/unix-sk.h"
#include "kinds/unix.h"
#include "unix.pb-c.h"
#include "util/cleanup.h"

/* An image socket bound to this name, or NULL. */
static struct unix_obj *obj_by_name(struct ckpt_ctx *ctx, uint32_t type, const uint8_t *name,
				    size_t len)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		struct unix_obj *u = o->ptr;
		if (!u->is_reg && u->e.type == type && u->e.has_name && u->e.name.len == len &&
		    !memcmp(u->e.name.data, name, len))
			return u;
	}
	return NULL;
}


/* --- peers outside the image (--external unix) -----------------------------
 *
 * A socket whose peer is outside the image can be saved as external when
 * that peer has a name to reach it by again: stream and seqpacket, the
 * listener outside the image its connection came from (the accepted side
 * shows the listener's name; a connection still waiting in its queue
 * names it too); dgram, the named socket it is connect()ed to. Restart
 * connects it anew to that name (the server sees a new client). A path
 * must be absolute and still lead to that listener or socket. What cannot
 * be made again is refused: data the outside peer sent that is still
 * queued (only that peer could send it again), data sent to a connection
 * the outside server has not accepted yet.
 */

/* "/path" or "@abstract" of sun_path bytes */
const char *unix_name_str(const uint8_t *name, size_t len, char *buf, size_t size)
{
	if (len && name[0] == 0)
		snprintf(buf, size, "@%.*s", (int)len - 1, (const char *)name + 1);
	else
		snprintf(buf, size, "%.*s", (int)len, (const char *)name);
	return buf;
}

/* Is the file at k's path name the socket k is bound to? */
static bool name_leads_to(const struct usk *k)
{
	struct stat s;
	if (!k->namelen || k->name[0] == 0)
		return true;
	return stat((const char *)k->name, &s) == 0 && S_ISSOCK(s.st_mode) && k->has_vfs &&
	       s.st_ino == k->vfs_ino && major(s.st_dev) == (k->vfs_dev >> 20) &&
	       minor(s.st_dev) == (k->vfs_dev & 0xfffff);
}

/* The listener outside the image bound to p's name (p: an accepted socket). */
static const struct usk *listener_of_name(struct ckpt_ctx *ctx, const struct unix_table *tab,
					  const struct usk *p)
{
	for (size_t i = 0; p->namelen && i < tab->n; i++) {
		const struct usk *l = &tab->v[i];
		if (l->state == K_LISTEN && l->type == p->type && l->namelen == p->namelen &&
		    !memcmp(l->name, p->name, p->namelen) && !unix_find_obj(ctx, l->ino, NULL) &&
		    (p->name[0] != 0 || l->tag == p->tag)) /* abstract: the same namespace's */
			return l;
	}
	return NULL;
}

/*
 * The socket outside the image whose name u's peer can be reached by
 * again, or NULL with why it cannot be.
 */
static const struct usk *ext_target(struct ckpt_ctx *ctx, struct unix_obj *u, char *why, size_t wl)
{
	const struct unix_table *tab = &unix_reg(ctx)->tab;
	const UnixSkEntry *e = &u->e;
	const struct usk *k = unix_table_find(tab, (uint32_t)e->ino), *t = NULL;
	char nb[NAME_BUF + 2];

	if (e->state == UNIX_ST_PENDING) {
		t = unix_table_find(tab, (uint32_t)e->listener);
		if (k && k->wqlen) {
			snprintf(why, wl, "it sent %u bytes on a connection not accepted yet",
				 k->wqlen);
			return NULL;
		}
	} else if (e->type == SOCK_DGRAM) {
		t = unix_table_find(tab, (uint32_t)e->peer);
	} else {
		const struct usk *p = unix_table_find(tab, (uint32_t)e->peer);
		t = p ? listener_of_name(ctx, tab, p) : NULL;
		if (p && !t) {
			snprintf(why, wl, "it has no name of a listener to connect to again%s",
				 p->namelen ? "" : " (unnamed)");
			return NULL;
		}
	}
	if (!t || !t->namelen) {
		snprintf(why, wl, "it has no name to connect to again");
		return NULL;
	}
	unix_name_str(t->name, t->namelen, nb, sizeof(nb));
	if (t->name[0] != 0 && t->name[0] != '/') {
		snprintf(why, wl, "its name %s is relative: ckpt cannot tell where it is", nb);
		return NULL;
	}
	if (!name_leads_to(t)) {
		snprintf(why, wl, "its name %s no longer leads to it", nb);
		return NULL;
	}
	return t;
}

/* Queued data of u that only its outside peer t could send again. */
static int ext_queue(struct ckpt_ctx *ctx, struct unix_obj *u, const struct usk *t)
{
	char nb[NAME_BUF + 2];
	unix_name_str(t->name, t->namelen, nb, sizeof(nb));
	if (u->e.type != SOCK_DGRAM && u->e.n_queue)
		return REFUSE(ctx, u,
			      "its receive queue holds %zu bytes from its peer outside the "
			      "image (%s); a new connection cannot have them",
			      u->queue.bytes, nb);
	for (size_t i = 0; i < u->e.n_queue; i++) {
		const UnixMsg *m = u->e.queue[i];
		if (m->has_from && m->from.len == t->namelen &&
		    !memcmp(m->from.data, t->name, t->namelen))
			return REFUSE(ctx, u,
				      "queued message %zu is from its peer outside the image "
				      "(%s), which ckpt cannot send as",
				      i, nb);
	}
	return 0;
}

/* A peer outside the image (socket:[peer], or the listener the connection
 * waits on): saved as external with CKPT_EXT_UNIX if it can be, else
 * refused saying whether and how --external unix would do. */
static int check_external(struct ckpt_ctx *ctx, struct unix_obj *u, const char *what, uint64_t ino)
{
	char why[256], nb[NAME_BUF + 2];
	const struct usk *t = ext_target(ctx, u, why, sizeof(why));
	bool ext = ctx->flags & CKPT_EXT_UNIX;

	if (!t) {
		/* who holds the peer: a helper that left the tree (a daemon it
		 * started, reparented to init), or the process that started it */
		char who[256] = "", path[64];
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", u->pid, u->fd);
		if (!u->in_flight && stat(path, &st) == 0)
			ctx_outside_holders(ctx, st.st_dev, ino, -1, u->fd, who, sizeof(who));
		return REFUSE(ctx, u, "peer outside the image (%s socket:[%llu]%s%s): %s%s", what,
			      (unsigned long long)ino, *who ? ", held" : "", who, why,
			      ext ? ", so not even --external unix can save it" : "");
	}
	unix_name_str(t->name, t->namelen, nb, sizeof(nb));
	if (!ext)
		return REFUSE(ctx, u,
			      "peer outside the image (%s socket:[%llu]), bound to %s; "
			      "--external unix would connect it again to that name at restart",
			      what, (unsigned long long)ino, nb);
	int r = ext_queue(ctx, u, t);
	if (r < 0)
		return r;
	memcpy(u->ext, t->name, t->namelen);
	u->e.has_external = true;
	u->e.external.data = u->ext;
	u->e.external.len = t->namelen;
	u->e.has_peer = u->e.has_listener = false;
	u->e.peer = u->e.listener = 0;
	if (u->e.state == UNIX_ST_PENDING)
		u->e.state = UNIX_ST_CONNECTED; /* a new connection, pending or not */
	log_info(&ctx->log,
		 "pid %d fd %d (unix socket:[%llu]): its peer is outside the image: "
		 "external, connected again to %s at restart",
		 u->pid, u->fd, (unsigned long long)u->e.ino, nb);
	return 0;
}

/* dgram: can every queued message be sent again by a socket of the image? */
static int check_dgram(struct ckpt_ctx *ctx, struct unix_obj *u)
{
	struct unix_obj *p = u->e.has_peer ? unix_find_obj(ctx, u->e.peer, NULL) : NULL;
	bool pair =
	    p && p->e.has_peer && p->e.peer == u->e.ino && (!u->e.has_name || !p->e.has_name);

	if (u->e.has_peer && u->e.peer && !p) {
		int r = check_external(ctx, u, "dgram", u->e.peer);
		if (r < 0)
			return r;
	}
	if (p && !pair && !p->e.has_name)
		return REFUSE(ctx, u, "connected to an unnamed socket that is not its peer");
	for (size_t i = 0; i < u->e.n_queue; i++) {
		const UnixMsg *m = u->e.queue[i];
		if (pair) {
			bool same = m->has_from
					? p->e.has_name && p->e.name.len == m->from.len &&
					      !memcmp(p->e.name.data, m->from.data, m->from.len)
					: !p->e.has_name;
			if (!same)
				return REFUSE(ctx, u, "a queued message is not from its peer");
			continue;
		}
		if (!u->e.has_name)
			return REFUSE(ctx, u, "an unnamed socket holding queued messages");
		if (m->has_from && m->from.data[0] &&
		    !obj_by_name(ctx, SOCK_DGRAM, m->from.data, m->from.len))
			return REFUSE(ctx, u,
				      "a queued message from %.*s, a socket not in the image",
				      (int)m->from.len, (const char *)m->from.data);
	}
	return 0;
}

/* --- clients outside the image (--detach-clients) -------------------------
 *
 * A connection accepted by a listener of the image whose client is outside
 * (a tmux or screen client attached to a server of the image) has no name
 * to connect back to. With CKPT_DETACH_CLIENTS it is saved as a
 * connection whose peer has closed: restart accepts it from its listener
 * with a stand-in client that sends what was queued and closes, so the
 * server reads the client's last data, then EOF, as when a client goes.
 */

/* The listener of the image u was accepted from (bound to u's name), or NULL. */
static const struct unix_obj *own_listener(struct ckpt_ctx *ctx, const struct unix_obj *u)
{
	const UnixSkEntry *e = &u->e;
	for (struct obj *o = NULL; e->has_name && (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		const struct unix_obj *l = o->ptr;
		if (!l->is_reg && l->e.state == UNIX_ST_LISTEN && l->e.type == e->type &&
		    unix_same_name(&l->e, e))
			return l;
	}
	return NULL;
}

static int detach_client(struct ckpt_ctx *ctx, struct unix_obj *u, const struct unix_obj *l)
{
	char nb[NAME_BUF + 2];
	uint64_t peer = u->e.peer;
	unix_name_str(l->e.name.data, l->e.name.len, nb, sizeof(nb));
	if (!(ctx->flags & CKPT_DETACH_CLIENTS))
		return REFUSE(ctx, u,
			      "peer outside the image (%s socket:[%llu]): a client of the "
			      "image's listener %s, which has no name to connect back to; "
			      "--detach-clients restores the connection as closed by the client",
			      unix_type_name(u->e.type), (unsigned long long)peer, nb);
	u->e.peer = 0;
	log_info(&ctx->log,
		 "pid %d fd %d (unix socket:[%llu]): its client (socket:[%llu]) is outside the "
		 "image: detached, the connection comes back closed by the client",
		 u->pid, u->fd, (unsigned long long)u->e.ino, (unsigned long long)peer);
	return 0;
}

int unix_check_peers(struct ckpt_ctx *ctx, struct unix_obj *u)
{
	const UnixSkEntry *e = &u->e;
	if (e->type == SOCK_DGRAM)
		return check_dgram(ctx, u);
	if (e->state == UNIX_ST_CONNECTED && e->peer && !unix_find_obj(ctx, e->peer, NULL)) {
		const struct unix_obj *l = own_listener(ctx, u);
		return l ? detach_client(ctx, u, l)
			 : check_external(ctx, u, unix_type_name(e->type), e->peer);
	}
	if (e->state == UNIX_ST_PENDING && !unix_find_obj(ctx, e->listener, NULL))
		return check_external(ctx, u, "waiting on listener", e->listener);
	for (size_t i = 0; i < e->n_pending; i++)
		if (e->pending[i]->client && !unix_find_obj(ctx, e->pending[i]->client, NULL))
			return REFUSE(ctx, u,
				      "peer outside the image (pending connection from "
				      "socket:[%llu])",
				      (unsigned long long)e->pending[i]->client);
	return 0;
}

