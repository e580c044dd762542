/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unix socket helpers for the unix kind (unix.c): the sock_diag table,
 * reading a receive queue without taking it out, socket options,
 * addresses and sending messages again. See unix-sk.h.
 */
#include "kinds/netns.h"
#include "kinds/sk-filter.h"
#include "kinds/unix-sk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/unix_diag.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/userns.h"

/* --- the sock_diag table ----------------------------------------------- */

void unix_table_free(struct unix_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].icons);
	free(t->v);
	*t = (struct unix_table){0};
}

const struct usk *unix_table_find(const struct unix_table *t, uint32_t ino)
{
	for (size_t i = 0; ino && i < t->n; i++)
		if (t->v[i].ino == ino)
			return &t->v[i];
	return NULL;
}

/* The listener in whose queue the socket ino waits, or NULL. */
const struct usk *unix_table_listener_of(const struct unix_table *t, uint32_t ino)
{
	for (size_t i = 0; i < t->n; i++)
		for (uint32_t j = 0; t->v[i].state == K_LISTEN && j < t->v[i].nicons; j++)
			if (t->v[i].icons[j] == ino)
				return &t->v[i];
	return NULL;
}

static int parse_attr(struct usk *s, const struct rtattr *a)
{
	const void *d = RTA_DATA(a);
	size_t len = RTA_PAYLOAD(a);

	switch (a->rta_type) {
	case UNIX_DIAG_NAME:
		if (len > NAME_BUF - 1)
			return -EBADMSG;
		memcpy(s->name, d, len);
		s->namelen = (uint32_t)len;
		break;
	case UNIX_DIAG_VFS:
		if (len < sizeof(struct unix_diag_vfs))
			return -EBADMSG;
		s->has_vfs = true;
		s->vfs_ino = ((const struct unix_diag_vfs *)d)->udiag_vfs_ino;
		s->vfs_dev = ((const struct unix_diag_vfs *)d)->udiag_vfs_dev;
		break;
	case UNIX_DIAG_PEER:
		if (len < 4)
			return -EBADMSG;
		s->has_peer = true;
		memcpy(&s->peer, d, 4);
		break;
	case UNIX_DIAG_ICONS:
		s->nicons = (uint32_t)(len / 4);
		s->icons = malloc(len ? len : 1);
		if (!s->icons)
			return -ENOMEM;
		memcpy(s->icons, d, s->nicons * 4);
		break;
	case UNIX_DIAG_RQLEN:
		if (len < sizeof(struct unix_diag_rqlen))
			return -EBADMSG;
		s->rqlen = ((const struct unix_diag_rqlen *)d)->udiag_rqueue;
		s->wqlen = ((const struct unix_diag_rqlen *)d)->udiag_wqueue;
		break;
	case UNIX_DIAG_SHUTDOWN:
		if (len >= 1)
			s->shutdown = *(const uint8_t *)d;
		break;
	case UNIX_DIAG_MEMINFO:
		if (len >= sizeof(uint32_t) * (SK_MEMINFO_SNDBUF + 1)) {
			s->has_mem = true;
			s->wmem = ((const uint32_t *)d)[SK_MEMINFO_WMEM_ALLOC];
			s->sndbuf = ((const uint32_t *)d)[SK_MEMINFO_SNDBUF];
		}
		break;
	}
	return 0;
}

static int table_add(struct unix_table *t, const struct nlmsghdr *h)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return -EBADMSG;
	if (!m->udiag_ino) /* an embryo: seen through its listener */
		return 0;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct usk *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	struct usk *s = &t->v[t->n++];
	*s = (struct usk){.ino = m->udiag_ino, .type = m->udiag_type, .state = m->udiag_state};
	int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
	for (const struct rtattr *a = (const void *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		int r = parse_attr(s, a);
		if (r < 0)
			return r;
	}
	return 0;
}

/* socket(2) (sv NULL) or socketpair(2) in the namespace netns_fd (-1: the
 * calling thread's) */
static int make_in(int netns_fd, int domain, int type, int proto, int *sv)
{
	if (netns_fd < 0)
		return sv ? socketpair(domain, type, proto, sv) : socket(domain, type, proto);
	int own, r = netns_enter_fd(netns_fd, &own);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	int s = sv ? socketpair(domain, type, proto, sv) : socket(domain, type, proto);
	int err = errno;
	netns_leave(own);
	errno = err;
	return s;
}

