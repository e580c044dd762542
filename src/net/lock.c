/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The network lock (see lock.h): libnftables makes the table, a raw
 * nf_tables netlink request removes it.
 */
#include "net/lock.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

/* One element of a set: saddr . sport . daddr . dport, addresses raw. */
struct flow {
	int family;
	uint8_t saddr[16], daddr[16];
	uint16_t sport, dport; /* host order */
};

#define UNDO_MAX 256
#define NETLOCK_PORTS_MAX 1024

struct netlock {
	int netns_fd;           /* -1: the caller's namespace */
	char name[NETLOCK_NAME_MAX];
	struct flow *flows;     /* two per connection */
	size_t nflows, cap;
	struct { uint8_t proto; bool syn; uint16_t port; } ports[NETLOCK_PORTS_MAX];
	size_t nports;
	bool installed;
	struct timespec since;  /* when it was installed */
	int nlfd;               /* NETLINK_NETFILTER in the namespace, once installed */
	uint8_t undo[UNDO_MAX]; /* the removal request */
	size_t undo_len;
	char error[512];
};

/* ---- running code in the lock's network namespace ---- */

struct ns_job {
	int netns_fd;
	bool private_fds;
	int (*fn)(void *arg);
	void *arg;
	int ret;
};

static void *ns_thread(void *p)
{
	struct ns_job *job = p;
	job->ret = 0;
	if (job->netns_fd >= 0 && setns(job->netns_fd, CLONE_NEWNET) < 0)
		job->ret = -errno;
	/* libnftables waits on its socket with select(): an fd above
	 * FD_SETSIZE aborts the process. This thread gets a copy of the fd
	 * table with nothing but 0-2 in it, so its socket is fd 3 */
	if (job->ret == 0 && job->private_fds &&
	    (unshare(CLONE_FILES) < 0 || syscall(SYS_close_range, 3, ~0u, 0) < 0))
		job->ret = -errno;
	/* its errors are buffered, but a failed cache initialisation (no
	 * CAP_NET_ADMIN) also printed "Operation not permitted (you must be
	 * root)" on ckpt's stderr: in this copy of the table fd 2 is
	 * /dev/null */
	if (job->ret == 0 && job->private_fds) {
		int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (nul >= 0 && nul != 2) {
			dup2(nul, 2);
			close(nul);
		}
	}
	if (job->ret == 0)
		job->ret = job->fn(job->arg);
	return NULL;
}

/* Is fd the calling thread's own network namespace? */
static bool is_own_netns(int fd)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat("/proc/thread-self/ns/net", &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * fn(arg) on a thread in the namespace netns_fd (setns affects only the
 * calling thread; sockets keep the namespace they were made in).
 */
static int in_netns_fds(int netns_fd, bool private_fds, int (*fn)(void *), void *arg)
{
	if (netns_fd >= 0 && is_own_netns(netns_fd))
		netns_fd = -1;
	if (netns_fd < 0 && !private_fds)
		return fn(arg);
	struct ns_job job = { .netns_fd = netns_fd, .private_fds = private_fds, .fn = fn,
			      .arg = arg };
	pthread_t th;
	int e = pthread_create(&th, NULL, ns_thread, &job);
	if (e)
		return -e;
	pthread_join(th, NULL);
	return job.ret;
}

static int in_netns(int netns_fd, int (*fn)(void *), void *arg)
{
	return in_netns_fds(netns_fd, false, fn, arg);
}

/* ---- raw nf_tables requests ---- */

static size_t put_msg(uint8_t *buf, size_t off, uint16_t type, uint16_t flags, uint32_t seq,
		      uint8_t family, uint16_t res_id, const char *name)
{
	struct nlmsghdr *h = (struct nlmsghdr *)(buf + off);
	struct nfgenmsg *g = (struct nfgenmsg *)(h + 1);
	size_t len = NLMSG_LENGTH(sizeof(*g));
	*h = (struct nlmsghdr){ .nlmsg_type = type, .nlmsg_flags = NLM_F_REQUEST | flags,
				.nlmsg_seq = seq };
	*g = (struct nfgenmsg){ .nfgen_family = family, .version = NFNETLINK_V0,
				.res_id = htons(res_id) };
	if (name) {
		struct nlattr *a = (struct nlattr *)(buf + off + NLMSG_ALIGN(len));
		size_t n = strlen(name) + 1;
		a->nla_type = NFTA_TABLE_NAME;
		a->nla_len = (uint16_t)(NLA_HDRLEN + n);
		memcpy((uint8_t *)a + NLA_HDRLEN, name, n);
		len = NLMSG_ALIGN(len) + NLA_ALIGN(a->nla_len);
	}
	h->nlmsg_len = (uint32_t)len;
	return off + NLMSG_ALIGN(len);
}

/* A batch that deletes table inet name; its length (buf: UNDO_MAX bytes). */
static size_t build_deltable(uint8_t *buf, const char *name)
{
	memset(buf, 0, UNDO_MAX);
	size_t off = put_msg(buf, 0, NFNL_MSG_BATCH_BEGIN, 0, 1, AF_UNSPEC, NFNL_SUBSYS_NFTABLES,
			     NULL);
	off = put_msg(buf, off, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELTABLE, NLM_F_ACK, 2,
		      NFPROTO_INET, 0, name);
	return put_msg(buf, off, NFNL_MSG_BATCH_END, 0, 3, AF_UNSPEC, NFNL_SUBSYS_NFTABLES, NULL);
}

static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0)
		return -errno;
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* an error answers with the request's header only, not its 50 KiB */
	int one = 1;
	setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	return fd;
}

