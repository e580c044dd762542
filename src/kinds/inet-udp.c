/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Helpers of the inet kind for UDP and UDP-Lite (inet-sk.h): the receive
 * queue peeked and sent again, multicast memberships, the shutdown state.
 */
#include "kinds/inet-sk.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/socket.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/lock.h"
#include "util/cleanup.h"
#include "util/proc.h"

#ifndef SO_PEEK_OFF
#define SO_PEEK_OFF 42
#endif
#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

#define DGRAM_MAX 65536 /* the largest UDP payload, with room to see truncation */

static int get_int(int s, int level, int name, int *ret)
{
	socklen_t l = sizeof(*ret);
	*ret = 0;
	return getsockopt(s, level, name, ret, &l) < 0 ? -errno : 0;
}

/* ---- the receive queue ------------------------------------------------------ */

void inet_udp_free(UdpDgram **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		if (v[i])
			free(v[i]->data.data);
		free(v[i]);
	}
	free(v);
}

/* One peeked datagram into a new UdpDgram (its addresses stored after it). */
static UdpDgram *dgram_new(const uint8_t *buf, size_t len, const union inet_addr *from,
			   const struct msghdr *m)
{
	struct dgram_mem {
		UdpDgram d;
		uint8_t src[16], dst[16];
	} *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	udp_dgram__init(&x->d);
	x->d.data.data = malloc(len ? len : 1);
	if (!x->d.data.data) {
		free(x);
		return NULL;
	}
	memcpy(x->d.data.data, buf, len);
	x->d.data.len = len;
	bool v4 = from->sa.sa_family == AF_INET;
	memcpy(x->src, v4 ? (const void *)&from->v4.sin_addr : (const void *)&from->v6.sin6_addr,
	       v4 ? 4 : 16);
	x->d.src = (ProtobufCBinaryData){ .len = v4 ? 4 : 16, .data = x->src };
	x->d.src_port = ntohs(v4 ? from->v4.sin_port : from->v6.sin6_port);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (v4 && c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(x->dst, &pi.ipi_addr, 4);
			x->d.has_dst = true;
			x->d.dst = (ProtobufCBinaryData){ .len = 4, .data = x->dst };
		} else if (!v4 && c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(x->dst, &pi.ipi6_addr, 16);
			x->d.has_dst = true;
			x->d.dst = (ProtobufCBinaryData){ .len = 16, .data = x->dst };
		}
	}
	return &x->d;
}

