/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Network namespaces: the tree's own, its root's, when it is not ckpt's
 * (`ckpt run --net`); those of other tasks; those no task is in that
 * namespace files hold. Every thread must be in its process's namespace.
 * The root's kstate holds a list: the root's own namespace first (if
 * any), then every other one once, each with an id (1, 2...): held by
 * namespace files (netns_hold, called by the nsfile kind) or the namespace
 * of a task (task_netns, at the task's collect). Each is one NetnsEntry
 * record of the root; a task (not the root) in another namespace than the
 * root's has a NetnsTask naming its id (or ckpt's namespace). At restart
 * all are made at prepare, the others before the root's, and each task
 * enters its own right after its fork (netns_forked, step "forked").
 *
 * Checkpoint (collect, the root): through a rtnetlink socket opened in the
 * namespace (ckpt's thread enters it for that instant, and to read the
 * sysctls under /proc/sys/net, which show the reader's namespace):
 * - links: loopback and veth only, any other kind refused by name. A veth's
 *   other end must be in ckpt's namespace (the host end of ckpt run --net:
 *   its name, mac, mtu, up state and addresses are saved with it) or in
 *   another namespace of the image (found at collect end by the id the
 *   namespace gives the other, NetnsLink.peer_netns);
 * - each link's index, mac, mtu, up state and addresses, but those the
 *   kernel makes itself (127.0.0.1/8 and ::1 on loopback, IPv6 link-local
 *   addresses, which the restored mac gives back);
 * - the routes of every table, but the kernel's own (protocol kernel,
 *   router advertisements, the local table); policy routing rules other
 *   than the three a namespace starts with, and permanent neighbour
 *   entries, are refused by name;
 * - every sysctl of the namespace that differs from a fresh one's
 *   (netns-conf.c);
 * - its nftables tables, as text (netns-nft.c).
 *
 * Restart (prepare, before any socket is made): ckpt's thread enters a new
 * network namespace and stays in it until the root is spawned, so that the
 * sockets the other kinds make at prepare (inet), the network lock of the
 * restart (netlock.c) and the root itself are in it. There loopback is set
 * as it was; each veth pair is made again with its two names, macs and
 * the container end's index, the host end in ckpt's namespace; mtu, up
 * state and addresses of both ends, routes, sysctls. The host ends come up
 * only at "spawn root", after the restart's network lock is in place, so
 * no packet of a peer reaches the namespace before its sockets exist. ckpt
 * goes back to its own namespace there; if the restart fails before, it
 * goes back when the kind's state is freed, and the namespace (with the
 * veth pairs, host ends included) goes with the last reference to it.
 * A dry run beside the live original (RESTART_VERIFY) makes each pair with
 * both ends in the new namespace and the host end unconfigured, so that
 * nothing of the host's changes. With several namespaces (netns-rst.c):
 * each is made first (unshare, an fd kept, back to ckpt's), then every
 * veth pair (one between two namespaces of the image from the one made
 * last, both ends with their names, macs and indexes), then the links
 * set, then each one's routes, rules, sysctls and nftables; ckpt's thread
 * then enters the root's. The inet kind makes a socket of another
 * namespace in it (netns_rst_enter).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <sys/socket.h>

#include "core/ctx.h"
#include "kinds/netns.h"
#include "kinds/ns.h"
#include "net/nat.h"
#include "net/ct.h"
#include "net/rtnl.h"
#include "netns.pb-c.h"
#include "util/cleanup.h"

enum { NETNS_ENTRY = REC_TYPE(KID_netns, 1), NETNS_TASK = REC_TYPE(KID_netns, 2) };

#define LINKS_MAX 16
#define ADDRS_MAX 64  /* of each end of a link */
#define ROUTES_MAX 128
#define HOST_ROUTES_MAX 16

struct addr_buf {
	NetnsAddr m;
	uint8_t bytes[16];
};

struct link_buf {
	NetnsLink m;
	int peer_index; /* the host end's, in ckpt's namespace */
	char name[IF_NAMESIZE], peer_name[IF_NAMESIZE];
	uint8_t mac[6], peer_mac[6];
	NetnsAddr *addrs[ADDRS_MAX], *peer_addrs[ADDRS_MAX];
	struct addr_buf a[ADDRS_MAX], pa[ADDRS_MAX];
	/* a veth whose other end is not in ckpt's namespace: the id of that
	 * end's namespace here (IFLA_LINK_NETNSID), found at collect end */
	int peer_nsid;
	bool pending;
};

struct route_buf {
	NetnsRoute m;
	uint8_t dst[16], gw[16], src[16];
};

/* What a task's kstate[KIND_netns] holds: the root's, a list of
 * namespaces (struct netns_ckpt); another task's, a NetnsTask. */
enum { NETNS_LIST = 1, NETNS_TREF };

struct netns_tref {
	int tag; /* NETNS_TREF */
	NetnsTask m;
};

struct netns_ckpt {
	int tag; /* NETNS_LIST */
	NetnsEntry e;
	NetnsLink *links[LINKS_MAX];
	NetnsRoute *routes[ROUTES_MAX];
	struct link_buf l[LINKS_MAX];
	struct route_buf r[ROUTES_MAX];
	NetnsRoute *host_routes[HOST_ROUTES_MAX];
	struct route_buf hr[HOST_ROUTES_MAX];
	dev_t dev;
	ino_t ino; /* the namespace's */
	pid_t root;
	struct ckpt_log *log;
	int err; /* a refusal from a dump callback */
	/* the socket in the namespace, open until the checkpoint ends: it
	 * holds the namespace, so that after --kill its links are cut before
	 * it can die (netns_after_kill) */
	struct rtnl in;
	int nsfd; /* the namespace */
	uint64_t cookie; /* its sockets' SO_NETNS_COOKIE (0: unknown) */
	/* the root's kstate is the first of a list: the root's own namespace
	 * (held false) if it has one, then the others, each with an id (held
	 * true): those held by namespace files only, and those of tasks */
	bool held;
	struct netns_ckpt *next;
};

/* --- checkpoint ------------------------------------------------------- */

/* The root's own namespace's entry, or NULL (the root is in ckpt's). */
static const struct netns_ckpt *own_of(struct ckpt_ctx *ctx)
{
	const struct netns_ckpt *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	return n && !n->held ? n : NULL;
}

/* Is the IPv4 address a (network order bytes) within m's prefix? */
static bool in_prefix4(const NetnsAddr *m, const uint8_t *a)
{
	if (m->family != AF_INET || m->addr.len != 4 || m->prefixlen > 32)
		return false;
	uint32_t x, y, mask = m->prefixlen ? ~0u << (32 - m->prefixlen) : 0;
	memcpy(&x, m->addr.data, 4);
	memcpy(&y, a, 4);
	return (ntohl(x) & mask) == (ntohl(y) & mask);
}

/* Is a an address of ckpt's network namespace (a bind to it works)? */
static bool host_local4(const uint8_t *a)
{
	struct sockaddr_in in = { .sin_family = AF_INET };
	memcpy(&in.sin_addr, a, 4);
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	return s >= 0 && (bind(s, (struct sockaddr *)&in, sizeof(in)) == 0 || errno == EADDRINUSE);
}

/*
 * Is the IPv4 connection src:sport -> dst:dport translated by this host
 * (its conntrack entry's reply goes to another address or port)? From
 * /proc/net/nf_conntrack, read into *t at the first question; 1, 0 (no
 * such entry: nothing translated it), or -errno if the table cannot be
 * read.
 */
static int translated4(struct ct_table *t, const uint8_t *src, uint16_t sport, const uint8_t *dst,
		       uint16_t dport)
{
	if (!t->read) {
		t->err = ct_nat_list(&t->v, &t->n);
		t->read = true;
	}
	return t->err < 0 ? t->err : ct_nat_find(t->v, t->n, 0, src, sport, dst, dport) != NULL;
}

bool netns_via_nat(struct ckpt_ctx *ctx, struct ct_table *ct, int family, const uint8_t *src,
		   uint16_t sport, const uint8_t *dst, uint16_t dport, char *via, size_t vialen)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	const struct netns_ckpt *n = own_of(ctx);
	const NetnsLink *nat = NULL;
	if (!n)
		return false;
	if (family == AF_INET6 && !memcmp(dst, mapped, 12)) {
		dst += 12; /* a v4-mapped peer: an IPv4 packet */
		src += 12;
		family = AF_INET;
	}
	if (family != AF_INET || dst[0] == 127) /* the table is `ip`: IPv4 only */
		return false;
	for (size_t i = 0; i < n->e.n_links; i++) {
		const NetnsLink *l = n->e.links[i];
		for (size_t k = 0; k < l->n_addrs; k++)
			if (in_prefix4(l->addrs[k], dst))
				return false; /* on one of its own links */
		if (l->has_peer_nat && l->peer_nat && !nat)
			nat = l;
	}
	if (!nat || host_local4(dst))
		return false;
	/* an inbound connection routed to it is not translated: the host's
	 * conntrack tells; without its table, taken as translated */
	if (translated4(ct, src, sport, dst, dport) == 0)
		return false;
	snprintf(via, vialen, "%s", nat->peer_name ? nat->peer_name : "?");
	return true;
}

