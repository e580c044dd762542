/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Netlink sockets. One object per socket (a socket has one open file): its
 * type and protocol, O_NONBLOCK, the port id it is bound to (getsockname;
 * 0 while the kernel has not bound it), every multicast group it joined
 * (NETLINK_LIST_MEMBERSHIPS, not only the 32 getsockname shows), the peer
 * a connect() set, the SOL_NETLINK options that are on, buffer sizes and
 * SO_PASSCRED, all read on a copy of the fd (pidfd_getfd).
 *
 * Refused, by fd: a socket of another network namespace than its process's,
 * or of a process in ckpt's namespace while the root has its own; one
 * with messages not read yet or a dump in progress (/proc/PID/net/netlink:
 * Rmem, Dump), which cannot be put back; and the protocols whose
 * subsystems keep state of their own by port id that is not saved here
 * (nfnetlink queues and logs, the proc connector...): only route,
 * sock_diag, xfrm, selinux, fib_lookup, kobject_uevent, generic netlink
 * and audit are taken, audit but the socket of the audit daemon the
 * kernel has registered (AUDIT_GET's pid: its registration is not saved).
 *
 * At restart ckpt makes the socket, sets its options, binds it to the saved
 * port id (free again: its holder was killed; a dry run beside the live
 * original, RESTART_VERIFY, leaves it unbound), joins its groups and
 * connects it; fdtable passes it on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/netlink.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/netns.h"
#include "netlink.pb-c.h"
#include "util/cleanup.h"

enum { NETLINK_ENTRY = REC_TYPE(KID_netlink, 1) };
#define MAX_GROUP_WORDS 64 /* 2048 groups */
#define MAX_BUF (1u << 30)

/* The SOL_NETLINK options saved when on. */
static const int saved_opts[] = {
	NETLINK_PKTINFO,	  NETLINK_BROADCAST_ERROR, NETLINK_NO_ENOBUFS,
	NETLINK_LISTEN_ALL_NSID, NETLINK_CAP_ACK,	   NETLINK_EXT_ACK,
	NETLINK_GET_STRICT_CHK,
};

struct netlink_obj {
	struct fdobj f;
	NetlinkEntry e;
	uint32_t groups[MAX_GROUP_WORDS];
	uint32_t opts[sizeof(saved_opts) / sizeof(saved_opts[0])];
};

static bool protocol_ok(int proto)
{
	return proto == NETLINK_ROUTE || proto == NETLINK_SOCK_DIAG || proto == NETLINK_XFRM ||
	       proto == NETLINK_SELINUX || proto == NETLINK_FIB_LOOKUP ||
	       proto == NETLINK_KOBJECT_UEVENT || proto == NETLINK_GENERIC || proto == NETLINK_AUDIT;
}

/*
 * The pid of the audit daemon the kernel has registered (AUDIT_GET), 0 if
 * none, -errno if it cannot be asked (no audit in the kernel; a caller
 * without CAP_AUDIT_CONTROL, who cannot checkpoint a root daemon anyway).
 */
static int audit_daemon_pid(void)
{
	_cleanup_close_ int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
	struct nlmsghdr req = { .nlmsg_len = NLMSG_LENGTH(0), .nlmsg_type = AUDIT_GET,
				.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK, .nlmsg_seq = 1 };
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct timeval tv = { 2, 0 };
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    sendto(s, &req, req.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	union {
		struct nlmsghdr h;
		char b[8192];
	} buf;
	for (int tries = 0; tries < 4; tries++) {
		ssize_t n = recv(s, buf.b, sizeof(buf.b), 0);
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = &buf.h; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error)
					return e->error;
			} else if (h->nlmsg_type == AUDIT_GET) {
				struct audit_status st = { 0 };
				size_t len = NLMSG_PAYLOAD(h, 0);
				memcpy(&st, NLMSG_DATA(h), len < sizeof(st) ? len : sizeof(st));
				return (int)st.pid;
			}
		}
	}
	return -EPROTO;
}