/* Peeks every datagram of s from peek offset 0 into *v (grown). */
static int peek_all(int s, UdpDgram ***v, size_t *n, size_t *total)
{
	_cleanup_free_ uint8_t *buf = malloc(DGRAM_MAX);
	size_t cap = 0;
	if (!buf)
		return -ENOMEM;
	for (;;) {
		union inet_addr from;
		char ctl[256];
		struct iovec io = { .iov_base = buf, .iov_len = DGRAM_MAX };
		struct msghdr m = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &io,
				    .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		memset(&from, 0, sizeof(from));
		ssize_t got = recvmsg(s, &m, MSG_PEEK | MSG_DONTWAIT);
		if (got < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (m.msg_flags & MSG_TRUNC)
			return -EMSGSIZE;
		if (from.sa.sa_family != AF_INET && from.sa.sa_family != AF_INET6)
			return -EPROTO;
		*total += (size_t)got;
		if (*total > INET_QUEUE_MAX)
			return -EFBIG;
		if (*n == cap) {
			size_t nc = cap ? 2 * cap : 8;
			UdpDgram **nv = realloc(*v, nc * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			*v = nv;
			cap = nc;
		}
		(*v)[*n] = dgram_new(buf, (size_t)got, &from, &m);
		if (!(*v)[*n])
			return -ENOMEM;
		(*n)++;
	}
}

int inet_udp_peek(int s, int family, UdpDgram ***ret, size_t *ret_n)
{
	int old_off, old_pi, one = 1, zero = 0, r;
	int lv = family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6;
	int pi = family == AF_INET ? IP_PKTINFO : IPV6_RECVPKTINFO;
	size_t total = 0;

	*ret = NULL;
	*ret_n = 0;
	if (get_int(s, SOL_SOCKET, SO_PEEK_OFF, &old_off) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) < 0)
		return -EOPNOTSUPP;
	if ((r = get_int(s, lv, pi, &old_pi)) == 0 &&
	    setsockopt(s, lv, pi, &one, sizeof(one)) < 0)
		r = -errno;
	if (r == 0)
		r = peek_all(s, ret, ret_n, &total);
	/* as the program had them */
	setsockopt(s, lv, pi, &old_pi, sizeof(old_pi));
	if (setsockopt(s, SOL_SOCKET, SO_PEEK_OFF, &old_off, sizeof(old_off)) < 0 && r == 0)
		r = -errno;
	if (r < 0) {
		inet_udp_free(*ret, *ret_n);
		*ret = NULL;
		*ret_n = 0;
	}
	return r;
}

/* The memory s's receive queue holds and the datagrams it dropped. */
static int meminfo(int s, uint32_t *rmem, uint32_t *drops)
{
	uint32_t v[SK_MEMINFO_VARS];
	socklen_t l = sizeof(v);
	memset(v, 0, sizeof(v));
	if (getsockopt(s, SOL_SOCKET, SO_MEMINFO, v, &l) < 0)
		return -errno;
	*rmem = v[SK_MEMINFO_RMEM_ALLOC];
	*drops = v[SK_MEMINFO_DROPS];
	return 0;
}

/* Waits until s holds more than rmem (a datagram came): not by peeking,
 * which marks a datagram of 0 bytes so that a later peek from an offset
 * (the next checkpoint's) skips it. */
static int wait_queued(int s, uint32_t *rmem, uint32_t drops, int *budget)
{
	for (;;) {
		uint32_t now, d;
		int r = meminfo(s, &now, &d);
		if (r < 0)
			return r;
		if (d != drops)
			return -ENOBUFS;
		if (now > *rmem) {
			*rmem = now;
			return 0;
		}
		if ((*budget)-- <= 0)
			return -ETIMEDOUT;
		poll(NULL, 0, 1);
	}
}

static uint32_t csum_add(uint32_t sum, const void *p, size_t len)
{
	const uint8_t *b = p;
	for (; len > 1; len -= 2, b += 2)
		sum += (uint32_t)(b[0] << 8 | b[1]);
	if (len)
		sum += (uint32_t)b[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	uint16_t c = (uint16_t)~sum;
	return c ? c : 0xffff;
}

/* The UDP (or UDP-Lite, full coverage) header and payload at pkt + off,
 * checksummed with the pseudo header of saddr and daddr (alen bytes). */
static void put_udp(uint8_t *pkt, size_t off, const uint8_t *saddr, const uint8_t *daddr,
		    size_t alen, int proto, uint16_t sport, uint16_t dport,
		    const ProtobufCBinaryData *data)
{
	uint8_t *u = pkt + off;
	uint16_t ulen = (uint16_t)(8 + data->len);
	uint16_t w[4] = { htons(sport), htons(dport), htons(proto == IPPROTO_UDP ? ulen : 0), 0 };
	memcpy(u, w, 8);
	if (data->len) /* a datagram of 0 bytes has no data pointer */
		memcpy(u + 8, data->data, data->len);
	uint8_t ph[8] = { 0, 0, (uint8_t)(ulen >> 8), (uint8_t)ulen, 0, 0, 0, (uint8_t)proto };
	uint32_t sum = csum_add(0, saddr, alen);
	sum = csum_add(sum, daddr, alen);
	sum = alen == 4 ? csum_add(sum, (uint8_t[]){ 0, (uint8_t)proto, (uint8_t)(ulen >> 8), (uint8_t)ulen }, 4)
			: csum_add(sum, ph, 8);
	sum = csum_add(sum, u, ulen);
	uint16_t c = htons(csum_fold(sum));
	memcpy(u + 6, &c, 2);
}

/* A raw socket whose packets the network lock lets pass. */
static int raw_socket(int family)
{
	int s = socket(family, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW), one = 1;
	unsigned mark = NETLOCK_MARK_PASS;
	if (s < 0)
		return -errno;
	if (setsockopt(s, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)) < 0) {
		int r = -errno;
		close(s);
		return r;
	}
	return s;
}

static bool is_mapped(const uint8_t *a, size_t len)
{
	static const uint8_t pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return len == 16 && !memcmp(a, pre, 12);
}

static bool all_zero(const uint8_t *a, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i])
			return false;
	return true;
}