bool netns_saved(struct ckpt_ctx *ctx, pid_t pid)
{
	const struct netns_ckpt *n = own_of(ctx);
	struct stat st;
	if (!n)
		return proc_same_netns(pid);
	return proc_ns_stat(pid, "net", &st) == 0 && st.st_dev == n->dev && st.st_ino == n->ino;
}

/* A socket's namespace cookie (SO_NETNS_COOKIE), 0 if none. */
static uint64_t sock_cookie(int s)
{
	uint64_t c = 0;
	socklen_t l = sizeof(c);
	return getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l) == 0 ? c : 0;
}

uint64_t netns_tree_cookie(struct ckpt_ctx *ctx)
{
	const struct netns_ckpt *n = own_of(ctx);
	if (n)
		return n->in.nl ? sock_cookie(mnl_socket_get_fd(n->in.nl)) : 0;
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	uint64_t c = s < 0 ? 0 : sock_cookie(s);
	if (s >= 0)
		close(s);
	return c;
}

bool netns_sock_saved(uint64_t tree_cookie, int s)
{
	uint64_t c = sock_cookie(s);
	/* a kernel without cookies (before 5.14) tells nothing */
	return !c || !tree_cookie || c == tree_cookie;
}

static struct link_buf *link_of(struct netns_ckpt *n, int index)
{
	for (size_t i = 0; i < n->e.n_links; i++)
		if ((int)n->l[i].m.index == index)
			return &n->l[i];
	return NULL;
}

