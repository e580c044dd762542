/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rtnetlink over libmnl (see rtnl.h): one request at a time, its answer
 * read until the kernel's ack (or the end of a dump).
 */
#include "net/rtnl.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <net/if.h>
#include <linux/if_addr.h>
#include <linux/fib_rules.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

int rtnl_open(struct rtnl *r)
{
	r->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!r->nl)
		return -errno;
	if (mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int e = -errno;
		mnl_socket_close(r->nl);
		r->nl = NULL;
		return e;
	}
	r->portid = mnl_socket_get_portid(r->nl);
	r->seq = (uint32_t)time(NULL);
	return 0;
}

void rtnl_close(struct rtnl *r)
{
	if (r->nl)
		mnl_socket_close(r->nl);
	r->nl = NULL;
}

/* Sends nlh and reads the answer, each message through cb; 0 or -errno. */
static int talk(struct rtnl *r, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	char buf[32768]; /* a dump's messages come in batches this big */
	nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));
		if (n < 0)
			return -errno;
		int ret = mnl_cb_run(buf, (size_t)n, r->seq, r->portid, cb, data);
		if (ret < 0)
			return -errno;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

static struct nlmsghdr *new_msg(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	return nlh;
}

/* ---- dumps ---- */

struct dump {
	void *cb;
	void *arg;
	int ret; /* a callback's failure */
};

/* tb[0] holds the table's size (the kernel may know attributes newer
 * than these headers: those are skipped) */
static int attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(a);
	if (type && type < (uintptr_t)tb[0])
		tb[type] = a;
	return MNL_CB_OK;
}

#define TB(name, max) const struct nlattr *name[(max) + 1] = { (const void *)(uintptr_t)((max) + 1) }

static void parse_linkinfo(const struct nlattr *info, struct rtnl_link *l)
{
	TB(tb, IFLA_INFO_MAX);
	if (mnl_attr_parse_nested(info, attr_cb, tb) < 0 || !tb[IFLA_INFO_KIND])
		return;
	const char *kind = mnl_attr_get_str(tb[IFLA_INFO_KIND]);
	size_t n = strnlen(kind, mnl_attr_get_payload_len(tb[IFLA_INFO_KIND]));
	if (n >= sizeof(l->kind))
		n = sizeof(l->kind) - 1;
	memcpy(l->kind, kind, n);
	l->kind[n] = 0;
}

static int link_parse(const struct nlmsghdr *nlh, struct rtnl_link *l)
{
	const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	TB(tb, IFLA_MAX);
	memset(l, 0, sizeof(*l));
	if (mnl_attr_parse(nlh, sizeof(*ifm), attr_cb, tb) < 0)
		return -EINVAL;
	l->index = ifm->ifi_index;
	l->flags = ifm->ifi_flags;
	if (tb[IFLA_IFNAME]) {
		const char *s = mnl_attr_get_str(tb[IFLA_IFNAME]);
		size_t n = strnlen(s, mnl_attr_get_payload_len(tb[IFLA_IFNAME]));
		if (n >= sizeof(l->name))
			return -EINVAL;
		memcpy(l->name, s, n);
	}
	if (tb[IFLA_MTU] && mnl_attr_get_payload_len(tb[IFLA_MTU]) == 4)
		l->mtu = mnl_attr_get_u32(tb[IFLA_MTU]);
	if (tb[IFLA_ADDRESS] && mnl_attr_get_payload_len(tb[IFLA_ADDRESS]) <= sizeof(l->mac)) {
		l->maclen = mnl_attr_get_payload_len(tb[IFLA_ADDRESS]);
		memcpy(l->mac, mnl_attr_get_payload(tb[IFLA_ADDRESS]), l->maclen);
	}
	if (tb[IFLA_LINK] && mnl_attr_get_payload_len(tb[IFLA_LINK]) == 4)
		l->peer = (int)mnl_attr_get_u32(tb[IFLA_LINK]);
	l->peer_other_ns = tb[IFLA_LINK_NETNSID] != NULL;
	l->peer_nsid = l->peer_other_ns && mnl_attr_get_payload_len(tb[IFLA_LINK_NETNSID]) == 4
			       ? (int)mnl_attr_get_u32(tb[IFLA_LINK_NETNSID])
			       : -1;
	if (tb[IFLA_LINKINFO])
		parse_linkinfo(tb[IFLA_LINKINFO], l);
	return 0;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct dump *d = data;
	struct rtnl_link l;
	if (nlh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	if ((d->ret = link_parse(nlh, &l)) < 0)
		return MNL_CB_ERROR;
	d->ret = ((int (*)(const struct rtnl_link *, void *))d->cb)(&l, d->arg);
	return d->ret < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

static int dump(struct rtnl *r, uint16_t type, size_t hdr, int family, mnl_cb_t cb,
		struct dump *d)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, type, NLM_F_DUMP);
	struct rtgenmsg *g = mnl_nlmsg_put_extra_header(nlh, hdr);
	g->rtgen_family = (unsigned char)family;
	d->ret = 0;
	int e = talk(r, nlh, cb, d);
	return d->ret < 0 ? d->ret : e;
}

