/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The network lock in checkpoint and restart (see netlock.h).
 *
 * At checkpoint the connections are found when the tree is frozen, before
 * any kind has looked at a socket: every socket inode the tree's processes
 * hold (/proc/PID/fd) that /proc/ROOT/net/tcp or tcp6 lists with a peer
 * (any state but LISTEN and CLOSE) is one connection, its local and remote
 * address from that line. The root's network namespace is the lock's;
 * each other namespace of the tree's tasks that has connections or ports
 * gets one of the same name (lock_others), and so at restart each other
 * namespace of the image with connections (rst_netlock_add_ns).
 * When it is ckpt's own, TCP's sockets come from a sock_diag dump instead
 * of that text (the same fields, no text printed and parsed back).
 */
#include "core/netlock.h"
#include "kinds/fdtable.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/inet-move.h"
#include "kinds/netns.h"
#include "net/ct.h"
#include "net/diag.h"
#include <linux/rtnetlink.h>
#include "net/rtnl.h"
#include "net/lock.h"
#include "util/cleanup.h"
#include "util/userns.h"

struct inodes {
	unsigned long *v;
	size_t n, cap;
};

static int cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

/* The socket inodes of t's fds, appended (fdtable_links: read once a
 * task for this pass and the collect's). */
static int socket_inodes(struct task *t, struct inodes *s)
{
	const struct fd_link *l;
	size_t n;
	int r = fdtable_links(t, &l, &n);
	for (size_t i = 0; r == 0 && i < n; i++) {
		unsigned long ino;
		if (strncmp(l[i].link, "socket:[", 8) || sscanf(l[i].link, "socket:[%lu]", &ino) != 1)
			continue;
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 64;
			unsigned long *v = realloc(s->v, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			s->v = v;
			s->cap = cap;
		}
		s->v[s->n++] = ino;
	}
	return r;
}

/* "0100007F:1F90" (tcp) or 32 hex digits and a port (tcp6) into sa. */
static bool parse_addr(const char *text, bool v6, struct sockaddr_storage *sa)
{
	unsigned int port;
	memset(sa, 0, sizeof(*sa));
	if (!v6) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;
		unsigned int a;
		if (sscanf(text, "%8X:%X", &a, &port) != 2)
			return false;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = a; /* printed as the u32 in memory */
		in->sin_port = htons((uint16_t)port);
		return true;
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
	unsigned int w[4];
	if (sscanf(text, "%8X%8X%8X%8X:%X", &w[0], &w[1], &w[2], &w[3], &port) != 5)
		return false;
	in6->sin6_family = AF_INET6;
	memcpy(&in6->sin6_addr, w, 16);
	in6->sin6_port = htons((uint16_t)port);
	return true;
}

/* One socket of the tree, in state (TCP's numbers), bound to l, with
 * peer rm: its connection, or its port (a listener, any UDP socket). */
static int add_sock(struct netlock *nl, bool ports, bool udp, unsigned state,
		    const struct sockaddr_storage *l, const struct sockaddr_storage *rm)
{
	/* a UDP socket (bound) or a listener (0x0A): its port; 0x07 CLOSE:
	 * nothing */
	if (udp || state == 0x0a) {
		uint16_t port = l->ss_family == AF_INET6
					? ntohs(((const struct sockaddr_in6 *)l)->sin6_port)
					: ntohs(((const struct sockaddr_in *)l)->sin_port);
		return port && ports ? netlock_add_port(nl, udp ? IPPROTO_UDP : IPPROTO_TCP, port)
				     : 0;
	}
	if (state == 0x07)
		return 0;
	return netlock_add(nl, (const struct sockaddr *)l, (const struct sockaddr *)rm);
}

struct seen_set {
	struct tcp_seen *v;
	size_t n, cap;
};

struct diag_add {
	struct netlock *nl;
	bool ports;
	const struct inodes *s;
	struct seen_set *seen; /* what the dump says of the tree's sockets */
};

