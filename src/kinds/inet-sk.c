/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers of the inet kind: options, TCP_REPAIR, addresses (inet-sk.h). */
#include "kinds/inet-sk.h"
#include "kinds/sk-filter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sockopts.h"

#ifndef UDPLITE_SEND_CSCOV
#define UDPLITE_SEND_CSCOV 10
#define UDPLITE_RECV_CSCOV 11
#endif
#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif
#ifndef SOL_UDPLITE
#define SOL_UDPLITE 136
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif
#ifndef IPV6_HDRINCL
#define IPV6_HDRINCL 36
#endif
#ifndef SOL_RAW
#define SOL_RAW 255
#endif
#ifndef ICMP_FILTER
#define ICMP_FILTER 1
#endif
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define T OPT_TCP
#define U OPT_UDP
#define TU (OPT_TCP | OPT_UDP)
static const struct inet_opt_desc opt_table[] = {
	{ SOL_SOCKET, SO_REUSEADDR, TU | OPT_BIND, "SO_REUSEADDR" },
	{ SOL_SOCKET, SO_REUSEPORT, TU | OPT_BIND, "SO_REUSEPORT" },
	{ SOL_SOCKET, SO_KEEPALIVE, TU, "SO_KEEPALIVE" },
	{ SOL_SOCKET, SO_BROADCAST, TU, "SO_BROADCAST" },
	{ SOL_SOCKET, SO_OOBINLINE, TU, "SO_OOBINLINE" },
	{ SOL_SOCKET, SO_PRIORITY, TU, "SO_PRIORITY" },
	{ SOL_SOCKET, SO_MARK, TU, "SO_MARK" },
	{ SOL_SOCKET, SO_RCVLOWAT, TU, "SO_RCVLOWAT" },
	{ SOL_SOCKET, SO_DONTROUTE, TU, "SO_DONTROUTE" },
	{ SOL_SOCKET, SO_TIMESTAMP, TU, "SO_TIMESTAMP" },
	{ SOL_SOCKET, SO_TIMESTAMPNS, TU, "SO_TIMESTAMPNS" },
	{ IPPROTO_TCP, TCP_NODELAY, T, "TCP_NODELAY" },
	{ IPPROTO_TCP, TCP_KEEPIDLE, T, "TCP_KEEPIDLE" },
	{ IPPROTO_TCP, TCP_KEEPINTVL, T, "TCP_KEEPINTVL" },
	{ IPPROTO_TCP, TCP_KEEPCNT, T, "TCP_KEEPCNT" },
	{ IPPROTO_TCP, TCP_USER_TIMEOUT, T, "TCP_USER_TIMEOUT" },
	{ IPPROTO_TCP, TCP_SYNCNT, T, "TCP_SYNCNT" },
	{ IPPROTO_TCP, TCP_LINGER2, T, "TCP_LINGER2" },
	{ IPPROTO_TCP, TCP_NOTSENT_LOWAT, T, "TCP_NOTSENT_LOWAT" },
	{ IPPROTO_TCP, TCP_DEFER_ACCEPT, T | OPT_LISTEN, "TCP_DEFER_ACCEPT" },
	{ IPPROTO_TCP, TCP_FASTOPEN, T | OPT_LISTEN, "TCP_FASTOPEN" },
	{ IPPROTO_TCP, TCP_CORK, T | OPT_LAST, "TCP_CORK" },
	{ IPPROTO_IP, IP_TOS, TU | OPT_V4, "IP_TOS" },
	{ IPPROTO_IP, IP_TTL, TU | OPT_V4, "IP_TTL" },
	{ IPPROTO_IP, IP_FREEBIND, TU | OPT_V4 | OPT_BIND, "IP_FREEBIND" },
	{ IPPROTO_IP, IP_TRANSPARENT, TU | OPT_V4 | OPT_BIND, "IP_TRANSPARENT" },
	{ IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, TU | OPT_V4 | OPT_BIND, "IP_BIND_ADDRESS_NO_PORT" },
	{ IPPROTO_IP, IP_MTU_DISCOVER, TU | OPT_V4, "IP_MTU_DISCOVER" },
	{ IPPROTO_IP, IP_RECVERR, TU | OPT_V4, "IP_RECVERR" },
	{ IPPROTO_IP, IP_PKTINFO, U | OPT_V4, "IP_PKTINFO" },
	{ IPPROTO_IP, IP_RECVTOS, U | OPT_V4, "IP_RECVTOS" },
	{ IPPROTO_IP, IP_RECVTTL, U | OPT_V4, "IP_RECVTTL" },
	{ IPPROTO_IP, IP_MULTICAST_TTL, U | OPT_V4, "IP_MULTICAST_TTL" },
	{ IPPROTO_IP, IP_MULTICAST_LOOP, U | OPT_V4, "IP_MULTICAST_LOOP" },
	/* the interface's address as an int (the index alone, ip_mreqn with
	 * no address, is not shown by getsockopt) */
	{ IPPROTO_IP, IP_MULTICAST_IF, U | OPT_V4, "IP_MULTICAST_IF" },
	{ IPPROTO_IP, IP_MULTICAST_ALL, U | OPT_V4, "IP_MULTICAST_ALL" },
	{ IPPROTO_IPV6, IPV6_V6ONLY, TU | OPT_V6 | OPT_BIND, "IPV6_V6ONLY" },
	{ IPPROTO_IPV6, IPV6_FREEBIND, TU | OPT_V6 | OPT_BIND, "IPV6_FREEBIND" },
	{ IPPROTO_IPV6, IPV6_TRANSPARENT, TU | OPT_V6 | OPT_BIND, "IPV6_TRANSPARENT" },
	{ IPPROTO_IPV6, IPV6_TCLASS, TU | OPT_V6, "IPV6_TCLASS" },
	{ IPPROTO_IPV6, IPV6_UNICAST_HOPS, TU | OPT_V6, "IPV6_UNICAST_HOPS" },
	{ IPPROTO_IPV6, IPV6_MTU_DISCOVER, TU | OPT_V6, "IPV6_MTU_DISCOVER" },
	{ IPPROTO_IPV6, IPV6_RECVERR, TU | OPT_V6, "IPV6_RECVERR" },
	{ IPPROTO_IPV6, IPV6_RECVPKTINFO, U | OPT_V6, "IPV6_RECVPKTINFO" },
	{ IPPROTO_IPV6, IPV6_MULTICAST_HOPS, U | OPT_V6, "IPV6_MULTICAST_HOPS" },
	{ IPPROTO_IPV6, IPV6_MULTICAST_LOOP, U | OPT_V6, "IPV6_MULTICAST_LOOP" },
	{ IPPROTO_IPV6, IPV6_MULTICAST_IF, U | OPT_V6, "IPV6_MULTICAST_IF" },
	{ IPPROTO_IPV6, IPV6_MULTICAST_ALL, U | OPT_V6, "IPV6_MULTICAST_ALL" },
	{ IPPROTO_IP, IP_HDRINCL, OPT_RAW | OPT_V4, "IP_HDRINCL" },
	{ SOL_RAW, ICMP_FILTER, OPT_RAW | OPT_V4, "ICMP_FILTER" }, /* a u32 mask */
	{ IPPROTO_IPV6, IPV6_HDRINCL, OPT_RAW | OPT_V6, "IPV6_HDRINCL" },
	{ IPPROTO_IPV6, IPV6_CHECKSUM, OPT_RAW | OPT_V6, "IPV6_CHECKSUM" },
	{ IPPROTO_UDP, UDP_SEGMENT, U, "UDP_SEGMENT" },
	{ IPPROTO_UDP, UDP_GRO, U, "UDP_GRO" },
	{ SOL_UDPLITE, UDPLITE_SEND_CSCOV, U, "UDPLITE_SEND_CSCOV" },
	{ SOL_UDPLITE, UDPLITE_RECV_CSCOV, U, "UDPLITE_RECV_CSCOV" },
};
#undef T
#undef U
#undef TU