int rtnl_links(struct rtnl *r, int (*cb)(const struct rtnl_link *l, void *arg), void *arg)
{
	struct dump d = { .cb = (void *)cb, .arg = arg };
	return dump(r, RTM_GETLINK, sizeof(struct ifinfomsg), AF_UNSPEC, link_cb, &d);
}

static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
	struct dump *d = data;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	TB(tb, IFA_MAX);
	if (nlh->nlmsg_type != RTM_NEWADDR)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(*ifa), attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	struct rtnl_addr a = { .family = ifa->ifa_family, .index = (int)ifa->ifa_index,
			       .prefixlen = ifa->ifa_prefixlen, .flags = ifa->ifa_flags,
			       .scope = ifa->ifa_scope };
	size_t len = a.family == AF_INET ? 4 : a.family == AF_INET6 ? 16 : 0;
	const struct nlattr *at = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if (!len || !at || mnl_attr_get_payload_len(at) != len)
		return MNL_CB_OK;
	memcpy(a.addr, mnl_attr_get_payload(at), len);
	if (tb[IFA_FLAGS] && mnl_attr_get_payload_len(tb[IFA_FLAGS]) == 4)
		a.flags = mnl_attr_get_u32(tb[IFA_FLAGS]);
	d->ret = ((int (*)(const struct rtnl_addr *, void *))d->cb)(&a, d->arg);
	return d->ret < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

int rtnl_addrs(struct rtnl *r, int (*cb)(const struct rtnl_addr *a, void *arg), void *arg)
{
	struct dump d = { .cb = (void *)cb, .arg = arg };
	return dump(r, RTM_GETADDR, sizeof(struct ifaddrmsg), AF_UNSPEC, addr_cb, &d);
}

static void copy_addr(const struct nlattr *at, uint8_t *to, size_t len, bool *has)
{
	if (!at || mnl_attr_get_payload_len(at) != len)
		return;
	memcpy(to, mnl_attr_get_payload(at), len);
	if (has)
		*has = true;
}

