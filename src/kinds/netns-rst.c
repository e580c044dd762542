/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The restart of a network namespace (netns.c tells the whole kind): the
 * record checked at load; at prepare ckpt's thread enters a new namespace
 * and makes its links, addresses, routes and sysctls, the veth pairs'
 * host ends in ckpt's namespace (down); at "spawn root" it goes back to
 * its own namespace and brings the host ends up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <net/if.h>

#include "core/ctx.h"
#include "kinds/netns.h"
#include "net/nat.h"
#include "net/rtnl.h"
#include "netns.pb-c.h"
#include "puppet/puppet.h"
#include "util/cleanup.h"

enum { NETNS_ENTRY = REC_TYPE(KID_netns, 1), NETNS_TASK = REC_TYPE(KID_netns, 2) };

/* One namespace to make. */
struct one_ns {
	NetnsEntry *e;
	int index[16]; /* each link's host end index in ckpt's namespace, 0 none */
	int fd;        /* once made; -1 */
	struct rtnl in; /* a netlink socket in it, during prepare */
};

/* What a task's kstate[KIND_netns] holds: the root's, a struct netns_rst;
 * another task's in another namespace than the root's, a NetnsTask. */
enum { NETNS_RST = 1, NETNS_TREF };

struct netns_tref {
	int tag; /* NETNS_TREF */
	NetnsTask *m;
	int fd; /* its namespace (ckpt's, not to be closed), once made */
};

struct netns_rst {
	int tag; /* NETNS_RST */
	struct one_ns own; /* the root's; e NULL: the root is in ckpt's */
	struct one_ns *held; /* the others (held by files, or tasks'), by id */
	size_t nheld;
	int host_ns;  /* ckpt's own network namespace */
	bool away;    /* ckpt's thread is in own, not back in host_ns */
	bool verify;  /* host ends made inside, left alone */
};

static bool name_ok(const char *s)
{
	return s && s[0] && strlen(s) < IF_NAMESIZE && !strpbrk(s, "/: \t\n") && strcmp(s, ".") &&
	       strcmp(s, "..");
}

static bool addr_ok(const NetnsAddr *a)
{
	size_t len = a->family == AF_INET ? 4 : a->family == AF_INET6 ? 16 : 0;
	return len && a->addr.len == len && a->prefixlen <= len * 8 && a->scope <= 255;
}

static bool bytes_ok(protobuf_c_boolean has, const ProtobufCBinaryData *b, size_t len)
{
	return !has || b->len == len;
}

static bool link_ok(const NetnsEntry *e, size_t i)
{
	const NetnsLink *l = e->links[i];
	bool lo = !strcmp(l->kind, "loopback"), veth = !strcmp(l->kind, "veth");
	if (!name_ok(l->name) || (!lo && !veth) || !l->index || l->index > 0x7fffffff ||
	    l->mtu > 65536 || !bytes_ok(l->has_mac, &l->mac, 6) ||
	    !bytes_ok(l->has_peer_mac, &l->peer_mac, 6) || (veth && !name_ok(l->peer_name)) ||
	    (lo && (l->peer_name || l->n_peer_addrs)) || l->peer_mtu > 65536)
		return false;
	for (size_t j = 0; j < l->n_addrs; j++)
		if (!addr_ok(l->addrs[j]))
			return false;
	for (size_t j = 0; j < l->n_peer_addrs; j++)
		if (!addr_ok(l->peer_addrs[j]))
			return false;
	for (size_t j = 0; j < i; j++)
		if (!strcmp(e->links[j]->name, l->name) || e->links[j]->index == l->index)
			return false;
	return true;
}

const NetnsLink *netns_link_named(const NetnsEntry *e, const char *name)
{
	for (size_t i = 0; name && i < e->n_links; i++)
		if (!strcmp(e->links[i]->name, name))
			return e->links[i];
	return NULL;
}