/*
 * Sends msg and reads the kernel's answers to the messages of seqs [first,
 * last] (a batch's begin and end, first - 1 and last + 1, are answered only
 * when they fail): 0 once each has an ack or a reply, else the first
 * -errno the kernel gave.
 */
static int nl_exchange(int fd, const void *msg, size_t len, uint32_t first, uint32_t last)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	if (sendto(fd, msg, len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	for (uint32_t answered = 0; answered < last - first + 1;) {
		uint8_t buf[8192];
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq < first - 1 || h->nlmsg_seq > last + 1)
				continue;
			const struct nlmsgerr *e = NLMSG_DATA(h);
			if (h->nlmsg_type == NLMSG_ERROR && e->error)
				return e->error;
			/* an ack, or a reply: what was asked for exists */
			answered += h->nlmsg_seq >= first && h->nlmsg_seq <= last;
		}
	}
	return 0;
}

/* One request: 0 (an ack, or a reply) or the kernel's -errno. */
static int nl_talk(int fd, const void *msg, size_t len, uint32_t seq)
{
	return nl_exchange(fd, msg, len, seq, seq);
}

struct name_job {
	const char *name;
	bool get; /* ask whether it exists, rather than delete it */
	int fd;   /* in: a socket to use, or -1 */
};

static int name_job_run(void *arg)
{
	struct name_job *j = arg;
	_cleanup_close_ int own = j->fd < 0 ? nl_open() : -1;
	int fd = j->fd >= 0 ? j->fd : own;
	if (fd < 0)
		return fd;
	uint8_t buf[UNDO_MAX];
	if (j->get) {
		size_t len = put_msg(buf, 0, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE,
				     NLM_F_ACK, 7, NFPROTO_INET, 0, j->name);
		int r = nl_talk(fd, buf, len, 7);
		return r == 0 ? 1 : r == -ENOENT ? 0 : r;
	}
	return nl_talk(fd, buf, build_deltable(buf, j->name), 2);
}