int unix_socket_in(int netns_fd, int domain, int type, int proto)
{
	return make_in(netns_fd, domain, type, proto, NULL);
}

int unix_socketpair_in(int netns_fd, int type, int sv[2])
{
	return make_in(netns_fd, AF_UNIX, type, 0, sv);
}

int unix_table_dump(struct unix_table *t)
{
	return unix_table_dump_ns(t, -1);
}

int unix_table_dump_ns(struct unix_table *t, int netns_fd)
{
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} req = {
	    .h = {.nlmsg_len = sizeof(req),
		  .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		  .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		  .nlmsg_seq = 1},
	    .r = {.sdiag_family = AF_UNIX,
		  .udiag_states = ~0u,
		  .udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_PEER |
				UDIAG_SHOW_ICONS | UDIAG_SHOW_RQLEN | UDIAG_SHOW_MEMINFO},
	};
	_cleanup_close_ int nl =
	    unix_socket_in(netns_fd, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	_cleanup_free_ char *buf = malloc(1 << 16);
	if (nl < 0 || !buf)
		return nl < 0 ? -errno : -ENOMEM;
	if (send(nl, &req, sizeof(req), 0) != sizeof(req))
		return -errno;
	for (;;) {
		ssize_t n = recv(nl, buf, 1 << 16, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EBADMSG;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error ? e->error : -EBADMSG;
			}
			int r = table_add(t, h);
			if (r < 0)
				return r;
		}
	}
}

/* --- messages ------------------------------------------------------------ */

static void close_rights(int *fds)
{
	for (int i = 1; fds && i <= fds[0]; i++)
		close(fds[i]);
	free(fds);
}

void unix_msgs_free(struct unix_msgs *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->v[i]->fds);
		free(q->v[i]);
		if (q->rights)
			close_rights(q->rights[i]);
	}
	free(q->v);
	free(q->rights);
	*q = (struct unix_msgs){0};
}

int unix_stream_wmem(const struct unix_msgs *q, uint32_t sndbuf, uint64_t *ret)
{
	int sv[2], half = (int)(sndbuf / 2);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	/* without CAP_NET_ADMIN, SO_SNDBUF (capped by net.core.wmem_max): a
	 * message it cuts otherwise is not compared (-EAGAIN below) */
	int r = setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &half, sizeof(half)) < 0 &&
			setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &half, sizeof(half)) < 0
		    ? -errno
		    : 0;
	for (size_t i = 0; r >= 0 && i < q->n; i++) {
		const UnixMsg *m = q->v[i];
		const int *fds = q->rights ? q->rights[i] : NULL;
		union {
			char buf[CMSG_SPACE(sizeof(int) * RIGHTS_MAX)];
			struct cmsghdr align;
		} cm;
		size_t nf = fds ? (size_t)fds[0] : 0;
		struct iovec iov = {.iov_base = m->data.data, .iov_len = m->data.len};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
		if (nf) {
			msg.msg_control = cm.buf;
			msg.msg_controllen = CMSG_SPACE(sizeof(int) * nf);
			struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nf);
			memcpy(CMSG_DATA(c), fds + 1, sizeof(int) * nf);
		}
		ssize_t n = sendmsg(sv[0], &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0)
			r = errno == EAGAIN ? -EAGAIN : -errno;
		else if ((size_t)n != m->data.len)
			r = -EAGAIN; /* split by the sndbuf: not compared */
	}
	uint32_t v[SK_MEMINFO_VARS];
	socklen_t l = sizeof(v);
	if (r >= 0 && getsockopt(sv[0], SOL_SOCKET, SO_MEMINFO, v, &l) < 0)
		r = -errno;
	if (r >= 0)
		*ret = v[SK_MEMINFO_WMEM_ALLOC];
	close(sv[0]);
	close(sv[1]);
	return r < 0 ? r : 0;
}