static bool route_ok(const NetnsEntry *e, const NetnsRoute *rt)
{
	size_t len = rt->family == AF_INET ? 4 : rt->family == AF_INET6 ? 16 : 0;
	return len && rt->dst_len <= len * 8 && (rt->dst_len == 0) == !rt->has_dst &&
	       bytes_ok(rt->has_dst, &rt->dst, len) && bytes_ok(rt->has_gateway, &rt->gateway, len) &&
	       bytes_ok(rt->has_prefsrc, &rt->prefsrc, len) && rt->protocol <= 255 &&
	       rt->scope <= 255 && rt->type <= 255 && (!rt->oif || netns_link_named(e, rt->oif)) &&
	       (!rt->has_table || (rt->table && rt->table != RT_TABLE_LOCAL));
}

/* A route of ckpt's namespace through a host end of e's links. */
static bool host_route_ok(const NetnsEntry *e, const NetnsRoute *rt)
{
	bool end = false;
	for (size_t i = 0; !end && rt->oif && i < e->n_links; i++)
		end = e->links[i]->peer_name && !strcmp(e->links[i]->peer_name, rt->oif);
	NetnsRoute inner = *rt;
	inner.oif = NULL;
	return end && route_ok(e, &inner);
}

static bool entry_ok(const NetnsEntry *e)
{
	bool ok = e->n_links <= 16 && e->n_routes <= 128 && e->n_sysctls <= 4096 &&
		  e->n_host_routes <= 16;
	for (size_t i = 0; ok && i < e->n_host_routes; i++)
		ok = host_route_ok(e, e->host_routes[i]);
	for (size_t i = 0; ok && i < e->n_links; i++)
		ok = link_ok(e, i);
	for (size_t i = 0; ok && i < e->n_routes; i++)
		ok = route_ok(e, e->routes[i]);
	for (size_t i = 0; ok && i < e->n_sysctls; i++)
		ok = netns_sysctl_ok(e->sysctls[i]);
	return ok && netns_nft_ok(e->nftables) && netns_rules_ok(e);
}

static struct one_ns *by_id(struct netns_rst *n, uint32_t id)
{
	for (size_t i = 0; n && i < n->nheld; i++)
		if (n->held[i].e->id == id)
			return &n->held[i];
	return NULL;
}

/* A task's NetnsTask: a namespace of the root's records, or ckpt's. */
static int load_task(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	struct netns_rst *n = ctx->tasks[0].kstate[KIND_netns];
	struct netns_tref *ref = calloc(1, sizeof(*ref));
	if (!ref)
		return -ENOMEM;
	ref->tag = NETNS_TREF;
	ref->fd = -1;
	t->kstate[KIND_netns] = ref;
	if (!(ref->m = rctx_unpack(ctx, rec, &netns_task__descriptor)))
		return -EINVAL;
	if (t == &ctx->tasks[0] || ref->m->has_netns == ref->m->caller ||
	    (ref->m->has_netns && !by_id(n, ref->m->netns)) || (ref->m->caller && !n->own.e))
		return log_fail(&ctx->log, -EINVAL, "record %u: pid %d: a network namespace the "
				"image does not hold, or of the root", rec->index, t->pid);
	return 0;
}

int netns_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	struct netns_rst *n = t->kstate[KIND_netns];
	if (rec->type == NETNS_TASK && !n && ctx->tasks[0].kstate[KIND_netns])
		return load_task(ctx, t, rec);
	if (t != &ctx->tasks[0] || rec->type != NETNS_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: a network namespace not of the root, "
				"or a task's twice", rec->index);
	if (!n) {
		if (!(n = calloc(1, sizeof(*n))))
			return -ENOMEM;
		n->tag = NETNS_RST;
		n->host_ns = n->own.fd = -1;
		t->kstate[KIND_netns] = n;
	}
	NetnsEntry *e = rctx_unpack(ctx, rec, &netns_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (e->held && n->nheld % 16 == 0) {
		struct one_ns *h = realloc(n->held, (n->nheld + 16) * sizeof(*h));
		if (!h) {
			protobuf_c_message_free_unpacked(&e->base, NULL);
			return -ENOMEM;
		}
		n->held = h;
	}
	struct one_ns *o = e->held ? &n->held[n->nheld] : &n->own;
	if (e->held)
		*o = (struct one_ns){ .fd = -1 };
	if (o->e || (e->held && (!e->id || by_id(n, e->id)))) {
		protobuf_c_message_free_unpacked(&e->base, NULL);
		return log_fail(&ctx->log, -EINVAL, "record %u: a second network namespace of the "
				"root, or another one without an id or twice", rec->index);
	}
	o->e = e;
	o->fd = -1;
	if (e->held)
		n->nheld++;
	if (!entry_ok(e))
		return log_fail(&ctx->log, -EINVAL, "record %u: the network namespace is not valid",
				rec->index);
	return 0;
}