/* Sends datagram d to s (bound at self), from its sender's address. */
static int send_one(int *raw4, int *raw6, int proto, const union inet_addr *self,
		    const UdpDgram *d)
{
	static const uint8_t lo4[4] = { 127, 0, 0, 1 };
	static const uint8_t lo6[16] = { [15] = 1 };
	bool v4 = d->src.len == 4 || is_mapped(d->src.data, d->src.len);
	const uint8_t *src = d->src.len == 16 && v4 ? d->src.data + 12 : d->src.data;
	uint8_t dst[16];
	/* to where it was sent; else the bound address; else loopback */
	if (d->has_dst && d->dst.len == d->src.len)
		memcpy(dst, d->dst.len == 16 && v4 ? d->dst.data + 12 : d->dst.data, v4 ? 4 : 16);
	else if (self->sa.sa_family == AF_INET)
		memcpy(dst, &self->v4.sin_addr, 4);
	else
		memcpy(dst, v4 ? self->v6.sin6_addr.s6_addr + 12 : self->v6.sin6_addr.s6_addr,
		       v4 ? 4 : 16);
	if (all_zero(dst, v4 ? 4 : 16))
		memcpy(dst, v4 ? lo4 : lo6, v4 ? 4 : 16);
	uint16_t dport = ntohs(self->sa.sa_family == AF_INET ? self->v4.sin_port : self->v6.sin6_port);
	size_t hl = v4 ? 20 : 40, len = hl + 8 + d->data.len;
	if (len > 65535 + (v4 ? 0 : 40))
		return -EMSGSIZE;
	_cleanup_free_ uint8_t *pkt = calloc(1, len);
	if (!pkt)
		return -ENOMEM;
	int *raw = v4 ? raw4 : raw6;
	if (*raw < 0 && (*raw = raw_socket(v4 ? AF_INET : AF_INET6)) < 0)
		return *raw;
	union inet_addr to;
	memset(&to, 0, sizeof(to));
	if (v4) {
		struct iphdr ip = { .version = 4, .ihl = 5, .ttl = 64, .protocol = (uint8_t)proto,
				    .tot_len = htons((uint16_t)len) };
		memcpy(&ip.saddr, src, 4);
		memcpy(&ip.daddr, dst, 4);
		memcpy(pkt, &ip, sizeof(ip));
		to.v4.sin_family = AF_INET;
		memcpy(&to.v4.sin_addr, dst, 4);
	} else {
		struct ip6_hdr ip = { .ip6_flow = htonl(6u << 28),
				      .ip6_plen = htons((uint16_t)(8 + d->data.len)),
				      .ip6_nxt = (uint8_t)proto, .ip6_hlim = 64 };
		memcpy(&ip.ip6_src, src, 16);
		memcpy(&ip.ip6_dst, dst, 16);
		memcpy(pkt, &ip, sizeof(ip));
		to.v6.sin6_family = AF_INET6;
		memcpy(&to.v6.sin6_addr, dst, 16);
	}
	put_udp(pkt, hl, src, dst, v4 ? 4 : 16, proto, (uint16_t)d->src_port, dport, &d->data);
	ssize_t n = sendto(*raw, pkt, len, 0, &to.sa, v4 ? sizeof(to.v4) : sizeof(to.v6));
	return n < 0 ? -errno : 0;
}