int unix_msgs_add(struct unix_msgs *q, const void *data, size_t len, const void *from,
		  size_t fromlen, const struct ucred *cred, int *rights)
{
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 16;
		UnixMsg **v = realloc(q->v, cap * sizeof(*v));
		if (v)
			q->v = v;
		int **rv = v ? realloc(q->rights, cap * sizeof(*rv)) : NULL;
		if (!rv)
			return -ENOMEM;
		q->rights = rv;
		q->cap = cap;
	}
	UnixMsg *m = malloc(sizeof(*m) + len + fromlen + 1);
	if (!m)
		return -ENOMEM;
	unix_msg__init(m);
	m->data.data = (uint8_t *)(m + 1);
	m->data.len = len;
	if (len)
		memcpy(m->data.data, data, len);
	if (cred) {
		m->has_pid = m->has_uid = m->has_gid = true;
		m->pid = (uint32_t)cred->pid;
		m->uid = cred->uid;
		m->gid = cred->gid;
	}
	if (from) {
		m->has_from = true;
		m->from.data = m->data.data + len;
		m->from.len = fromlen;
		memcpy(m->from.data, from, fromlen);
	}
	q->rights[q->n] = rights;
	q->v[q->n++] = m;
	q->bytes += len;
	return 0;
}

/* Takes the fds out of a received message: kept ([n, fd...]) or closed. */
static int take_rights(struct msghdr *msg, bool keep, int **ret)
{
	int *fds = NULL;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET ||
		    (c->cmsg_type != SCM_RIGHTS && c->cmsg_type != SCM_PIDFD))
			continue;
		int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *in = (int *)CMSG_DATA(c);
		if (c->cmsg_type == SCM_RIGHTS && keep && !fds) {
			fds = malloc((size_t)(n + 1) * sizeof(int));
			if (fds) {
				fds[0] = n;
				memcpy(fds + 1, in, (size_t)n * sizeof(int));
				continue;
			}
		}
		for (int i = 0; i < n; i++)
			close(in[i]);
	}
	*ret = fds;
	return 0;
}

/* The credentials a message carries; NULL if none were attached (pid 0:
 * neither end had SO_PASSCRED when it was sent, nor the sender gave any). */
static const struct ucred *cred_of(struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		const struct ucred *u = (const struct ucred *)CMSG_DATA(c);
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(*u)))
			return u->pid ? u : NULL;
	}
	return NULL;
}

static bool has_rights(struct msghdr *msg)
{
	if (msg->msg_flags & MSG_CTRUNC)
		return true;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			return true;
	return false;
}

struct peek {
	int s, type;
	bool keep, eof_zero; /* keep fds; a 0 return is the end (seqpacket unix_shut down) */
	uint8_t *buf;
	size_t cap;
};

/* One recvmsg(MSG_PEEK) at offset off: 1 got one, 0 the end. */
static int peek_one(struct peek *p, struct unix_msgs *q, size_t *off)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(sizeof(struct ucred)) + 512];
		struct cmsghdr align;
	} cm;
	struct sockaddr_un from;
	struct iovec iov = {.iov_base = p->buf, .iov_len = p->cap};
	struct msghdr msg = {.msg_name = &from,
			     .msg_namelen = sizeof(from),
			     .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf)};
	int flags = MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC;
	ssize_t n = recvmsg(p->s, &msg, flags | (p->type == SOCK_STREAM ? 0 : MSG_TRUNC));
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	if (n == 0 && (p->type == SOCK_STREAM || p->eof_zero))
		return 0;
	bool rights = has_rights(&msg);
	int *fds = NULL;
	if (p->keep && (msg.msg_flags & MSG_CTRUNC)) {
		take_rights(&msg, false, &fds);
		return -ENOBUFS; /* more control data than ckpt reads: fds may be lost */
	}
	take_rights(&msg, p->keep, &fds);
	if (p->type != SOCK_STREAM && (size_t)n > p->cap) {
		/* truncated: peek it again, whole, from where it starts */
		close_rights(fds);
		uint8_t *nb = realloc(p->buf, (size_t)n);
		int o = (int)*off;
		if (!nb || (size_t)n > QUEUE_MAX)
			return nb ? -EFBIG : -ENOMEM;
		p->buf = nb;
		p->cap = (size_t)n;
		return setsockopt(p->s, SOL_SOCKET, SO_PEEK_OFF, &o, sizeof(o)) < 0 ? -errno : 1;
	}
	q->has_rights |= rights;
	size_t fl = msg.msg_namelen > offsetof(struct sockaddr_un, sun_path)
			? msg.msg_namelen - offsetof(struct sockaddr_un, sun_path)
			: 0;
	bool named = p->type == SOCK_DGRAM && fl;
	int r = unix_msgs_add(q, p->buf, (size_t)n, named ? from.sun_path : NULL,
			      MIN(fl, SUN_LEN_MAX), cred_of(&msg), fds);
	if (r < 0) {
		close_rights(fds);
		return r;
	}
	*off += (size_t)n;
	if (q->bytes > QUEUE_MAX || q->n > MSGS_MAX)
		return -EFBIG;
	return 1;
}