int netns_rst_enter(struct rst_ctx *ctx, uint32_t id)
{
	struct netns_rst *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	const struct one_ns *o = id ? by_id(n, id) : NULL;
	if (id && !o)
		return -EINVAL;
	int fd = o ? o->fd : !n ? -1 : n->own.e ? n->own.fd : n->host_ns;
	if (fd < 0) /* the root is in ckpt's, and so is ckpt */
		return 0;
	return setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
}

int netns_rst_call(struct rst_ctx *ctx, uint32_t id, int (*fn)(struct rst_ctx *, void *), void *arg)
{
	int r = id ? netns_rst_enter(ctx, id) : 0;
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot enter network namespace %u: %s", id,
				strerror(-r));
	r = fn(ctx, arg);
	int r2 = id ? netns_rst_enter(ctx, 0) : 0;
	if (r2 < 0 && r >= 0)
		r = log_fail(&ctx->log, r2, "cannot go back to the root's network namespace: %s",
			     strerror(-r2));
	return r;
}

int netns_held_fd(struct rst_ctx *ctx, uint32_t id)
{
	const struct one_ns *o = by_id(ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL, id);
	return o ? o->fd : -1;
}

static void to_addr(const NetnsAddr *m, int index, struct rtnl_addr *a)
{
	*a = (struct rtnl_addr){ .family = (int)m->family, .index = index,
				 .prefixlen = m->prefixlen, .flags = m->flags, .scope = m->scope };
	memcpy(a->addr, m->addr.data, m->addr.len);
}

static const char *addr_text(const NetnsAddr *m, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	inet_ntop((int)m->family, m->addr.data, a, sizeof(a));
	snprintf(buf, len, "%s/%u", a, m->prefixlen);
	return buf;
}

static int add_addrs(struct rst_ctx *ctx, struct rtnl *nl, const char *link, int index,
		     NetnsAddr *const *addrs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct rtnl_addr a;
		char text[64];
		to_addr(addrs[i], index, &a);
		int r = rtnl_addr_add(nl, &a);
		if (r < 0)
			return log_fail(&ctx->log, r, "network namespace link %s: cannot add address "
					"%s: %s", link, addr_text(addrs[i], text, sizeof(text)),
					strerror(-r));
	}
	return 0;
}

static int add_pair(const struct netns_rst *n, const NetnsLink *l, const char *hname,
		    struct rtnl *in, struct rtnl *host, int in_ns)
{
	return rtnl_veth_add(n->verify ? in : host, hname,
			     l->has_peer_mac && !n->verify ? l->peer_mac.data : NULL, l->name,
			     l->has_mac ? l->mac.data : NULL, (int)l->index, n->verify ? -1 : in_ns);
}

/* A veth pair: the container's end inside (o), the host end in ckpt's
 * namespace (host) or, for a dry run beside the original, inside too. */