static int route_cb(const struct nlmsghdr *nlh, void *data)
{
	struct dump *d = data;
	const struct rtmsg *rm = mnl_nlmsg_get_payload(nlh);
	TB(tb, RTA_MAX);
	if (nlh->nlmsg_type != RTM_NEWROUTE)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(*rm), attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	uint32_t table = tb[RTA_TABLE] ? mnl_attr_get_u32(tb[RTA_TABLE]) : rm->rtm_table;
	size_t len = rm->rtm_family == AF_INET ? 4 : rm->rtm_family == AF_INET6 ? 16 : 0;
	if (!len)
		return MNL_CB_OK;
	struct rtnl_route rt = { .family = rm->rtm_family, .dst_len = rm->rtm_dst_len,
				 .protocol = rm->rtm_protocol, .scope = rm->rtm_scope,
				 .type = rm->rtm_type, .table = table };
	copy_addr(tb[RTA_DST], rt.dst, len, NULL);
	copy_addr(tb[RTA_GATEWAY], rt.gw, len, &rt.has_gw);
	copy_addr(tb[RTA_PREFSRC], rt.prefsrc, len, &rt.has_prefsrc);
	if (tb[RTA_OIF])
		rt.oif = (int)mnl_attr_get_u32(tb[RTA_OIF]);
	if (tb[RTA_PRIORITY])
		rt.priority = mnl_attr_get_u32(tb[RTA_PRIORITY]);
	d->ret = ((int (*)(const struct rtnl_route *, void *))d->cb)(&rt, d->arg);
	return d->ret < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

int rtnl_routes(struct rtnl *r, int (*cb)(const struct rtnl_route *rt, void *arg), void *arg)
{
	struct dump d = { .cb = (void *)cb, .arg = arg };
	return dump(r, RTM_GETROUTE, sizeof(struct rtmsg), AF_UNSPEC, route_cb, &d);
}

/* Attributes a rule is made again with (FRA_PAD and the unused ones are
 * the kernel's own). */
static bool rule_attr_kept(uint16_t type)
{
	return type && type <= FRA_MAX && type != FRA_PAD && type != FRA_UNUSED2 &&
	       type != FRA_UNUSED3 && type != FRA_UNUSED4 && type != FRA_UNUSED5;
}

static int rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct dump *d = data;
	const struct fib_rule_hdr *fh = mnl_nlmsg_get_payload(nlh);
	TB(tb, FRA_MAX);
	if (nlh->nlmsg_type != RTM_NEWRULE)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(*fh), attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	struct rtnl_rule ru = { .family = fh->family, .action = fh->action, .table = fh->table,
				.src_len = fh->src_len, .dst_len = fh->dst_len, .tos = fh->tos,
				.flags = fh->flags, .hdr_table = fh->table };
	if (tb[FRA_TABLE] && mnl_attr_get_payload_len(tb[FRA_TABLE]) == 4)
		ru.table = mnl_attr_get_u32(tb[FRA_TABLE]);
	if (tb[FRA_PRIORITY] && mnl_attr_get_payload_len(tb[FRA_PRIORITY]) == 4)
		ru.priority = mnl_attr_get_u32(tb[FRA_PRIORITY]);
	static const int selectors[] = { FRA_DST, FRA_SRC, FRA_IIFNAME, FRA_OIFNAME, FRA_FWMARK,
					 FRA_FWMASK, FRA_UID_RANGE, FRA_IP_PROTO, FRA_SPORT_RANGE,
					 FRA_DPORT_RANGE, FRA_L3MDEV, FRA_TUN_ID, FRA_GOTO };
	static const int suppress[] = { FRA_SUPPRESS_PREFIXLEN, FRA_SUPPRESS_IFGROUP };
	ru.selects = fh->src_len || fh->dst_len || fh->tos || (fh->flags & FIB_RULE_INVERT);
	for (size_t i = 0; i < sizeof(selectors) / sizeof(*selectors); i++)
		ru.selects |= tb[selectors[i]] != NULL;
	for (size_t i = 0; i < sizeof(suppress) / sizeof(*suppress); i++) /* ~0: not set */
		ru.selects |= tb[suppress[i]] && mnl_attr_get_payload_len(tb[suppress[i]]) == 4 &&
			      mnl_attr_get_u32(tb[suppress[i]]) != ~0u;
	/* every attribute, as it came */
	const struct nlattr *a;
	mnl_attr_for_each(a, nlh, sizeof(*fh)) {
		uint16_t type = mnl_attr_get_type(a), len = mnl_attr_get_payload_len(a);
		if (type == FRA_PAD)
			continue;
		if (!rule_attr_kept(type) || len > sizeof(ru.attrs[0].data) ||
		    ru.nattrs == RTNL_RULE_ATTRS) {
			ru.selects = true;
			if (!ru.unknown)
				ru.unknown = type;
			continue;
		}
		struct rtnl_rule_attr *k = &ru.attrs[ru.nattrs++];
		k->type = type;
		k->len = len;
		memcpy(k->data, mnl_attr_get_payload(a), len);
	}
	d->ret = ((int (*)(const struct rtnl_rule *, void *))d->cb)(&ru, d->arg);
	return d->ret < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

int rtnl_rules(struct rtnl *r, int (*cb)(const struct rtnl_rule *ru, void *arg), void *arg)
{
	struct dump d = { .cb = (void *)cb, .arg = arg };
	return dump(r, RTM_GETRULE, sizeof(struct fib_rule_hdr), AF_UNSPEC, rule_cb, &d);
}

static int neigh_cb(const struct nlmsghdr *nlh, void *data)
{
	struct dump *d = data;
	const struct ndmsg *nd = mnl_nlmsg_get_payload(nlh);
	TB(tb, NDA_MAX);
	if (nlh->nlmsg_type != RTM_NEWNEIGH)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(*nd), attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	size_t len = nd->ndm_family == AF_INET ? 4 : nd->ndm_family == AF_INET6 ? 16 : 0;
	struct rtnl_neigh n = { .family = nd->ndm_family, .index = nd->ndm_ifindex,
				.state = nd->ndm_state, .flags = nd->ndm_flags };
	copy_addr(tb[NDA_DST], n.dst, len, NULL);
	if (tb[NDA_LLADDR] && mnl_attr_get_payload_len(tb[NDA_LLADDR]) <= sizeof(n.lladdr)) {
		n.lladdr_len = mnl_attr_get_payload_len(tb[NDA_LLADDR]);
		memcpy(n.lladdr, mnl_attr_get_payload(tb[NDA_LLADDR]), n.lladdr_len);
	}
	d->ret = ((int (*)(const struct rtnl_neigh *, void *))d->cb)(&n, d->arg);
	return d->ret < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

int rtnl_neighs(struct rtnl *r, int (*cb)(const struct rtnl_neigh *n, void *arg), void *arg)
{
	struct dump d = { .cb = (void *)cb, .arg = arg };
	return dump(r, RTM_GETNEIGH, sizeof(struct ndmsg), AF_UNSPEC, neigh_cb, &d);
}

static int get_cb(const struct nlmsghdr *nlh, void *data)
{
	if (nlh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	return link_parse(nlh, data) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

int rtnl_link_get(struct rtnl *r, int index, const char *name, struct rtnl_link *ret)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, RTM_GETLINK, NLM_F_ACK);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_index = index;
	if (name)
		mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	struct rtnl_link l = { 0 };
	int e = talk(r, nlh, get_cb, &l);
	if (e == 0 && !l.index)
		e = -ENODEV;
	if (e == 0)
		*ret = l;
	return e;
}

static int nsid_cb(const struct nlmsghdr *nlh, void *data)
{
	int *nsid = data;
	TB(tb, NETNSA_MAX);
	if (nlh->nlmsg_type != RTM_NEWNSID ||
	    mnl_attr_parse(nlh, sizeof(struct rtgenmsg), attr_cb, tb) < 0)
		return MNL_CB_OK;
	if (tb[NETNSA_NSID] && mnl_attr_get_payload_len(tb[NETNSA_NSID]) == 4)
		*nsid = (int)mnl_attr_get_u32(tb[NETNSA_NSID]);
	return MNL_CB_OK;
}

int rtnl_nsid(struct rtnl *r, int ns_fd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, RTM_GETNSID, NLM_F_ACK);
	struct rtgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)ns_fd);
	int nsid = -1;
	int e = talk(r, nlh, nsid_cb, &nsid);
	return e < 0 ? e : nsid < 0 ? -ENOENT : nsid;
}