/* A link inside: loopback or a veth whose other end is in ckpt's namespace. */
static int note_link(const struct rtnl_link *l, void *arg)
{
	struct netns_ckpt *n = arg;
	bool lo = l->flags & IFF_LOOPBACK;
	/* every such link is named, the dump goes on */
	if (!lo && strcmp(l->kind, "veth")) {
		log_error(n->log, "pid %d: network namespace link %s (%s): only loopback and veth "
			  "links are supported", n->root, l->name, l->kind[0] ? l->kind : "no kind");
		n->err = -EOPNOTSUPP;
		return 0;
	}
	if (n->e.n_links == LINKS_MAX) {
		log_error(n->log, "pid %d: network namespace link %s: more than %d links", n->root,
			  l->name, LINKS_MAX);
		return n->err = -EOPNOTSUPP;
	}
	struct link_buf *b = &n->l[n->e.n_links];
	n->links[n->e.n_links++] = &b->m;
	netns_link__init(&b->m);
	memcpy(b->name, l->name, sizeof(b->name));
	b->m.name = b->name;
	b->m.index = (uint32_t)l->index;
	b->m.kind = lo ? "loopback" : "veth";
	b->m.mtu = l->mtu;
	b->m.up = l->flags & IFF_UP;
	b->m.addrs = b->addrs;
	b->m.peer_addrs = b->peer_addrs;
	if (!lo && l->maclen == 6) {
		memcpy(b->mac, l->mac, 6);
		b->m.has_mac = true;
		b->m.mac = (ProtobufCBinaryData){ 6, b->mac };
	}
	b->peer_index = lo ? 0 : l->peer_other_ns ? l->peer : -1;
	b->peer_nsid = l->peer_nsid;
	return 0;
}

/* A veth's host end, in ckpt's namespace: its name, mac, mtu, state. */
static int host_end(struct netns_ckpt *n, struct rtnl *host, struct link_buf *b)
{
	struct rtnl_link p;
	int r = b->peer_index > 0 ? rtnl_link_get(host, b->peer_index, NULL, &p) : -ENODEV;
	if (r < 0 || strcmp(p.kind, "veth") || p.peer != (int)b->m.index || !p.peer_other_ns)
		return log_fail(n->log, -EOPNOTSUPP,
				"pid %d: network namespace link %s (veth): its other end is not in "
				"ckpt's network namespace",
				n->root, b->name);
	memcpy(b->peer_name, p.name, sizeof(b->peer_name));
	b->m.peer_name = b->peer_name;
	b->m.has_peer_mtu = b->m.has_peer_up = true;
	b->m.peer_mtu = p.mtu;
	b->m.peer_up = p.flags & IFF_UP;
	int nat = netnat_exists(p.name);
	if (nat < 0 && nat != -ENOPKG)
		log_warn(n->log, "pid %d: network namespace link %s: cannot tell whether its host "
			 "end %s has NAT: %s", n->root, b->name, p.name, strerror(-nat));
	b->m.has_peer_nat = b->m.peer_nat = nat > 0;
	if (p.maclen == 6) {
		memcpy(b->peer_mac, p.mac, 6);
		b->m.has_peer_mac = true;
		b->m.peer_mac = (ProtobufCBinaryData){ 6, b->peer_mac };
	}
	return 0;
}

