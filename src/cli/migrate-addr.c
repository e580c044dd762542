/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The addresses that move with a migrated tree of the source's own network
 * namespace (no `ckpt run --net`): see migrate-addr.h.
 */
#include "cli/migrate-addr.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if_arp.h>
#include <netinet/icmp6.h>
#include <netpacket/packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/rtnl.h"
#include "util/cleanup.h"

/* ---- the source: which addresses ---------------------------------------- */

struct inodes {
	unsigned long *v;
	size_t n, cap;
};

static int add_inodes(pid_t pid, struct inodes *s)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	for (struct dirent *de; (de = readdir(d));) {
		char target[64];
		unsigned long ino;
		ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (sscanf(target, "socket:[%lu]", &ino) != 1)
			continue;
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 64;
			unsigned long *v = realloc(s->v, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			s->v = v, s->cap = cap;
		}
		s->v[s->n++] = ino;
	}
	return 0;
}

static bool has_inode(const struct inodes *s, unsigned long ino)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == ino)
			return true;
	return false;
}

/* "0100007F:1F90" (v4: the u32 as memory holds it) or 32 hex digits (v6). */
static bool parse_local(const char *text, bool v6, int *family, uint8_t *addr)
{
	unsigned int w[4], port;
	if (!v6) {
		if (sscanf(text, "%8X:%X", &w[0], &port) != 2)
			return false;
		*family = AF_INET;
		memcpy(addr, w, 4);
		return true;
	}
	if (sscanf(text, "%8X%8X%8X%8X:%X", &w[0], &w[1], &w[2], &w[3], &port) != 5)
		return false;
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	if (!memcmp(w, mapped, 12)) { /* a v4-mapped address is IPv4 on the wire */
		*family = AF_INET;
		memcpy(addr, (uint8_t *)w + 12, 4);
		return true;
	}
	*family = AF_INET6;
	memcpy(addr, w, 16);
	return true;
}

static bool movable(int family, const uint8_t *a)
{
	static const uint8_t zero[16], lo6[16] = {[15] = 1};
	if (family == AF_INET)
		return memcmp(a, zero, 4) && a[0] != 127;
	return memcmp(a, zero, 16) && memcmp(a, lo6, 16);
}

static int add_addr(int family, const uint8_t *a, struct ckpt_addr *out, size_t max, size_t *n)
{
	size_t len = family == AF_INET ? 4 : 16;
	for (size_t i = 0; i < *n; i++)
		if (out[i].family == family && !memcmp(out[i].addr, a, len))
			return 0;
	if (*n == max)
		return -E2BIG;
	memset(&out[*n], 0, sizeof(out[*n]));
	out[*n].family = family;
	memcpy(out[*n].addr, a, len);
	(*n)++;
	return 0;
}

struct find_link {
	struct ckpt_addr *a;
	bool found;
};

static int link_of(const struct rtnl_addr *ra, void *arg)
{
	struct find_link *f = arg;
	if (ra->family != f->a->family ||
	    memcmp(ra->addr, f->a->addr, ra->family == AF_INET ? 4 : 16))
		return 0;
	char name[IF_NAMESIZE] = "";
	if (!if_indextoname((unsigned)ra->index, name))
		return 0;
	snprintf(f->a->ifname, sizeof(f->a->ifname), "%s", name);
	f->a->prefixlen = ra->prefixlen;
	f->found = true;
	return 0;
}

int migrate_addrs_of_tree(const pid_t *pids, size_t npids, struct ckpt_addr *out, size_t max,
			  size_t *ret_n, char *why, size_t why_len)
{
	struct inodes s = {0};
	size_t n = 0;
	int r = 0;
	for (size_t i = 0; r >= 0 && i < npids; i++)
		r = add_inodes(pids[i], &s);
	static const char *const tables[] = {"tcp", "tcp6", "udp", "udp6", "raw", "raw6"};
	for (size_t t = 0; r >= 0 && s.n && t < sizeof(tables) / sizeof(*tables); t++) {
		char path[64], *line = NULL;
		size_t cap = 0;
		snprintf(path, sizeof(path), "/proc/%d/net/%s", pids[0], tables[t]);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		bool v6 = strchr(tables[t], '6') != NULL;
		for (bool first = true; r >= 0 && getline(&line, &cap, f) > 0; first = false) {
			char local[64];
			unsigned long ino;
			uint8_t a[16];
			int family;
			if (first || sscanf(line, " %*s %63s %*s %*s %*s %*s %*s %*s %*s %lu",
					    local, &ino) != 2)
				continue;
			if (!has_inode(&s, ino) || !parse_local(local, v6, &family, a) ||
			    !movable(family, a))
				continue;
			r = add_addr(family, a, out, max, &n);
		}
		free(line);
		fclose(f);
	}
	free(s.v);
	if (r < 0) {
		snprintf(why, why_len, "cannot list the tree's socket addresses: %s", strerror(-r));
		return r;
	}
	struct rtnl rt = {0};
	r = n ? rtnl_open(&rt) : 0;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct find_link f = {.a = &out[i]};
		r = rtnl_addrs(&rt, link_of, &f);
		if (r >= 0 && !f.found) {
			char text[INET6_ADDRSTRLEN] = "?";
			inet_ntop(out[i].family, out[i].addr, text, sizeof(text));
			snprintf(why, why_len,
				 "a socket of the tree has the address %s, which no link "
				 "of this host holds: it cannot move",
				 text);
			rtnl_close(&rt);
			return -EADDRNOTAVAIL;
		}
	}
	rtnl_close(&rt);
	if (r < 0) {
		snprintf(why, why_len, "cannot list this host's addresses: %s", strerror(-r));
		return r;
	}
	*ret_n = n;
	return 0;
}