static bool valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= NETLOCK_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(name[i] == '_' || (name[i] >= '0' && name[i] <= '9') ||
		      (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z')))
			return false;
	return true;
}

int netlock_remove_name(int netns_fd, const char *name)
{
	if (!valid_name(name))
		return -EINVAL;
	struct name_job j = { .name = name, .fd = -1 };
	return in_netns(netns_fd, name_job_run, &j);
}

int netlock_exists(int netns_fd, const char *name)
{
	if (!valid_name(name))
		return -EINVAL;
	struct name_job j = { .name = name, .get = true, .fd = -1 };
	return in_netns(netns_fd, name_job_run, &j);
}

struct sock_job {
	int domain, type, proto, fd;
};

static int sock_job_run(void *arg)
{
	struct sock_job *j = arg;
	j->fd = socket(j->domain, j->type | SOCK_CLOEXEC, j->proto);
	return j->fd < 0 ? -errno : 0;
}

int netns_socket(int netns_fd, int domain, int type, int proto)
{
	struct sock_job j = { .domain = domain, .type = type, .proto = proto, .fd = -1 };
	int r = in_netns(netns_fd, sock_job_run, &j);
	return r < 0 ? r : j.fd;
}

/* ---- the lock ---- */

static int open_nl_job(void *arg)
{
	struct netlock *nl = arg;
	nl->nlfd = nl_open();
	return nl->nlfd < 0 ? nl->nlfd : 0;
}

void netlock_name(char *buf, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint32_t tag = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 2654435761u;
	snprintf(buf, len, "ckpt_lock_%d_%08" PRIx32, (int)getpid(), tag);
}

int netlock_new(int netns_fd, const char *name, struct netlock **ret)
{
	if (!valid_name(name))
		return -EINVAL;
	struct netlock *nl = calloc(1, sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	nl->nlfd = -1;
	nl->netns_fd = netns_fd >= 0 ? fcntl(netns_fd, F_DUPFD_CLOEXEC, 3) : -1;
	if (netns_fd >= 0 && nl->netns_fd < 0) {
		int e = -errno;
		free(nl);
		return e;
	}
	snprintf(nl->name, sizeof(nl->name), "%s", name);
	/* the removal is ready before the table exists: whoever must remove it
	 * can be given it first, leaving no window */
	int r = in_netns(nl->netns_fd, open_nl_job, nl);
	if (r < 0) {
		netlock_free(nl);
		return r;
	}
	nl->undo_len = build_deltable(nl->undo, nl->name);
	*ret = nl;
	return 0;
}

void netlock_free(struct netlock *nl)
{
	if (!nl)
		return;
	if (nl->installed && netlock_remove(nl) < 0)
		nl->installed = false; /* nothing more to be done here */
	if (nl->nlfd >= 0)
		close(nl->nlfd);
	if (nl->netns_fd >= 0)
		close(nl->netns_fd);
	free(nl->flows);
	free(nl);
}

/* addr's family (v4-mapped taken as AF_INET), raw address and port. */
static int split_addr(const struct sockaddr *sa, uint8_t addr[16], uint16_t *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		memset(addr, 0, 16);
		memcpy(addr, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return AF_INET;
	}
	if (sa->sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
	*port = ntohs(in6->sin6_port);
	memset(addr, 0, 16);
	if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
		memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
		return AF_INET;
	}
	memcpy(addr, &in6->sin6_addr, 16);
	return AF_INET6;
}

int netlock_add(struct netlock *nl, const struct sockaddr *local, const struct sockaddr *remote)
{
	struct flow out = { 0 }, in = { 0 };
	int fl = split_addr(local, out.saddr, &out.sport);
	int fr = split_addr(remote, out.daddr, &out.dport);
	if (fl < 0 || fr < 0)
		return -EAFNOSUPPORT;
	if (fl != fr)
		return -EINVAL;
	if (nl->installed)
		return -EBUSY;
	if (nl->nflows + 2 > nl->cap) {
		size_t cap = nl->cap ? 2 * nl->cap : 64;
		struct flow *v = realloc(nl->flows, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		nl->flows = v;
		nl->cap = cap;
	}
	out.family = in.family = fl;
	memcpy(in.saddr, out.daddr, 16);
	memcpy(in.daddr, out.saddr, 16);
	in.sport = out.dport;
	in.dport = out.sport;
	nl->flows[nl->nflows++] = out;
	nl->flows[nl->nflows++] = in;
	return 0;
}

static int add_port(struct netlock *nl, int proto, bool syn, uint16_t port)
{
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return -EPROTONOSUPPORT;
	if (nl->installed)
		return -EBUSY;
	for (size_t i = 0; i < nl->nports; i++)
		if (nl->ports[i].proto == proto && nl->ports[i].syn == syn &&
		    nl->ports[i].port == port)
			return 0;
	if (nl->nports == NETLOCK_PORTS_MAX)
		return -E2BIG;
	nl->ports[nl->nports].proto = (uint8_t)proto;
	nl->ports[nl->nports].syn = syn;
	nl->ports[nl->nports].port = port;
	nl->nports++;
	return 0;
}

int netlock_add_port(struct netlock *nl, int proto, uint16_t port)
{
	return add_port(nl, proto, false, port);
}

int netlock_add_syn_port(struct netlock *nl, uint16_t port)
{
	return add_port(nl, IPPROTO_TCP, true, port);
}

size_t netlock_ports(const struct netlock *nl)
{
	return nl ? nl->nports : 0;
}

size_t netlock_count(const struct netlock *nl)
{
	return nl ? nl->nflows / 2 : 0;
}

int netlock_installed(const struct netlock *nl)
{
	return nl && nl->installed;
}

const char *netlock_name_of(const struct netlock *nl)
{
	return nl->name;
}

uint64_t netlock_age_us(const struct netlock *nl)
{
	struct timespec now;
	if (!nl || !nl->installed)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - nl->since.tv_sec) * 1000000u +
	       (uint64_t)((now.tv_nsec - nl->since.tv_nsec) / 1000);
}

void netlock_keep(struct netlock *nl)
{
	nl->installed = false;
}

const char *netlock_error(const struct netlock *nl)
{
	return nl->error;
}

static int cmp_flow(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct flow));
}

