/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Packet sockets (AF_PACKET, SOCK_RAW and SOCK_DGRAM). One object per
 * socket (a socket has one open file): its type, the protocol it receives
 * (packet_diag's num: SO_PROTOCOL says 0 for any packet socket, so it is
 * made again with that one) and the device it is bound to (getsockname),
 * O_NONBLOCK, the SOL_PACKET options that are not 0 (PACKET_VERSION,
 * _RESERVE, _AUXDATA, _ORIGDEV, _VNET_HDR, _LOSS, _TIMESTAMP,
 * _QDISC_BYPASS, _IGNORE_OUTGOING), and from packet_diag (a
 * NETLINK_SOCK_DIAG dump of the namespace's packet sockets, found by
 * inode): the memberships (multicast, promiscuous, all-multicast, unicast
 * addresses, with how many times each was added), the fanout group, the
 * classic BPF filter, the copy threshold, and the memory its receive
 * queue holds. Devices are saved by name and found by name at restart.
 *
 * Refused, by fd: a socket of another network namespace than its process's,
 * or of a process in ckpt's namespace while the root has its own; one
 * with an mmap'ed ring (PACKET_RX_RING, PACKET_TX_RING: the ring's frames
 * and the program's mapping of them are not saved); one with packets in
 * its receive queue (a packet socket cannot be read without taking them:
 * it has no SO_PEEK_OFF); a filter larger than BPF_MAXINSNS.
 *
 * At restart, in prepare, ckpt makes the socket, sets its options and
 * filter, binds it, adds its memberships and joins its fanout group;
 * fdtable passes it on.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/packet_diag.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/netns.h"
#include "packet.pb-c.h"
#include "util/cleanup.h"
#include "util/proc.h"

enum { PACKET_ENTRY = REC_TYPE(KID_packet, 1) };
#define MAX_MC 16
#define MAX_BUF (1u << 30)

static const int saved_opts[] = {
	PACKET_VERSION, PACKET_RESERVE,	 PACKET_AUXDATA,      PACKET_ORIGDEV,	      PACKET_VNET_HDR,
	PACKET_LOSS,	PACKET_TIMESTAMP, PACKET_QDISC_BYPASS, PACKET_IGNORE_OUTGOING,
};
#define NOPTS (sizeof(saved_opts) / sizeof(saved_opts[0]))

struct packet_obj {
	struct fdobj f;
	PacketEntry e;
	PacketOpt opts[NOPTS];
	PacketOpt *popts[NOPTS];
	PacketMclist mc[MAX_MC];
	PacketMclist *pmc[MAX_MC];
	uint8_t mcaddr[MAX_MC][8];
	char ifname[IF_NAMESIZE], mcname[MAX_MC][IF_NAMESIZE];
	struct sock_filter filter[BPF_MAXINSNS];
};

/* What packet_diag says of one socket. */
struct pdiag {
	bool found, rx_ring, tx_ring, has_fanout;
	uint32_t num, fanout, copy_thresh, rmem;
	size_t nmc, nfilter;
	struct packet_diag_mclist mc[MAX_MC];
	bool mc_more;
};

static bool packet_claim(const struct fd_info *fi)
{
	return fdtable_sock_proto(fi, "PACKET");
}

static int get_int(int s, int level, int opt)
{
	int v = 0;
	socklen_t l = sizeof(v);
	return getsockopt(s, level, opt, &v, &l) < 0 ? 0 : v;
}