/*
 * Reads the receive queue of s without taking it out. SO_PEEK_OFF walks
 * it (a zero-length datagram, once peeked, is skipped at its offset) and
 * is put back as it was. -EBADMSG: the queue holds what a peek does not
 * show (out-of-band data). Caller logs.
 */
int unix_peek_queue(int s, int type, uint8_t shutdown, bool keep, struct unix_msgs *q)
{
	struct peek p = {.s = s,
			 .type = type,
			 .keep = keep,
			 .cap = 256 << 10,
			 .eof_zero = type == SOCK_SEQPACKET && (shutdown & RCV_SHUTDOWN)};
	int orig = -1, zero = 0, one = 1, cred = 0, r, inq = 0;
	socklen_t l = sizeof(orig), cl = sizeof(cred);
	size_t off = 0;

	/* SO_PASSCRED for the time of the walk: every message carries its
	 * sender's credentials, shown only then */
	if (getsockopt(s, SOL_SOCKET, SO_PEEK_OFF, &orig, &l) < 0 ||
	    getsockopt(s, SOL_SOCKET, SO_PASSCRED, &cred, &cl) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) < 0 ||
	    (!cred && setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0))
		return -errno;
	p.buf = malloc(p.cap);
	r = p.buf ? 1 : -ENOMEM;
	while (r > 0)
		r = peek_one(&p, q, &off);
	free(p.buf);
	if (setsockopt(s, SOL_SOCKET, SO_PEEK_OFF, &orig, sizeof(orig)) < 0 && r == 0)
		r = -errno;
	if (!cred && setsockopt(s, SOL_SOCKET, SO_PASSCRED, &cred, sizeof(cred)) < 0 && r == 0)
		r = -errno;
	if (r == 0 && ioctl(s, FIONREAD, &inq) < 0)
		r = -errno;
	if (r == 0) {
		/* FIONREAD: the whole queue, for dgram the first message */
		size_t want = type == SOCK_DGRAM ? (q->n ? q->v[0]->data.len : 0) : q->bytes;
		if ((size_t)inq != want)
			r = -EBADMSG;
	}
	return r;
}

/* --- options ------------------------------------------------------------- */

static int get_int(int s, int opt, int *ret)
{
	socklen_t l = sizeof(*ret);
	return getsockopt(s, SOL_SOCKET, opt, ret, &l) < 0 ? -errno : 0;
}

static uint64_t get_timeo(int s, int opt)
{
	struct timeval tv = {0};
	socklen_t l = sizeof(tv);
	if (getsockopt(s, SOL_SOCKET, opt, &tv, &l) < 0)
		return 0;
	return (uint64_t)tv.tv_sec * 1000000 + (uint64_t)tv.tv_usec;
}

/* Reads the options; *ret_ebpf: an eBPF socket filter, unreadable, is
 * attached (a classic one is read into o, malloc'd: unix_opts_free). */