const struct inet_opt_desc *inet_opt_find(uint32_t level, uint32_t name)
{
	for (size_t i = 0; i < sizeof(opt_table) / sizeof(opt_table[0]); i++)
		if ((uint32_t)opt_table[i].level == level && (uint32_t)opt_table[i].name == name)
			return &opt_table[i];
	return NULL;
}

static bool opt_applies(const struct inet_opt_desc *d, int family, int type, int proto)
{
	/* raw and ping sockets: the datagram options (those their protocol
	 * does not have fail on a new socket, and are not read) and theirs */
	bool raw = type == SOCK_RAW || proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
	unsigned want = raw ? OPT_UDP | OPT_RAW : proto == IPPROTO_TCP ? OPT_TCP : OPT_UDP;
	if (!(d->flags & want))
		return false;
	if ((d->flags & OPT_V4) && family != AF_INET)
		return false;
	if ((d->flags & OPT_V6) && family != AF_INET6)
		return false;
	if (d->level == SOL_UDPLITE && proto != IPPROTO_UDPLITE)
		return false;
	return true;
}

static int get_int(int s, int level, int name, int *ret)
{
	socklen_t l = sizeof(*ret);
	*ret = 0;
	return getsockopt(s, level, name, ret, &l) < 0 ? -errno : 0;
}

static uint64_t tv_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* What read_misc reads, asked with the options in one batch. */
struct misc_vals {
	int sndbuf, rcvbuf, buf_lock;
	struct linger lg;
	struct timeval rcvtimeo, sndtimeo;
};
enum { MISC_SNDBUF, MISC_RCVBUF, MISC_BUF_LOCK, MISC_LINGER, MISC_RCVTIMEO, MISC_SNDTIMEO,
       MISC_DEV, MISC_FILTER, MISC_N };

static void misc_reqs(int s, struct misc_vals *m, char *dev, size_t devlen,
		      struct sockopt_req *q)
{
	memset(m, 0, sizeof(*m));
	dev[0] = 0;
	q[MISC_SNDBUF] = (struct sockopt_req){ s, SOL_SOCKET, SO_SNDBUF, &m->sndbuf, sizeof(int), 0 };
	q[MISC_RCVBUF] = (struct sockopt_req){ s, SOL_SOCKET, SO_RCVBUF, &m->rcvbuf, sizeof(int), 0 };
	q[MISC_BUF_LOCK] =
		(struct sockopt_req){ s, SOL_SOCKET, SO_BUF_LOCK, &m->buf_lock, sizeof(int), 0 };
	q[MISC_LINGER] = (struct sockopt_req){ s, SOL_SOCKET, SO_LINGER, &m->lg, sizeof(m->lg), 0 };
	q[MISC_RCVTIMEO] = (struct sockopt_req){ s, SOL_SOCKET, SO_RCVTIMEO, &m->rcvtimeo,
						 sizeof(m->rcvtimeo), 0 };
	q[MISC_SNDTIMEO] = (struct sockopt_req){ s, SOL_SOCKET, SO_SNDTIMEO, &m->sndtimeo,
						 sizeof(m->sndtimeo), 0 };
	q[MISC_DEV] = (struct sockopt_req){ s, SOL_SOCKET, SO_BINDTODEVICE, dev,
					    (socklen_t)devlen, 0 };
	/* no room: the number of the filter's instructions (sk-filter.c) */
	q[MISC_FILTER] = (struct sockopt_req){ s, SOL_SOCKET, SO_GET_FILTER, NULL, 0, 0 };
}