int inet_udp_refill(int s, const InetSkEntry *e, size_t *ret_got)
{
	_cleanup_close_ int raw4 = -1;
	_cleanup_close_ int raw6 = -1;
	union inet_addr self;
	socklen_t sl = sizeof(self);
	size_t want = 0;
	uint32_t rmem, drops;
	int r, budget = 5000; /* 1 ms each: loopback delivers in a softirq, soon */

	*ret_got = 0;
	if (getsockname(s, &self.sa, &sl) < 0)
		return -errno;
	for (size_t i = 0; i < e->n_rcvq; i++)
		want += e->rcvq[i]->data.len;
	/* room for them all, whatever the saved size (set again at the end) */
	if ((r = inet_bufs_raise(s, 0, want + e->n_rcvq * 1024)) < 0)
		return r;
	if ((r = meminfo(s, &rmem, &drops)) < 0)
		return r;
	/* one at a time: each in the queue before the next is sent */
	for (size_t i = 0; i < e->n_rcvq; i++) {
		if ((r = send_one(&raw4, &raw6, (int)e->proto, &self, e->rcvq[i])) < 0 ||
		    (r = wait_queued(s, &rmem, drops, &budget)) < 0)
			return r;
		*ret_got = i + 1;
	}
	return 0;
}
/* ---- multicast memberships ------------------------------------------------- */

#define MC_SOURCES 64

static void mcast_free_one(InetMcast *m)
{
	if (!m)
		return;
	free(m->ifname);
	free(m->sources);
	free(m);
}

void inet_mcast_free(InetMcast **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		mcast_free_one(v[i]);
	free(v);
}

struct mc_filter {
	struct group_filter gf;
	struct sockaddr_storage more[MC_SOURCES];
};

/* The membership of s in group (alen bytes) on ifindex, or NULL if none. */
static int mcast_one(int s, const uint8_t *group, size_t alen, unsigned ifindex,
		     InetMcast **ret)
{
	struct mc_filter f;
	memset(&f, 0, sizeof(f));
	f.gf.gf_interface = ifindex;
	f.gf.gf_numsrc = MC_SOURCES;
	struct sockaddr_in *g4 = (struct sockaddr_in *)&f.gf.gf_group;
	struct sockaddr_in6 *g6 = (struct sockaddr_in6 *)&f.gf.gf_group;
	if (alen == 4) {
		g4->sin_family = AF_INET;
		memcpy(&g4->sin_addr, group, 4);
	} else {
		g6->sin6_family = AF_INET6;
		memcpy(&g6->sin6_addr, group, 16);
	}
	socklen_t l = sizeof(f);
	*ret = NULL;
	if (getsockopt(s, alen == 4 ? IPPROTO_IP : IPPROTO_IPV6, MCAST_MSFILTER, &f, &l) < 0)
		return 0; /* not a group this socket joined there */
	if (f.gf.gf_numsrc > MC_SOURCES)
		return -E2BIG;
	struct mc_mem {
		InetMcast m;
		uint8_t group[16];
		uint8_t srcb[MC_SOURCES][16];
	} *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	inet_mcast__init(&x->m);
	memcpy(x->group, group, alen);
	x->m.group = (ProtobufCBinaryData){ .len = alen, .data = x->group };
	x->m.ifindex = ifindex;
	char name[IF_NAMESIZE];
	if (if_indextoname(ifindex, name))
		x->m.ifname = strdup(name);
	x->m.fmode = f.gf.gf_fmode;
	x->m.n_sources = f.gf.gf_numsrc;
	x->m.sources = calloc(MC_SOURCES, sizeof(*x->m.sources));
	if (!x->m.sources) {
		free(x->m.ifname);
		free(x);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f.gf.gf_numsrc; i++) {
		const struct sockaddr_storage *ss = &f.gf.gf_slist[i];
		memcpy(x->srcb[i], alen == 4 ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
					     : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr,
		       alen);
		x->m.sources[i] = (ProtobufCBinaryData){ .len = alen, .data = x->srcb[i] };
	}
	*ret = &x->m;
	return 0;
}

