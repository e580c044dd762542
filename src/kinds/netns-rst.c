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
#include <unistd.h>
#include <net/if.h>

#include "core/ctx.h"
#include "kinds/netns.h"
#include "net/nat.h"
#include "net/rtnl.h"
#include "netns.pb-c.h"
#include "util/cleanup.h"

enum { NETNS_ENTRY = REC_TYPE(KID_netns, 1) };

/* What the restart keeps in the root's kstate[KIND_netns]. */
struct netns_rst {
	NetnsEntry *e;
	int host_ns;  /* ckpt's own network namespace, -1 once back in it */
	int index[32]; /* each link's host end index in ckpt's namespace, 0 none */
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

static const NetnsLink *link_named(const NetnsEntry *e, const char *name)
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
	       rt->scope <= 255 && rt->type <= 255 && (!rt->oif || link_named(e, rt->oif)) &&
	       (!rt->has_table || (rt->table && rt->table != RT_TABLE_LOCAL));
}

int netns_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	if (t != &ctx->tasks[0] || rec->type != NETNS_ENTRY || t->kstate[KIND_netns])
		return log_fail(&ctx->log, -EINVAL, "record %u: a network namespace not of the root, "
				"or a second one", rec->index);
	NetnsEntry *e = rctx_unpack(ctx, rec, &netns_entry__descriptor);
	if (!e)
		return -EINVAL;
	struct netns_rst *n = calloc(1, sizeof(*n));
	if (!n) {
		protobuf_c_message_free_unpacked(&e->base, NULL);
		return -ENOMEM;
	}
	n->e = e;
	n->host_ns = -1;
	t->kstate[KIND_netns] = n;
	bool ok = e->n_links <= 16 && e->n_routes <= 128 && e->n_sysctls <= 4096;
	for (size_t i = 0; ok && i < e->n_links; i++)
		ok = link_ok(e, i);
	for (size_t i = 0; ok && i < e->n_routes; i++)
		ok = route_ok(e, e->routes[i]);
	for (size_t i = 0; ok && i < e->n_sysctls; i++)
		ok = netns_sysctl_ok(e->sysctls[i]);
	ok = ok && netns_nft_ok(e->nftables);
	if (!ok)
		return log_fail(&ctx->log, -EINVAL, "record %u: the network namespace is not valid",
				rec->index);
	return 0;
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

/* A veth pair: the container's end inside (in), the host end in ckpt's
 * namespace (host) or, for a dry run beside the original, inside too. */