/* One socket of the dump: the tree's (its inode one of s) is added. */
static int add_diag_sock(const struct inet_diag_msg *m, const struct rtattr *a, size_t alen,
			 void *arg)
{
	const struct diag_add *d = arg;
	unsigned long ino = m->idiag_inode;
	if (!ino || !bsearch(&ino, d->s->v, d->s->n, sizeof(*d->s->v), cmp_ul))
		return 0;
	struct seen_set *ss = d->seen;
	if (ss && ss->n == ss->cap) {
		size_t cap = ss->cap ? 2 * ss->cap : 256;
		struct tcp_seen *v = realloc(ss->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ss->v = v;
		ss->cap = cap;
	}
	if (ss) {
		struct tcp_seen *ts = &ss->v[ss->n++];
		*ts = (struct tcp_seen){ ino, m->idiag_family, m->idiag_state,
					 ntohs(m->id.idiag_sport), ntohs(m->id.idiag_dport) };
		memcpy(ts->src, m->id.idiag_src, 16);
		memcpy(ts->dst, m->id.idiag_dst, 16);
		/* options the kernel says with every socket (SOCKOPT, Linux
		 * 5.10) or when asked (TOS): getsockopt calls fewer in inet */
		unsigned int left = (unsigned int)alen;
		for (; RTA_OK(a, left); a = RTA_NEXT(a, left)) {
			if (a->rta_type == INET_DIAG_TOS && RTA_PAYLOAD(a) >= 1) {
				ts->tos = *(const uint8_t *)RTA_DATA(a);
				ts->has_tos = true;
			} else if (a->rta_type == INET_DIAG_SOCKOPT &&
				   RTA_PAYLOAD(a) >= sizeof(struct inet_diag_sockopt)) {
				struct inet_diag_sockopt o;
				memcpy(&o, RTA_DATA(a), sizeof(o));
				ts->recverr = o.recverr;
				ts->freebind = o.freebind;
				ts->transparent = o.transparent;
				ts->bind_no_port = o.bind_address_no_port;
				ts->has_opts = true;
			}
		}
	}
	struct sockaddr_storage l = { 0 }, rm = { 0 };
	if (m->idiag_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&l, *b = (struct sockaddr_in6 *)&rm;
		a->sin6_family = b->sin6_family = AF_INET6;
		memcpy(&a->sin6_addr, m->id.idiag_src, 16);
		memcpy(&b->sin6_addr, m->id.idiag_dst, 16);
		a->sin6_port = m->id.idiag_sport;
		b->sin6_port = m->id.idiag_dport;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&l, *b = (struct sockaddr_in *)&rm;
		a->sin_family = b->sin_family = AF_INET;
		memcpy(&a->sin_addr, m->id.idiag_src, 4);
		memcpy(&b->sin_addr, m->id.idiag_dst, 4);
		a->sin_port = m->id.idiag_sport;
		b->sin_port = m->id.idiag_dport;
	}
	return add_sock(d->nl, d->ports, false, m->idiag_state, &l, &rm);
}

/* add_table for TCP of family through sock_diag (ckpt's own network
 * namespace): one binary dump, not the kernel's text of every socket
 * parsed back (0.2-0.4 s of a checkpoint of 10,000 connections). */
static int add_tcp_diag(struct netlock *nl, bool ports, int family, const struct inodes *s,
			struct seen_set *seen)
{
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	struct diag_add d = { .nl = nl, .ports = ports, .s = s, .seen = seen };
	return tcp_diag_dump_ext(fd, family, ~0u, 1u << (INET_DIAG_TOS - 1), add_diag_sock, &d);
}

/* The IPv4 (or v4-mapped) TCP connection l -> rm as this namespace's NAT
 * shows it to the peer, if it translates it (one of nat): added too. */
static int add_nat_view(struct netlock *nl, const struct ct_nat *nat, size_t nnat,
			const struct sockaddr_storage *l, const struct sockaddr_storage *rm)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	const uint8_t *la, *ra;
	uint16_t lp, rp;
	if (l->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)l, *b = (const void *)rm;
		la = (const uint8_t *)&a->sin_addr;
		ra = (const uint8_t *)&b->sin_addr;
		lp = a->sin_port;
		rp = b->sin_port;
	} else {
		const struct sockaddr_in6 *a = (const void *)l, *b = (const void *)rm;
		if (memcmp(&a->sin6_addr, mapped, 12) || memcmp(&b->sin6_addr, mapped, 12))
			return 0;
		la = (const uint8_t *)&a->sin6_addr + 12;
		ra = (const uint8_t *)&b->sin6_addr + 12;
		lp = a->sin6_port;
		rp = b->sin6_port;
	}
	const struct ct_nat *e = ct_nat_find(nat, nnat, IPPROTO_TCP, la, ntohs(lp), ra, ntohs(rp));
	if (!e)
		return 0;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(e->toport) };
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = rp };
	memcpy(&to.sin_addr, e->to, 4);
	memcpy(&peer.sin_addr, ra, 4);
	return netlock_add(nl, (const struct sockaddr *)&to, (const struct sockaddr *)&peer);
}

/* fn(state, ino, local, remote, arg) for each socket of /proc/PID/NAME
 * (tcp, tcp6, udp, udp6) whose inode is one of s (NULL: any); none
 * without the file (no IPv6). */
static int each_line(pid_t pid, const char *name, const struct inodes *s,
		     int (*fn)(unsigned state, unsigned long ino, const struct sockaddr_storage *l,
			       const struct sockaddr_storage *rm, void *arg),
		     void *arg)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r = proc_read(pid, name, &text, &len);
	if (r < 0)
		return r == -ENOENT ? 0 : r; /* no IPv6 */
	bool v6 = strchr(name, '6') != NULL;
	char *next = strchr(text, '\n');
	for (char *line = next; line && line[1]; line = next) {
		char local[64], remote[64];
		unsigned int state;
		unsigned long ino;
		/* a line ends there: sscanf takes the length of its whole input,
		 * which made this quadratic (1.6 s for 40,000 lines) */
		next = strchr(line + 1, '\n');
		if (next)
			*next = 0;
		int nf = sscanf(line + 1, " %*s %63s %63s %X %*s %*s %*s %*s %*s %lu", local, remote,
				&state, &ino);
		if (next)
			*next = '\n';
		if (nf != 4)
			continue;
		if (!ino || (s && !bsearch(&ino, s->v, s->n, sizeof(*s->v), cmp_ul)))
			continue;
		struct sockaddr_storage l, rm;
		if (!parse_addr(local, v6, &l) || !parse_addr(remote, v6, &rm))
			continue;
		if ((r = fn(state, ino, &l, &rm, arg)) < 0)
			return r;
	}
	return 0;
}