static int mcast_push(InetMcast ***v, size_t *n, InetMcast *m)
{
	InetMcast **nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv) {
		mcast_free_one(m);
		return -ENOMEM;
	}
	nv[(*n)++] = m;
	*v = nv;
	return 0;
}

/* Candidates from /proc/PID/net/igmp (v6 false) or igmp6: each group of
 * each interface the namespace joined, asked of s. */
static int mcast_scan(int s, pid_t pid, bool v6, InetMcast ***v, size_t *n)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r = proc_read(pid, v6 ? "net/igmp6" : "net/igmp", &text, &len);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	unsigned idx = 0;
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		uint8_t g[16];
		char hex[40];
		if (!v6) {
			unsigned x, i;
			if (line[0] >= '0' && line[0] <= '9' && sscanf(line, "%u", &i) == 1) {
				idx = i;
				continue;
			}
			if (line[0] != '\t' || !idx || sscanf(line, " %8X", &x) != 1)
				continue;
			memcpy(g, &x, 4); /* printed as the u32 in memory */
		} else {
			if (sscanf(line, "%u %*s %32s", &idx, hex) != 2 || strlen(hex) != 32)
				continue;
			for (int i = 0; i < 16; i++) {
				unsigned b;
				sscanf(hex + 2 * i, "%2x", &b);
				g[i] = (uint8_t)b;
			}
		}
		InetMcast *m;
		if ((r = mcast_one(s, g, v6 ? 16 : 4, idx, &m)) < 0)
			return r;
		if (m && (r = mcast_push(v, n, m)) < 0)
			return r;
	}
	return 0;
}

int inet_mcast_read(int s, int family, pid_t pid, InetMcast ***ret, size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	/* an IPv6 socket may join IPv4 groups too (IP_ADD_MEMBERSHIP) */
	int r = mcast_scan(s, pid, false, ret, ret_n);
	if (r == 0 && family == AF_INET6)
		r = mcast_scan(s, pid, true, ret, ret_n);
	if (r < 0) {
		inet_mcast_free(*ret, *ret_n);
		*ret = NULL;
		*ret_n = 0;
	}
	return r;
}

int inet_mcast_apply(int s, const InetSkEntry *e, const InetMcast **ret_bad)
{
	for (size_t i = 0; i < e->n_mcast; i++) {
		const InetMcast *m = e->mcast[i];
		size_t alen = m->group.len;
		int lv = alen == 4 ? IPPROTO_IP : IPPROTO_IPV6;
		unsigned idx = m->ifindex;
		*ret_bad = m;
		if (m->ifname && !(idx = if_nametoindex(m->ifname)))
			return -ENODEV;
		struct mc_filter f;
		memset(&f, 0, sizeof(f));
		struct group_req gr = { .gr_interface = idx };
		struct sockaddr_storage *ss[1 + MC_SOURCES] = { &gr.gr_group };
		for (size_t k = 0; k < m->n_sources; k++)
			ss[1 + k] = &f.gf.gf_slist[k];
		for (size_t k = 0; k <= m->n_sources; k++) {
			const uint8_t *a = k ? m->sources[k - 1].data : m->group.data;
			if (alen == 4) {
				struct sockaddr_in *in = (struct sockaddr_in *)ss[k];
				in->sin_family = AF_INET;
				memcpy(&in->sin_addr, a, 4);
			} else {
				struct sockaddr_in6 *in = (struct sockaddr_in6 *)ss[k];
				in->sin6_family = AF_INET6;
				memcpy(&in->sin6_addr, a, 16);
			}
		}
		if (setsockopt(s, lv, MCAST_JOIN_GROUP, &gr, sizeof(gr)) < 0)
			return -errno;
		if (m->fmode == MCAST_EXCLUDE && !m->n_sources)
			continue;
		f.gf.gf_interface = idx;
		f.gf.gf_group = gr.gr_group;
		f.gf.gf_fmode = m->fmode;
		f.gf.gf_numsrc = (uint32_t)m->n_sources;
		if (setsockopt(s, lv, MCAST_MSFILTER, &f, (socklen_t)GROUP_FILTER_SIZE(m->n_sources)) < 0)
			return -errno;
	}
	*ret_bad = NULL;
	return 0;
}