/* The nft commands that make the table: a text buffer, malloc'd. */
static char *install_script(struct netlock *nl)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	const char *n = nl->name;
	fprintf(f, "create table inet %s\n", n); /* -EEXIST if it exists */
	fprintf(f, "add set inet %s c4 { type ipv4_addr . inet_service . ipv4_addr . inet_service; }\n", n);
	fprintf(f, "add set inet %s c6 { type ipv6_addr . inet_service . ipv6_addr . inet_service; }\n", n);
	fprintf(f, "add set inet %s p { type inet_proto . inet_service; }\n", n);
	static const char *const chains[][2] = { { "in", "input" }, { "out", "output" } };
	for (int c = 0; c < 2; c++) {
		fprintf(f, "add chain inet %s %s { type filter hook %s priority %d; policy accept; }\n",
			n, chains[c][0], chains[c][1], NETLOCK_PRIORITY);
		fprintf(f, "add rule inet %s %s meta mark 0x%x accept\n", n, chains[c][0],
			NETLOCK_MARK_PASS);
		fprintf(f, "add rule inet %s %s ip saddr . tcp sport . ip daddr . tcp dport @c4 "
			   "counter drop\n", n, chains[c][0]);
		fprintf(f, "add rule inet %s %s ip6 saddr . tcp sport . ip6 daddr . tcp dport @c6 "
			   "counter drop\n", n, chains[c][0]);
	}
	/* what comes in to a listener or a UDP port: no connection of it is
	 * outside the tree (those inside are in c4/c6 anyway) */
	fprintf(f, "add rule inet %s in meta l4proto . th dport @p counter drop\n", n);
	/* a new client's first SYN to a listener, and nothing else of its port */
	fprintf(f, "add set inet %s s { type inet_service; }\n", n);
	fprintf(f, "add rule inet %s in tcp flags & (syn | ack) == syn tcp dport @s counter drop\n",
		n);
	for (int syn = 0; syn < 2; syn++) {
		bool any = false;
		for (size_t i = 0; i < nl->nports; i++) {
			if (nl->ports[i].syn != syn)
				continue;
			if (!any)
				fprintf(f, "add element inet %s %s { ", n, syn ? "s" : "p");
			if (syn)
				fprintf(f, "%s%u", any ? ", " : "", nl->ports[i].port);
			else
				fprintf(f, "%s%s . %u", any ? ", " : "",
					nl->ports[i].proto == IPPROTO_TCP ? "tcp" : "udp",
					nl->ports[i].port);
			any = true;
		}
		if (any)
			fprintf(f, " }\n");
	}
	/* the connections' elements go in as netlink messages (add_flows) */
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- the connections' elements, as raw nf_tables messages ---- */