static bool netlink_claim(const struct fd_info *fi)
{
	return fdtable_sock_proto(fi, "NETLINK");
}

/* Its line of /proc/PID/net/netlink: bytes queued to read, a dump on. */
static int queue_state(pid_t pid, ino_t ino, unsigned long *ret_rmem, int *ret_dump)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read(pid, "net/netlink", &text, NULL);
	if (r < 0)
		return r;
	for (char *l = strchr(text, '\n'); l && *++l; l = strchr(l, '\n')) {
		unsigned long rmem, wmem, inode;
		int eth, dump, locks;
		unsigned portid, groups, drops;
		if (sscanf(l, "%*s %d %u %x %lu %lu %d %d %u %lu", &eth, &portid, &groups, &rmem,
			   &wmem, &dump, &locks, &drops, &inode) == 9 &&
		    inode == (unsigned long)ino) {
			*ret_rmem = rmem;
			*ret_dump = dump;
			return 0;
		}
	}
	return -ENOENT;
}

static int get_int(int s, int level, int opt)
{
	int v = 0;
	socklen_t l = sizeof(v);
	return getsockopt(s, level, opt, &v, &l) < 0 ? -1 : v;
}

#define REFUSE(ctx, fi, fmt, ...)                                                        \
	log_fail(&(ctx)->log, -EOPNOTSUPP, "pid %d fd %d (netlink): " fmt, (fi)->pid, (fi)->fd, \
		 ##__VA_ARGS__)

/* Whether this socket can be saved; its queue and dump state. */
static int check_socket(struct ckpt_ctx *ctx, const struct fd_info *fi, int s, int proto,
			uint32_t *netns)
{
	unsigned long rmem = 0;
	int dump = 0;
	/* its process's namespace, one the image holds (the root's, or a
	 * task's: its port ids and groups are that namespace's) */
	const char *why = netns_sock_of(ctx, fi->pid, s, netns);
	if (why)
		return REFUSE(ctx, fi, "%s", why);
	/* audit: only the daemon's registration (AUDIT_SET) is state of the
	 * kernel's; a socket that sends user messages (dbus-daemon) is not */
	if (proto == NETLINK_AUDIT && audit_daemon_pid() == fi->pid)
		return REFUSE(ctx, fi, "the audit daemon's socket (its registration with the "
			      "kernel, AUDIT_SET, is not saved); not supported");
	if (!protocol_ok(proto))
		return REFUSE(ctx, fi, "protocol %d: not supported yet (its subsystem's state "
			      "for the socket would not be saved)", proto);
	/* not listed: not bound yet, so it has sent and received nothing */
	int r = queue_state(fi->pid, fi->st.st_ino, &rmem, &dump);
	if (r < 0 && r != -ENOENT)
		return log_fail(&ctx->log, r, "pid %d fd %d (netlink): cannot read "
				"/proc/%d/net/netlink: %s", fi->pid, fi->fd, fi->pid, strerror(-r));
	if (dump)
		return REFUSE(ctx, fi, "protocol %d: a dump is in progress (its replies would "
			      "be lost); not supported", proto);
	if (rmem)
		return REFUSE(ctx, fi, "protocol %d: %lu bytes of messages not read yet (they "
			      "cannot be put back); not supported", proto, rmem);
	return 0;
}

static int netlink_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   void *obj)
{
	struct netlink_obj *o = obj;
	_cleanup_close_ int s = puppet_getfd(&t->pup, fi->fd);
	if (s < 0)
		return log_fail(&ctx->log, s, "pid %d fd %d (netlink): cannot take a copy: %s",
				fi->pid, fi->fd, strerror(-s));
	int type = get_int(s, SOL_SOCKET, SO_TYPE), proto = get_int(s, SOL_SOCKET, SO_PROTOCOL);
	uint32_t netns = 0;
	int r = check_socket(ctx, fi, s, proto, &netns);
	if (r < 0)
		return r;
	o->e.has_netns = netns != 0;
	o->e.netns = netns;
	struct sockaddr_nl me = { 0 }, peer = { 0 };
	socklen_t l = sizeof(me), gl = sizeof(o->groups);
	if (getsockname(s, (struct sockaddr *)&me, &l) < 0 ||
	    getsockopt(s, SOL_NETLINK, NETLINK_LIST_MEMBERSHIPS, o->groups, &gl) < 0)
		return log_fail(&ctx->log, -errno, "pid %d fd %d (netlink): cannot read it: %m",
				fi->pid, fi->fd);
	if (gl > sizeof(o->groups))
		return REFUSE(ctx, fi, "it joined groups above %d; not supported",
			      MAX_GROUP_WORDS * 32);
	l = sizeof(peer);
	if (getpeername(s, (struct sockaddr *)&peer, &l) == 0 && (peer.nl_pid || peer.nl_groups)) {
		o->e.has_dst_portid = o->e.has_dst_group = true;
		o->e.dst_portid = peer.nl_pid;
		o->e.dst_group = peer.nl_groups;
	}
	o->e.type = (uint32_t)type;
	o->e.protocol = (uint32_t)proto;
	o->e.flags = fi->fi.flags & O_NONBLOCK;
	o->e.portid = me.nl_pid;
	o->e.n_groups = gl / sizeof(uint32_t);
	o->e.groups = o->groups;
	for (size_t i = 0; i < sizeof(saved_opts) / sizeof(saved_opts[0]); i++)
		if (get_int(s, SOL_NETLINK, saved_opts[i]) > 0)
			o->opts[o->e.n_opts++] = (uint32_t)saved_opts[i];
	o->e.opts = o->opts;
	o->e.has_rcvbuf = o->e.has_sndbuf = o->e.has_passcred = true;
	o->e.rcvbuf = (uint32_t)get_int(s, SOL_SOCKET, SO_RCVBUF);
	o->e.sndbuf = (uint32_t)get_int(s, SOL_SOCKET, SO_SNDBUF);
	o->e.passcred = get_int(s, SOL_SOCKET, SO_PASSCRED) > 0;
	return 0;
}