/* ---- what was sent ---------------------------------------------------------- */

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int inet_udp_wait_sent(int s, int proto, int max_ms, int *ret_outq)
{
	int outq = 0, cork = 0;
	if (ioctl(s, SIOCOUTQ, &outq) < 0)
		return -errno;
	if (!outq)
		return 0;
	*ret_outq = outq;
	/* a cork holds what the program sent until it sends again */
	if (get_int(s, proto, UDP_CORK, &cork) == 0 && cork)
		return -EBUSY;
	int64_t t0 = mono_ms(), waited = 0;
	while (outq && waited < max_ms) {
		poll(NULL, 0, 5);
		if (ioctl(s, SIOCOUTQ, &outq) < 0)
			return -errno;
		waited = mono_ms() - t0;
	}
	*ret_outq = outq;
	return outq ? -ETIMEDOUT : (int)(waited > 0 ? waited : 1);
}

/* ---- shutdown --------------------------------------------------------------- */

int inet_udp_shutdown(int s, int family, int proto, uint32_t *ret)
{
	union inet_addr self, peer;
	socklen_t sl = sizeof(self), pl = sizeof(peer);
	uint64_t cookie = 0;
	socklen_t cl = sizeof(cookie);
	struct pollfd p = { .fd = s, .events = POLLRDHUP };

	/* reading shut down shows in poll; writing only in sock_diag */
	*ret = poll(&p, 1, 0) == 1 && (p.revents & POLLRDHUP) ? 1 : 0;
	memset(&peer, 0, sizeof(peer));
	if (getsockname(s, &self.sa, &sl) < 0 || getsockopt(s, SOL_SOCKET, SO_COOKIE, &cookie, &cl) < 0)
		return -errno;
	if (getpeername(s, &peer.sa, &pl) < 0)
		memset(&peer, 0, sizeof(peer));
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req = {
		.h = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		.r = { .sdiag_family = (uint8_t)family, .sdiag_protocol = (uint8_t)proto,
		       .idiag_states = ~0u,
		       .id = { .idiag_cookie = { (uint32_t)cookie, (uint32_t)(cookie >> 32) } } },
	};
	bool v6 = family == AF_INET6;
	/* the lookup takes the remote end as src ("swapped for historical reasons") */
	req.r.id.idiag_sport = v6 ? peer.v6.sin6_port : peer.v4.sin_port;
	req.r.id.idiag_dport = v6 ? self.v6.sin6_port : self.v4.sin_port;
	memcpy(req.r.id.idiag_src, v6 ? (void *)&peer.v6.sin6_addr : (void *)&peer.v4.sin_addr,
	       v6 ? 16 : 4);
	memcpy(req.r.id.idiag_dst, v6 ? (void *)&self.v6.sin6_addr : (void *)&self.v4.sin_addr,
	       v6 ? 16 : 4);
	_cleanup_close_ int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	if (send(nl, &req, sizeof(req), 0) < 0)
		return -errno;
	char buf[1024];
	ssize_t n = recv(nl, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (!NLMSG_OK(h, (size_t)n))
		return -EPROTO;
	if (h->nlmsg_type == NLMSG_ERROR)
		return ((struct nlmsgerr *)NLMSG_DATA(h))->error ?: -EPROTO;
	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
		return -EPROTO;
	struct inet_diag_msg *dm = NLMSG_DATA(h);
	int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*dm)));
	for (struct rtattr *a = (struct rtattr *)(dm + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
		if (a->rta_type == INET_DIAG_SHUTDOWN && RTA_PAYLOAD(a) >= 1)
			*ret = *(uint8_t *)RTA_DATA(a) & 3;
	return 0;
}