int unix_opts_read(int s, UnixOpts *o, bool *ret_ebpf)
{
	int v, r;

	unix_opts__init(o);
	if ((r = get_int(s, SO_SNDBUF, &v)) < 0)
		return r;
	o->sndbuf = (uint32_t)v;
	if ((r = get_int(s, SO_RCVBUF, &v)) < 0)
		return r;
	o->rcvbuf = (uint32_t)v;
#define BOOL_OPT(opt, field)                                                                       \
	if (get_int(s, opt, &v) == 0 && v)                                                         \
		o->has_##field = o->field = true;
	BOOL_OPT(SO_PASSCRED, passcred)
	BOOL_OPT(SO_PASSSEC, passsec)
	BOOL_OPT(SO_PASSPIDFD, passpidfd)
	BOOL_OPT(SO_REUSEADDR, reuseaddr)
	BOOL_OPT(SO_OOBINLINE, oobinline)
#undef BOOL_OPT
	if (get_int(s, SO_RCVLOWAT, &v) == 0 && v != 1)
		o->has_rcvlowat = true, o->rcvlowat = v;
	if (get_int(s, SO_PEEK_OFF, &v) == 0 && v != -1)
		o->has_peek_off = true, o->peek_off = v;
	if (get_int(s, SO_PRIORITY, &v) == 0 && v)
		o->has_priority = true, o->priority = (uint32_t)v;
	if (get_int(s, SO_MARK, &v) == 0 && v)
		o->has_mark = true, o->mark = (uint32_t)v;
	if ((o->rcvtimeo_us = get_timeo(s, SO_RCVTIMEO)))
		o->has_rcvtimeo_us = true;
	if ((o->sndtimeo_us = get_timeo(s, SO_SNDTIMEO)))
		o->has_sndtimeo_us = true;
	bool locked;
	r = sk_filter_read(s, &o->filter.data, &o->filter.len, &locked);
	*ret_ebpf = r == -EACCES;
	if (r < 0 && r != -EACCES)
		return r;
	o->has_filter = o->has_filter_locked = o->filter.len != 0;
	o->filter_locked = locked;
	return 0;
}

void unix_opts_free(UnixOpts *o)
{
	free(o->filter.data);
	o->filter.data = NULL;
	o->filter.len = 0;
	o->has_filter = false;
}

static int set_int(int s, int opt, int v)
{
	return setsockopt(s, SOL_SOCKET, opt, &v, sizeof(v)) < 0 ? -errno : 0;
}

static int set_timeo(int s, int opt, uint64_t us)
{
	struct timeval tv = {.tv_sec = (time_t)(us / 1000000),
			     .tv_usec = (suseconds_t)(us % 1000000)};
	return setsockopt(s, SOL_SOCKET, opt, &tv, sizeof(tv)) < 0 ? -errno : 0;
}

/* A buffer size as getsockopt said it (the kernel doubles what is set). */
int unix_set_buf(int s, bool snd, uint32_t val)
{
	int v = (int)(val / 2);
	if (set_int(s, snd ? SO_SNDBUFFORCE : SO_RCVBUFFORCE, v) == 0)
		return 0;
	return set_int(s, snd ? SO_SNDBUF : SO_RCVBUF, v);
}

/* Everything but what unix_opts_finish() sets at the end; the send buffer is
 * raised meanwhile so that queues can be refilled. */
int unix_opts_apply(int s, const UnixOpts *o)
{
	int r = unix_set_buf(s, true, BIG_SNDBUF);
	if (r == 0 && o->reuseaddr)
		r = set_int(s, SO_REUSEADDR, 1);
	if (r == 0 && o->oobinline)
		r = set_int(s, SO_OOBINLINE, 1);
	if (r == 0 && o->has_rcvlowat)
		r = set_int(s, SO_RCVLOWAT, o->rcvlowat);
	if (r == 0 && o->has_priority)
		r = set_int(s, SO_PRIORITY, (int)o->priority);
	if (r == 0 && o->has_mark)
		r = set_int(s, SO_MARK, (int)o->mark);
	if (r == 0 && o->has_rcvtimeo_us)
		r = set_timeo(s, SO_RCVTIMEO, o->rcvtimeo_us);
	if (r == 0 && o->has_sndtimeo_us)
		r = set_timeo(s, SO_SNDTIMEO, o->sndtimeo_us);
	return r;
}

int unix_opts_finish(int s, const UnixOpts *o)
{
	int cur, r = unix_set_buf(s, true, o->sndbuf);
	/* SO_PASS* last: set before, they would autobind senders and clients */
	if (r == 0 && o->passcred)
		r = set_int(s, SO_PASSCRED, 1);
	if (r == 0 && o->passsec)
		r = set_int(s, SO_PASSSEC, 1);
	if (r == 0 && o->passpidfd)
		r = set_int(s, SO_PASSPIDFD, 1);
	if (r == 0 && get_int(s, SO_RCVBUF, &cur) == 0 && (uint32_t)cur != o->rcvbuf)
		r = unix_set_buf(s, false, o->rcvbuf);
	/* after the queues are refilled: what they hold passed it already */
	if (r == 0 && o->has_filter)
		r = sk_filter_apply(s, o->filter.data, o->filter.len, o->filter_locked);
	if (r == 0 && o->has_peek_off)
		r = set_int(s, SO_PEEK_OFF, o->peek_off);
	return r;
}