/*
 * libnftables parses a text of 20,000 elements in about 0.4 s; the same
 * elements as NFT_MSG_NEWSETELEM messages cost the kernel a few ms. A
 * set's key is its fields one after the other, each in 4-byte registers:
 * address, port (network order, 2 bytes and 2 of padding), address, port.
 */
#define ELEMS_PER_MSG 1024
#define BATCH_MAX (128u << 10) /* under the socket's send buffer */

struct nlbuf {
	uint8_t *p;
	size_t len, cap;
};

static void *nlbuf_put(struct nlbuf *b, size_t n)
{
	n = NLA_ALIGN(n);
	if (b->len + n > b->cap)
		return NULL; /* sized for the worst case by the caller */
	void *at = b->p + b->len;
	memset(at, 0, n);
	b->len += n;
	return at;
}

static struct nlattr *attr_put(struct nlbuf *b, uint16_t type, const void *data, size_t n)
{
	struct nlattr *a = nlbuf_put(b, NLA_HDRLEN + n);
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + n);
	if (n)
		memcpy((uint8_t *)a + NLA_HDRLEN, data, n);
	return a;
}

static void attr_end(struct nlbuf *b, struct nlattr *nest)
{
	nest->nla_len = (uint16_t)(b->p + b->len - (uint8_t *)nest);
}

static size_t flow_key(const struct flow *fl, uint8_t key[40])
{
	size_t alen = fl->family == AF_INET ? 4 : 16, at = 0;
	uint16_t sp = htons(fl->sport), dp = htons(fl->dport);
	memset(key, 0, 40);
	memcpy(key + at, fl->saddr, alen), at += alen;
	memcpy(key + at, &sp, 2), at += 4;
	memcpy(key + at, fl->daddr, alen), at += alen;
	memcpy(key + at, &dp, 2), at += 4;
	return at;
}

/* One NEWSETELEM message of flows [from, to) of family af into set. */
static void put_elems(struct nlbuf *b, const char *table, const char *set,
		      const struct flow *flows, size_t from, size_t to, uint32_t seq)
{
	struct nlmsghdr *h = nlbuf_put(b, NLMSG_HDRLEN);
	size_t start = (size_t)((uint8_t *)h - b->p);
	h->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
	h->nlmsg_seq = seq;
	struct nfgenmsg *g = nlbuf_put(b, sizeof(*g));
	*g = (struct nfgenmsg){ .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0 };
	attr_put(b, NFTA_SET_ELEM_LIST_TABLE, table, strlen(table) + 1);
	attr_put(b, NFTA_SET_ELEM_LIST_SET, set, strlen(set) + 1);
	struct nlattr *list = attr_put(b, NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED, NULL, 0);
	for (size_t i = from; i < to; i++) {
		uint8_t key[40];
		size_t klen = flow_key(&flows[i], key);
		struct nlattr *el = attr_put(b, NFTA_LIST_ELEM | NLA_F_NESTED, NULL, 0);
		struct nlattr *k = attr_put(b, NFTA_SET_ELEM_KEY | NLA_F_NESTED, NULL, 0);
		attr_put(b, NFTA_DATA_VALUE, key, klen);
		attr_end(b, k);
		attr_end(b, el);
	}
	attr_end(b, list);
	((struct nlmsghdr *)(b->p + start))->nlmsg_len = (uint32_t)(b->p + b->len - b->p - start);
}

