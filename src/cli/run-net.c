/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt run --net: the container gets a network namespace of its own (the
 * clone's CLONE_NEWNET), joined to the host by a veth pair: "eth0" inside,
 * ckptPID-h (or --net-host-if NAME) in ckpt's namespace. The pair has an
 * IPv4 subnet: the host end takes its first address, the container its
 * second, and the container's default route goes through the host end.
 * Without --net-addr the subnet is a /30 of 10.200.0.0/16 that no address
 * or route of ckpt's namespace touches, the search starting from ckpt's
 * pid. Loopback is up inside. Everything is done by rtnetlink (net/rtnl.h):
 * the pair and its host end by ckpt, before the container runs anything;
 * loopback, eth0 and the route by the container's init itself, once ckpt
 * says the pair exists. Needs CAP_NET_ADMIN where ckpt runs (root).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>

#include "cli/cli.h"
#include "cli/run-net.h"
#include "net/nat.h"
#include "net/rtnl.h"
#include "util/cleanup.h"

#define NET_POOL 0x0ac80000u /* 10.200.0.0/16 */

static uint32_t mask_of(unsigned plen)
{
	return plen ? ~0u << (32 - plen) : 0;
}

/* Does a.../alen overlap b.../blen (host order)? */
static bool overlaps(uint32_t a, unsigned alen, uint32_t b, unsigned blen)
{
	uint32_t m = mask_of(alen < blen ? alen : blen);
	return (a & m) == (b & m);
}

struct taken {
	uint32_t net[512];
	unsigned len[512];
	size_t n;
};

static int note_addr(const struct rtnl_addr *a, void *arg)
{
	struct taken *t = arg;
	if (a->family != AF_INET || t->n == 512)
		return 0;
	uint32_t v;
	memcpy(&v, a->addr, 4);
	t->net[t->n] = ntohl(v);
	t->len[t->n++] = 32;
	return 0;
}

static int note_route(const struct rtnl_route *rt, void *arg)
{
	struct taken *t = arg;
	if (rt->family != AF_INET || !rt->dst_len || t->n == 512)
		return 0;
	uint32_t v;
	memcpy(&v, rt->dst, 4);
	t->net[t->n] = ntohl(v);
	t->len[t->n++] = rt->dst_len;
	return 0;
}

static bool is_free(const struct taken *t, uint32_t net, unsigned plen)
{
	for (size_t i = 0; i < t->n; i++)
		if (overlaps(t->net[i], t->len[i], net, plen))
			return false;
	return true;
}

/* --net-addr NET/LEN: an IPv4 subnet of at least 4 addresses, aligned. */
static int parse_subnet(const char *text, struct run_net *n)
{
	char addr[32];
	unsigned plen;
	int used = 0;
	struct in_addr in;
	if (sscanf(text, "%31[0-9.]/%u%n", addr, &plen, &used) != 2 || text[used] ||
	    inet_pton(AF_INET, addr, &in) != 1 || plen < 8 || plen > 30 ||
	    (ntohl(in.s_addr) & ~mask_of(plen))) {
		fprintf(stderr, "ckpt: run: --net-addr '%s' is not an IPv4 subnet NET/LEN (LEN 8 to "
				"30, NET its first address)\n", text);
		return -EINVAL;
	}
	n->net = ntohl(in.s_addr);
	n->plen = plen;
	return 0;
}

int run_net_plan(const struct cli_args *a, struct run_net *n)
{
	memset(n, 0, sizeof(*n));
	n->go[0] = n->go[1] = -1;
	if (!a->net)
		return 0;
	n->on = true;
	n->nat = a->nat;
	if (geteuid() != 0) {
		fprintf(stderr, "ckpt: run --net: a veth pair to the host needs root\n");
		return -EPERM;
	}
	snprintf(n->host_if, sizeof(n->host_if), "%s", a->net_host_if ? a->net_host_if : "");
	if (!a->net_host_if)
		snprintf(n->host_if, sizeof(n->host_if), "ckpt%d-h", (int)getpid());
	if (a->net_addr)
		return parse_subnet(a->net_addr, n);
	struct rtnl nl = { 0 };
	struct taken *t = calloc(1, sizeof(*t));
	int r = t ? rtnl_open(&nl) : -ENOMEM;
	if (r >= 0)
		r = rtnl_addrs(&nl, note_addr, t);
	if (r >= 0)
		r = rtnl_routes(&nl, note_route, t);
	rtnl_close(&nl);
	for (unsigned i = 0; r >= 0 && i < 16384; i++) {
		uint32_t net = NET_POOL + (((unsigned)getpid() + i) % 16384) * 4;
		if (is_free(t, net, 30)) {
			n->net = net;
			n->plen = 30;
			free(t);
			return 0;
		}
	}
	free(t);
	fprintf(stderr, "ckpt: run --net: %s\n",
		r < 0 ? "cannot list the host's addresses and routes"
		      : "no /30 of 10.200.0.0/16 is free here; give one with --net-addr");
	return r < 0 ? r : -EADDRINUSE;
}

static void put4(uint8_t *to, uint32_t host_order)
{
	uint32_t v = htonl(host_order);
	memcpy(to, &v, 4);
}

static int add_nat(const char *host_if)
{
	char err[512];
	bool was_off;
	int r = netnat_add(host_if, &was_off, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "ckpt: run --nat: %s\n", err);
	else if (was_off)
		fprintf(stderr, "ckpt: run --nat: IPv4 forwarding was off on this host and is "
				"now on (net.ipv4.ip_forward=1)\n");
	return r;
}

/* In ckpt's namespace: the pair, the host end's address, up. */
int run_net_setup(struct run_net *n, pid_t pid)
{
	char path[64], text[INET_ADDRSTRLEN];
	struct rtnl nl = { 0 };
	struct rtnl_link host;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	const char *what = "opening the container's network namespace";
	int r = ns < 0 ? -errno : rtnl_open(&nl);
	if (r >= 0) {
		what = "making the veth pair";
		r = rtnl_veth_add(&nl, n->host_if, NULL, RUN_NET_INSIDE, NULL, 0, ns);
	}
	if (r >= 0) {
		what = "finding the host end";
		r = rtnl_link_get(&nl, 0, n->host_if, &host);
	}
	if (r >= 0) {
		struct rtnl_addr a = { .family = AF_INET, .index = host.index, .prefixlen = n->plen };
		put4(a.addr, n->net + 1);
		what = "the host end's address";
		r = rtnl_addr_add(&nl, &a);
		if (r >= 0) {
			what = "bringing the host end up";
			r = rtnl_link_set(&nl, host.index, 0, true);
		}
		if (r >= 0 && n->nat) {
			what = "NAT for the host end";
			r = add_nat(n->host_if);
		}
		if (r < 0 && rtnl_link_del(&nl, host.index) < 0)
			what = "the host end's address (and the pair stays)";
	}
	rtnl_close(&nl);
	uint32_t h = htonl(n->net + 1);
	inet_ntop(AF_INET, &h, text, sizeof(text));
	if (r < 0) {
		fprintf(stderr, "ckpt: run --net: %s %s (%s/%u): %s\n", what, n->host_if, text,
			n->plen, strerror(-r));
		return r;
	}
	if (write(n->go[1], "n", 1) != 1)
		return -errno;
	close(n->go[1]);
	n->go[1] = -1;
	return 0;
}

/* In the container, once ckpt made the pair: lo and eth0 up, eth0's
 * address, the default route through the host end. */
int run_net_inside(const struct run_net *n)
{
	char c;
	struct rtnl nl = { 0 };
	struct rtnl_link lo, eth;
	if (read(n->go[0], &c, 1) != 1)
		return -EPIPE; /* ckpt could not make the pair: it says why */
	int r = rtnl_open(&nl);
	if (r >= 0)
		r = rtnl_link_get(&nl, 0, "lo", &lo);
	if (r >= 0)
		r = rtnl_link_set(&nl, lo.index, 0, true);
	if (r >= 0)
		r = rtnl_link_get(&nl, 0, RUN_NET_INSIDE, &eth);
	if (r >= 0) {
		struct rtnl_addr a = { .family = AF_INET, .index = eth.index, .prefixlen = n->plen };
		put4(a.addr, n->net + 2);
		r = rtnl_addr_add(&nl, &a);
	}
	if (r >= 0)
		r = rtnl_link_set(&nl, eth.index, 0, true);
	if (r >= 0) {
		struct rtnl_route rt = { .family = AF_INET, .oif = eth.index, .has_gw = true,
					 .protocol = RTPROT_BOOT, .scope = RT_SCOPE_UNIVERSE,
					 .type = RTN_UNICAST };
		put4(rt.gw, n->net + 1);
		r = rtnl_route_add(&nl, &rt);
	}
	rtnl_close(&nl);
	return r;
}

void run_net_close(struct run_net *n)
{
	for (int i = 0; i < 2; i++)
		if (n->go[i] >= 0)
			close(n->go[i]);
	n->go[0] = n->go[1] = -1;
}

void run_net_ended(const struct run_net *n, int st)
{
	if (!n->nat || (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
		return;
	int r = netnat_remove(n->host_if);
	if (r < 0 && r != -ENOENT)
		fprintf(stderr, "ckpt: run --nat: cannot remove the NAT table of %s: %s\n",
			n->host_if, strerror(-r));
}