/* buffers, linger, timeouts, device, from the answers q[MISC_N] */
static int read_misc(const struct sockopt_req *q, const struct misc_vals *m, InetSkEntry *e,
		     char *dev, size_t devlen)
{
	if (q[MISC_SNDBUF].res < 0)
		return q[MISC_SNDBUF].res;
	e->sndbuf = (uint32_t)m->sndbuf;
	if (q[MISC_RCVBUF].res < 0)
		return q[MISC_RCVBUF].res;
	e->rcvbuf = (uint32_t)m->rcvbuf;
	e->buf_lock = q[MISC_BUF_LOCK].res == 0 ? (uint32_t)m->buf_lock & 3 : 0;
	if (q[MISC_LINGER].res < 0)
		return q[MISC_LINGER].res;
	if (m->lg.l_onoff) {
		e->has_linger_on = e->has_linger_secs = true;
		e->linger_on = true;
		e->linger_secs = (uint32_t)m->lg.l_linger;
	}
	if (q[MISC_RCVTIMEO].res == 0 && tv_us(&m->rcvtimeo)) {
		e->has_rcvtimeo_us = true;
		e->rcvtimeo_us = tv_us(&m->rcvtimeo);
	}
	if (q[MISC_SNDTIMEO].res == 0 && tv_us(&m->sndtimeo)) {
		e->has_sndtimeo_us = true;
		e->sndtimeo_us = tv_us(&m->sndtimeo);
	}
	socklen_t l = q[MISC_DEV].len;
	if (q[MISC_DEV].res == 0 && l > 0 && dev[0]) {
		dev[l < devlen ? l : devlen - 1] = 0;
		e->bindtodevice = dev;
	} else
		dev[0] = 0;
	return 0;
}

#define OPT_TABLE_N (sizeof(opt_table) / sizeof(opt_table[0]))
_Static_assert(OPT_TABLE_N <= INET_OPTS_TABLE, "INET_OPTS_TABLE too small");

/* The defaults of a new socket of family, type and proto: from defs if it
 * has them, else read (and kept in defs when there is room). */
static int opt_defaults(int family, int type, int proto, struct inet_opt_defaults *defs,
			int *val, bool *ok)
{
	for (size_t i = 0; defs && i < defs->n; i++)
		if (defs->e[i].family == family && defs->e[i].type == type &&
		    defs->e[i].proto == proto) {
			memcpy(val, defs->e[i].val, sizeof(defs->e[i].val));
			memcpy(ok, defs->e[i].ok, sizeof(defs->e[i].ok));
			return 0;
		}
	_cleanup_close_ int fresh = socket(family, type | SOCK_CLOEXEC, proto);
	if (fresh < 0)
		return -errno;
	for (size_t i = 0; i < OPT_TABLE_N; i++)
		ok[i] = opt_applies(&opt_table[i], family, type, proto) &&
			get_int(fresh, opt_table[i].level, opt_table[i].name, &val[i]) == 0;
	if (defs && defs->n < sizeof(defs->e) / sizeof(defs->e[0])) {
		defs->e[defs->n].family = family;
		defs->e[defs->n].type = type;
		defs->e[defs->n].proto = proto;
		memcpy(defs->e[defs->n].val, val, sizeof(defs->e[0].val));
		memcpy(defs->e[defs->n].ok, ok, sizeof(defs->e[0].ok));
		defs->n++;
	}
	return 0;
}

int inet_opts_read(int s, int family, int type, int proto, struct inet_opt_defaults *defs,
		   const struct inet_opt_val *known, size_t nknown, InetOpt *v, size_t cap,
		   size_t *ret_n, InetSkEntry *e, char *dev, size_t devlen, int *ret_filter)
{
	int def[INET_OPTS_TABLE], val[INET_OPTS_TABLE];
	bool ok[INET_OPTS_TABLE], got[INET_OPTS_TABLE];
	struct sockopt_req q[INET_OPTS_TABLE + MISC_N];
	size_t at[INET_OPTS_TABLE], nq = MISC_N, n = 0;
	struct misc_vals m;
	int r = opt_defaults(family, type, proto, defs, def, ok);
	if (r < 0)
		return r;
	/* the options and the rest in one batch (sockopts.h): the SOL_SOCKET
	 * ones in one system call */
	if (defs && !defs->so && !defs->no_ring && sockopts_new(32, &defs->so) < 0)
		defs->no_ring = true;
	misc_reqs(s, &m, dev, devlen, q);
	for (size_t i = 0; i < OPT_TABLE_N; i++) {
		if (!ok[i])
			continue;
		val[i] = 0;
		got[i] = false;
		for (size_t k = 0; k < nknown && !got[i]; k++)
			if (known[k].level == opt_table[i].level && known[k].name == opt_table[i].name) {
				val[i] = known[k].val;
				got[i] = true;
			}
		if (got[i])
			continue;
		at[i] = nq;
		q[nq++] = (struct sockopt_req){ s, opt_table[i].level, opt_table[i].name, &val[i],
						sizeof(int), 0 };
	}
	sockopts_get(defs ? defs->so : NULL, q, nq);
	for (size_t i = 0; i < OPT_TABLE_N; i++) {
		const struct inet_opt_desc *d = &opt_table[i];
		if (!ok[i] || (!got[i] && q[at[i]].res < 0) || val[i] == def[i])
			continue;
		if (n == cap)
			return -E2BIG;
		inet_opt__init(&v[n]);
		v[n].level = (uint32_t)d->level;
		v[n].name = (uint32_t)d->name;
		v[n].val = val[i];
		n++;
	}
	*ret_n = n;
	*ret_filter = q[MISC_FILTER].res < 0 ? q[MISC_FILTER].res : (int)q[MISC_FILTER].len;
	return read_misc(q, &m, e, dev, devlen);
}