static int make_veth(struct rst_ctx *ctx, struct netns_rst *n, struct one_ns *o, size_t i,
		     struct rtnl *host)
{
	const NetnsLink *l = o->e->links[i];
	char tmp[IF_NAMESIZE];
	snprintf(tmp, sizeof(tmp), "ckptv%u", (unsigned)(i & 0xffff));
	const char *hname = n->verify ? tmp : l->peer_name;
	/* right after checkpoint --kill the killed container's namespace, and
	 * its host end with it, may still be going (the kernel's cleanup runs
	 * once the last socket of it is closed): wait a little for the name */
	int r = add_pair(n, l, hname, &o->in, host, o->fd);
	for (int waited = 0; r == -EEXIST && !n->verify && waited < 5000; waited += 10) {
		usleep(10000);
		if (!if_nametoindex(hname))
			r = add_pair(n, l, hname, &o->in, host, o->fd);
	}
	if (r < 0)
		return log_fail(&ctx->log, r, "network namespace link %s (veth): cannot make it with "
				"its host end %s: %s%s", l->name, l->peer_name, strerror(-r),
				r == -EEXIST ? " (the name is taken on this host)" : "");
	if (n->verify)
		return 0;
	struct rtnl_link h;
	r = rtnl_link_get(host, 0, l->peer_name, &h);
	if (r >= 0 && l->peer_mtu)
		r = rtnl_link_set(host, h.index, l->peer_mtu, false);
	if (r < 0)
		return log_fail(&ctx->log, r, "network namespace link %s: its host end %s: %s",
				l->name, l->peer_name, strerror(-r));
	o->index[i] = h.index;
	return add_addrs(ctx, host, l->peer_name, h.index, l->peer_addrs, l->n_peer_addrs);
}

/* The namespace of the other end of a veth between two of the image's. */
static struct one_ns *peer_ns(struct netns_rst *n, const NetnsLink *l)
{
	return l->peer_netns ? by_id(n, l->peer_netns) : n->own.e ? &n->own : NULL;
}

/* Where o comes in the order the namespaces are made: the others, then own. */
static size_t order(const struct netns_rst *n, const struct one_ns *o)
{
	return o == &n->own ? n->nheld : (size_t)(o - n->held);
}

/* Each veth between two namespaces of the image names one whose link of
 * that name names it back. */
static bool pairs_ok(struct netns_rst *n, struct one_ns *o)
{
	uint32_t me = o == &n->own ? 0 : o->e->id;
	for (size_t i = 0; i < o->e->n_links; i++) {
		const NetnsLink *l = o->e->links[i];
		if (!l->has_peer_netns)
			continue;
		struct one_ns *p = peer_ns(n, l);
		const NetnsLink *pl = p ? netns_link_named(p->e, l->peer_name) : NULL;
		if (!p || p == o || !pl || strcmp(l->kind, "veth") || strcmp(pl->kind, "veth") ||
		    !pl->has_peer_netns || pl->peer_netns != me || strcmp(pl->peer_name, l->name) ||
		    l->n_peer_addrs || l->peer_nat)
			return false;
	}
	return true;
}

/* A veth between two namespaces of the image: made once, both ends with
 * their names, macs and indexes, from the one made last. */
static int make_inner(struct rst_ctx *ctx, struct netns_rst *n, struct one_ns *o,
		      const NetnsLink *l)
{
	struct one_ns *p = peer_ns(n, l);
	if (order(n, o) < order(n, p))
		return 0;
	const NetnsLink *pl = netns_link_named(p->e, l->peer_name);
	int r = rtnl_veth_add_at(&o->in, l->name, l->has_mac ? l->mac.data : NULL, (int)l->index,
				 pl->name, pl->has_mac ? pl->mac.data : NULL, (int)pl->index, p->fd);
	if (r < 0)
		return log_fail(&ctx->log, r, "network namespace link %s (veth): cannot make it with "
				"its other end %s in another namespace of the image: %s", l->name,
				pl->name, strerror(-r));
	return 0;
}