#define REFUSE(ctx, fi, fmt, ...)                                                        \
	log_fail(&(ctx)->log, -EOPNOTSUPP, "pid %d fd %d (packet): " fmt, (fi)->pid, (fi)->fd, \
		 ##__VA_ARGS__)

/* The attributes of one packet_diag reply into d (and the filter into f). */
static void parse_reply(struct nlmsghdr *h, struct pdiag *d, struct sock_filter *f)
{
	struct packet_diag_msg *m = NLMSG_DATA(h);
	size_t len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	struct nlattr *a = (struct nlattr *)((char *)m + NLMSG_ALIGN(sizeof(*m)));
	d->found = true;
	d->num = m->pdiag_num;
	while (len >= sizeof(*a) && a->nla_len >= sizeof(*a) && a->nla_len <= len) {
		void *data = (char *)a + NLA_HDRLEN;
		size_t dl = a->nla_len - NLA_HDRLEN;
		switch (a->nla_type) {
		case PACKET_DIAG_INFO:
			if (dl >= sizeof(struct packet_diag_info))
				d->copy_thresh = ((struct packet_diag_info *)data)->pdi_copy_thresh;
			break;
		case PACKET_DIAG_MCLIST:
			d->nmc = dl / sizeof(struct packet_diag_mclist);
			d->mc_more = d->nmc > MAX_MC;
			if (d->nmc > MAX_MC)
				d->nmc = MAX_MC;
			memcpy(d->mc, data, d->nmc * sizeof(d->mc[0]));
			break;
		case PACKET_DIAG_RX_RING:
			d->rx_ring = true;
			break;
		case PACKET_DIAG_TX_RING:
			d->tx_ring = true;
			break;
		case PACKET_DIAG_FANOUT:
			if (dl >= 4) {
				d->has_fanout = true;
				memcpy(&d->fanout, data, 4);
			}
			break;
		case PACKET_DIAG_MEMINFO:
			if (dl >= sizeof(uint32_t) * (SK_MEMINFO_RMEM_ALLOC + 1))
				d->rmem = ((uint32_t *)data)[SK_MEMINFO_RMEM_ALLOC];
			break;
		case PACKET_DIAG_FILTER:
			d->nfilter = dl / sizeof(struct sock_filter);
			if (d->nfilter <= BPF_MAXINSNS)
				memcpy(f, data, d->nfilter * sizeof(*f));
			break;
		}
		size_t step = NLA_ALIGN(a->nla_len);
		if (step >= len)
			break;
		len -= step;
		a = (struct nlattr *)((char *)a + step);
	}
}

/* packet_diag of the socket with inode ino in ckpt's network namespace. */
static int diag(ino_t ino, struct pdiag *d, struct sock_filter *f)
{
	struct {
		struct nlmsghdr h;
		struct packet_diag_req r;
	} req = {
		.h = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.r = { .sdiag_family = AF_PACKET,
		       .pdiag_show = PACKET_SHOW_INFO | PACKET_SHOW_MCLIST | PACKET_SHOW_RING_CFG |
				     PACKET_SHOW_FANOUT | PACKET_SHOW_MEMINFO | PACKET_SHOW_FILTER },
	};
	_cleanup_close_ int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	if (send(nl, &req, sizeof(req), 0) < 0)
		return -errno;
	_cleanup_free_ char *buf = malloc(64 << 10);
	if (!buf)
		return -ENOMEM;
	memset(d, 0, sizeof(*d));
	for (;;) {
		ssize_t n = recv(nl, buf, 64 << 10, 0);
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return d->found ? 0 : -ENOENT;
			if (h->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(h))->error ?: -EPROTO;
			struct packet_diag_msg *m = NLMSG_DATA(h);
			if (!d->found && m->pdiag_ino == (uint32_t)ino)
				parse_reply(h, d, f);
		}
	}
}

static int check_diag(struct ckpt_ctx *ctx, const struct fd_info *fi, const struct pdiag *d)
{
	if (d->rx_ring || d->tx_ring)
		return REFUSE(ctx, fi, "has an mmap'ed %s ring (PACKET_%s_RING); not supported "
			      "yet (the ring's frames and their mapping are not saved)",
			      d->rx_ring ? "receive" : "transmit", d->rx_ring ? "RX" : "TX");
	if (d->rmem)
		return REFUSE(ctx, fi, "has %u bytes of packets not read yet in its receive queue; "
			      "not supported yet (a packet socket cannot be read without taking "
			      "them; retry when it is idle, or bind it to a protocol or device "
			      "that is quiet)", d->rmem);
	if (d->mc_more)
		return REFUSE(ctx, fi, "has more than %d memberships; not supported yet", MAX_MC);
	if (d->nfilter > BPF_MAXINSNS)
		return REFUSE(ctx, fi, "has a filter of %zu instructions; not supported", d->nfilter);
	return 0;
}