int inet_opts_apply(int s, const InetSkEntry *e, bool bind, bool last, const InetOpt **ret_bad)
{
	for (size_t i = 0; i < e->n_opts; i++) {
		const InetOpt *o = e->opts[i];
		const struct inet_opt_desc *d = inet_opt_find(o->level, o->name);
		if (!d)
			return -EINVAL;
		if (last ? !(d->flags & OPT_LAST)
			 : ((d->flags & OPT_LAST) || !(d->flags & OPT_BIND) != !bind))
			continue;
		int v = o->val;
		if (setsockopt(s, d->level, d->name, &v, sizeof(v)) < 0) {
			*ret_bad = o;
			return -errno;
		}
	}
	return 0;
}

int inet_opts_apply_misc(int s, const InetSkEntry *e)
{
	if (e->linger_on) {
		struct linger lg = { .l_onoff = 1, .l_linger = (int)e->linger_secs };
		if (setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
			return -errno;
	}
	if (e->has_rcvtimeo_us) {
		struct timeval tv = { .tv_sec = (time_t)(e->rcvtimeo_us / 1000000u),
				      .tv_usec = (suseconds_t)(e->rcvtimeo_us % 1000000u) };
		if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
			return -errno;
	}
	if (e->has_sndtimeo_us) {
		struct timeval tv = { .tv_sec = (time_t)(e->sndtimeo_us / 1000000u),
				      .tv_usec = (suseconds_t)(e->sndtimeo_us % 1000000u) };
		if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
			return -errno;
	}
	if (e->bindtodevice && e->bindtodevice[0] &&
	    setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, e->bindtodevice,
		       (socklen_t)strlen(e->bindtodevice)) < 0)
		return -errno;
	return 0;
}

int inet_filter_apply(int s, const InetSkEntry *e)
{
	return e->has_filter ? sk_filter_apply(s, e->filter.data, e->filter.len, e->filter_locked)
			     : 0;
}

/* sk_sndbuf/sk_rcvbuf = 2 * what is set: set half, forced if the limit is lower */
static int set_buf(int s, bool snd, uint32_t val)
{
	int half = (int)(val / 2);
	int v;
	if (setsockopt(s, SOL_SOCKET, snd ? SO_SNDBUFFORCE : SO_RCVBUFFORCE, &half, sizeof(half)) == 0)
		return 0;
	if (setsockopt(s, SOL_SOCKET, snd ? SO_SNDBUF : SO_RCVBUF, &half, sizeof(half)) < 0)
		return -errno;
	if (get_int(s, SOL_SOCKET, snd ? SO_SNDBUF : SO_RCVBUF, &v) < 0 || (uint32_t)v < val)
		return -EPERM;
	return 0;
}

int inet_bufs_raise_at(int s, size_t sndq, size_t rcvq, const int *now)
{
	int v, r;
	if (sndq && (r = now && now[0] >= 0 ? (v = now[0], 0) : get_int(s, SOL_SOCKET, SO_SNDBUF, &v)) == 0 &&
	    (size_t)v < 4 * sndq)
		r = set_buf(s, true, (uint32_t)(4 * sndq));
	else
		r = 0;
	if (r == 0 && rcvq &&
	    (now && now[1] >= 0 ? (v = now[1], 0) : get_int(s, SOL_SOCKET, SO_RCVBUF, &v)) == 0 &&
	    (size_t)v < 4 * rcvq)
		r = set_buf(s, false, (uint32_t)(4 * rcvq));
	return r;
}

int inet_bufs_raise(int s, size_t sndq, size_t rcvq)
{
	return inet_bufs_raise_at(s, sndq, rcvq, NULL);
}

/* One buffer (snd: SO_SNDBUF) as saved (want); fresh: its size on a new
 * socket or NULL (asked). *now: its size after, -1 if not known; *set:
 * set_buf ran. */
static int one_buf(int s, bool snd, uint32_t want, const int *fresh, int *now, bool *set)
{
	int cur = fresh ? *fresh : -1, r;
	if (!fresh && get_int(s, SOL_SOCKET, snd ? SO_SNDBUF : SO_RCVBUF, &cur) < 0)
		cur = (int)want; /* not known: left as it is */
	if ((uint32_t)cur != want) {
		if ((r = set_buf(s, snd, want)) < 0)
			return r;
		cur = -1;
		*set = true;
	}
	*now = fresh ? cur : -1;
	return 0;
}