/* The flows of family af (sorted by family first) into set c4 or c6. */
static int add_flows(struct netlock *nl, struct nlbuf *b, int af, uint32_t *seq)
{
	size_t i = 0, n = nl->nflows;
	const char *set = af == AF_INET ? "c4" : "c6";
	while (i < n && nl->flows[i].family != af)
		i++;
	while (i < n && nl->flows[i].family == af) {
		b->len = put_msg(b->p, 0, NFNL_MSG_BATCH_BEGIN, 0, ++(*seq), AF_UNSPEC,
				 NFNL_SUBSYS_NFTABLES, NULL);
		uint32_t first = *seq + 1;
		/* messages while the next would still fit, with the batch end */
		while (i < n && nl->flows[i].family == af &&
		       b->len + (ELEMS_PER_MSG + 1) * 64 + 256 <= BATCH_MAX) {
			size_t to = i;
			while (to < n && nl->flows[to].family == af && to - i < ELEMS_PER_MSG)
				to++;
			put_elems(b, nl->name, set, nl->flows, i, to, ++(*seq));
			i = to;
		}
		uint32_t last = *seq;
		b->len = put_msg(b->p, b->len, NFNL_MSG_BATCH_END, 0, ++(*seq), AF_UNSPEC,
				 NFNL_SUBSYS_NFTABLES, NULL);
		int r = nl_exchange(nl->nlfd, b->p, b->len, first, last);
		if (r < 0)
			return r;
	}
	return 0;
}

static int install_flows(struct netlock *nl)
{
	struct nlbuf b = { .p = malloc(BATCH_MAX), .cap = BATCH_MAX };
	uint32_t seq = 100;
	if (!b.p)
		return -ENOMEM;
	int r = add_flows(nl, &b, AF_INET, &seq);
	if (r >= 0)
		r = add_flows(nl, &b, AF_INET6, &seq);
	free(b.p);
	return r;
}

struct nft_job {
	char *error;           /* what libnftables said when it failed */
	size_t error_len;
	const char *cmd;
	char *out;             /* the command's output, malloc'd, if wanted */
	bool want_out;
};

/*
 * libnftables is loaded when a lock is first made or removed by a script,
 * not linked: it and the five libraries it needs cost every run of ckpt
 * about 2 ms of start-up (and its guardian's fork more mappings), for a
 * lock most checkpoints never take. The handle stays (dlopen counts it).
 */
struct nft_api {
	struct nft_ctx *(*ctx_new)(uint32_t flags);
	void (*ctx_free)(struct nft_ctx *ctx);
	int (*buffer_output)(struct nft_ctx *ctx);
	int (*buffer_error)(struct nft_ctx *ctx);
	int (*run_cmd)(struct nft_ctx *ctx, const char *buf);
	const char *(*error_buffer)(struct nft_ctx *ctx);
	const char *(*output_buffer)(struct nft_ctx *ctx);
};

#define NFT_SONAME "libnftables.so.1"

static int nft_load(struct nft_api *api, char *error, size_t len)
{
	void *h = dlopen(NFT_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(error, len, "cannot load %s: %s", NFT_SONAME, e ? e : "not found");
		return -ENOPKG;
	}
	static const char *const names[] = {
		"nft_ctx_new", "nft_ctx_free", "nft_ctx_buffer_output", "nft_ctx_buffer_error",
		"nft_run_cmd_from_buffer", "nft_ctx_get_error_buffer", "nft_ctx_get_output_buffer",
	};
	void *fns[sizeof(names) / sizeof(names[0])];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		fns[i] = dlsym(h, names[i]);
		if (!fns[i]) {
			snprintf(error, len, "%s has no %s", NFT_SONAME, names[i]);
			return -ENOPKG;
		}
	}
	_Static_assert(sizeof(fns) == sizeof(*api), "one pointer per function");
	memcpy(api, fns, sizeof(*api));
	return 0;
}