/* ---- changes ---- */

static int request(struct rtnl *r, struct nlmsghdr *nlh)
{
	nlh->nlmsg_flags |= NLM_F_ACK;
	return talk(r, nlh, NULL, NULL);
}

int rtnl_veth_add(struct rtnl *r, const char *name, const uint8_t *mac, const char *peer_name,
		  const uint8_t *peer_mac, int peer_index, int peer_ns_fd)
{
	return rtnl_veth_add_at(r, name, mac, 0, peer_name, peer_mac, peer_index, peer_ns_fd);
}

int rtnl_veth_add_at(struct rtnl *r, const char *name, const uint8_t *mac, int index,
		     const char *peer_name, const uint8_t *peer_mac, int peer_index, int peer_ns_fd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_index = index;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	if (mac)
		mnl_attr_put(nlh, IFLA_ADDRESS, 6, mac);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	struct ifinfomsg *pm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pm));
	pm->ifi_index = peer_index;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_name);
	if (peer_mac)
		mnl_attr_put(nlh, IFLA_ADDRESS, 6, peer_mac);
	if (peer_ns_fd >= 0)
		mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_ns_fd);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return request(r, nlh);
}

int rtnl_link_set(struct rtnl *r, int index, unsigned mtu, bool up)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWLINK, 0);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_index = index;
	ifm->ifi_change = IFF_UP;
	ifm->ifi_flags = up ? IFF_UP : 0;
	if (mtu)
		mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
	return request(r, nlh);
}

int rtnl_link_del(struct rtnl *r, int index)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, RTM_DELLINK, 0);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_index = index;
	return request(r, nlh);
}

int rtnl_addr_add(struct rtnl *r, const struct rtnl_addr *a)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	size_t len = a->family == AF_INET ? 4 : 16;
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	unsigned flags = a->flags & (IFA_F_NODAD | IFA_F_NOPREFIXROUTE | IFA_F_PERMANENT);
	if (a->family == AF_INET6)
		flags |= IFA_F_NODAD;
	ifa->ifa_family = (uint8_t)a->family;
	ifa->ifa_prefixlen = (uint8_t)a->prefixlen;
	ifa->ifa_scope = (uint8_t)a->scope;
	ifa->ifa_index = (uint32_t)a->index;
	ifa->ifa_flags = (uint8_t)flags;
	mnl_attr_put(nlh, IFA_LOCAL, len, a->addr);
	mnl_attr_put(nlh, IFA_ADDRESS, len, a->addr);
	mnl_attr_put_u32(nlh, IFA_FLAGS, flags);
	return request(r, nlh);
}

