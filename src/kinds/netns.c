/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A network namespace of the tree's own: the root's, when it is not
 * ckpt's (`ckpt run --net`). Every task of the tree must be in it. One
 * record (NetnsEntry), the root's.
 *
 * Checkpoint (collect, the root): through a rtnetlink socket opened in the
 * namespace (ckpt's thread enters it for that instant, and to read the
 * sysctls under /proc/sys/net, which show the reader's namespace):
 * - links: loopback and veth only, any other kind refused by name. A veth's
 *   other end must be in ckpt's namespace (the host end of ckpt run --net):
 *   its name, mac, mtu, up state and addresses are saved with it;
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
 * nothing of the host's changes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fib_rules.h>
#include <linux/neighbour.h>
#include <net/if.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/netns.h"
#include "net/nat.h"
#include "net/rtnl.h"
#include "netns.pb-c.h"
#include "util/cleanup.h"

enum { NETNS_ENTRY = REC_TYPE(KID_netns, 1) };

#define LINKS_MAX 16
#define ADDRS_MAX 64  /* of each end of a link */
#define ROUTES_MAX 128

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
};

struct route_buf {
	NetnsRoute m;
	uint8_t dst[16], gw[16], src[16];
};

struct netns_ckpt {
	NetnsEntry e;
	NetnsLink *links[LINKS_MAX];
	NetnsRoute *routes[ROUTES_MAX];
	struct link_buf l[LINKS_MAX];
	struct route_buf r[ROUTES_MAX];
	dev_t dev;
	ino_t ino; /* the namespace's */
	pid_t root;
	struct ckpt_log *log;
	int err; /* a refusal from a dump callback */
	/* the socket in the namespace, open until the checkpoint ends: it
	 * holds the namespace, so that after --kill its links are cut before
	 * it can die (netns_after_kill) */
	struct rtnl in;
};

/* --- checkpoint ------------------------------------------------------- */

static int ns_ident(pid_t pid, struct stat *st)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	return stat(path, st) < 0 ? -errno : 0;
}