/* The addresses the kernel makes by itself are left out. */
static bool kernel_addr(const struct rtnl_addr *a, bool lo)
{
	static const uint8_t lo4[4] = { 127, 0, 0, 1 };
	static const uint8_t lo6[16] = { [15] = 1 };
	if (a->family == AF_INET6 && a->addr[0] == 0xfe && (a->addr[1] & 0xc0) == 0x80)
		return true;
	return lo && ((a->family == AF_INET && !memcmp(a->addr, lo4, 4) && a->prefixlen == 8) ||
		      (a->family == AF_INET6 && !memcmp(a->addr, lo6, 16)));
}

static int put_addr(struct netns_ckpt *n, const char *link, size_t *count, NetnsAddr **ptrs,
		    struct addr_buf *bufs, const struct rtnl_addr *a)
{
	if (*count == ADDRS_MAX)
		return log_fail(n->log, -EOPNOTSUPP, "pid %d: network namespace link %s: more than "
				"%d addresses", n->root, link, ADDRS_MAX);
	struct addr_buf *b = &bufs[*count];
	ptrs[(*count)++] = &b->m;
	netns_addr__init(&b->m);
	size_t len = a->family == AF_INET ? 4 : 16;
	memcpy(b->bytes, a->addr, len);
	b->m.family = (uint32_t)a->family;
	b->m.addr = (ProtobufCBinaryData){ len, b->bytes };
	b->m.prefixlen = a->prefixlen;
	b->m.has_flags = b->m.has_scope = true;
	b->m.flags = a->flags;
	b->m.scope = a->scope;
	return 0;
}

static int note_addr(const struct rtnl_addr *a, void *arg)
{
	struct netns_ckpt *n = arg;
	struct link_buf *b = link_of(n, a->index);
	if (!b || kernel_addr(a, !strcmp(b->m.kind, "loopback")))
		return 0;
	return n->err = put_addr(n, b->name, &b->m.n_addrs, b->addrs, b->a, a);
}

static int note_host_addr(const struct rtnl_addr *a, void *arg)
{
	struct netns_ckpt *n = arg;
	for (size_t i = 0; i < n->e.n_links; i++) {
		struct link_buf *b = &n->l[i];
		if (b->m.peer_name && b->peer_index == a->index && !kernel_addr(a, false))
			return n->err = put_addr(n, b->peer_name, &b->m.n_peer_addrs, b->peer_addrs,
						 b->pa, a);
	}
	return 0;
}

/* b: rt, through the link named oif (NULL: none). */
static void route_fill(struct route_buf *b, const struct rtnl_route *rt, char *oif)
{
	netns_route__init(&b->m);
	size_t len = rt->family == AF_INET ? 4 : 16;
	b->m.family = (uint32_t)rt->family;
	b->m.dst_len = rt->dst_len;
	if (rt->dst_len) {
		memcpy(b->dst, rt->dst, len);
		b->m.has_dst = true;
		b->m.dst = (ProtobufCBinaryData){ len, b->dst };
	}
	if (rt->has_gw) {
		memcpy(b->gw, rt->gw, len);
		b->m.has_gateway = true;
		b->m.gateway = (ProtobufCBinaryData){ len, b->gw };
	}
	if (rt->has_prefsrc) {
		memcpy(b->src, rt->prefsrc, len);
		b->m.has_prefsrc = true;
		b->m.prefsrc = (ProtobufCBinaryData){ len, b->src };
	}
	b->m.oif = oif;
	b->m.has_protocol = b->m.has_scope = b->m.has_type = b->m.has_priority = true;
	b->m.protocol = rt->protocol;
	b->m.scope = rt->scope;
	b->m.type = rt->type;
	b->m.priority = rt->priority;
	b->m.has_table = rt->table != RT_TABLE_MAIN;
	b->m.table = rt->table;
}

static int note_route(const struct rtnl_route *rt, void *arg)
{
	struct netns_ckpt *n = arg;
	if (rt->protocol == RTPROT_KERNEL || rt->protocol == RTPROT_RA ||
	    (rt->family == AF_INET6 && rt->dst_len >= 8 && rt->dst[0] == 0xff) ||
	    (rt->table == RT_TABLE_LOCAL && rt->family == AF_INET6 && rt->type == RTN_LOCAL))
		return 0;
	if (rt->table == RT_TABLE_LOCAL) { /* the kernel's; one a program added is not */
		log_error(n->log,
			  "pid %d: network namespace: a route of the local table that the "
			  "kernel did not make (protocol %u): not supported yet",
			  n->root, rt->protocol);
		return n->err = -EOPNOTSUPP;
	}
	struct link_buf *oif = rt->oif ? link_of(n, rt->oif) : NULL;
	if ((rt->oif && !oif) || n->e.n_routes == ROUTES_MAX) {
		log_error(n->log, "pid %d: network namespace: a route %s", n->root,
			  oif || !rt->oif ? "too many (more than 128)" : "through an unknown link");
		return n->err = -EOPNOTSUPP;
	}
	struct route_buf *b = &n->r[n->e.n_routes];
	n->routes[n->e.n_routes++] = &b->m;
	route_fill(b, rt, oif ? oif->name : NULL);
	return 0;
}