static void save_diag(struct packet_obj *o, const struct pdiag *d)
{
	for (size_t i = 0; i < d->nmc; i++) {
		PacketMclist *m = &o->mc[i];
		packet_mclist__init(m);
		m->ifindex = d->mc[i].pdmc_index;
		if (if_indextoname(m->ifindex, o->mcname[i]))
			m->ifname = o->mcname[i];
		m->type = d->mc[i].pdmc_type;
		m->count = d->mc[i].pdmc_count;
		size_t alen = d->mc[i].pdmc_alen > 8 ? 8 : d->mc[i].pdmc_alen;
		memcpy(o->mcaddr[i], d->mc[i].pdmc_addr, alen);
		m->addr = (ProtobufCBinaryData){ .len = alen, .data = o->mcaddr[i] };
		o->pmc[i] = m;
	}
	o->e.n_mclist = d->nmc;
	o->e.mclist = o->pmc;
	if (d->has_fanout) {
		o->e.has_fanout = true;
		o->e.fanout = d->fanout;
	}
	if (d->nfilter) {
		o->e.has_filter = true;
		o->e.filter = (ProtobufCBinaryData){ .len = d->nfilter * sizeof(struct sock_filter),
						     .data = (uint8_t *)o->filter };
	}
	o->e.has_copy_thresh = d->copy_thresh != 0;
	o->e.copy_thresh = d->copy_thresh;
}

/* packet_collect, ckpt's thread in the socket's namespace */
static int collect_in(struct ckpt_ctx *ctx, const struct fd_info *fi, int s, struct packet_obj *o)
{
	int r;
	_cleanup_free_ struct pdiag *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	r = diag(fi->st.st_ino, d, o->filter);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (packet): packet_diag: %s%s", fi->pid,
				fi->fd, strerror(-r),
				r == -ENOENT ? " (the packet_diag module is not loaded?)" : "");
	if ((r = check_diag(ctx, fi, d)) < 0)
		return r;
	struct sockaddr_ll ll = { 0 };
	socklen_t l = sizeof(ll);
	if (getsockname(s, (struct sockaddr *)&ll, &l) < 0)
		return log_fail(&ctx->log, -errno, "pid %d fd %d (packet): getsockname: %m",
				fi->pid, fi->fd);
	o->e.type = (uint32_t)get_int(s, SOL_SOCKET, SO_TYPE);
	/* SO_PROTOCOL says 0 for a packet socket: what it receives is its
	 * protocol (packet_diag's num), which socket() takes */
	o->e.protocol = htons((uint16_t)d->num);
	o->e.flags = fi->fi.flags & O_NONBLOCK;
	o->e.bound_proto = ntohs(ll.sll_protocol);
	o->e.ifindex = (uint32_t)ll.sll_ifindex;
	if (ll.sll_ifindex && if_indextoname((unsigned)ll.sll_ifindex, o->ifname))
		o->e.ifname = o->ifname;
	for (size_t i = 0; i < NOPTS; i++) {
		int v = get_int(s, SOL_PACKET, saved_opts[i]);
		if (!v)
			continue;
		packet_opt__init(&o->opts[o->e.n_opts]);
		o->opts[o->e.n_opts].name = (uint32_t)saved_opts[i];
		o->opts[o->e.n_opts].val = v;
		o->popts[o->e.n_opts] = &o->opts[o->e.n_opts];
		o->e.n_opts++;
	}
	o->e.opts = o->popts;
	save_diag(o, d);
	o->e.has_rcvbuf = o->e.has_sndbuf = true;
	o->e.rcvbuf = (uint32_t)get_int(s, SOL_SOCKET, SO_RCVBUF);
	o->e.sndbuf = (uint32_t)get_int(s, SOL_SOCKET, SO_SNDBUF);
	return 0;
}