/* --- restart --------------------------------------------------------- */

static bool opt_known(uint32_t opt)
{
	for (size_t i = 0; i < sizeof(saved_opts) / sizeof(saved_opts[0]); i++)
		if (opt == (uint32_t)saved_opts[i])
			return true;
	return false;
}

static const char *netlink_invalid(struct rst_ctx *ctx, const void *msg)
{
	const NetlinkEntry *e = msg;
	(void)ctx;
	if (e->type != SOCK_RAW && e->type != SOCK_DGRAM)
		return "its socket type is not raw or datagram";
	if (!protocol_ok((int)e->protocol))
		return "its protocol is not one ckpt saves";
	if (e->flags & ~(uint32_t)O_NONBLOCK)
		return "unknown flags";
	if (e->n_groups > MAX_GROUP_WORDS || e->n_opts > sizeof(saved_opts) / sizeof(saved_opts[0]))
		return "too many groups or options";
	for (size_t i = 0; i < e->n_opts; i++)
		if (!opt_known(e->opts[i]))
			return "an unknown option";
	if ((e->has_rcvbuf && e->rcvbuf > MAX_BUF) || (e->has_sndbuf && e->sndbuf > MAX_BUF))
		return "a buffer size out of range";
	return NULL;
}

/* getsockopt gives twice what was set: the force variant (root) first */
static void set_buf(int s, int force, int plain, uint32_t got)
{
	int v = (int)(got / 2);
	if (got && setsockopt(s, SOL_SOCKET, force, &v, sizeof(v)) < 0)
		setsockopt(s, SOL_SOCKET, plain, &v, sizeof(v));
}