bool netns_saved(struct ckpt_ctx *ctx, pid_t pid)
{
	const struct netns_ckpt *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	struct stat st;
	if (proc_same_netns(pid))
		return true;
	return n && ns_ident(pid, &st) == 0 && st.st_dev == n->dev && st.st_ino == n->ino;
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

static int note_route(const struct rtnl_route *rt, void *arg)
{
	struct netns_ckpt *n = arg;
	if (rt->protocol == RTPROT_KERNEL || rt->protocol == RTPROT_RA ||
	    (rt->family == AF_INET6 && rt->dst_len >= 8 && rt->dst[0] == 0xff) ||
	    (rt->table == RT_TABLE_LOCAL && rt->family == AF_INET6 && rt->type == RTN_LOCAL))
		return 0;
	if (rt->table == RT_TABLE_LOCAL) { /* the kernel's; one a program added is not */
		log_error(n->log, "pid %d: network namespace: a route of the local table that the "
			  "kernel did not make (protocol %u): not supported yet", n->root,
			  rt->protocol);
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
	b->m.oif = oif ? oif->name : NULL;
	b->m.has_protocol = b->m.has_scope = b->m.has_type = b->m.has_priority = true;
	b->m.protocol = rt->protocol;
	b->m.scope = rt->scope;
	b->m.type = rt->type;
	b->m.priority = rt->priority;
	b->m.has_table = rt->table != RT_TABLE_MAIN;
	b->m.table = rt->table;
	return 0;
}

/* The rules a namespace starts with: lookup local at 0, main at 32766,
 * default (IPv4) at 32767; any other is refused by priority and table. */
static int note_rule(const struct rtnl_rule *ru, void *arg)
{
	struct netns_ckpt *n = arg;
	bool fresh = !ru->selects && ru->action == FR_ACT_TO_TBL &&
		     ((ru->priority == 0 && ru->table == RT_TABLE_LOCAL) ||
		      (ru->priority == 32766 && ru->table == RT_TABLE_MAIN) ||
		      (ru->priority == 32767 && ru->table == RT_TABLE_DEFAULT &&
		       ru->family == AF_INET));
	if (fresh)
		return 0;
	log_error(n->log, "pid %d: network namespace: %s policy routing rule %u (table %u, action "
		  "%u): not supported yet", n->root, ru->family == AF_INET6 ? "an IPv6" : "an IPv4",
		  ru->priority, ru->table, ru->action);
	n->err = -EOPNOTSUPP;
	return 0; /* every one named */
}

/* Neighbour entries the kernel learns come back by themselves; one set
 * by hand (permanent) is refused by address and link. */
static int note_neigh(const struct rtnl_neigh *nb, void *arg)
{
	struct netns_ckpt *n = arg;
	if (!(nb->state & NUD_PERMANENT) || (nb->family != AF_INET && nb->family != AF_INET6))
		return 0;
	char a[INET6_ADDRSTRLEN] = "?";
	const struct link_buf *b = link_of(n, nb->index);
	inet_ntop(nb->family, nb->dst, a, sizeof(a));
	log_error(n->log, "pid %d: network namespace: a permanent neighbour entry %s on %s: not "
		  "supported yet", n->root, a, b ? b->name : "a link");
	n->err = -EOPNOTSUPP;
	return 0;
}

/*
 * The calling thread enters the namespace of fd for an instant: a netlink
 * socket there, its sysctls read; then back to old (ckpt's own).
 */
static int open_inside(struct netns_ckpt *n, int fd, struct rtnl *in)
{
	_cleanup_close_ int old = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (old < 0 || setns(fd, CLONE_NEWNET) < 0)
		return log_fail(n->log, -errno, "pid %d: cannot enter its network namespace: %m",
				n->root);
	int r = rtnl_open(in);
	if (r < 0)
		log_error(n->log, "pid %d: no netlink socket in its network namespace: %s", n->root,
			  strerror(-r));
	if (r >= 0) /* this leaves the namespace for a fresh one */
		r = netns_sysctls_read(n->log, n->root, &n->e);
	if (setns(old, CLONE_NEWNET) < 0) /* cannot happen: it is our own */
		abort();
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

/* What the namespace holds, read through in (its) and host (ckpt's). */
static int read_netns(struct netns_ckpt *n, struct rtnl *in, struct rtnl *host)
{
	int r = dumped(n, rtnl_links(in, note_link, n), "links");
	for (size_t i = 0; r >= 0 && i < n->e.n_links; i++)
		if (n->l[i].peer_index)
			r = host_end(n, host, &n->l[i]);
	if (r >= 0)
		r = dumped(n, rtnl_addrs(in, note_addr, n), "addresses");
	if (r >= 0)
		r = dumped(n, rtnl_addrs(host, note_host_addr, n), "host ends' addresses");
	if (r >= 0)
		r = dumped(n, rtnl_routes(in, note_route, n), "routes");
	/* each of these names every refusal, and the next runs still */
	if (r >= 0 || n->err < 0) {
		int r2 = rtnl_rules(in, note_rule, n), r3 = rtnl_neighs(in, note_neigh, n);
		r = r < 0 ? r : r2 < 0 ? dumped(n, r2, "policy routing rules")
				       : dumped(n, r3, "neighbour entries");
	}
	return r;
}

static int netns_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct task *root = &ctx->tasks[0];
	struct netns_ckpt *rn = root->kstate[KIND_netns];
	struct stat st;
	/* a tree in ckpt's namespace: as before, the inet and unix kinds
	 * refuse sockets of any other */
	if (t != root) {
		if (!rn || (ns_ident(t->pid, &st) == 0 && st.st_dev == rn->dev && st.st_ino == rn->ino))
			return 0;
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: in another network namespace than its root's; not supported",
				t->pid);
	}
	if (proc_same_netns(t->pid))
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", t->pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot open its network namespace: %m",
				t->pid);
	struct netns_ckpt *n = task_state(t, KIND_netns, sizeof(*n));
	if (!n)
		return -ENOMEM;
	netns_entry__init(&n->e);
	n->e.links = n->links;
	n->e.routes = n->routes;
	n->dev = st.st_dev;
	n->ino = st.st_ino;
	n->root = t->pid;
	n->log = &ctx->log;
	struct rtnl host = { 0 };
	int r = open_inside(n, fd, &n->in);
	if (r >= 0 && (r = rtnl_open(&host)) < 0)
		log_error(&ctx->log, "cannot open a netlink socket: %s", strerror(-r));
	if (r >= 0)
		r = read_netns(n, &n->in, &host);
	/* after refusals too, to name every one */
	int r2 = r >= 0 || r == n->err ? netns_nft_read(&ctx->log, t->pid, fd, &n->e) : 0;
	if (r >= 0)
		r = r2;
	rtnl_close(&host);
	if (r >= 0)
		log_info(&ctx->log, "pid %d: a network namespace of its own: %zu link(s), %zu route(s)",
			 t->pid, n->e.n_links, n->e.n_routes);
	return r;
}

static int netns_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct netns_ckpt *n = t->kstate[KIND_netns];
	return n ? ctx_write_msg(ctx, NETNS_ENTRY, &n->e.base) : 0;
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
	if (!n || !n->in.nl)
		return;
	for (size_t i = 0; i < n->e.n_links; i++) {
		const NetnsLink *l = n->e.links[i];
		if (!strcmp(l->kind, "loopback"))
			continue;
		int r = rtnl_link_del(&n->in, (int)l->index);
		if (r < 0 && r != -ENODEV)
			log_warn(&ctx->log, "pid %d: link %s of its network namespace: cannot delete "
				 "it after the kill: %s", n->root, l->name, strerror(-r));
	}
}

static void netns_free_state(void *state)
{
	struct netns_ckpt *n = state;
	if (n) {
		rtnl_close(&n->in);
		netns_sysctls_free(&n->e);
		free(n->e.nftables);
	}
	free(n);
}

/* --- restart: in netns-rst.c --------------------------------------------- */

static const ProtobufCMessageDescriptor *netns_descriptor(uint32_t sub)
{
	return sub == REC_SUB(NETNS_ENTRY) ? &netns_entry__descriptor : NULL;
}

const struct kind_ops netns_ops = {
	.collect = netns_collect,
	.dump = netns_dump,
	.check_restore = netns_check_restore,
	.after_kill = netns_after_kill,
	.load = netns_load,
	.prepare = netns_prepare,
	.root_spawned = netns_root_spawned,
	.free_state = netns_free_state,
	.free_rstate = netns_free_rstate,
	.descriptor = netns_descriptor,
};