/* RTM_DELADDR of a, built at buf (room for it: RTNL_ADDR_DEL_MAX). */
static struct nlmsghdr *addr_del_msg(char *buf, const struct rtnl_addr *a)
{
	size_t len = a->family == AF_INET ? 4 : 16;
	struct nlmsghdr *nlh = new_msg(buf, RTM_DELADDR, 0);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = (uint8_t)a->family;
	ifa->ifa_prefixlen = (uint8_t)a->prefixlen;
	ifa->ifa_index = (uint32_t)a->index;
	mnl_attr_put(nlh, IFA_LOCAL, len, a->addr);
	return nlh;
}

int rtnl_addr_del(struct rtnl *r, const struct rtnl_addr *a)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	return request(r, addr_del_msg(buf, a));
}

size_t rtnl_addr_del_msg(void *buf, size_t room, const struct rtnl_addr *a)
{
	char one[RTNL_ADDR_DEL_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	memset(one, 0, sizeof(one));
	struct nlmsghdr *nlh = addr_del_msg(one, a);
	size_t len = NLMSG_ALIGN(nlh->nlmsg_len);
	if (len > room)
		return 0;
	memcpy(buf, one, len);
	return len;
}

int rtnl_route_add(struct rtnl *r, const struct rtnl_route *rt)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	size_t len = rt->family == AF_INET ? 4 : 16;
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
	struct rtmsg *rm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rm));
	rm->rtm_family = (uint8_t)rt->family;
	rm->rtm_dst_len = (uint8_t)rt->dst_len;
	uint32_t table = rt->table ? rt->table : RT_TABLE_MAIN;
	rm->rtm_table = (uint8_t)(table < 256 ? table : RT_TABLE_UNSPEC);
	rm->rtm_protocol = (uint8_t)(rt->protocol ? rt->protocol : RTPROT_BOOT);
	rm->rtm_scope = (uint8_t)rt->scope;
	rm->rtm_type = (uint8_t)(rt->type ? rt->type : RTN_UNICAST);
	if (rt->dst_len)
		mnl_attr_put(nlh, RTA_DST, len, rt->dst);
	if (rt->has_gw)
		mnl_attr_put(nlh, RTA_GATEWAY, len, rt->gw);
	if (rt->has_prefsrc)
		mnl_attr_put(nlh, RTA_PREFSRC, len, rt->prefsrc);
	if (rt->oif)
		mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)rt->oif);
	if (rt->priority)
		mnl_attr_put_u32(nlh, RTA_PRIORITY, rt->priority);
	mnl_attr_put_u32(nlh, RTA_TABLE, table);
	return request(r, nlh);
}

static int rule_req(struct rtnl *r, const struct rtnl_rule *ru, uint16_t type, uint16_t flags)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, type, flags);
	struct fib_rule_hdr *fh = mnl_nlmsg_put_extra_header(nlh, sizeof(*fh));
	fh->family = (uint8_t)ru->family;
	fh->src_len = (uint8_t)ru->src_len;
	fh->dst_len = (uint8_t)ru->dst_len;
	fh->tos = (uint8_t)ru->tos;
	fh->table = (uint8_t)ru->hdr_table;
	fh->action = (uint8_t)ru->action;
	fh->flags = ru->flags;
	for (unsigned i = 0; i < ru->nattrs && i < RTNL_RULE_ATTRS; i++)
		mnl_attr_put(nlh, ru->attrs[i].type, ru->attrs[i].len, ru->attrs[i].data);
	return request(r, nlh);
}

int rtnl_rule_add(struct rtnl *r, const struct rtnl_rule *ru)
{
	return rule_req(r, ru, RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL);
}

int rtnl_rule_del(struct rtnl *r, const struct rtnl_rule *ru)
{
	return rule_req(r, ru, RTM_DELRULE, 0);
}

int rtnl_neigh_add(struct rtnl *r, const struct rtnl_neigh *n)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE);
	struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof(*nd));
	nd->ndm_family = (uint8_t)n->family;
	nd->ndm_ifindex = n->index;
	nd->ndm_state = (uint16_t)n->state;
	nd->ndm_flags = (uint8_t)n->flags;
	mnl_attr_put(nlh, NDA_DST, n->family == AF_INET ? 4 : 16, n->dst);
	if (n->lladdr_len)
		mnl_attr_put(nlh, NDA_LLADDR, n->lladdr_len, n->lladdr);
	return request(r, nlh);
}