static int make_veth(struct rst_ctx *ctx, struct netns_rst *n, size_t i, struct rtnl *in,
		     struct rtnl *host, int in_ns)
{
	const NetnsLink *l = n->e->links[i];
	char tmp[IF_NAMESIZE];
	snprintf(tmp, sizeof(tmp), "ckptv%u", (unsigned)(i & 0xffff));
	const char *hname = n->verify ? tmp : l->peer_name;
	/* right after checkpoint --kill the killed container's namespace, and
	 * its host end with it, may still be going (the kernel's cleanup runs
	 * once the last socket of it is closed): wait a little for the name */
	int r = add_pair(n, l, hname, in, host, in_ns);
	for (int waited = 0; r == -EEXIST && !n->verify && waited < 5000; waited += 10) {
		usleep(10000);
		if (!if_nametoindex(hname))
			r = add_pair(n, l, hname, in, host, in_ns);
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
	n->index[i] = h.index;
	return add_addrs(ctx, host, l->peer_name, h.index, l->peer_addrs, l->n_peer_addrs);
}

static int make_links(struct rst_ctx *ctx, struct netns_rst *n, struct rtnl *in,
		      struct rtnl *host, int in_ns)
{
	for (size_t i = 0; i < n->e->n_links; i++) {
		const NetnsLink *l = n->e->links[i];
		struct rtnl_link got;
		int r = strcmp(l->kind, "veth") ? 0 : make_veth(ctx, n, i, in, host, in_ns);
		if (r < 0)
			return r;
		r = rtnl_link_get(in, 0, l->name, &got);
		if (r >= 0 && (unsigned)got.index != l->index)
			r = -EADDRNOTAVAIL;
		if (r >= 0)
			r = rtnl_link_set(in, got.index, l->mtu, l->up);
		if (r < 0)
			return log_fail(&ctx->log, r, "network namespace link %s (index %u): %s", l->name,
					l->index, strerror(-r));
		r = add_addrs(ctx, in, l->name, got.index, l->addrs, l->n_addrs);
		if (r < 0)
			return r;
	}
	return 0;
}

static int make_routes(struct rst_ctx *ctx, const NetnsEntry *e, struct rtnl *in)
{
	for (size_t i = 0; i < e->n_routes; i++) {
		const NetnsRoute *m = e->routes[i];
		const NetnsLink *oif = link_named(e, m->oif);
		struct rtnl_route rt = { .family = (int)m->family, .dst_len = m->dst_len,
					 .protocol = m->protocol, .scope = m->scope, .type = m->type,
					 .priority = m->priority, .table = m->table,
					 .has_gw = m->has_gateway,
					 .has_prefsrc = m->has_prefsrc,
					 .oif = oif ? (int)oif->index : 0 };
		if (m->has_dst)
			memcpy(rt.dst, m->dst.data, m->dst.len);
		if (m->has_gateway)
			memcpy(rt.gw, m->gateway.data, m->gateway.len);
		if (m->has_prefsrc)
			memcpy(rt.prefsrc, m->prefsrc.data, m->prefsrc.len);
		int r = rtnl_route_add(in, &rt);
		if (r < 0) {
			char d[INET6_ADDRSTRLEN] = "default";
			if (m->has_dst)
				inet_ntop((int)m->family, m->dst.data, d, sizeof(d));
			return log_fail(&ctx->log, r, "network namespace: cannot add the route to %s/%u"
					"%s%s: %s", d, m->dst_len, oif ? " dev " : "",
					oif ? oif->name : "", strerror(-r));
		}
	}
	return 0;
}

/* Back to ckpt's own namespace (the new one lives on in what is in it). */
static int leave(struct netns_rst *n)
{
	if (n->host_ns < 0)
		return 0;
	int r = setns(n->host_ns, CLONE_NEWNET) < 0 ? -errno : 0;
	close(n->host_ns);
	n->host_ns = -1;
	return r;
}

int netns_prepare(struct rst_ctx *ctx)
{
	struct netns_rst *n = ctx->ntasks ? ctx->tasks[0].kstate[KIND_netns] : NULL;
	if (!n)
		return 0;
	n->verify = ctx->flags & RESTART_VERIFY;
	struct rtnl in = { 0 }, host = { 0 };
	n->host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int r = n->host_ns < 0 ? -errno : rtnl_open(&host);
	if (r >= 0 && unshare(CLONE_NEWNET) < 0)
		r = -errno;
	if (r < 0) {
		close(n->host_ns);
		n->host_ns = -1;
		rtnl_close(&host);
		return log_fail(&ctx->log, r, "cannot make a network namespace: %s", strerror(-r));
	}
	/* from here ckpt's thread is in it, until "spawn root" (or the end) */
	_cleanup_close_ int in_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	r = in_ns < 0 ? -errno : rtnl_open(&in);
	if (r < 0)
		log_error(&ctx->log, "no netlink socket in the new network namespace: %s",
			  strerror(-r));
	/* the thread is in the new namespace: /proc/sys/net is its */
	if (r >= 0)
		r = netns_sysctls_write(ctx, n->e, true);
	if (r >= 0)
		r = make_links(ctx, n, &in, &host, in_ns);
	if (r >= 0)
		r = make_routes(ctx, n->e, &in);
	if (r >= 0)
		r = netns_sysctls_write(ctx, n->e, false);
	if (r >= 0)
		r = netns_nft_write(ctx, n->e);
	rtnl_close(&in);
	rtnl_close(&host);
	if (r >= 0)
		log_info(&ctx->log, "network namespace made: %zu link(s), %zu route(s)",
			 n->e->n_links, n->e->n_routes);
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
	if (!n)
		return 0;
	int r = leave(n);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot go back to ckpt's network namespace: %s",
				strerror(-r));
	if (n->verify)
		return 0;
	struct rtnl host = { 0 };
	r = rtnl_open(&host);
	for (size_t i = 0; r >= 0 && i < n->e->n_links; i++) {
		const NetnsLink *l = n->e->links[i];
		if (n->index[i] && l->peer_up && (r = rtnl_link_set(&host, n->index[i], 0, true)) < 0)
			log_error(&ctx->log, "network namespace link %s: cannot bring its host end %s "
				  "up: %s", l->name, l->peer_name, strerror(-r));
		if (r >= 0 && n->index[i] && l->peer_nat)
			r = remake_nat(ctx, l);
	}
	rtnl_close(&host);
	return r;
}

void netns_free_rstate(void *state)
{
	struct netns_rst *n = state;
	if (!n)
		return;
	/* a restart that failed before "spawn root": ckpt's own namespace again */
	if (leave(n) < 0)
		abort();
	protobuf_c_message_free_unpacked(&n->e->base, NULL);
	free(n);
}