int inet_bufs_set(int s, const InetSkEntry *e, const int *fresh, int *now)
{
	int here[2], r;
	bool set = false;
	/* as saved, whether the program set them or the kernel tuned them;
	 * then the locks as they were (a buffer the kernel tunes stays so) */
	if ((r = one_buf(s, true, e->sndbuf, fresh, &here[0], &set)) < 0 ||
	    (r = one_buf(s, false, e->rcvbuf, fresh ? &fresh[1] : NULL, &here[1], &set)) < 0)
		return r;
	if (now)
		memcpy(now, here, sizeof(here));
	/* a new socket's lock is 0, and only set_buf sets one */
	int lock = (int)e->buf_lock;
	if ((set || lock || !fresh) &&
	    setsockopt(s, SOL_SOCKET, SO_BUF_LOCK, &lock, sizeof(lock)) < 0 && lock)
		return -errno;
	return 0;
}

int inet_bufs_apply(int s, const InetSkEntry *e)
{
	return inet_bufs_set(s, e, NULL, NULL);
}

socklen_t inet_mkaddr(union inet_addr *a, int family, const uint8_t *addr, size_t len,
		      uint16_t port)
{
	memset(a, 0, sizeof(*a));
	if (family == AF_INET) {
		a->v4.sin_family = AF_INET;
		a->v4.sin_port = htons(port);
		if (len == 4)
			memcpy(&a->v4.sin_addr, addr, 4);
		return sizeof(a->v4);
	}
	a->v6.sin6_family = AF_INET6;
	a->v6.sin6_port = htons(port);
	if (len == 16)
		memcpy(&a->v6.sin6_addr, addr, 16);
	return sizeof(a->v6);
}

const char *inet_addr_str(const union inet_addr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (a->sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &a->v4.sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->v4.sin_port));
	} else {
		inet_ntop(AF_INET6, &a->v6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->v6.sin6_port));
	}
	return buf;
}

const char *inet_tcp_state_name(int state)
{
	static const char *const names[] = {
		[TCP_ESTABLISHED] = "ESTABLISHED", [TCP_SYN_SENT] = "SYN_SENT",
		[TCP_SYN_RECV] = "SYN_RECV",	   [TCP_FIN_WAIT1] = "FIN_WAIT1",
		[TCP_FIN_WAIT2] = "FIN_WAIT2",	   [TCP_TIME_WAIT] = "TIME_WAIT",
		[TCP_CLOSE] = "CLOSE",		   [TCP_CLOSE_WAIT] = "CLOSE_WAIT",
		[TCP_LAST_ACK] = "LAST_ACK",	   [TCP_LISTEN] = "LISTEN",
		[TCP_CLOSING] = "CLOSING",
	};
	return state > 0 && state < (int)(sizeof(names) / sizeof(names[0])) && names[state]
		       ? names[state]
		       : "unknown";
}

/* "0100007F:1F90" (v4) or 32 hex digits of four host-order words (v6) */
static int parse_proc_addr(const char *txt, int family, union inet_addr *a)
{
	unsigned port;
	memset(a, 0, sizeof(*a));
	if (family == AF_INET) {
		unsigned x;
		if (sscanf(txt, "%8x:%x", &x, &port) != 2)
			return -EINVAL;
		a->v4.sin_family = AF_INET;
		a->v4.sin_addr.s_addr = x;
		a->v4.sin_port = htons((uint16_t)port);
		return 0;
	}
	uint32_t w[4];
	if (sscanf(txt, "%8x%8x%8x%8x:%x", &w[0], &w[1], &w[2], &w[3], &port) != 5)
		return -EINVAL;
	a->v6.sin6_family = AF_INET6;
	memcpy(&a->v6.sin6_addr, w, 16);
	a->v6.sin6_port = htons((uint16_t)port);
	return 0;
}

int inet_proc_peer(int s, union inet_addr *ret)
{
	struct stat st;
	char line[512], rem[64];
	unsigned long ino;
	if (fstat(s, &st) < 0)
		return -errno;
	for (int v6 = 0; v6 < 2; v6++) {
		_cleanup_fclose_ FILE *f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "re");
		while (f && fgets(line, sizeof(line), f)) {
			if (sscanf(line, "%*s %*s %63s %*s %*s %*s %*s %*s %*s %lu", rem, &ino) != 2 ||
			    ino != st.st_ino)
				continue;
			int r = parse_proc_addr(rem, v6 ? AF_INET6 : AF_INET, ret);
			if (r == 0 && !(v6 ? ret->v6.sin6_port : ret->v4.sin_port))
				r = -ENOENT; /* no peer: a listener, a socket not connected */
			return r;
		}
	}
	return -ENOENT;
}

/* The IPv4 address of a (v4-mapped for AF_INET6) into *v4, or false. */
static bool addr_v4(const union inet_addr *a, uint32_t *v4)
{
	if (a->sa.sa_family == AF_INET) {
		*v4 = a->v4.sin_addr.s_addr;
		return true;
	}
	if (!IN6_IS_ADDR_V4MAPPED(&a->v6.sin6_addr))
		return false;
	memcpy(v4, &a->v6.sin6_addr.s6_addr[12], 4);
	return true;
}