int migrate_host_id(char *buf, size_t len)
{
	char boot[64] = "";
	struct stat st;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	bool ok = f && fgets(boot, sizeof(boot), f);
	if (f)
		fclose(f);
	boot[strcspn(boot, "\n ")] = 0;
	if (!ok || !boot[0] || stat("/proc/self/ns/net", &st) < 0)
		return -ENOENT;
	int n = snprintf(buf, len, "%s %lu:%lu", boot, (unsigned long)st.st_dev,
			 (unsigned long)st.st_ino);
	return n < 0 || (size_t)n >= len ? -EMSGSIZE : 0;
}

/* ---- the lines ------------------------------------------------------------ */

int migrate_addr_format(const struct ckpt_addr *a, char *buf, size_t len)
{
	char text[INET6_ADDRSTRLEN];
	if (!inet_ntop(a->family, a->addr, text, sizeof(text)))
		return -EINVAL;
	int n = snprintf(buf, len, "addr %s/%u %.*s\n", text, a->prefixlen, (int)sizeof(a->ifname),
			 a->ifname);
	return n < 0 || (size_t)n >= len ? -EMSGSIZE : 0;
}

int migrate_addr_parse(const char *line, struct ckpt_addr *a)
{
	char text[INET6_ADDRSTRLEN + 1], ifname[IF_NAMESIZE + 1];
	unsigned prefix;
	char end;
	memset(a, 0, sizeof(*a));
	if (sscanf(line, "addr %46[0-9a-fA-F.:]/%u %16s%c", text, &prefix, ifname, &end) != 3)
		return -EPROTO;
	if (inet_pton(AF_INET, text, a->addr) == 1)
		a->family = AF_INET;
	else if (inet_pton(AF_INET6, text, a->addr) == 1)
		a->family = AF_INET6;
	else
		return -EPROTO;
	if (prefix > (a->family == AF_INET ? 32u : 128u) || strlen(ifname) >= IF_NAMESIZE ||
	    !movable(a->family, a->addr))
		return -EPROTO;
	a->prefixlen = prefix;
	snprintf(a->ifname, sizeof(a->ifname), "%s", ifname);
	return 0;
}

/* ---- the target ----------------------------------------------------------- */

static int holds(const struct rtnl_addr *ra, void *arg)
{
	struct migrate_addr *m = arg;
	if (ra->family == m->a.family &&
	    !memcmp(ra->addr, m->a.addr, ra->family == AF_INET ? 4 : 16))
		m->index = ra->index, m->present = true;
	return 0;
}

int migrate_addrs_take(struct migrate_addr *v, size_t n, char *why, size_t why_len)
{
	struct rtnl rt = {0};
	int r = n ? rtnl_open(&rt) : 0;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct migrate_addr *m = &v[i];
		char text[INET6_ADDRSTRLEN] = "?", ifname[IF_NAMESIZE + 1];
		inet_ntop(m->a.family, m->a.addr, text, sizeof(text));
		snprintf(ifname, sizeof(ifname), "%.*s", (int)sizeof(m->a.ifname), m->a.ifname);
		r = rtnl_addrs(&rt, holds, m);
		if (r < 0 || m->present)
			continue;
		m->index = (int)if_nametoindex(ifname);
		if (!m->index) {
			snprintf(why, why_len,
				 "address %s/%u: no link %s on this host to put it on", text,
				 m->a.prefixlen, ifname);
			r = -ENODEV;
			break;
		}
		struct rtnl_addr ra = {
		    .family = m->a.family, .index = m->index, .prefixlen = m->a.prefixlen};
		memcpy(ra.addr, m->a.addr, sizeof(ra.addr));
		r = rtnl_addr_add(&rt, &ra);
		if (r < 0) {
			snprintf(why, why_len, "address %s/%u: cannot add it to %s: %s", text,
				 m->a.prefixlen, ifname, strerror(-r));
			break;
		}
		m->added = true;
	}
	rtnl_close(&rt);
	if (r < 0) {
		if (!why[0])
			snprintf(why, why_len, "cannot list this host's addresses: %s",
				 strerror(-r));
		migrate_addrs_drop(v, n);
	}
	return r;
}