/* A route of ckpt's namespace through one of the host ends: kept, but
 * the kernel's own (the host end's addresses', multicast). */
static int note_host_route(const struct rtnl_route *rt, void *arg)
{
	struct netns_ckpt *n = arg;
	if (rt->protocol == RTPROT_KERNEL || rt->protocol == RTPROT_RA || !rt->oif ||
	    rt->table == RT_TABLE_LOCAL ||
	    (rt->family == AF_INET6 && rt->dst_len >= 8 && rt->dst[0] == 0xff))
		return 0;
	const struct link_buf *end = NULL;
	for (size_t i = 0; !end && i < n->e.n_links; i++)
		if (n->l[i].m.peer_name && !n->l[i].pending && n->l[i].peer_index == rt->oif)
			end = &n->l[i];
	if (!end)
		return 0;
	if (n->e.n_host_routes == HOST_ROUTES_MAX) {
		log_error(n->log,
			  "pid %d: network namespace: more than %d routes of ckpt's "
			  "network namespace through its host ends",
			  n->root, HOST_ROUTES_MAX);
		return n->err = -EOPNOTSUPP;
	}
	struct route_buf *b = &n->hr[n->e.n_host_routes];
	n->host_routes[n->e.n_host_routes++] = &b->m;
	route_fill(b, rt, end->m.peer_name);
	return 0;
}

/*
 * The calling thread enters the namespace of fd for an instant: a netlink
 * socket there, its sysctls read; then back to old (ckpt's own).
 */
static int open_inside(struct netns_ckpt *n, int fd, struct rtnl *in)
{
	int old, r = netns_enter_fd(fd, &old);
	if (r < 0)
		return log_fail(n->log, r, "pid %d: cannot enter its network namespace: %s", n->root,
				strerror(-r));
	r = rtnl_open(in);
	if (r < 0)
		log_error(n->log, "pid %d: no netlink socket in its network namespace: %s", n->root,
			  strerror(-r));
	if (r >= 0) /* this leaves the namespace for a fresh one */
		r = netns_sysctls_read(n->log, n->root, &n->e);
	netns_leave(old);
	return r;
}

static int dumped(struct netns_ckpt *n, int r, const char *what)
{
	if (n->err < 0)
		return n->err;
	if (r < 0)
		return log_fail(n->log, r, "pid %d: network namespace: cannot list its %s: %s",
				n->root, what, strerror(-r));
	return 0;
}

/* What the namespace holds, read through in (its) and host (ckpt's). A
 * veth whose other end is in another namespace than ckpt's (by the id the
 * namespace gives ckpt's) is left pending, for collect end. */
static int read_netns(struct netns_ckpt *n, struct rtnl *in, struct rtnl *host)
{
	int r = dumped(n, rtnl_links(in, note_link, n), "links");
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int host_nsid = self < 0 ? -EBADF : rtnl_nsid(in, self);
	for (size_t i = 0; r >= 0 && i < n->e.n_links; i++) {
		struct link_buf *b = &n->l[i];
		/* without ids (an old kernel), the host's or refused, as before */
		if (b->peer_index > 0 && (host_nsid >= 0 || host_nsid == -ENOENT) &&
		    b->peer_nsid != host_nsid)
			b->pending = true;
		else if (b->peer_index)
			r = host_end(n, host, b);
	}
	if (r >= 0)
		r = dumped(n, rtnl_addrs(in, note_addr, n), "addresses");
	if (r >= 0)
		r = dumped(n, rtnl_addrs(host, note_host_addr, n), "host ends' addresses");
	if (r >= 0)
		r = dumped(n, rtnl_routes(in, note_route, n), "routes");
	if (r >= 0)
		r = dumped(n, rtnl_routes(host, note_host_route, n), "host ends' routes");
	/* names every refusal, after the others' too */
	if (r >= 0 || n->err < 0) {
		int r2 = netns_rules_read(n->log, n->root, in, &n->e);
		r = r < 0 ? r : r2;
	}
	return r;
}

