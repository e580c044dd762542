/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A little rtnetlink (NETLINK_ROUTE) over libmnl: what `ckpt run --net`
 * and the netns kind need of a network namespace's links, addresses and
 * routes. Nothing runs `ip`.
 *
 * Invariants:
 * - A struct rtnl is one netlink socket, opened in the network namespace of
 *   the calling thread at rtnl_open(); every request on it acts there
 *   (sockets keep the namespace they were made in).
 * - Each request waits for the kernel's answer: 0 or the -errno it gave.
 * - Nothing here logs and nothing is global.
 */
#ifndef CKPT_NET_RTNL_H
#define CKPT_NET_RTNL_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

struct mnl_socket;

struct rtnl {
	struct mnl_socket *nl;
	uint32_t seq, portid;
};

/* One link (RTM_NEWLINK). kind is IFLA_INFO_KIND ("veth"; "" for none,
 * which loopback is). peer: IFLA_LINK (a veth's peer index, in the
 * namespace IFLA_LINK_NETNSID names when peer_other_ns). */
struct rtnl_link {
	int index;
	char name[IF_NAMESIZE];
	char kind[32];
	unsigned flags; /* IFF_* */
	unsigned mtu;
	uint8_t mac[6];
	unsigned maclen;
	int peer;
	bool peer_other_ns;
	int peer_nsid; /* IFLA_LINK_NETNSID when peer_other_ns, else -1 */
};

/* One address (RTM_NEWADDR): the local address (IFA_LOCAL, else IFA_ADDRESS). */
struct rtnl_addr {
	int family; /* AF_INET, AF_INET6 */
	int index;
	unsigned prefixlen, flags, scope;
	uint8_t addr[16];
};

/* One route (RTM_NEWROUTE) of any table. */
struct rtnl_route {
	int family;
	unsigned dst_len, protocol, scope, type, priority;
	unsigned table; /* RTA_TABLE; 0 at rtnl_route_add: the main table */
	uint8_t dst[16], gw[16], prefsrc[16];
	bool has_gw, has_prefsrc;
	int oif; /* 0: none */
};

/* One policy routing rule (RTM_NEWRULE): its priority, table, action, and
 * whether it selects packets by anything (addresses, links, marks...); its
 * header and attributes as they came (attrs), to make it again. */
#define RTNL_RULE_ATTRS 24
struct rtnl_rule_attr {
	uint16_t type, len;
	uint8_t data[16];
};
struct rtnl_rule {
	int family;
	unsigned priority, table, action;
	bool selects;
	unsigned src_len, dst_len, tos, flags, hdr_table; /* fib_rule_hdr */
	unsigned nattrs;
	struct rtnl_rule_attr attrs[RTNL_RULE_ATTRS];
	/* an attribute not kept: its type (one these headers do not know, or
	 * too long), 0 if none */
	unsigned unknown;
};

/* One neighbour entry (RTM_NEWNEIGH). */
struct rtnl_neigh {
	int family;
	int index;
	unsigned state, flags; /* NUD_*, NTF_* */
	uint8_t dst[16];
	uint8_t lladdr[32];
	unsigned lladdr_len; /* 0: none */
};

/* Opens the socket in the calling thread's network namespace. */
int rtnl_open(struct rtnl *r) __attribute__((warn_unused_result));
/* Closes it; a closed or zeroed one is fine. */
void rtnl_close(struct rtnl *r);

/* Calls cb for each link, address (family AF_UNSPEC: both), route, rule,
 * neighbour entry; the first cb < 0 stops the dump and is returned. */
int rtnl_links(struct rtnl *r, int (*cb)(const struct rtnl_link *l, void *arg), void *arg)
	__attribute__((warn_unused_result));
int rtnl_addrs(struct rtnl *r, int (*cb)(const struct rtnl_addr *a, void *arg), void *arg)
	__attribute__((warn_unused_result));
int rtnl_routes(struct rtnl *r, int (*cb)(const struct rtnl_route *rt, void *arg), void *arg)
	__attribute__((warn_unused_result));
int rtnl_rules(struct rtnl *r, int (*cb)(const struct rtnl_rule *ru, void *arg), void *arg)
	__attribute__((warn_unused_result));
int rtnl_neighs(struct rtnl *r, int (*cb)(const struct rtnl_neigh *n, void *arg), void *arg)
	__attribute__((warn_unused_result));

/* The link of that index or name: -ENODEV if none. */
int rtnl_link_get(struct rtnl *r, int index, const char *name, struct rtnl_link *ret)
	__attribute__((warn_unused_result));

/*
 * A veth pair: name here (its mac if mac is not NULL), peer_name in the
 * namespace peer_ns_fd (-1: here too), with the index peer_index there (0:
 * any) and peer_mac. -EEXIST if a link has the name (or the index).
 */
int rtnl_veth_add(struct rtnl *r, const char *name, const uint8_t *mac, const char *peer_name,
		  const uint8_t *peer_mac, int peer_index, int peer_ns_fd)
	__attribute__((warn_unused_result));
/* The same, this end with the index index (0: any). */
int rtnl_veth_add_at(struct rtnl *r, const char *name, const uint8_t *mac, int index,
		     const char *peer_name, const uint8_t *peer_mac, int peer_index, int peer_ns_fd)
	__attribute__((warn_unused_result));
/* The id the socket's namespace gives the namespace of ns_fd (what
 * IFLA_LINK_NETNSID of its links names it by): -ENOENT if it gave none. */
int rtnl_nsid(struct rtnl *r, int ns_fd) __attribute__((warn_unused_result));
/* Sets a link's mtu (0: leaves it) and up or down. */
int rtnl_link_set(struct rtnl *r, int index, unsigned mtu, bool up)
	__attribute__((warn_unused_result));
/* Deletes a link (a veth: both ends). */
int rtnl_link_del(struct rtnl *r, int index) __attribute__((warn_unused_result));
/* Adds an address (IPv6 ones without duplicate address detection, so that
 * they can be bound at once). */
int rtnl_addr_add(struct rtnl *r, const struct rtnl_addr *a) __attribute__((warn_unused_result));
/* Deletes the address a->addr/a->prefixlen of the link a->index:
 * -EADDRNOTAVAIL if it has none such. */
int rtnl_addr_del(struct rtnl *r, const struct rtnl_addr *a) __attribute__((warn_unused_result));
/* The same request, built at buf for another to send (several may follow
 * one another in one datagram; no answer is asked for): its length, or 0
 * if it does not fit in room. */
#define RTNL_ADDR_DEL_MAX 64
size_t rtnl_addr_del_msg(void *buf, size_t room, const struct rtnl_addr *a);
/* Adds a route (to the main table if rt->table is 0). */
int rtnl_route_add(struct rtnl *r, const struct rtnl_route *rt)
	__attribute__((warn_unused_result));

/* Adds a policy routing rule made of ru's header and attrs; deletes one
 * (the kernel finds it by what ru gives). */
int rtnl_rule_add(struct rtnl *r, const struct rtnl_rule *ru) __attribute__((warn_unused_result));
int rtnl_rule_del(struct rtnl *r, const struct rtnl_rule *ru) __attribute__((warn_unused_result));
/* Adds a neighbour entry (n->state, lladdr if n->lladdr_len). */
int rtnl_neigh_add(struct rtnl *r, const struct rtnl_neigh *n) __attribute__((warn_unused_result));

#endif