struct table_add {
	struct netlock *nl;
	bool ports, udp;
	const struct ct_nat *nat;
	size_t nnat;
};

static int table_sock(unsigned state, unsigned long ino, const struct sockaddr_storage *l,
		      const struct sockaddr_storage *rm, void *arg)
{
	const struct table_add *t = arg;
	(void)ino;
	int r = add_sock(t->nl, t->ports, t->udp, state, l, rm);
	if (r >= 0 && t->nnat && !t->udp && state != 0x0a && state != 0x07)
		r = add_nat_view(t->nl, t->nat, t->nnat, l, rm);
	return r;
}

/* Adds each connection of /proc/ROOT/net/NAME whose inode the tree holds
 * to nl (and, with ports, its listening and bound ports); with nat (this
 * namespace's translated connections), also each one's translated view. */
static int add_table(struct netlock *nl, bool ports, pid_t root, const char *name,
		     const struct inodes *s, const struct ct_nat *nat, size_t nnat)
{
	struct table_add t = {nl, ports, strstr(name, "udp") != NULL, nat, nnat};
	return each_line(root, name, s, table_sock, &t);
}

/* One end of a TCP connection, as its packets carry it (a v4-mapped IPv6
 * address as the IPv4 one); no padding, so that memcmp compares. */
struct tup {
	uint8_t a[16];
	uint16_t port; /* network order */
	uint8_t v4, pad;
};
struct conn {
	struct tup l, r; /* local, remote */
	unsigned long ino;
	bool tree;
};
struct conns {
	struct conn *v;
	size_t n, cap;
	bool sorted;
};

static struct tup tup_of(const struct sockaddr_storage *sa)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	struct tup t = {0};
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)sa;
		t.v4 = 1;
		memcpy(t.a, &a->sin_addr, 4);
		t.port = a->sin_port;
		return t;
	}
	const struct sockaddr_in6 *a = (const void *)sa;
	t.v4 = !memcmp(&a->sin6_addr, mapped, 12);
	memcpy(t.a, (const uint8_t *)&a->sin6_addr + (t.v4 ? 12 : 0), t.v4 ? 4 : 16);
	t.port = a->sin6_port;
	return t;
}

static struct sockaddr_storage sa_of(const struct tup *t)
{
	struct sockaddr_storage sa = {0};
	if (t->v4) {
		struct sockaddr_in *a = (struct sockaddr_in *)&sa;
		a->sin_family = AF_INET;
		a->sin_port = t->port;
		memcpy(&a->sin_addr, t->a, 4);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&sa;
		a->sin6_family = AF_INET6;
		a->sin6_port = t->port;
		memcpy(&a->sin6_addr, t->a, 16);
	}
	return sa;
}

static int cmp_conn(const void *a, const void *b)
{
	return memcmp(a, b, 2 * sizeof(struct tup));
}

static int conns_push(struct conns *c, const struct conn *one)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct conn *v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = *one;
	return 0;
}

/* The socket whose local end is r and remote end l in c, or NULL. */
static const struct conn *conns_find(struct conns *c, const struct tup *l, const struct tup *r)
{
	if (!c->sorted && c->n)
		qsort(c->v, c->n, sizeof(*c->v), cmp_conn);
	c->sorted = true;
	struct conn key = {.l = *r, .r = *l};
	return c->n ? bsearch(&key, c->v, c->n, sizeof(*c->v), cmp_conn) : NULL;
}

struct ns_conns {
	struct conns *c;
	const struct inodes *s;
};

/* A socket of a namespace's /proc/PID/net/tcp(6) with a peer. */
static int ns_conn(unsigned state, unsigned long ino, const struct sockaddr_storage *l,
		   const struct sockaddr_storage *rm, void *arg)
{
	const struct ns_conns *n = arg;
	if (state == 0x0a || state == 0x07)
		return 0;
	struct conn c = {.l = tup_of(l), .r = tup_of(rm), .ino = ino};
	c.tree = bsearch(&ino, n->s->v, n->s->n, sizeof(*n->s->v), cmp_ul) != NULL;
	return conns_push(n->c, &c);
}

/* A socket of ckpt's namespace (the sock_diag dump). */
static int host_conn(const struct inet_diag_msg *m, void *arg)
{
	struct sockaddr_storage l = {0}, rm = {0};
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)&l, *b = (struct sockaddr_in6 *)&rm;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&l, *b4 = (struct sockaddr_in *)&rm;
	if (m->idiag_family == AF_INET6) {
		a->sin6_family = b->sin6_family = AF_INET6;
		memcpy(&a->sin6_addr, m->id.idiag_src, 16);
		memcpy(&b->sin6_addr, m->id.idiag_dst, 16);
	} else {
		a4->sin_family = b4->sin_family = AF_INET;
		memcpy(&a4->sin_addr, m->id.idiag_src, 4);
		memcpy(&b4->sin_addr, m->id.idiag_dst, 4);
	}
	struct conn c = {.l = tup_of(&l), .r = tup_of(&rm)};
	c.l.port = m->id.idiag_sport;
	c.r.port = m->id.idiag_dport;
	return conns_push(arg, &c);
}