static int packet_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi, void *obj)
{
	struct packet_obj *o = obj;
	_cleanup_close_ int s = puppet_getfd(&t->pup, fi->fd);
	if (s < 0)
		return log_fail(&ctx->log, s, "pid %d fd %d (packet): cannot take a copy: %s",
				fi->pid, fi->fd, strerror(-s));
	uint32_t netns = 0;
	const char *why = netns_sock_of(ctx, fi->pid, s, &netns);
	if (why)
		return REFUSE(ctx, fi, "%s", why);
	o->e.has_netns = netns != 0;
	o->e.netns = netns;
	/* packet_diag and the devices' names: of the socket's namespace */
	int own;
	int r = netns_enter_task(fi->pid, &own);
	if (r < 0)
		return log_fail(&ctx->log, r,
				"pid %d fd %d (packet): cannot enter its network namespace: %s",
				fi->pid, fi->fd, strerror(-r));
	r = collect_in(ctx, fi, s, o);
	netns_leave(own);
	return r;
}

/* --- restart --------------------------------------------------------- */

static bool opt_known(uint32_t opt)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opt == (uint32_t)saved_opts[i])
			return true;
	return false;
}

static const char *packet_invalid(struct rst_ctx *ctx, const void *msg)
{
	const PacketEntry *e = msg;
	(void)ctx;
	if (e->type != SOCK_RAW && e->type != SOCK_DGRAM)
		return "its socket type is not raw or datagram";
	if (e->protocol > 0xffff || e->bound_proto > 0xffff)
		return "its protocol";
	if (e->flags & ~(uint32_t)O_NONBLOCK)
		return "unknown flags";
	if (e->n_opts > NOPTS || e->n_mclist > MAX_MC)
		return "too many options or memberships";
	for (size_t i = 0; i < e->n_opts; i++)
		if (!opt_known(e->opts[i]->name))
			return "an unknown option";
	for (size_t i = 0; i < e->n_mclist; i++)
		if (e->mclist[i]->addr.len > 8 || e->mclist[i]->count > 1024 ||
		    (e->mclist[i]->ifname && strlen(e->mclist[i]->ifname) >= IF_NAMESIZE))
			return "a membership";
	if (e->has_filter && (e->filter.len % sizeof(struct sock_filter) ||
			      e->filter.len > BPF_MAXINSNS * sizeof(struct sock_filter)))
		return "its filter";
	if ((e->ifname && strlen(e->ifname) >= IF_NAMESIZE) ||
	    (e->has_rcvbuf && e->rcvbuf > MAX_BUF) || (e->has_sndbuf && e->sndbuf > MAX_BUF))
		return "its device or buffer sizes";
	return NULL;
}

static void set_buf(int s, int force, int plain, uint32_t got)
{
	int v = (int)(got / 2);
	if (got && setsockopt(s, SOL_SOCKET, force, &v, sizeof(v)) < 0)
		setsockopt(s, SOL_SOCKET, plain, &v, sizeof(v));
}

/* a device saved by index and name: by name now */
static int dev_index(uint32_t index, const char *name)
{
	if (!name)
		return (int)index;
	unsigned i = if_nametoindex(name);
	return i ? (int)i : -ENODEV;
}