static bool addr_any(const union inet_addr *a)
{
	return a->sa.sa_family == AF_INET ? a->v4.sin_addr.s_addr == htonl(INADDR_ANY)
					  : IN6_IS_ADDR_UNSPECIFIED(&a->v6.sin6_addr);
}

/* Does the local address loc of a connection clash with a bind to a? */
static bool same_local(const union inet_addr *a, const union inet_addr *loc)
{
	uint32_t x, y;
	if (addr_any(a))
		return true;
	if (addr_v4(a, &x) && addr_v4(loc, &y))
		return x == y;
	return a->sa.sa_family == AF_INET6 && loc->sa.sa_family == AF_INET6 &&
	       !memcmp(&a->v6.sin6_addr, &loc->v6.sin6_addr, 16);
}

/* SOCK_DESTROY of the TCP connection loc -> rem in state on the sock_diag
 * socket nl */
static int destroy_one(int nl, const union inet_addr *loc, const union inet_addr *rem,
		       unsigned state)
{
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req = {
		.h = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DESTROY,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK, .nlmsg_seq = 1 },
		.r = { .sdiag_family = loc->sa.sa_family, .sdiag_protocol = IPPROTO_TCP,
		       .idiag_states = 1u << state,
		       .id = { .idiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } } },
	};
	bool v6 = loc->sa.sa_family == AF_INET6;
	req.r.id.idiag_sport = v6 ? loc->v6.sin6_port : loc->v4.sin_port;
	req.r.id.idiag_dport = v6 ? rem->v6.sin6_port : rem->v4.sin_port;
	memcpy(req.r.id.idiag_src, v6 ? (const void *)&loc->v6.sin6_addr : (const void *)&loc->v4.sin_addr,
	       v6 ? 16 : 4);
	memcpy(req.r.id.idiag_dst, v6 ? (const void *)&rem->v6.sin6_addr : (const void *)&rem->v4.sin_addr,
	       v6 ? 16 : 4);
	if (send(nl, &req, sizeof(req), 0) < 0)
		return -errno;
	struct {
		struct nlmsghdr h;
		struct nlmsgerr e;
	} ack;
	ssize_t n = recv(nl, &ack, sizeof(ack), 0);
	if (n < 0)
		return -errno;
	if ((size_t)n < sizeof(ack) || ack.h.nlmsg_type != NLMSG_ERROR)
		return -EPROTO;
	/* gone meanwhile (its time was up): not an error */
	return ack.e.error == -ENOENT ? 0 : ack.e.error;
}

static bool same_addr(const union inet_addr *x, const union inet_addr *y)
{
	uint32_t a, b;
	if (addr_v4(x, &a) && addr_v4(y, &b))
		return a == b && x->v4.sin_port == y->v4.sin_port;
	return x->sa.sa_family == AF_INET6 && y->sa.sa_family == AF_INET6 &&
	       !memcmp(&x->v6.sin6_addr, &y->v6.sin6_addr, 16) && x->v6.sin6_port == y->v6.sin6_port;
}

int inet_stale_destroy(const union inet_addr *a, const union inet_addr *rem)
{
	uint16_t port = a->sa.sa_family == AF_INET ? a->v4.sin_port : a->v6.sin6_port;
	_cleanup_close_ int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	char line[512], loc[64], rm[64];
	unsigned st;
	unsigned long ino;
	int n = 0;
	for (int v6 = 0; v6 < 2; v6++) {
		_cleanup_fclose_ FILE *f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "re");
		while (f && fgets(line, sizeof(line), f)) {
			union inet_addr l, r;
			int fam = v6 ? AF_INET6 : AF_INET;
			if (sscanf(line, "%*s %63s %63s %x %*s %*s %*s %*s %*s %lu", loc, rm, &st,
				   &ino) != 4 ||
			    parse_proc_addr(loc, fam, &l) < 0 || parse_proc_addr(rm, fam, &r) < 0)
				continue;
			if ((v6 ? l.v6.sin6_port : l.v4.sin_port) != port || !same_local(a, &l))
				continue;
			/* TIME_WAIT of the port; else an orphan of this very connection */
			bool stale = st == TCP_TIME_WAIT ||
				     (rem && ino == 0 && st != TCP_LISTEN && st != TCP_CLOSE &&
				      same_addr(a, &l) && same_addr(rem, &r));
			if (!stale)
				continue;
			int e = destroy_one(nl, &l, &r, st);
			if (e < 0)
				return e;
			n++;
		}
	}
	return n;
}

const char *inet_proto_name(int proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_UDPLITE:
		return "udplite";
	case IPPROTO_ICMP:
		return "icmp";
	case IPPROTO_ICMPV6:
		return "icmpv6";
	case IPPROTO_SCTP:
		return "sctp";
	case IPPROTO_MPTCP:
		return "mptcp";
	default:
		return "ip";
	}
}

/* ---- TCP_REPAIR ------------------------------------------------------------ */

int inet_tcp_repair(int s, int mode)
{
	return setsockopt(s, IPPROTO_TCP, TCP_REPAIR, &mode, sizeof(mode)) < 0 ? -errno : 0;
}

static int set_queue(int s, int q)
{
	return setsockopt(s, IPPROTO_TCP, TCP_REPAIR_QUEUE, &q, sizeof(q)) < 0 ? -errno : 0;
}

/* The repair queue selected on a socket while it is read: a selection
 * already made is not made again (one setsockopt less each). */
struct qsel {
	int s;
	int cur; /* -1: not known */
};