/* ckpt's namespace's TCP sockets with a peer, once. */
static int host_conns(struct conns *host, bool *dumped)
{
	if (*dumped)
		return 0;
	*dumped = true;
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	uint32_t states = ~0u & ~(1u << 10) & ~(1u << 7); /* not LISTEN, CLOSE */
	int r = tcp_diag_dump(fd, AF_INET, states, host_conn, host);
	if (r >= 0 && (r = tcp_diag_dump(fd, AF_INET6, states, host_conn, host)) == -ENOENT)
		r = 0; /* no IPv6 */
	return r;
}

/*
 * Is r the address ckpt's namespace reaches l from: the source it picks
 * for l (a UDP connect, which sends nothing)? A peer bound to the host
 * end's address is; one bound to an address that outlives the host end
 * (another link's) is not, and is not tested (DESIGN "Not done").
 */
static bool reached_from(const struct tup *l, const struct tup *r)
{
	struct sockaddr_storage dst = sa_of(l), src;
	socklen_t len = sizeof(src);
	bool v4 = dst.ss_family == AF_INET;
	_cleanup_close_ int s = socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0 ||
	    connect(s, (struct sockaddr *)&dst,
		    v4 ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) < 0 ||
	    getsockname(s, (struct sockaddr *)&src, &len) < 0 || src.ss_family != dst.ss_family)
		return false;
	return v4 ? !memcmp(&((struct sockaddr_in *)&src)->sin_addr, r->a, 4)
		  : !memcmp(&((struct sockaddr_in6 *)&src)->sin6_addr, r->a, 16);
}