void migrate_addrs_drop(struct migrate_addr *v, size_t n)
{
	struct rtnl rt = {0};
	bool open = false;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].added)
			continue;
		if (!open && rtnl_open(&rt) < 0)
			return;
		open = true;
		struct rtnl_addr ra = {
		    .family = v[i].a.family, .index = v[i].index, .prefixlen = v[i].a.prefixlen};
		memcpy(ra.addr, v[i].a.addr, sizeof(ra.addr));
		int e = rtnl_addr_del(&rt, &ra); /* gone already, or nothing more to do */
		(void)e;
		v[i].added = false;
	}
	rtnl_close(&rt);
}

/* The link of m, into l: 1 if it is an Ethernet link that answers ARP
 * (an announcement makes sense), 0 if not, or -errno. */
static int announcing_link(const struct migrate_addr *m, struct rtnl_link *l)
{
	struct rtnl rt = {0};
	int r = rtnl_open(&rt);
	if (r >= 0)
		r = rtnl_link_get(&rt, m->index, NULL, l);
	rtnl_close(&rt);
	if (r < 0)
		return r;
	return l->maclen == ETH_ALEN && !(l->flags & IFF_NOARP);
}

/* A gratuitous ARP request (sender and target: the address) from the link's
 * own mac: the neighbours that had the source's mac for it take ours. */
static int garp(const struct migrate_addr *m)
{
	struct rtnl_link l;
	int r = announcing_link(m, &l);
	if (r <= 0)
		return r;
	_cleanup_close_ int s = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ARP));
	if (s < 0)
		return -errno;
	struct {
		struct arphdr h;
		uint8_t sha[ETH_ALEN], sip[4], tha[ETH_ALEN], tip[4];
	} __attribute__((packed)) p = {
	    .h = {.ar_hrd = htons(ARPHRD_ETHER),
		  .ar_pro = htons(ETH_P_IP),
		  .ar_hln = ETH_ALEN,
		  .ar_pln = 4,
		  .ar_op = htons(ARPOP_REQUEST)},
	};
	memcpy(p.sha, l.mac, ETH_ALEN);
	memcpy(p.sip, m->a.addr, 4);
	memcpy(p.tip, m->a.addr, 4);
	struct sockaddr_ll to = {.sll_family = AF_PACKET,
				 .sll_protocol = htons(ETH_P_ARP),
				 .sll_ifindex = m->index,
				 .sll_halen = ETH_ALEN};
	memset(to.sll_addr, 0xff, ETH_ALEN);
	for (int i = 0; i < 2; i++)
		if (sendto(s, &p, sizeof(p), 0, (struct sockaddr *)&to, sizeof(to)) < 0)
			return -errno;
	return 0;
}

/* An unsolicited neighbour advertisement (RFC 4861 7.2.6: override, to all
 * nodes, from the address, hop limit 255) with the link's mac: IPv6's
 * gratuitous ARP. The kernel fills in the ICMPv6 checksum. */
static int unsolicited_na(const struct migrate_addr *m)
{
	struct rtnl_link l;
	int r = announcing_link(m, &l);
	if (r <= 0)
		return r;
	_cleanup_close_ int s = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6);
	if (s < 0)
		return -errno;
	int hops = 255, ifindex = m->index;
	struct sockaddr_in6 from = {.sin6_family = AF_INET6};
	memcpy(&from.sin6_addr, m->a.addr, 16);
	if (setsockopt(s, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof(hops)) < 0 ||
	    setsockopt(s, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof(ifindex)) < 0 ||
	    bind(s, (struct sockaddr *)&from, sizeof(from)) < 0)
		return -errno;
	struct {
		struct nd_neighbor_advert na;
		struct nd_opt_hdr opt;
		uint8_t mac[ETH_ALEN];
	} __attribute__((packed)) p = {
	    .na = {.nd_na_type = ND_NEIGHBOR_ADVERT, .nd_na_flags_reserved = ND_NA_FLAG_OVERRIDE},
	    .opt = {.nd_opt_type = ND_OPT_TARGET_LINKADDR, .nd_opt_len = 1},
	};
	memcpy(&p.na.nd_na_target, m->a.addr, 16);
	memcpy(p.mac, l.mac, ETH_ALEN);
	struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_scope_id = (uint32_t)m->index};
	inet_pton(AF_INET6, "ff02::1", &to.sin6_addr);
	for (int i = 0; i < 2; i++)
		if (sendto(s, &p, sizeof(p), 0, (struct sockaddr *)&to, sizeof(to)) < 0)
			return -errno;
	return 0;
}

void migrate_addrs_announce(const struct migrate_addr *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!v[i].added)
			continue;
		bool v4 = v[i].a.family == AF_INET;
		int r = v4 ? garp(&v[i]) : unsolicited_na(&v[i]);
		if (r < 0) {
			char text[INET6_ADDRSTRLEN] = "?";
			inet_ntop(v[i].a.family, v[i].a.addr, text, sizeof(text));
			fprintf(stderr, "ckpt: address %s: cannot announce it (%s): %s\n", text,
				v4 ? "gratuitous ARP" : "neighbour advertisement", strerror(-r));
		}
	}
}