static int qsel_set(struct qsel *q, int which)
{
	if (q->cur == which)
		return 0;
	int r = set_queue(q->s, which);
	q->cur = r == 0 ? which : -1;
	return r;
}

static int qsel_seq(struct qsel *q, int which, uint32_t *ret)
{
	socklen_t l = sizeof(*ret);
	int r = qsel_set(q, which);
	if (r == 0 && getsockopt(q->s, IPPROTO_TCP, TCP_QUEUE_SEQ, ret, &l) < 0)
		r = -errno;
	return r;
}

/* Peeks len bytes of queue which (repair mode) into a new buffer. */
static int peek_queue(struct qsel *q, int which, size_t len, ProtobufCBinaryData *ret)
{
	ret->len = 0;
	ret->data = NULL;
	if (!len)
		return 0;
	if (len > INET_QUEUE_MAX)
		return -EFBIG;
	int r = qsel_set(q, which);
	if (r < 0)
		return r;
	uint8_t *buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	ssize_t n = recv(q->s, buf, len + 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 || (size_t)n != len) {
		free(buf);
		return n < 0 ? -errno : -EAGAIN;
	}
	ret->data = buf;
	ret->len = len;
	return 0;
}

/* ti: the connection's tcp_info, read in repair mode */
static int read_opts(int s, const struct tcp_info *ti, TcpRepair *t)
{
	socklen_t l;
	int mss;

	t->opts = ti->tcpi_options & (TCPI_OPT_TIMESTAMPS | TCPI_OPT_SACK | TCPI_OPT_WSCALE);
	t->snd_wscale = ti->tcpi_snd_wscale;
	t->rcv_wscale = ti->tcpi_rcv_wscale;
	l = sizeof(mss);
	if (getsockopt(s, IPPROTO_TCP, TCP_MAXSEG, &mss, &l) < 0)
		return -errno;
	t->mss = (uint32_t)mss;
	l = sizeof(t->timestamp);
	if (getsockopt(s, IPPROTO_TCP, TCP_TIMESTAMP, &t->timestamp, &l) < 0)
		return -errno;
	struct tcp_repair_window w;
	l = sizeof(w);
	if (getsockopt(s, IPPROTO_TCP, TCP_REPAIR_WINDOW, &w, &l) == 0 && l == sizeof(w)) {
		t->has_snd_wl1 = t->has_snd_wnd = t->has_max_window = true;
		t->has_rcv_wnd = t->has_rcv_wup = t->has_has_window = true;
		t->has_window = true;
		t->snd_wl1 = w.snd_wl1;
		t->snd_wnd = w.snd_wnd;
		t->max_window = w.max_window;
		t->rcv_wnd = w.rcv_wnd;
		t->rcv_wup = w.rcv_wup;
	}
	return 0;
}

int inet_tcp_read(int s, const struct tcp_info *ti0, TcpRepair *t)
{
	int outq, unsent = 0, inq, r;
	struct qsel q = { s, -1 };

	tcp_repair__init(t);
	/* nothing queued to send: nothing unsent (no SIOCOUTQNSD) */
	if (ioctl(s, SIOCOUTQ, &outq) < 0 || (outq && ioctl(s, SIOCOUTQNSD, &unsent) < 0) ||
	    ioctl(s, SIOCINQ, &inq) < 0)
		return -errno;
	if (outq < 0 || unsent < 0 || inq < 0 || unsent > outq)
		return -EINVAL;
	/* FIN_WAIT1, LAST_ACK, CLOSING: the FIN not acknowledged yet is
	 * counted in both (if not sent) and is no byte of the queue. An
	 * ESTABLISHED tcp_info read before repair mode serves: from there
	 * the frozen program's peer can only make it CLOSE_WAIT, which
	 * counts no FIN sent, and the options are those of the handshake */
	struct tcp_info ti;
	if (ti0 && ti0->tcpi_state == TCP_ESTABLISHED) {
		ti = *ti0;
	} else {
		socklen_t tl = sizeof(ti);
		memset(&ti, 0, sizeof(ti));
		if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0)
			return -errno;
	}
	if ((ti.tcpi_state == TCP_FIN_WAIT1 || ti.tcpi_state == TCP_LAST_ACK ||
	     ti.tcpi_state == TCP_CLOSING) && outq > 0) {
		outq--;
		if (unsent > 0)
			unsent--;
	}
	r = qsel_seq(&q, TCP_SEND_QUEUE, &t->snd_seq);
	if (r == 0)
		r = peek_queue(&q, TCP_SEND_QUEUE, (size_t)outq, &t->sendq);
	if (r == 0)
		r = qsel_seq(&q, TCP_RECV_QUEUE, &t->rcv_seq);
	if (r == 0)
		r = peek_queue(&q, TCP_RECV_QUEUE, (size_t)inq, &t->recvq);
	if (r == 0)
		r = read_opts(s, &ti, t);
	/* data that came in meanwhile (a peer outside the tree, were it not
	 * locked out): after SIOCINQ and before the peek, the peek finds more
	 * than inq bytes (-EAGAIN: read again); after the receive sequence
	 * with nothing queued, or after the peek, it is in neither the
	 * sequence nor the queue read, which agree (no second TCP_QUEUE_SEQ) */
	qsel_set(&q, TCP_NO_QUEUE);
	t->unsent = (uint32_t)unsent;
	if (r < 0)
		inet_tcp_free(t);
	return r;
}