/* Every thread in its process's namespace: else refused by pid and thread. */
static int same_netns(struct ckpt_ctx *ctx, struct task *t)
{
	struct stat st;
	if (t->zombie)
		return 0;
	int r = proc_ns_stat(t->pid, "net", &st);
	_cleanup_free_ struct ns_thread_ino *ths = ns_threads_ino(t, "net");
	if (!ths)
		return -ENOMEM;
	for (size_t j = 0; r >= 0 && j < t->nthreads; j++) {
		/* by its inode alone: nsfs is one device */
		if (ths[j].err < 0)
			r = ths[j].err;
		else if (ths[j].ino != (uint64_t)st.st_ino)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d thread %d: in another network namespace (net:[%lu]) "
					"than its process (net:[%lu]); not supported", t->pid,
					t->threads[j].pid, (unsigned long)ths[j].ino,
					(unsigned long)st.st_ino);
	}
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its network namespace: %s", t->pid,
				strerror(-r));
	return 0;
}

static void netns_free_state(void *state);

/* Reads the namespace of fd (st) into a new n, which it returns in *ret
 * (to be freed by netns_free_state, read or not); pid names it in logs. */
static int save_netns(struct ckpt_ctx *ctx, pid_t pid, int fd, const struct stat *st,
		      struct netns_ckpt **ret)
{
	struct netns_ckpt *n = calloc(1, sizeof(*n));
	if (!(*ret = n))
		return -ENOMEM;
	n->tag = NETNS_LIST;
	netns_entry__init(&n->e);
	if ((n->nsfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return -errno;
	n->e.links = n->links;
	n->e.routes = n->routes;
	n->e.host_routes = n->host_routes;
	n->dev = st->st_dev;
	n->ino = st->st_ino;
	n->root = pid;
	n->log = &ctx->log;
	struct rtnl host = { 0 };
	int r = open_inside(n, fd, &n->in);
	if (r >= 0 && (r = rtnl_open(&host)) < 0)
		log_error(&ctx->log, "cannot open a netlink socket: %s", strerror(-r));
	if (r >= 0) {
		n->cookie = sock_cookie(mnl_socket_get_fd(n->in.nl));
		r = read_netns(n, &n->in, &host);
	}
	/* after refusals too, to name every one */
	int r2 = r >= 0 || r == n->err ? netns_nft_read(&ctx->log, pid, fd, &n->e) : 0;
	if (r >= 0)
		r = r2;
	rtnl_close(&host);
	return r;
}

/*
 * A namespace other than the root's (nsfd, st), of a task or held by fd
 * fd of pid (fd -1: pid is in it): the one of the root's list that is
 * it, or saved at the list's end with the next id. Its id in *id.
 */
static int extra_netns(struct ckpt_ctx *ctx, pid_t pid, int fd, int nsfd, const struct stat *st,
		       uint32_t *id)
{
	struct task *root = &ctx->tasks[0];
	struct netns_ckpt **at = (struct netns_ckpt **)&root->kstate[KIND_netns];
	uint32_t n_extra = 0;
	for (; *at; at = &(*at)->next) {
		if ((*at)->dev == st->st_dev && (*at)->ino == st->st_ino && (*at)->held) {
			*id = (*at)->e.id;
			return 0;
		}
		n_extra += (*at)->held;
	}
	int r = save_netns(ctx, pid, nsfd, st, at);
	if (!*at)
		return r;
	(*at)->held = true;
	(*at)->e.has_held = (*at)->e.held = true;
	(*at)->e.has_id = true;
	*id = (*at)->e.id = n_extra + 1;
	if (r >= 0 && fd >= 0)
		log_info(&ctx->log, "pid %d fd %d: a network namespace no process is in (%u): %zu "
			 "link(s), %zu route(s)", pid, fd, *id, (*at)->e.n_links, (*at)->e.n_routes);
	else if (r >= 0)
		log_info(&ctx->log, "pid %d: in a network namespace other than the root's (%u): %zu "
			 "link(s), %zu route(s)", pid, *id, (*at)->e.n_links, (*at)->e.n_routes);
	return r;
}

/* A task other than the root in another namespace than the root's: its
 * NetnsTask (the namespace saved once, by extra_netns, or ckpt's). */
static int task_netns(struct ckpt_ctx *ctx, struct task *t)
{
	struct stat st, rs;
	int r = proc_ns_stat(t->pid, "net", &st);
	if (r >= 0)
		r = proc_ns_stat(ctx->tasks[0].pid, "net", &rs);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its network namespace: %s", t->pid,
				strerror(-r));
	if (st.st_dev == rs.st_dev && st.st_ino == rs.st_ino)
		return 0;
	struct netns_tref *ref = calloc(1, sizeof(*ref));
	if (!ref)
		return -ENOMEM;
	ref->tag = NETNS_TREF;
	netns_task__init(&ref->m);
	t->kstate[KIND_netns] = ref;
	if (proc_same_netns(t->pid)) {
		ref->m.has_caller = ref->m.caller = true;
		log_info(&ctx->log, "pid %d: in ckpt's network namespace, not the root's", t->pid);
		return 0;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", t->pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot open its network namespace: %m",
				t->pid);
	ref->m.has_netns = true;
	return extra_netns(ctx, t->pid, -1, fd, &st, &ref->m.netns);
}

static int netns_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct task *root = &ctx->tasks[0];
	struct stat st;
	int r = same_netns(ctx, t);
	if (r < 0 || t->zombie)
		return r;
	if (t != root)
		return task_netns(ctx, t);
	if (proc_same_netns(t->pid))
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", t->pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot open its network namespace: %m",
				t->pid);
	struct netns_ckpt *n;
	r = save_netns(ctx, t->pid, fd, &st, &n);
	if (!n)
		return r;
	/* first in the list (held ones met before come after it) */
	n->next = t->kstate[KIND_netns];
	t->kstate[KIND_netns] = n;
	if (r >= 0)
		log_info(&ctx->log, "pid %d: a network namespace of its own: %zu link(s), %zu route(s)",
			 t->pid, n->e.n_links, n->e.n_routes);
	return r;
}