/* --- addresses and sending ------------------------------------------------ */

socklen_t unix_mkaddr(struct sockaddr_un *a, const uint8_t *name, size_t len)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	len = MIN(len, SUN_LEN_MAX);
	memcpy(a->sun_path, name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

/* "/proc/self/fd/N" of an O_PATH fd of a bound file: how ckpt reaches a
 * path socket, even one whose file was unlinked or whose name is long. */
socklen_t unix_opath_addr(struct sockaddr_un *a, int opath)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	int n = snprintf(a->sun_path, sizeof(a->sun_path), "/proc/self/fd/%d", opath);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

const char *unix_type_name(uint32_t type)
{
	return type == SOCK_STREAM ? "stream" : type == SOCK_DGRAM ? "dgram" : "seqpacket";
}

/* One sendmsg of m's data from done on, with fds and credentials. */
static ssize_t send_part(int s, const UnixMsg *m, size_t done, const int *rights,
			 const struct ucred *cred, const struct sockaddr_un *addr, socklen_t alen)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = m->data.data + done, .iov_len = m->data.len - done};
	struct msghdr msg = {.msg_name = (void *)addr,
			     .msg_namelen = addr ? alen : 0,
			     .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.buf};
	struct cmsghdr *c = (struct cmsghdr *)cm.buf;
	int nfds = rights && done == 0 ? MIN(rights[0], 253) : 0;

	memset(cm.buf, 0, sizeof(cm.buf));
	if (nfds > 0) {
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), rights + 1, sizeof(int) * (size_t)nfds);
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = (struct cmsghdr *)(cm.buf + msg.msg_controllen);
	}
	if (cred) {
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_CREDENTIALS;
		c->cmsg_len = CMSG_LEN(sizeof(*cred));
		memcpy(CMSG_DATA(c), cred, sizeof(*cred));
		msg.msg_controllen += CMSG_SPACE(sizeof(*cred));
	}
	if (!msg.msg_controllen)
		msg.msg_control = NULL;
	ssize_t n = sendmsg(s, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	return n < 0 ? -errno : n;
}

int unix_send(int s, const UnixMsg *m, const int *rights, const struct sockaddr_un *addr,
	      socklen_t alen, unsigned flags)
{
	bool stream = flags & UNIX_SEND_STREAM, strict = flags & UNIX_SEND_STRICT;
	struct ucred cred = {.pid = (pid_t)m->pid, .uid = m->uid, .gid = m->gid};
	bool with_cred = m->has_pid && m->has_uid && m->has_gid;
	size_t done = 0;
	for (;;) {
		ssize_t n = send_part(s, m, done, rights, with_cred ? &cred : NULL, addr, alen);
		if (n == -ESRCH && with_cred && !strict && cred.pid != getpid()) {
			cred.pid = getpid(); /* the sender is gone: ckpt sends it */
			continue;
		}
		if (n == -EPERM && with_cred && !strict) {
			with_cred = false; /* not allowed to speak for them */
			continue;
		}
		if (n < 0)
			return (int)n;
		if (!stream && (size_t)n != m->data.len)
			return -EMSGSIZE;
		done += (size_t)n;
		if (done >= m->data.len)
			return 0;
	}
}

int unix_shut(int s, uint32_t bits)
{
	static const int how[] = {-1, SHUT_RD, SHUT_WR, SHUT_RDWR};
	if (!(bits & 3))
		return 0;
	return shutdown(s, how[bits & 3]) < 0 && errno != ENOTCONN ? -errno : 0;
}

static bool in_my_groups(gid_t g)
{
	gid_t list[256];
	int n = getgroups(256, list);
	if (g == getegid())
		return true;
	for (int i = 0; i < n; i++)
		if (list[i] == g)
			return true;
	return false;
}