static int setup(struct rst_ctx *ctx, int s, const NetlinkEntry *m)
{
	int one = 1;
	for (size_t i = 0; i < m->n_opts; i++)
		if (setsockopt(s, SOL_NETLINK, (int)m->opts[i], &one, sizeof(one)) < 0)
			return log_fail(&ctx->log, -errno, "netlink %u: cannot set option %u: %m",
					m->id, m->opts[i]);
	if (m->has_passcred && m->passcred &&
	    setsockopt(s, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
		return log_fail(&ctx->log, -errno, "netlink %u: cannot set SO_PASSCRED: %m", m->id);
	set_buf(s, SO_RCVBUFFORCE, SO_RCVBUF, m->has_rcvbuf ? m->rcvbuf : 0);
	set_buf(s, SO_SNDBUFFORCE, SO_SNDBUF, m->has_sndbuf ? m->sndbuf : 0);
	/* the port id: the live original holds it in a dry run */
	struct sockaddr_nl a = { .nl_family = AF_NETLINK, .nl_pid = m->portid };
	if (m->portid && !(ctx->flags & RESTART_VERIFY) &&
	    bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		return log_fail(&ctx->log, -errno, "netlink %u: cannot bind port id %u (protocol "
				"%u): %m", m->id, m->portid, m->protocol);
	for (size_t w = 0; w < m->n_groups; w++)
		for (int b = 0; b < 32; b++) {
			int g = (int)(w * 32) + b + 1;
			if ((m->groups[w] >> b & 1) &&
			    setsockopt(s, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g, sizeof(g)) < 0)
				return log_fail(&ctx->log, -errno, "netlink %u: cannot join group "
						"%d (protocol %u): %m", m->id, g, m->protocol);
		}
	struct sockaddr_nl d = { .nl_family = AF_NETLINK, .nl_pid = m->dst_portid,
				 .nl_groups = m->dst_group };
	if ((m->dst_portid || m->dst_group) && connect(s, (struct sockaddr *)&d, sizeof(d)) < 0)
		return log_fail(&ctx->log, -errno, "netlink %u: cannot connect it to port id %u: %m",
				m->id, m->dst_portid);
	return 0;
}

static int open_in(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *p = obj;
	const NetlinkEntry *m = p->msg;
	int type = (int)m->type | SOCK_CLOEXEC | (m->flags & O_NONBLOCK ? SOCK_NONBLOCK : 0);
	p->fd = socket(AF_NETLINK, type, (int)m->protocol);
	if (p->fd < 0)
		return log_fail(&ctx->log, -errno, "netlink %u: cannot make a socket of protocol "
				"%u: %m", m->id, m->protocol);
	return setup(ctx, p->fd, m);
}

/* in its namespace (its port id and groups are that namespace's) */
static int netlink_open(struct rst_ctx *ctx, void *obj)
{
	const NetlinkEntry *m = ((struct fdobj_r *)obj)->msg;
	return netns_rst_call(ctx, m->netns, open_in, obj);
}

static const struct fdobj_ops netlink_file = {
	.kind = KIND_netlink,
	.name = "netlink",
	.type = NETLINK_ENTRY,
	.msg = &netlink_entry__descriptor,
	.size = sizeof(struct netlink_obj),
	.msg_off = offsetof(struct netlink_obj, e),
	.id_off = offsetof(NetlinkEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = netlink_claim,
	.collect = netlink_collect,
	.invalid = netlink_invalid,
	.open = netlink_open,
};

static int netlink_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &netlink_file);
}

static int netlink_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &netlink_file);
}

static const ProtobufCMessageDescriptor *netlink_descriptor(uint32_t sub)
{
	return sub == REC_SUB(NETLINK_ENTRY) ? &netlink_entry__descriptor : NULL;
}

const struct kind_ops netlink_ops = {
	.file = &netlink_file,
	.dump = netlink_dump,
	.load = fdobj_load,
	.prepare = netlink_prepare,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = netlink_descriptor,
};