static int note_peer(struct ckpt_ctx *ctx, unsigned long ino, int where)
{
	struct netns_peer *v = realloc(ctx->netns_peers, (ctx->n_netns_peers + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	ctx->netns_peers = v;
	v[ctx->n_netns_peers++] = (struct netns_peer){ino, where};
	return 0;
}

/*
 * The tree's TCP connections of the namespace of pid (a task in it, not
 * the root's nor ckpt's) whose peer is not a socket of the tree: where it
 * is (ctx->netns_peers). One in ckpt's namespace (a routed peer, reached
 * through the root's namespace) is added to hl, the lock of ckpt's
 * namespace that stays after a kill (NULL: none).
 */
static int find_peers(struct ckpt_ctx *ctx, pid_t pid, const struct inodes *s, struct netlock *hl,
		      struct conns *host, bool *dumped)
{
	struct conns c = {0};
	struct ns_conns n = {&c, s};
	int r = each_line(pid, "net/tcp", NULL, ns_conn, &n);
	if (r >= 0)
		r = each_line(pid, "net/tcp6", NULL, ns_conn, &n);
	if (r >= 0 && c.n)
		qsort(c.v, c.n, sizeof(*c.v), cmp_conn);
	c.sorted = true;
	for (size_t i = 0; r >= 0 && i < c.n; i++) {
		struct conn o = c.v[i];
		if (!o.tree)
			continue;
		const struct conn *p = conns_find(&c, &o.l, &o.r);
		if (p && p->tree)
			continue; /* both ends in the image */
		if (p) {
			r = note_peer(ctx, o.ino, NETNS_PEER_SAME);
			continue;
		}
		/* a loopback peer is never routed: the same tuple in ckpt's
		 * namespace is another flow */
		static const uint8_t lo6[16] = {[15] = 1};
		if ((o.r.v4 && o.r.a[0] == 127) || (!o.r.v4 && !memcmp(o.r.a, lo6, 16)))
			continue;
		if ((r = host_conns(host, dumped)) < 0 || !conns_find(host, &o.l, &o.r))
			continue;
		if (!reached_from(&o.l, &o.r)) {
			r = note_peer(ctx, o.ino, NETNS_PEER_ADDR);
			continue;
		}
		struct sockaddr_storage l = sa_of(&o.l), rm = sa_of(&o.r);
		r = note_peer(ctx, o.ino, NETNS_PEER_HOST);
		if (r >= 0 && hl)
			r = netlock_add(hl, (struct sockaddr *)&l, (struct sockaddr *)&rm);
	}
	free(c.v);
	return r;
}

static int cmp_peer(const void *a, const void *b)
{
	return cmp_ul(&((const struct netns_peer *)a)->ino, &((const struct netns_peer *)b)->ino);
}

int ckpt_netns_peer(const struct ckpt_ctx *ctx, unsigned long ino)
{
	struct netns_peer key = {ino, 0};
	const struct netns_peer *p =
	    ctx->n_netns_peers
		? bsearch(&key, ctx->netns_peers, ctx->n_netns_peers, sizeof(key), cmp_peer)
		: NULL;
	return p ? p->where : NETNS_PEER_UNKNOWN;
}

int ckpt_netlock_arm(struct puppet_guard *g, struct netlock *nl)
{
	int fd;
	const void *msg;
	size_t len;
	int r = netlock_undo(nl, &fd, &msg, &len);
	return r < 0 ? r : puppet_guard_on_death(g, GUARD_UNCOMMITTED, fd, msg, len);
}

static int install(struct ckpt_log *log, struct netlock *nl, struct puppet_guard *g)
{
	char name[NETLOCK_NAME_MAX];
	snprintf(name, sizeof(name), "%s", netlock_name_of(nl));
	uint64_t t0 = now_us();
	/* first the guardian, so that no instant has the table and no remover */
	int r = ckpt_netlock_arm(g, nl);
	if (r < 0)
		return log_fail(log, r, "network lock %s: the guardian cannot hold its removal: %s",
				name, strerror(-r));
	r = netlock_install(nl);
	if (r < 0)
		return log_fail(log, r, "network lock (nftables table inet %s) for %zu connection(s): "
				"%s", name, netlock_count(nl),
				netlock_error(nl)[0] ? netlock_error(nl) : strerror(-r));
	log_info(log, "network lock %s: %zu connection(s) locked in %llu us", name,
		 netlock_count(nl), (unsigned long long)(now_us() - t0));
	return 0;
}

/* A migration (its committed callback): the killed tree runs on its target
 * host, in the namespace restored there; nothing of it comes back here. */
static bool migrated(const struct ckpt_ctx *ctx)
{
	const struct ckpt_opts *o = ctx->opts;
	return o && o->size >= offsetof(struct ckpt_opts, committed) + sizeof(void *) &&
	       o->committed;
}

static const char *const tables[] = { "net/tcp", "net/tcp6", "net/udp", "net/udp6" };

/* Is st among the n namespaces of seen? Else it is added (0 or -ENOMEM). */
static int ns_seen(struct stat **seen, size_t *n, const struct stat *st)
{
	for (size_t j = 0; j < *n; j++)
		if ((*seen)[j].st_dev == st->st_dev && (*seen)[j].st_ino == st->st_ino)
			return 1;
	struct stat *more = realloc(*seen, (*n + 1) * sizeof(**seen));
	if (!more)
		return -ENOMEM;
	*seen = more;
	more[(*n)++] = *st;
	return 0;
}

/*
 * The tree's tasks in other network namespaces than the root's and ckpt's
 * (the netns kind saves them): a lock of the same name in each that has
 * connections or ports (from /proc/PID/net of a task in it). In the host
 * lock hl only those whose peer is a socket of ckpt's namespace
 * (find_peers): a flow of the namespace's own (loopback) would be ckpt's
 * namespace's there.
 */
static int lock_others(struct ckpt_ctx *ctx, const char *name, const struct inodes *s,
		       struct netlock *hl)
{
	struct conns host = {0};
	bool dumped = false;
	struct stat root, self, st;
	_cleanup_free_ struct stat *seen = NULL;
	size_t nseen = 0;
	char path[64];
	int r = 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", ctx->tasks[0].pid);
	if (stat(path, &root) < 0 || stat("/proc/thread-self/ns/net", &self) < 0)
		return -errno;
	for (size_t i = 1; r >= 0 && i < ctx->ntasks; i++) {
		pid_t pid = ctx->tasks[i].pid;
		snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
		if (ctx->tasks[i].zombie || stat(path, &st) < 0 ||
		    (st.st_dev == root.st_dev && st.st_ino == root.st_ino) ||
		    (st.st_dev == self.st_dev && st.st_ino == self.st_ino))
			continue;
		if ((r = ns_seen(&seen, &nseen, &st)) != 0)
			continue; /* seen (1), or -ENOMEM, which ends the loop */
		_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
		struct netlock *nl = NULL;
		r = ns < 0 ? -errno : netlock_new(ns, name, &nl);
		for (size_t k = 0; r >= 0 && k < 4; k++)
			r = add_table(nl, true, pid, tables[k], s, NULL, 0);
		if (r >= 0)
			r = find_peers(ctx, pid, s, hl, &host, &dumped);
		if (r < 0 || (!netlock_count(nl) && !netlock_ports(nl))) {
			netlock_free(nl);
			continue;
		}
		if (ctx->n_netlock_ns == CKPT_NETLOCK_NS) {
			netlock_free(nl);
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: network lock: more than %d "
					"network namespaces of the tree's tasks hold connections or "
					"ports; not supported", pid, CKPT_NETLOCK_NS);
		}
		ctx->netlock_ns[ctx->n_netlock_ns++] = nl;
		r = install(&ctx->log, nl, ctx->guard);
	}
	free(host.v);
	if (r >= 0 && ctx->n_netns_peers)
		qsort(ctx->netns_peers, ctx->n_netns_peers, sizeof(*ctx->netns_peers), cmp_peer);
	if (r < 0)
		return log_fail(&ctx->log, r, "network lock: cannot lock the connections of the "
				"tree's other network namespaces: %s", strerror(-r));
	return 0;
}

/* Is CAP_NET_ADMIN in ckpt's effective set (what a table in its own
 * network namespace takes)? If it cannot tell, the lock is tried. */
static bool has_net_admin(void)
{
	return userns_cap_effective(CAP_NET_ADMIN) != 0;
}

int ckpt_netlock_lock(struct ckpt_ctx *ctx)
{
	struct inodes s = { 0 };
	int r = 0;
	for (size_t i = 0; r >= 0 && i < ctx->ntasks; i++)
		if (!ctx->tasks[i].zombie && !ctx->tasks[i].files_with)
			r = socket_inodes(&ctx->tasks[i], &s);
	if (r < 0 || !s.n) {
		free(s.v);
		return r < 0 ? log_fail(&ctx->log, r, "network lock: cannot list the tree's sockets: "
					"%s", strerror(-r))
			     : 0;
	}
	qsort(s.v, s.n, sizeof(*s.v), cmp_ul);
	pid_t root = ctx->tasks[0].pid;
	char path[64], name[NETLOCK_NAME_MAX];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", root);
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	netlock_name(name, sizeof(name));
	r = ns < 0 ? -errno : netlock_new(ns, name, &ctx->netlock);
	/* TCP through sock_diag in ckpt's own namespace (where its netlink
	 * socket is), else as text from the root's /proc */
	bool diag = proc_same_netns(root);
	struct seen_set seen = { 0 };
	for (size_t i = 0; r >= 0 && i < 4; i++) {
		r = diag && i < 2 ? add_tcp_diag(ctx->netlock, true, i ? AF_INET6 : AF_INET, &s,
						  &seen)
				  : -ENOENT;
		/* refused at once (no IPv6, no inet_diag): nothing was added */
		if (r == -ENOENT || r == -EINVAL || r == -EOPNOTSUPP || r == -EPROTONOSUPPORT)
			r = add_table(ctx->netlock, true, root, tables[i], &s, NULL, 0);
	}
	/* what inet's read ahead takes from the dump (a socket not in it is
	 * looked at as before) */
	if (r >= 0 && seen.n) {
		qsort(seen.v, seen.n, sizeof(*seen.v), cmp_ul);
		free(ctx->tcp_seen);
		ctx->tcp_seen = TAKE_PTR(seen.v);
		ctx->n_tcp_seen = seen.n;
	}
	free(seen.v);
	/*
	 * A tree in a network namespace of its own (ckpt run --net), killed:
	 * its namespace goes with it, its lock and veth pairs too, and its
	 * peers on this host retransmit into ckpt's namespace (its default
	 * route) until the restart. The same connections are locked there
	 * too, under the same name, which the restart removes; its ports are
	 * not this namespace's. A connection this namespace's NAT translates
	 * (ckpt run --nat) is also locked as its peer sees it (the translated
	 * address and port): while no nat chain is loaded here (its table
	 * deleted before the restart makes it again) a retransmission is not
	 * translated back, but comes in to this namespace's own address and
	 * port, where no socket is: it would be answered with a reset.
	 */
	/* not for a migration: its tree is killed only once the copy runs on
	 * the target, and this lock would be removed right after the kill
	 * (ckpt_netlock_unlock); until the kill the container's own lock
	 * drops what comes through the veth pair (1.6-5 ms of frozen time) */
	bool host = (ctx->flags & CKPT_KILL) && !migrated(ctx) && !proc_same_netns(root);
	_cleanup_free_ struct ct_nat *nat = NULL;
	size_t nnat = 0;
	if (r >= 0 && host)
		r = netlock_new(-1, name, &ctx->netlock_host);
	if (r >= 0 && host && (r = ct_nat_list(&nat, &nnat)) == -ENOENT)
		r = 0; /* no conntrack here: nothing translated */
	for (size_t i = 0; r >= 0 && host && i < 2; i++)
		r = add_table(ctx->netlock_host, false, root, tables[i], &s, nat, nnat);
	if (r < 0) {
		free(s.v);
		return log_fail(&ctx->log, r, "pid %d: network lock: cannot list its connections: %s",
				root, strerror(-r));
	}
	/* a connection of another namespace to a peer in ckpt's (routed
	 * through the root's) is locked in ckpt's too: the lock there stays
	 * after a kill, and the peer's packets pass it */
	r = lock_others(ctx, name, &s, diag ? ctx->netlock : ctx->netlock_host);
	free(s.v);
	if (r < 0)
		return r;
	if (host && netlock_count(ctx->netlock_host) &&
	    (r = install(&ctx->log, ctx->netlock_host, ctx->guard)) < 0)
		return r;
	if (!netlock_count(ctx->netlock) && !netlock_ports(ctx->netlock)) {
		netlock_free(TAKE_PTR(ctx->netlock));
		return 0;
	}
	/* a user's tree with a server in ckpt's namespace: no table can be
	 * made, and a lock of ports alone only keeps new clients waiting
	 * (their connections are not in the image; an established one is
	 * refused by inet for want of TCP_REPAIR), so the checkpoint goes on
	 * without it, saying what clients will see */
	if (!netlock_count(ctx->netlock) && proc_same_netns(root) && !has_net_admin()) {
		log_warn(&ctx->log,
			 "pid %d: its %zu listening or bound port(s) are not held: "
			 "without CAP_NET_ADMIN ckpt cannot make a network lock, so a new "
			 "client is refused (or its datagram dropped) while the tree is %s",
			 root, netlock_ports(ctx->netlock),
			 (ctx->flags & CKPT_KILL) ? "frozen and until its restart" : "frozen");
		netlock_free(TAKE_PTR(ctx->netlock));
		return 0;
	}
	return install(&ctx->log, ctx->netlock, ctx->guard);
}

/* Removes an installed lock, saying how long it was in place. */
static void remove_logged(struct ckpt_log *log, struct netlock *nl)
{
	uint64_t age = netlock_age_us(nl);
	int r = netlock_remove(nl);
	if (r < 0)
		log_warn(log, "network lock %s: cannot remove it: %s", netlock_name_of(nl),
			 strerror(-r));
	else
		log_info(log, "network lock %s removed after %llu us in place", netlock_name_of(nl),
			 (unsigned long long)age);
}

/* One of the checkpoint's locks: kept for the restart (--kill, the image
 * made), else removed; freed. */
static void unlock_one(struct ckpt_ctx *ctx, struct netlock **nl, bool ok, const char *where)
{
	if (!netlock_installed(*nl))
		goto out;
	if (ok && (ctx->flags & CKPT_KILL)) {
		log_info(&ctx->log, "network lock %s%s stays until the restart of this image (or "
			 "`ckpt unlock IMAGE`, `nft delete table inet %s`)", netlock_name_of(*nl), where,
			 netlock_name_of(*nl));
		netlock_keep(*nl);
		goto out;
	}
	remove_logged(&ctx->log, *nl);
out:
	netlock_free(TAKE_PTR(*nl));
}

/* A migration of a tree in ckpt's own namespace whose addresses move
 * (target_addrs, checked by the inet kind at collect end). */
static bool moved(const struct ckpt_ctx *ctx)
{
	const struct ckpt_addr *addrs;
	opts_target_addrs(ctx->opts, &addrs);
	return addrs && migrated(ctx);
}

const struct tcp_seen *ckpt_tcp_seen(const struct ckpt_ctx *ctx, unsigned long ino)
{
	return ctx->n_tcp_seen ? bsearch(&ino, ctx->tcp_seen, ctx->n_tcp_seen,
					 sizeof(*ctx->tcp_seen), cmp_ul)
			       : NULL;
}

void ckpt_netlock_unlock(struct ckpt_ctx *ctx, bool ok)
{
	ckpt_netlock_unhold(ctx); /* a failure before the lock */
	free(TAKE_PTR(ctx->tcp_seen));
	ctx->n_tcp_seen = 0;
	free(TAKE_PTR(ctx->netns_peers));
	ctx->n_netns_peers = 0;
	/* a moved tree's lock stays until its addresses are gone from here:
	 * ckpt_netlock_moved() */
	if (!(ok && (ctx->flags & CKPT_KILL) && moved(ctx)))
		unlock_one(ctx, &ctx->netlock, ok, "");
	/* the container's own lock goes with its namespace; the one in ckpt's
	 * namespace would stay for good after a migration: removed */
	unlock_one(ctx, &ctx->netlock_host, ok && !migrated(ctx),
		   " (in ckpt's network namespace)");
	/* the other namespaces' go with them after a kill */
	for (size_t i = 0; i < ctx->n_netlock_ns; i++) {
		struct netlock *nl = TAKE_PTR(ctx->netlock_ns[i]);
		if (ok && (ctx->flags & CKPT_KILL) && netlock_installed(nl))
			netlock_keep(nl);
		else if (netlock_installed(nl))
			remove_logged(&ctx->log, nl);
		netlock_free(nl);
	}
	ctx->n_netlock_ns = 0;
}

/* A moved address as rtnetlink takes it; ifname gets its link's name (its
 * index 0 if this host has no such link now). */
static struct rtnl_addr moved_addr(const struct ckpt_addr *a, char ifname[IF_NAMESIZE + 1])
{
	snprintf(ifname, IF_NAMESIZE + 1, "%.*s", (int)sizeof(a->ifname), a->ifname);
	struct rtnl_addr ra = { .family = a->family, .index = (int)if_nametoindex(ifname),
				.prefixlen = a->prefixlen };
	memcpy(ra.addr, a->addr, a->family == AF_INET ? 4 : 16);
	return ra;
}

/* The rtnetlink requests that delete the moved addresses, as many as fit
 * in one datagram from *from on; its length (0: none). */
static size_t moved_del_msg(const struct ckpt_addr *addrs, size_t n, size_t *from, char *buf,
			    size_t room)
{
	size_t len = 0;
	for (; *from < n; ++*from) {
		char ifname[IF_NAMESIZE + 1];
		struct rtnl_addr ra = moved_addr(&addrs[*from], ifname);
		size_t one = ra.index ? rtnl_addr_del_msg(buf + len, room - len, &ra) : 0;
		if (ra.index && !one)
			break; /* full */
		len += one;
	}
	return len;
}

/*
 * Before the commit of a migration: should ckpt die once the tree's death
 * is decided, the guardian, having killed the tree, does what "unlock
 * moved" would: each moved address deleted here, then the lock removed.
 * The requests are built now; the guardian only sends them (their answers
 * unread: an address gone already is no matter).
 */
int ckpt_netlock_arm_moved(struct ckpt_ctx *ctx)
{
	const struct ckpt_addr *addrs;
	size_t n = opts_target_addrs(ctx->opts, &addrs), from = 0;
	if (!addrs || !n || !migrated(ctx) || !(ctx->flags & CKPT_KILL))
		return 0;
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	int r = fd < 0 ? -errno : 0;
	char buf[GUARD_UNDO_MAX] __attribute__((aligned(8)));
	while (r >= 0 && from < n) {
		size_t len = moved_del_msg(addrs, n, &from, buf, sizeof(buf));
		if (len)
			r = puppet_guard_on_death(ctx->guard, GUARD_COMMITTED, fd, buf, len);
	}
	const void *msg;
	size_t len;
	int lfd;
	if (r >= 0 && netlock_installed(ctx->netlock) &&
	    (r = netlock_undo(ctx->netlock, &lfd, &msg, &len)) >= 0)
		r = puppet_guard_on_death(ctx->guard, GUARD_COMMITTED, lfd, msg, len);
	if (r < 0)
		return log_fail(&ctx->log, r, "the guardian cannot hold the removal of the moved "
				"addresses and the network lock, should ckpt die: %s", strerror(-r));
	return 0;
}

/*
 * The step "unlock moved", after the kill of a migrated tree of ckpt's own
 * network namespace: its sockets are gone (after kill closed ckpt's copies
 * quietly), the copy runs on the target with the addresses. Each address is
 * deleted from its link here, so that this host no longer answers for it
 * (neither a reset nor an ARP reply), and only then is the lock removed. If
 * one cannot be deleted the lock stays (its name logged), since what comes
 * in to that address would be answered by a reset.
 */
int ckpt_netlock_moved(struct ckpt_ctx *ctx)
{
	const struct ckpt_addr *addrs;
	size_t n = opts_target_addrs(ctx->opts, &addrs), failed = 0;
	if (!addrs || !migrated(ctx))
		return 0;
	struct rtnl rt = { 0 };
	int r = n ? rtnl_open(&rt) : 0;
	for (size_t i = 0; i < n; i++) {
		const struct ckpt_addr *a = &addrs[i];
		char text[INET6_ADDRSTRLEN] = "?", ifname[IF_NAMESIZE + 1];
		inet_ntop(a->family, a->addr, text, sizeof(text));
		struct rtnl_addr ra = moved_addr(a, ifname);
		int e = r < 0 ? r : !ra.index ? -ENODEV : rtnl_addr_del(&rt, &ra);
		if (e == -EADDRNOTAVAIL)
			e = 0; /* gone already */
		if (e < 0) {
			failed++;
			log_warn(&ctx->log, "address %s/%u on %s: cannot delete it from this host after "
				 "the migration: %s", text, a->prefixlen, ifname, strerror(-e));
		} else {
			log_info(&ctx->log, "address %s/%u deleted from %s: it moved with the tree",
				 text, a->prefixlen, ifname);
		}
	}
	rtnl_close(&rt);
	if (!netlock_installed(ctx->netlock))
		goto out;
	if (failed) {
		log_warn(&ctx->log, "network lock %s stays while this host holds an address of the "
			 "migrated tree (`nft delete table inet %s` once it is gone)",
			 netlock_name_of(ctx->netlock), netlock_name_of(ctx->netlock));
		netlock_keep(ctx->netlock);
	} else {
		remove_logged(&ctx->log, ctx->netlock);
	}
out:
	netlock_free(TAKE_PTR(ctx->netlock));
	return 0;
}

int rst_netlock_add(struct rst_ctx *ctx, const struct sockaddr *local,
		    const struct sockaddr *remote)
{
	if (!ctx->netlock) {
		char name[NETLOCK_NAME_MAX];
		netlock_name(name, sizeof(name));
		int r = netlock_new(-1, name, &ctx->netlock);
		if (r < 0)
			return r;
	}
	return netlock_add(ctx->netlock, local, remote);
}

int rst_netlock_add_ns(struct rst_ctx *ctx, uint32_t netns, const struct sockaddr *local,
		       const struct sockaddr *remote)
{
	size_t i = 0;
	while (i < ctx->n_netlock_ns && ctx->netlock_ns_id[i] != netns)
		i++;
	if (i == ctx->n_netlock_ns) {
		char name[NETLOCK_NAME_MAX];
		int fd = netns_held_fd(ctx, netns);
		if (fd < 0)
			return -EINVAL;
		if (i == CKPT_NETLOCK_NS)
			return log_fail(&ctx->log, -EOPNOTSUPP, "network lock: more than %d network "
					"namespaces of the image hold connections", CKPT_NETLOCK_NS);
		netlock_name(name, sizeof(name));
		int r = netlock_new(fd, name, &ctx->netlock_ns[i]);
		if (r < 0)
			return r;
		ctx->netlock_ns_id[i] = netns;
		ctx->n_netlock_ns++;
	}
	return netlock_add(ctx->netlock_ns[i], local, remote);
}

int rst_netlock_lock(struct rst_ctx *ctx)
{
	for (size_t i = 0; i < ctx->n_netlock_ns; i++) {
		int r = install(&ctx->log, ctx->netlock_ns[i], ctx->watch);
		if (r < 0)
			return r;
	}
	if (!ctx->netlock || !netlock_count(ctx->netlock))
		return 0;
	return install(&ctx->log, ctx->netlock, ctx->watch);
}

void rst_netlock_unlock(struct rst_ctx *ctx, bool ok)
{
	if (netlock_installed(ctx->netlock))
		remove_logged(&ctx->log, ctx->netlock);
	netlock_free(TAKE_PTR(ctx->netlock));
	for (size_t i = 0; i < ctx->n_netlock_ns; i++) {
		if (netlock_installed(ctx->netlock_ns[i]))
			remove_logged(&ctx->log, ctx->netlock_ns[i]);
		netlock_free(TAKE_PTR(ctx->netlock_ns[i]));
	}
	ctx->n_netlock_ns = 0;
	/* the one the checkpoint left (--kill): the restored sockets run now;
	 * after a failure it stays, for the next restart */
	if (ok && ctx->netlock_left[0]) {
		int r = netlock_remove_name(-1, ctx->netlock_left);
		if (r < 0 && r != -ENOENT)
			log_warn(&ctx->log, "network lock %s (left by the checkpoint): cannot remove "
				 "it: %s", ctx->netlock_left, strerror(-r));
		else if (r == 0)
			log_info(&ctx->log, "network lock %s (left by the checkpoint) removed",
				 ctx->netlock_left);
	}
}

int rst_netlock_open(struct rst_ctx *ctx)
{
	rst_netlock_unlock(ctx, true);
	return 0;
}