int netns_hold(struct ckpt_ctx *ctx, pid_t pid, int fd, uint32_t *id)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	_cleanup_close_ int nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0 || fstat(nsfd, &st) < 0)
		return log_fail(&ctx->log, -errno, "pid %d fd %d: cannot open its network namespace: "
				"%m", pid, fd);
	return extra_netns(ctx, pid, fd, nsfd, &st, id);
}

int netns_of_task(struct ckpt_ctx *ctx, pid_t pid, uint32_t *id, uint64_t *cookie)
{
	struct stat st;
	*id = 0;
	if (netns_saved(ctx, pid)) {
		*cookie = netns_tree_cookie(ctx);
		return 0;
	}
	const struct netns_ckpt *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	for (; n && proc_ns_stat(pid, "net", &st) == 0; n = n->next)
		if (n->held && n->dev == st.st_dev && n->ino == st.st_ino) {
			*id = n->e.id;
			*cookie = n->cookie;
			return 0;
		}
	return -EOPNOTSUPP;
}

int netns_other(struct ckpt_ctx *ctx, size_t k, uint32_t *id, int *fd)
{
	const struct netns_ckpt *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	for (; n; n = n->next) {
		if (!n->held || k--)
			continue;
		*id = n->e.id;
		*fd = n->nsfd;
		return 0;
	}
	return -ENOENT;
}

int netns_of_sock_task(struct ckpt_ctx *ctx, int sock, uint32_t *id)
{
	struct stat st, ts;
	_cleanup_close_ int nsfd = ioctl(sock, SIOCGSKNS);
	if (nsfd < 0 || fstat(nsfd, &st) < 0)
		return -errno;
	for (size_t i = 1; i < ctx->ntasks; i++)
		if (!ctx->tasks[i].zombie && proc_ns_stat(ctx->tasks[i].pid, "net", &ts) == 0 &&
		    ts.st_dev == st.st_dev && ts.st_ino == st.st_ino)
			/* ckpt's or the root's: not another one */
			return netns_saved(ctx, ctx->tasks[i].pid)
				   ? -ENOENT
				   : extra_netns(ctx, ctx->tasks[i].pid, -1, nsfd, &st, id);
	return -ENOENT;
}

const char *netns_sock_of(struct ckpt_ctx *ctx, pid_t pid, int s, uint32_t *id)
{
	uint64_t cookie = 0;
	if (netns_of_task(ctx, pid, id, &cookie) < 0)
		return "a socket of a process in ckpt's network namespace while the tree's root "
		       "has its own; not supported yet";
	if (!netns_sock_saved(cookie, s))
		return "a socket of another network namespace than its process's (made there, "
		       "setns back); not supported yet";
	return NULL;
}

int netns_enter_task(pid_t pid, int *own)
{
	char path[64];
	*own = -1;
	if (proc_same_netns(pid))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : netns_enter_fd(fd, own);
}

int netns_enter_fd(int fd, int *own)
{
	*own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*own < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET) < 0) {
		int err = -errno;
		close(*own);
		*own = -1;
		return err;
	}
	return 0;
}

void netns_leave(int own)
{
	if (own < 0)
		return;
	if (setns(own, CLONE_NEWNET) < 0)
		abort(); /* ckpt's thread cannot go back to its own namespace */
	close(own);
}

static int netns_dump(struct ckpt_ctx *ctx, struct task *t)
{
	int r = 0;
	const struct netns_tref *ref = t->kstate[KIND_netns];
	if (ref && ref->tag == NETNS_TREF)
		return ctx_write_msg(ctx, NETNS_TASK, &ref->m.base);
	for (struct netns_ckpt *n = t->kstate[KIND_netns]; r >= 0 && n; n = n->next)
		r = ctx_write_msg(ctx, NETNS_ENTRY, &n->e.base);
	return r;
}