static int join(struct rst_ctx *ctx, int s, const PacketEntry *m)
{
	for (size_t i = 0; i < m->n_mclist; i++) {
		const PacketMclist *c = m->mclist[i];
		int idx = dev_index(c->ifindex, c->ifname);
		if (idx < 0)
			return log_fail(&ctx->log, idx, "packet %u: no device %s for its membership",
					m->id, c->ifname);
		struct packet_mreq mr = { .mr_ifindex = idx, .mr_type = (unsigned short)c->type,
					  .mr_alen = (unsigned short)c->addr.len };
		if (c->addr.len) /* a promiscuous or allmulti membership has none */
			memcpy(mr.mr_address, c->addr.data, c->addr.len);
		for (uint32_t k = 0; k < c->count; k++)
			if (setsockopt(s, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0)
				return log_fail(&ctx->log, -errno, "packet %u: cannot add its "
						"membership of type %u on %s: %m", m->id, c->type,
						c->ifname ? c->ifname : "its device");
	}
	int fo = (int)m->fanout;
	if (m->has_fanout && setsockopt(s, SOL_PACKET, PACKET_FANOUT, &fo, sizeof(fo)) < 0)
		return log_fail(&ctx->log, -errno, "packet %u: cannot join fanout group %u: %m",
				m->id, m->fanout & 0xffff);
	return 0;
}

static int setup(struct rst_ctx *ctx, int s, const PacketEntry *m)
{
	for (size_t i = 0; i < m->n_opts; i++) {
		int v = m->opts[i]->val;
		if (setsockopt(s, SOL_PACKET, (int)m->opts[i]->name, &v, sizeof(v)) < 0)
			return log_fail(&ctx->log, -errno, "packet %u: cannot set option %u: %m",
					m->id, m->opts[i]->name);
	}
	int ct = (int)m->copy_thresh;
	if (m->has_copy_thresh && setsockopt(s, SOL_PACKET, PACKET_COPY_THRESH, &ct, sizeof(ct)) < 0)
		return log_fail(&ctx->log, -errno, "packet %u: cannot set PACKET_COPY_THRESH: %m",
				m->id);
	set_buf(s, SO_RCVBUFFORCE, SO_RCVBUF, m->has_rcvbuf ? m->rcvbuf : 0);
	set_buf(s, SO_SNDBUFFORCE, SO_SNDBUF, m->has_sndbuf ? m->sndbuf : 0);
	if (m->has_filter) {
		struct sock_fprog p = { .len = (unsigned short)(m->filter.len / sizeof(struct sock_filter)),
					.filter = (struct sock_filter *)m->filter.data };
		if (setsockopt(s, SOL_SOCKET, SO_ATTACH_FILTER, &p, sizeof(p)) < 0)
			return log_fail(&ctx->log, -errno, "packet %u: cannot attach its filter: %m",
					m->id);
	}
	int idx = dev_index(m->ifindex, m->ifname);
	if (idx < 0)
		return log_fail(&ctx->log, idx, "packet %u: its device %s is not on this host",
				m->id, m->ifname);
	if (idx || m->bound_proto != ntohs((uint16_t)m->protocol)) {
		struct sockaddr_ll ll = { .sll_family = AF_PACKET,
					  .sll_protocol = htons((uint16_t)m->bound_proto),
					  .sll_ifindex = idx };
		if (bind(s, (struct sockaddr *)&ll, sizeof(ll)) < 0)
			return log_fail(&ctx->log, -errno, "packet %u: cannot bind it to %s, "
					"protocol 0x%04x: %m", m->id, m->ifname ? m->ifname : "any",
					m->bound_proto);
	}
	return join(ctx, s, m);
}

static int open_in(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *p = obj;
	const PacketEntry *m = p->msg;
	int type = (int)m->type | SOCK_CLOEXEC | (m->flags & O_NONBLOCK ? SOCK_NONBLOCK : 0);
	p->fd = socket(AF_PACKET, type, (int)m->protocol);
	if (p->fd < 0)
		return log_fail(&ctx->log, -errno, "packet %u: cannot make a packet socket of "
				"protocol 0x%04x: %m", m->id, ntohs((uint16_t)m->protocol));
	return setup(ctx, p->fd, m);
}

/* in its namespace, whose devices it is bound to */
static int packet_open(struct rst_ctx *ctx, void *obj)
{
	const PacketEntry *m = ((struct fdobj_r *)obj)->msg;
	return netns_rst_call(ctx, m->netns, open_in, obj);
}

static const struct fdobj_ops packet_file = {
	.kind = KIND_packet,
	.name = "packet",
	.type = PACKET_ENTRY,
	.msg = &packet_entry__descriptor,
	.size = sizeof(struct packet_obj),
	.msg_off = offsetof(struct packet_obj, e),
	.id_off = offsetof(PacketEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = packet_claim,
	.collect = packet_collect,
	.invalid = packet_invalid,
	.open = packet_open,
};

static int packet_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &packet_file);
}

static int packet_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &packet_file);
}

static const ProtobufCMessageDescriptor *packet_descriptor(uint32_t sub)
{
	return sub == REC_SUB(PACKET_ENTRY) ? &packet_entry__descriptor : NULL;
}

const struct kind_ops packet_ops = {
	.file = &packet_file,
	.dump = packet_dump,
	.load = fdobj_load,
	.prepare = packet_prepare,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = packet_descriptor,
};