/* o's veth pairs (its other links are there already). */
static int make_links(struct rst_ctx *ctx, struct netns_rst *n, struct one_ns *o,
		      struct rtnl *host)
{
	for (size_t i = 0; i < o->e->n_links; i++) {
		const NetnsLink *l = o->e->links[i];
		int r = strcmp(l->kind, "veth")	   ? 0
			: l->has_peer_netns ? make_inner(ctx, n, o, l)
					    : make_veth(ctx, n, o, i, host);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Each link of o, every pair made: its index checked, mtu, state, addresses. */
static int set_links(struct rst_ctx *ctx, struct one_ns *o)
{
	for (size_t i = 0; i < o->e->n_links; i++) {
		const NetnsLink *l = o->e->links[i];
		struct rtnl_link got;
		int r = rtnl_link_get(&o->in, 0, l->name, &got);
		if (r >= 0 && (unsigned)got.index != l->index)
			r = -EADDRNOTAVAIL;
		if (r >= 0)
			r = rtnl_link_set(&o->in, got.index, l->mtu, l->up);
		if (r < 0)
			return log_fail(&ctx->log, r, "network namespace link %s (index %u): %s", l->name,
					l->index, strerror(-r));
		r = add_addrs(ctx, &o->in, l->name, got.index, l->addrs, l->n_addrs);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The route m, through the link of index oif (0: none), added through in. */
static int add_route(struct rtnl *in, const NetnsRoute *m, int oif)
{
	struct rtnl_route rt = {.family = (int)m->family,
				.dst_len = m->dst_len,
				.protocol = m->protocol,
				.scope = m->scope,
				.type = m->type,
				.priority = m->priority,
				.table = m->table,
				.has_gw = m->has_gateway,
				.has_prefsrc = m->has_prefsrc,
				.oif = oif};
	if (m->has_dst)
		memcpy(rt.dst, m->dst.data, m->dst.len);
	if (m->has_gateway)
		memcpy(rt.gw, m->gateway.data, m->gateway.len);
	if (m->has_prefsrc)
		memcpy(rt.prefsrc, m->prefsrc.data, m->prefsrc.len);
	return rtnl_route_add(in, &rt);
}

/* "to D/N dev X" of m, for a message. */
static const char *route_text(const NetnsRoute *m, char *buf, size_t len)
{
	char d[INET6_ADDRSTRLEN] = "default";
	if (m->has_dst)
		inet_ntop((int)m->family, m->dst.data, d, sizeof(d));
	snprintf(buf, len, "to %s/%u%s%s", d, m->dst_len, m->oif ? " dev " : "",
		 m->oif ? m->oif : "");
	return buf;
}

static int make_routes(struct rst_ctx *ctx, const NetnsEntry *e, struct rtnl *in)
{
	for (size_t i = 0; i < e->n_routes; i++) {
		const NetnsRoute *m = e->routes[i];
		const NetnsLink *oif = netns_link_named(e, m->oif);
		int r = add_route(in, m, oif ? (int)oif->index : 0);
		char text[80];
		if (r < 0)
			return log_fail(&ctx->log, r,
					"network namespace: cannot add the route %s: %s",
					route_text(m, text, sizeof(text)), strerror(-r));
	}
	return 0;
}

/* o's host ends up: the routes of ckpt's namespace through them again
 * (one there already is left); a failure is told, the tree runs on. */
static void make_host_routes(struct rst_ctx *ctx, const struct one_ns *o, struct rtnl *host)
{
	for (size_t k = 0; k < o->e->n_host_routes; k++) {
		const NetnsRoute *m = o->e->host_routes[k];
		int oif = 0;
		for (size_t i = 0; !oif && i < o->e->n_links; i++)
			if (o->e->links[i]->peer_name && !strcmp(o->e->links[i]->peer_name, m->oif))
				oif = o->index[i];
		char text[80];
		int r = oif ? add_route(host, m, oif) : -ENODEV;
		if (r < 0 && r != -EEXIST)
			log_warn(&ctx->log,
				 "network namespace: cannot add the route %s of ckpt's "
				 "network namespace again: %s",
				 route_text(m, text, sizeof(text)), strerror(-r));
		else if (r == 0)
			log_info(&ctx->log,
				 "network namespace: the route %s of ckpt's network "
				 "namespace added again",
				 route_text(m, text, sizeof(text)));
	}
}

/* ckpt's thread back to its own namespace; it cannot fail (it is ours). */
static void back(const struct netns_rst *n)
{
	if (setns(n->host_ns, CLONE_NEWNET) < 0)
		abort();
}

/* A new namespace for o (ckpt's thread unshares, then goes back): its fd,
 * a netlink socket in it, the sysctls outside the links' directories. */
static int new_ns(struct rst_ctx *ctx, struct netns_rst *n, struct one_ns *o)
{
	if (unshare(CLONE_NEWNET) < 0)
		return log_fail(&ctx->log, -errno, "cannot make a network namespace: %m");
	o->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int r = o->fd < 0 ? -errno : rtnl_open(&o->in);
	if (r < 0)
		log_error(&ctx->log, "no netlink socket in the new network namespace: %s",
			  strerror(-r));
	/* the thread is in the new namespace: /proc/sys/net is its */
	if (r >= 0)
		r = netns_sysctls_write(ctx, o->e, true);
	back(n);
	return r;
}

/* o's links all made: its routes, rules, the links' sysctls, nftables. */
static int fill_ns(struct rst_ctx *ctx, struct netns_rst *n, struct one_ns *o)
{
	int r = make_routes(ctx, o->e, &o->in);
	if (r >= 0)
		r = netns_rules_write(ctx, o->e, &o->in);
	if (r >= 0 && setns(o->fd, CLONE_NEWNET) < 0)
		r = log_fail(&ctx->log, -errno, "cannot enter the new network namespace: %m");
	else if (r >= 0) {
		r = netns_sysctls_write(ctx, o->e, false);
		if (r >= 0)
			r = netns_nft_write(ctx, o->e);
		back(n);
	}
	rtnl_close(&o->in);
	if (r >= 0)
		log_info(&ctx->log, "network namespace%s made: %zu link(s), %zu route(s)",
			 o == &n->own ? "" : " (of tasks or held by a namespace file)",
			 o->e->n_links, o->e->n_routes);
	return r;
}

/* The k-th namespace to make: the others, then the root's own (if any). */
static struct one_ns *nth(struct netns_rst *n, size_t k)
{
	return k < n->nheld ? &n->held[k] : k == n->nheld && n->own.e ? &n->own : NULL;
}

int netns_prepare(struct rst_ctx *ctx)
{
	struct netns_rst *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	struct one_ns *o;
	if (!n)
		return 0;
	n->verify = ctx->flags & RESTART_VERIFY;
	for (size_t k = 0; (o = nth(n, k)); k++)
		if (!pairs_ok(n, o))
			return log_fail(&ctx->log, -EINVAL, "network namespace %u: a veth pair to "
					"another namespace of the image that is not one",
					o == &n->own ? 0 : o->e->id);
	struct rtnl host = { 0 };
	n->host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int r = n->host_ns < 0 ? -errno : rtnl_open(&host);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot make a network namespace: %s", strerror(-r));
	/* every namespace, then every pair (its ends may be in two), then the
	 * links set, then what goes through them; ckpt's thread stays in the
	 * root's (if it has one of its own) until "spawn root" (or the end) */
	for (size_t k = 0; r >= 0 && (o = nth(n, k)); k++)
		r = new_ns(ctx, n, o);
	for (size_t k = 0; r >= 0 && (o = nth(n, k)); k++)
		r = make_links(ctx, n, o, &host);
	for (size_t k = 0; r >= 0 && (o = nth(n, k)); k++)
		r = set_links(ctx, o);
	for (size_t k = 0; r >= 0 && (o = nth(n, k)); k++)
		r = fill_ns(ctx, n, o);
	rtnl_close(&host);
	if (r >= 0 && n->own.e) {
		if (setns(n->own.fd, CLONE_NEWNET) < 0)
			return log_fail(&ctx->log, -errno, "cannot enter the new network namespace: %m");
		n->away = true;
	}
	return r;
}

/* `ckpt run --nat`: the host end's table again (net/nat.h). */
static int remake_nat(struct rst_ctx *ctx, const NetnsLink *l)
{
	char err[512];
	bool was_off;
	int r = netnat_add(l->peer_name, &was_off, err, sizeof(err));
	if (r < 0)
		return log_fail(&ctx->log, r, "network namespace link %s: NAT for its host end %s: %s",
				l->name, l->peer_name, err);
	if (was_off)
		log_warn(&ctx->log, "network namespace link %s: NAT for its host end %s: IPv4 "
			 "forwarding was off on this host and is now on", l->name, l->peer_name);
	return 0;
}

/* The root is in the namespace: ckpt goes back to its own, and the host
 * ends come up (the restart's network lock is in place). */
int netns_root_spawned(struct rst_ctx *ctx, struct rst_task *root)
{
	struct netns_rst *n = root->kstate[KIND_netns];
	struct one_ns *o;
	if (!n)
		return 0;
	if (n->away) {
		back(n);
		n->away = false;
	}
	if (n->verify)
		return 0;
	struct rtnl host = { 0 };
	int r = rtnl_open(&host);
	for (size_t k = 0; r >= 0 && (o = nth(n, k)); k++) {
		for (size_t i = 0; r >= 0 && i < o->e->n_links; i++) {
			const NetnsLink *l = o->e->links[i];
			if (o->index[i] && l->peer_up &&
			    (r = rtnl_link_set(&host, o->index[i], 0, true)) < 0)
				log_error(&ctx->log, "network namespace link %s: cannot bring its host "
					  "end %s up: %s", l->name, l->peer_name, strerror(-r));
			if (r >= 0 && o->index[i] && l->peer_nat)
				r = remake_nat(ctx, l);
		}
		if (r >= 0)
			make_host_routes(ctx, o, &host);
	}
	rtnl_close(&host);
	return r;
}

/* The fd of the namespace t is to be in (ckpt's), t forked: its own, or
 * the root's; a ghost or a zombie stays in its creator's. */
static int target_fd(struct rst_ctx *ctx, const struct netns_rst *n, const struct rst_task *t)
{
	while ((t->ghost || t->zombie) && t->creator >= 0)
		t = &ctx->tasks[t->creator];
	const struct netns_tref *ref = t->kstate[KIND_netns];
	if (ref && ref->tag == NETNS_TREF)
		return ref->m->caller ? n->host_ns : by_id((struct netns_rst *)n, ref->m->netns)->fd;
	return n->own.e ? n->own.fd : n->host_ns;
}

int netns_forked(struct rst_ctx *ctx, struct rst_task *t)
{
	const struct netns_rst *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	if (!n || t->creator < 0 || t->ghost || t->zombie)
		return 0;
	int want = target_fd(ctx, n, t), had = target_fd(ctx, n, &ctx->tasks[t->creator]);
	if (want == had)
		return 0;
	int rfd = puppet_send_fd(&t->pup, ctx->ctl[0], ctx->ctl_remote, want);
	long e = rfd < 0 ? rfd : puppet_syscall(&t->pup, SYS_setns, rfd, CLONE_NEWNET);
	if (rfd >= 0)
		(void)puppet_syscall(&t->pup, SYS_close, rfd);
	if (e < 0)
		return log_fail(&ctx->log, (int)e, "pid %d: cannot enter its network namespace: %s",
				t->pid, strerror((int)-e));
	log_debug(&ctx->log, "pid %d: in its network namespace", t->pid);
	return 0;
}

void netns_free_rstate(void *state)
{
	struct netns_rst *n = state;
	struct one_ns *o;
	if (!n)
		return;
	if (n->tag == NETNS_TREF) {
		struct netns_tref *ref = state;
		if (ref->m)
			protobuf_c_message_free_unpacked(&ref->m->base, NULL);
		free(ref);
		return;
	}
	/* a restart that failed before "spawn root": ckpt's own namespace again */
	if (n->away)
		back(n);
	if (n->host_ns >= 0)
		close(n->host_ns);
	for (size_t k = 0; k <= n->nheld; k++) {
		if (!(o = k < n->nheld ? &n->held[k] : &n->own))
			continue;
		rtnl_close(&o->in);
		if (o->fd >= 0)
			close(o->fd);
		if (o->e)
			protobuf_c_message_free_unpacked(&o->e->base, NULL);
	}
	free(n->held);
	free(n);
}