void inet_tcp_free(TcpRepair *t)
{
	free(t->sendq.data);
	free(t->recvq.data);
	t->sendq.data = t->recvq.data = NULL;
	t->sendq.len = t->recvq.len = 0;
}

/* Writes len bytes into queue which of q's socket in repair mode (none:
 * no selection either). */
static int fill_queue(struct qsel *q, int which, const uint8_t *buf, size_t len)
{
	int r = len ? qsel_set(q, which) : 0;
	while (r == 0 && len) {
		ssize_t n = send(q->s, buf, len, MSG_DONTWAIT);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return r;
}

static int set_repair_opts(int s, const TcpRepair *t)
{
	struct tcp_repair_opt o[4];
	int n = 0;
	o[n++] = (struct tcp_repair_opt){ TCPOPT_MAXSEG, t->mss };
	if (t->opts & TCPI_OPT_WSCALE)
		o[n++] = (struct tcp_repair_opt){ TCPOPT_WINDOW,
						  t->snd_wscale | (t->rcv_wscale << 16) };
	if (t->opts & TCPI_OPT_SACK)
		o[n++] = (struct tcp_repair_opt){ TCPOPT_SACK_PERM, 0 };
	if (t->opts & TCPI_OPT_TIMESTAMPS)
		o[n++] = (struct tcp_repair_opt){ TCPOPT_TIMESTAMP, 0 };
	if (setsockopt(s, IPPROTO_TCP, TCP_REPAIR_OPTIONS, o, (socklen_t)(n * sizeof(o[0]))) < 0)
		return -errno;
	return 0;
}

int inet_tcp_restore(int s, const TcpRepair *t, const union inet_addr *src, socklen_t srclen,
		     const union inet_addr *dst, socklen_t dstlen, const int *bufs,
		     const char **ret_step)
{
	size_t sent = t->sendq.len - t->unsent;
	/* a FIN sent takes one sequence number after the data: queued again
	 * below by shutdown. A FIN received stays counted in rcv_seq (the
	 * peer's next sequence) and reading is shut down instead. */
	bool fin_sent = t->has_fin && (t->fin & TCP_FIN_SENT);
	uint32_t snd = t->snd_seq - (uint32_t)t->sendq.len - (fin_sent ? 1u : 0u);
	uint32_t rcv = t->rcv_seq - (uint32_t)t->recvq.len;
	int r;

#define STEP(what, call)                      \
	do {                                  \
		*ret_step = what;             \
		if ((r = (call)) < 0)         \
			return r;             \
	} while (0)
	/* the queue selected once for its sequence and again only to fill
	 * the other (two setsockopt fewer than a selection each step) */
	struct qsel q = { s, -1 };
	STEP("TCP_REPAIR", inet_tcp_repair(s, TCP_REPAIR_ON));
	q.cur = TCP_NO_QUEUE;
	STEP("the send sequence", qsel_set(&q, TCP_SEND_QUEUE));
	*ret_step = "the send sequence";
	if (setsockopt(s, IPPROTO_TCP, TCP_QUEUE_SEQ, &snd, sizeof(snd)) < 0)
		return -errno;
	STEP("the receive sequence", qsel_set(&q, TCP_RECV_QUEUE));
	*ret_step = "the receive sequence";
	if (setsockopt(s, IPPROTO_TCP, TCP_QUEUE_SEQ, &rcv, sizeof(rcv)) < 0)
		return -errno;
	*ret_step = "bind";
	if (bind(s, &src->sa, srclen) < 0)
		return -errno;
	*ret_step = "connect";
	if (connect(s, &dst->sa, dstlen) < 0)
		return -errno;
	STEP("TCP_REPAIR_OPTIONS", set_repair_opts(s, t));
	*ret_step = "TCP_TIMESTAMP";
	if (setsockopt(s, IPPROTO_TCP, TCP_TIMESTAMP, &t->timestamp, sizeof(t->timestamp)) < 0)
		return -errno;
	STEP("the buffers", inet_bufs_raise_at(s, t->sendq.len, t->recvq.len, bufs));
	STEP("the receive queue", fill_queue(&q, TCP_RECV_QUEUE, t->recvq.data, t->recvq.len));
	STEP("the send queue", fill_queue(&q, TCP_SEND_QUEUE, t->sendq.data, sent));
	/* in repair mode with the send queue selected, the FIN is queued as
	 * sent, not sent: the timer sends it again once repair mode is off
	 * (the peer, which had it, acknowledges it again) */
	*ret_step = "shutdown";
	if (fin_sent && shutdown(s, SHUT_WR) < 0)
		return -errno;
	if (t->has_fin && (t->fin & TCP_FIN_RECEIVED) && shutdown(s, SHUT_RD) < 0)
		return -errno;
	if (t->has_window) {
		struct tcp_repair_window w = { .snd_wl1 = t->snd_wl1, .snd_wnd = t->snd_wnd,
					       .max_window = t->max_window, .rcv_wnd = t->rcv_wnd,
					       .rcv_wup = t->rcv_wup };
		*ret_step = "TCP_REPAIR_WINDOW";
		if (setsockopt(s, IPPROTO_TCP, TCP_REPAIR_WINDOW, &w, sizeof(w)) < 0)
			return -errno;
	}
	qsel_set(&q, TCP_NO_QUEUE);
	*ret_step = NULL;
	return 0;
#undef STEP
}