/*
 * A veth of n whose other end is in another namespace of the image: m,
 * the one n gives the id b->peer_nsid, whose link b->peer_index is a veth
 * pointing back. Its NetnsLink names m (its id, 0 the root's own) and the
 * other end; false if no namespace of the image has it.
 */
static bool peer_in_image(struct netns_ckpt *list, struct netns_ckpt *n, struct link_buf *b)
{
	for (struct netns_ckpt *m = list; m; m = m->next) {
		struct rtnl_link p;
		struct link_buf *pb;
		if (m == n || rtnl_nsid(&n->in, m->nsfd) != b->peer_nsid ||
		    rtnl_link_get(&m->in, b->peer_index, NULL, &p) < 0 || strcmp(p.kind, "veth") ||
		    p.peer != (int)b->m.index || !p.peer_other_ns || !(pb = link_of(m, p.index)))
			continue;
		memcpy(b->peer_name, pb->name, sizeof(b->peer_name));
		b->m.peer_name = b->peer_name;
		b->m.has_peer_netns = true;
		b->m.peer_netns = m->held ? m->e.id : 0;
		return true;
	}
	return false;
}

/* Collect end: every namespace read; the veth pairs between two of them. */
static int netns_collect_end(struct ckpt_ctx *ctx)
{
	struct netns_ckpt *list = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	int r = 0;
	for (struct netns_ckpt *n = list; n; n = n->next)
		for (size_t i = 0; i < n->e.n_links; i++) {
			struct link_buf *b = &n->l[i];
			if (!b->pending || peer_in_image(list, n, b))
				continue;
			r = log_fail(&ctx->log, -EOPNOTSUPP,
				     "pid %d: network namespace link %s (veth): its other end is "
				     "neither in ckpt's network namespace nor in one the image holds",
				     n->root, b->name);
		}
	return r;
}

/* Before --kill: the namespace and its host ends take CAP_NET_ADMIN. */
static int netns_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	if (!t->kstate[KIND_netns] || caller_can(ctx->caller, CAP_NET_ADMIN))
		return 0;
	return log_fail(&ctx->log, -EPERM, "pid %d: a network namespace of its own; restarting it "
			"needs CAP_NET_ADMIN, which this caller lacks", t->pid);
}

/*
 * --kill, the tree dead: its namespace, which only n->in holds now, is cut
 * off before it goes. When the last reference goes, the kernel takes the
 * network lock's hooks away (nf_tables' pre_exit) before it takes the
 * links down, and a peer's retransmission that comes in through a veth in
 * between finds no socket and is answered with a reset. With the veth
 * pairs deleted first (both ends), nothing comes in.
 */
static void netns_after_kill(struct ckpt_ctx *ctx)
{
	struct netns_ckpt *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	for (; n; n = n->next) {
		for (size_t i = 0; n->in.nl && i < n->e.n_links; i++) {
			const NetnsLink *l = n->e.links[i];
			if (!strcmp(l->kind, "loopback"))
				continue;
			int r = rtnl_link_del(&n->in, (int)l->index);
			if (r < 0 && r != -ENODEV)
				log_warn(&ctx->log, "pid %d: link %s of its network namespace: cannot "
					 "delete it after the kill: %s", n->root, l->name, strerror(-r));
		}
	}
}

static void netns_free_state(void *state)
{
	struct netns_ckpt *n = state;
	if (n && n->tag == NETNS_TREF) {
		free(state);
		return;
	}
	while (n) {
		struct netns_ckpt *next = n->next;
		if (n->nsfd > 0)
			close(n->nsfd);
		rtnl_close(&n->in);
		netns_sysctls_free(&n->e);
		netns_rules_free(&n->e);
		free(n->e.nftables);
		free(n);
		n = next;
	}
}

/* --- restart: in netns-rst.c --------------------------------------------- */

static const ProtobufCMessageDescriptor *netns_descriptor(uint32_t sub)
{
	return sub == REC_SUB(NETNS_ENTRY)  ? &netns_entry__descriptor
	       : sub == REC_SUB(NETNS_TASK) ? &netns_task__descriptor
					    : NULL;
}

const struct kind_ops netns_ops = {
	.collect = netns_collect,
	.collect_end = netns_collect_end,
	.dump = netns_dump,
	.check_restore = netns_check_restore,
	.after_kill = netns_after_kill,
	.load = netns_load,
	.prepare = netns_prepare,
	.root_spawned = netns_root_spawned,
	.forked = netns_forked,
	.free_state = netns_free_state,
	.free_rstate = netns_free_rstate,
	.descriptor = netns_descriptor,
};