static int nft_job_run(void *arg)
{
	struct nft_job *j = arg;
	struct nft_api nft_;
	int r = nft_load(&nft_, j->error, j->error_len);
	if (r < 0)
		return r;
	const struct nft_api *api = &nft_;
	struct nft_ctx *nft = api->ctx_new(NFT_CTX_DEFAULT);
	if (!nft)
		return -ENOMEM;
	api->buffer_output(nft);
	api->buffer_error(nft);
	r = api->run_cmd(nft, j->cmd);
	if (r != 0) {
		const char *e = api->error_buffer(nft);
		snprintf(j->error, j->error_len, "%s", e ? e : "");
		size_t n = strlen(j->error);
		while (n && j->error[n - 1] == '\n')
			j->error[--n] = 0;
		r = strstr(j->error, "File exists")	      ? -EEXIST
		    : strstr(j->error, "Operation not permitted") ? -EPERM
		    : strstr(j->error, "No such file")	      ? -ENOENT
								      : -EPROTO;
	} else if (j->want_out) {
		j->out = strdup(api->output_buffer(nft));
		if (!j->out)
			r = -ENOMEM;
	}
	api->ctx_free(nft);
	return r;
}

int netlock_install(struct netlock *nl)
{
	if (nl->installed)
		return -EBUSY;
	nl->error[0] = 0;
	/* one element per flow: a pair of connections both in the list (both
	 * ends of a loopback connection) gives each element twice */
	if (nl->nflows)
		qsort(nl->flows, nl->nflows, sizeof(*nl->flows), cmp_flow);
	size_t n = 0;
	for (size_t i = 0; i < nl->nflows; i++)
		if (!n || memcmp(&nl->flows[n - 1], &nl->flows[i], sizeof(struct flow)))
			nl->flows[n++] = nl->flows[i];
	nl->nflows = n;
	_cleanup_free_ char *cmd = install_script(nl);
	if (!cmd)
		return -ENOMEM;
	struct nft_job j = { .error = nl->error, .error_len = sizeof(nl->error), .cmd = cmd };
	int r = in_netns_fds(nl->netns_fd, true, nft_job_run, &j);
	if (r < 0)
		return r;
	/* the socket is in the namespace already */
	r = install_flows(nl);
	if (r < 0) {
		snprintf(nl->error, sizeof(nl->error), "adding the connections' elements: %s",
			 strerror(-r));
		struct name_job del = { .name = nl->name, .fd = nl->nlfd };
		(void)name_job_run(&del);
		return r;
	}
	nl->installed = true;
	clock_gettime(CLOCK_MONOTONIC, &nl->since);
	return 0;
}

int netlock_remove(struct netlock *nl)
{
	if (!nl || !nl->installed)
		return 0;
	struct name_job j = { .name = nl->name, .fd = nl->nlfd };
	int r = name_job_run(&j); /* the socket is already in the namespace */
	if (r == -ENOENT)
		r = 0;
	if (r == 0)
		nl->installed = false;
	return r;
}

int netlock_undo(const struct netlock *nl, int *ret_fd, const void **ret_msg, size_t *ret_len)
{
	*ret_fd = nl->nlfd;
	*ret_msg = nl->undo;
	*ret_len = nl->undo_len;
	return 0;
}

int netlock_dropped(struct netlock *nl, uint64_t *ret_packets)
{
	if (!nl->installed)
		return -ENOENT;
	char cmd[NETLOCK_NAME_MAX + 32];
	snprintf(cmd, sizeof(cmd), "list table inet %s", nl->name);
	struct nft_job j = { .error = nl->error, .error_len = sizeof(nl->error), .cmd = cmd,
			     .want_out = true };
	int r = in_netns_fds(nl->netns_fd, true, nft_job_run, &j);
	if (r < 0)
		return r;
	uint64_t sum = 0;
	for (const char *p = j.out; (p = strstr(p, "counter packets ")) != NULL;) {
		p += strlen("counter packets ");
		sum += strtoull(p, NULL, 10);
	}
	free(j.out);
	*ret_packets = sum;
	return 0;
}

int nft_run_in(int netns_fd, const char *cmd, char **ret_out, char *error, size_t error_len)
{
	char none[1];
	struct nft_job j = { .error = error_len ? error : none,
			     .error_len = error_len ? error_len : sizeof(none), .cmd = cmd,
			     .want_out = ret_out != NULL };
	j.error[0] = 0;
	int r = in_netns_fds(netns_fd, true, nft_job_run, &j);
	if (r >= 0 && ret_out)
		*ret_out = j.out;
	else
		free(j.out);
	return r;
}