int unix_name_bindable(const UnixSkEntry *e, char *why, size_t len)
{
	if (!e->has_name || unix_name_abstract(&e->name) || !e->path)
		return 0; /* an abstract name is free once its holder is gone */
	if (e->path_gone && userns_may_mount())
		return 0; /* bound where no one sees it (unix_bind_hidden) */
	char dir[PATH_MAX];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s", e->path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	slash[slash == dir] = '\0';
	if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0) {
		int err = errno;
		snprintf(why, len, "cannot bind %s again: cannot create files in %s: %s", e->path,
			 dir, strerror(err));
		return -err;
	}
	if (lstat(e->path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(why, len, "cannot bind %s again: it exists and is not a socket", e->path);
		return -EEXIST;
	}
	if (e->has_path_uid && geteuid() != 0 &&
	    (e->path_uid != geteuid() || (e->has_path_gid && !in_my_groups(e->path_gid)))) {
		snprintf(why, len, "cannot give %s back its owner %u:%u (only root can)", e->path,
			 e->path_uid, e->has_path_gid ? e->path_gid : 0);
		return -EPERM;
	}
	return 0;
}

struct hidden_bind {
	int s;
	const UnixSkEntry *e;
	int opath;
	int r;
};

/* mkdir -p of path, whose deepest existing ancestor has a tmpfs over it */
static int make_dirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int r = mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
		*p = '/';
		if (r < 0)
			return r;
	}
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

/*
 * In a thread of its own fs and mount namespace: a tmpfs over a directory
 * nobody else sees then, the socket's directories made in it as they were
 * from "/", and chroot into it, so that the file is made, and unlinked
 * again, at its own path, and that path is what its file shows afterwards
 * (a later checkpoint reads it so).
 */
static int hidden_bind_in(struct hidden_bind *h)
{
	const UnixSkEntry *e = h->e;
	char dir[PATH_MAX], base[PATH_MAX], in[2 * PATH_MAX];
	struct stat st;
	if (unshare(CLONE_FS | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	snprintf(dir, sizeof(dir), "%s", e->path);
	char *slash = strrchr(dir, '/');
	if (!slash || dir[0] != '/')
		return -EINVAL;
	slash[slash == dir] = '\0';
	/* a relative name was bound from the directory its path starts with */
	size_t nl = strnlen((const char *)e->name.data, e->name.len);
	size_t bl = strlen(e->path) > nl ? strlen(e->path) - nl - 1 : 0;
	snprintf(base, sizeof(base), "%.*s", (int)(bl ? bl : 1), e->path);
	const char *top = stat("/tmp", &st) == 0 && S_ISDIR(st.st_mode) ? "/tmp" : "/mnt";
	if (mount("ckpt", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		return -errno;
	snprintf(in, sizeof(in), "%s%s", top, dir); /* base and the name's own */
	int r = make_dirs(in);
	if (r < 0)
		return r;
	if (chroot(top) < 0 || chdir(e->name.data[0] == '/' ? "/" : base) < 0)
		return -errno;
	struct sockaddr_un a;
	socklen_t alen = unix_mkaddr(&a, e->name.data, e->name.len - 1);
	if (bind(h->s, (struct sockaddr *)&a, alen) < 0)
		return -errno;
	h->opath = ioctl(h->s, SIOCUNIXFILE);
	if (h->opath < 0)
		return -errno;
	if (e->has_path_mode)
		(void)(chmod(e->path, e->path_mode) || lchown(e->path, e->path_uid, e->path_gid));
	return unlink(e->path) < 0 ? -errno : 0;
}

static void *hidden_bind_thread(void *arg)
{
	struct hidden_bind *h = arg;
	h->r = hidden_bind_in(h);
	return NULL;
}

int unix_bind_hidden(int s, const UnixSkEntry *e, int *ret_opath)
{
	struct hidden_bind h = { .s = s, .e = e, .opath = -1 };
	pthread_t th;
	if (!e->path || pthread_create(&th, NULL, hidden_bind_thread, &h) != 0)
		return -EAGAIN;
	pthread_join(th, NULL);
	if (h.r < 0) {
		if (h.opath >= 0)
			close(h.opath);
		return h.r == -EACCES ? -EPERM : h.r;
	}
	*ret_opath = h.opath;
	return 0;
}
