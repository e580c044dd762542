/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Internet sockets: TCP, UDP and UDP-Lite over IPv4 and IPv6 (v4-mapped
 * addresses included). A socket has one open file, so one object per
 * socket, found by its inode, holds everything: family, type, protocol,
 * state, addresses, the options that differ from a new socket's, buffer
 * sizes and their locks, O_NONBLOCK, and for an established TCP
 * connection what TCP_REPAIR shows (inet-sk.h).
 *
 * The kind also claims every socket the unix and netlink kinds leave (packet,
 * raw...), to refuse it by what it is.
 *
 * Checkpoint, in fd_collect, through a copy of the fd (pidfd_getfd), which
 * ckpt keeps until the end (a task's TCP sockets are read ahead by
 * threads at its first socket: prefetch()):
 * - TCP: unbound or bound (CLOSE), listening (LISTEN, the backlog; a
 *   listener with connections not accepted yet is refused), established:
 *   put in repair mode, its sequence numbers, both queues (peeked) and
 *   TCP options read, then out of repair mode again without a window probe
 *   and SO_REUSEADDR set again (leaving repair mode clears it). Every
 *   other state (SYN_SENT, the closing states) is refused.
 * - UDP, UDP-Lite: unbound, bound, connected. A datagram in the receive
 *   queue, or data corked in the send queue, is refused.
 * Under --kill (after_kill: the image complete, the tree killed), ckpt's
 * copies are what keeps the sockets open: each established one is put in
 * repair mode and closed, so that nothing (no FIN, no reset) goes out.
 *
 * Restart, on ckpt's side, in prepare: first every socket that is not an
 * established TCP connection (options for before bind, bind, listen or
 * connect), then the established ones, each in repair mode: bound and
 * connected without a packet, sequence numbers, options, timestamp,
 * receive queue and the sent part of the send queue refilled, window.
 * fdtable passes them in. restore_end, every socket made and no task
 * running yet: each connection leaves repair mode (a window probe tells
 * its peer to go on), SO_REUSEADDR is set again, the part of the send
 * queue that was never sent is sent, then buffer sizes and locks, TCP_CORK
 * and O_NONBLOCK. If the restart fails, the established sockets are put in
 * repair mode again before they are closed. RESTART_CONN_RESET: each
 * connection is restored, then leaves repair mode without a probe and is
 * disconnected (connect AF_UNSPEC): its peer gets a reset, the program
 * reads ECONNRESET; listeners and UDP sockets live.
 *
 * A connection whose two ends are both in the image is simply two sockets
 * restored each in its own right; an end elsewhere (another host, a
 * process outside the tree) is the peer, which retransmits what it sent
 * while the socket was gone: only with the network lock in place does it
 * not see a reset meanwhile (inet.h lists the connections for it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <net/if.h>
#include <stddef.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <linux/sockios.h>
#include <linux/if_packet.h>
#include <linux/capability.h>
#include <netinet/icmp6.h>
#include <unistd.h>

#include "core/ctx.h"
#include "util/proc.h"
#include "core/netlock.h"
#include "inet.pb-c.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/inet-move.h"
#include "kinds/inet-sk.h"
#include "kinds/inet.h"
#include "kinds/netns.h"
#include "kinds/sk-filter.h"
#include "util/cleanup.h"
#include "util/par.h"
#include "util/sockopts.h"

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif

enum { INET_SK_ENTRY = REC_TYPE(KID_inet, 1) };

/* states in the image */
enum {
	INET_ST_CLOSED,    /* unbound, or bound (src) */
	INET_ST_LISTEN,    /* TCP */
	INET_ST_CONNECTED, /* TCP: established (tcp); UDP: connected (dst) */
	INET_ST_SYN_SENT,  /* TCP: a connect in progress (src, dst): made again */
	INET_ST_MAX,
};

#define OPTS_MAX 64
/* how long a datagram sent may stay charged to its socket before it is
 * taken as corked: a neighbour not resolved holds one 3 s (3 probes, 1 s
 * apart, by default), then drops it */
#define UDP_SENT_WAIT_MS 4000

struct inet_obj {
	InetSkEntry e;
	TcpRepair tcp;
	InetOpt *opts; /* e.n_opts of them, malloc'ed (most sockets have none) */
	InetOpt **popts;
	uint8_t src[16], dst[16];
	char dev[IFNAMSIZ + 1];
	uint8_t icmp6f[sizeof(struct icmp6_filter)];
	pid_t pid;
	int fd;
	int copy; /* ckpt's, until the end */
	const struct tcp_seen *seen; /* the lock's dump of it (prefetch), or NULL */
};

struct inet_robj {
	InetSkEntry *e;
	int fd; /* ckpt's socket */
	bool repair; /* in repair mode now */
	bool finished; /* by restore_end's threads */
};

static bool inet_fd_claim(const struct fd_info *fi)
{
	return S_ISSOCK(fi->st.st_mode) && !fdtable_sock_proto(fi, "UNIX");
}

/* What inet keeps of a task while it is checkpointed. */
struct inet_task {
	struct inet_opt_defaults defs;
	int netns; /* 0 not known yet, 1 known (netns_id), -1 one the image does not hold */
	uint32_t netns_id; /* 0 the root's, else NetnsEntry.id */
	uint64_t cookie; /* its namespace's cookie, once netns is known */
	bool pre_done; /* prefetch() ran (or will not) */
	struct pre_ent *pre; /* its TCP sockets read ahead, by inode */
	size_t npre;
};

/* A socket read ahead by prefetch(), until inet_fd_collect takes it. */
struct pre_ent {
	unsigned long ino;
	struct inet_obj *o;
};

static void inet_free_obj(void *ptr);

static void inet_free_state(void *state)
{
	struct inet_task *it = state;
	if (it) {
		sockopts_free(it->defs.so);
		for (size_t i = 0; i < it->npre; i++)
			inet_free_obj(it->pre[i].o);
		free(it->pre);
	}
	free(it);
}

static int get_int(int s, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	return getsockopt(s, level, name, &v, &l) < 0 ? -errno : v;
}

/* "tcp 127.0.0.1:80 -> 127.0.0.1:4242" of s, into buf */
static const char *describe(int s, int proto, char *buf, size_t len)
{
	union inet_addr a, b;
	socklen_t al = sizeof(a), bl = sizeof(b);
	char x[64] = "unbound", y[64];
	if (getsockname(s, &a.sa, &al) == 0 && (a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6))
		inet_addr_str(&a, x, sizeof(x));
	if ((getpeername(s, &b.sa, &bl) == 0 || inet_proc_peer(s, &b) == 0) &&
	    (b.sa.sa_family == AF_INET || b.sa.sa_family == AF_INET6))
		snprintf(buf, len, "%s %s -> %s", inet_proto_name(proto), x,
			 inet_addr_str(&b, y, sizeof(y)));
	else
		snprintf(buf, len, "%s %s", inet_proto_name(proto), x);
	return buf;
}

static const char *family_name(int family)
{
	switch (family) {
	case AF_NETLINK:
		return "netlink";
	case AF_PACKET:
		return "packet";
	case AF_INET:
		return "inet";
	case AF_INET6:
		return "inet6";
	case AF_UNIX:
		return "unix";
	case AF_VSOCK:
		return "vsock";
	case AF_ALG:
		return "alg";
	case AF_BLUETOOTH:
		return "bluetooth";
	case AF_XDP:
		return "xdp";
	default:
		return NULL;
	}
}

static const char *type_name(int type)
{
	switch (type) {
	case SOCK_STREAM:
		return "stream";
	case SOCK_DGRAM:
		return "dgram";
	case SOCK_RAW:
		return "raw";
	case SOCK_SEQPACKET:
		return "seqpacket";
	case SOCK_RDM:
		return "rdm";
	default:
		return "?";
	}
}

/* A socket of no family this kind saves: said by family, type, protocol. */
static int refuse_other(struct ckpt_ctx *ctx, const struct fd_info *fi, int s, int family)
{
	int type = get_int(s, SOL_SOCKET, SO_TYPE), proto = get_int(s, SOL_SOCKET, SO_PROTOCOL);
	const char *fam = family_name(family);
	char fbuf[32];
	if (!fam)
		snprintf(fbuf, sizeof(fbuf), "family %d", family), fam = fbuf;
	if (family == AF_PACKET) {
		struct sockaddr_ll ll = { 0 };
		socklen_t l = sizeof(ll);
		getsockname(s, (struct sockaddr *)&ll, &l);
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (packet): packet %s socket of protocol 0x%04x is not "
				"supported yet",
				fi->pid, fi->fd, type_name(type), ntohs(ll.sll_protocol));
	}
	return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (%s): %s %s socket of protocol %d is "
			"not supported yet", fi->pid, fi->fd, fam, fam, type_name(type), proto);
}

/* A TCP state in which getsockname and getpeername both answer. */
static bool has_peer(int state)
{
	return state == TCP_ESTABLISHED || state == TCP_FIN_WAIT1 || state == TCP_FIN_WAIT2 ||
	       state == TCP_CLOSE_WAIT || state == TCP_LAST_ACK || state == TCP_CLOSING;
}

/* The address bytes and port of a into bytes/len and port. */
static void split_addr(const union inet_addr *a, uint8_t *bytes, size_t *len, uint32_t *port)
{
	if (a->sa.sa_family == AF_INET) {
		memcpy(bytes, &a->v4.sin_addr, 4);
		*len = 4;
		*port = ntohs(a->v4.sin_port);
	} else {
		memcpy(bytes, &a->v6.sin6_addr, 16);
		*len = 16;
		*port = ntohs(a->v6.sin6_port);
	}
}

/* ctx NULL: quietly (a prefetch thread, see prefetch()), the error alone */
#define REFUSE(ctx, fi, s, proto, fmt, ...)                                                   \
	({                                                                                     \
		char d_[192];                                                                  \
		(ctx) ? log_fail(&(ctx)->log, -EOPNOTSUPP, "pid %d fd %d (inet): %s " fmt,     \
				 (fi)->pid, (fi)->fd, describe(s, proto, d_, sizeof(d_)),      \
				 ##__VA_ARGS__)                                                \
		      : -EOPNOTSUPP;                                                           \
	})
#define FAIL(ctx, r, fmt, ...) ((ctx) ? log_fail(&(ctx)->log, r, fmt, ##__VA_ARGS__) : (r))

/* An established connection: read in repair mode, which is left at once. */
static int collect_tcp(struct ckpt_ctx *ctx, const struct fd_info *fi, struct inet_obj *o,
		       const struct tcp_info *ti)
{
	int s = o->copy, reuse = 0, r;
	/* read with the options (inet_opts_read keeps those not 0, a new
	 * socket's SO_REUSEADDR) */
	for (size_t i = 0; i < o->e.n_opts; i++)
		if (o->opts[i].level == SOL_SOCKET && o->opts[i].name == SO_REUSEADDR)
			reuse = o->opts[i].val;
	r = inet_tcp_repair(s, TCP_REPAIR_ON);
	if (r < 0)
		return r == -EPERM ? REFUSE(ctx, fi, s, IPPROTO_TCP,
					    "is established: saving it needs TCP_REPAIR, which "
					    "needs CAP_NET_ADMIN")
				   : FAIL(ctx, r, "pid %d fd %d (inet): TCP_REPAIR: %s",
					  fi->pid, fi->fd, strerror(-r));
	for (int i = 0; i < 20; i++) {
		r = inet_tcp_read(s, i ? NULL : ti, &o->tcp);
		if (r != -EAGAIN)
			break;
	}
	int off = inet_tcp_repair(s, TCP_REPAIR_OFF_NO_WP);
	if (reuse > 0)
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
	if (off < 0 && r >= 0)
		r = off;
	if (r == -EFBIG)
		return REFUSE(ctx, fi, s, IPPROTO_TCP,
			      "has more than %u MiB queued one way; not supported yet",
			      INET_QUEUE_MAX >> 20);
	if (r < 0)
		return FAIL(ctx, r, "pid %d fd %d (inet): cannot read the connection in repair "
			    "mode: %s", fi->pid, fi->fd, strerror(-r));
	o->e.tcp = &o->tcp;
	return 0;
}

static void log_tcp(struct ckpt_ctx *ctx, const struct inet_obj *o)
{
	log_debug(&ctx->log, "pid %d fd %d (inet): send queue %zu bytes up to %u (%u never sent), "
		  "receive queue %zu bytes up to %u, windows snd %u rcv %u", o->pid, o->fd,
		  o->tcp.sendq.len, o->tcp.snd_seq, o->tcp.unsent, o->tcp.recvq.len, o->tcp.rcv_seq,
		  o->tcp.snd_wnd, o->tcp.rcv_wnd);
}

/* State and addresses of a TCP socket; refuses the states not saved. */
static int collect_tcp_state(struct ckpt_ctx *ctx, const struct fd_info *fi, struct inet_obj *o)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	int s = o->copy;

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0)
		return FAIL(ctx, -errno, "pid %d fd %d (inet): TCP_INFO: %m", fi->pid, fi->fd);
	if (o->seen && has_peer(o->seen->state) && !has_peer(ti.tcpi_state))
		return -EAGAIN; /* its addresses taken from the dump: read again */
	switch (ti.tcpi_state) {
	case TCP_CLOSE:
		o->e.state = INET_ST_CLOSED;
		return 0;
	case TCP_LISTEN:
		/* a listener's tcp_info: unacked is the accept queue, sacked the backlog */
		if (ti.tcpi_unacked && !ctx)
			return -EAGAIN; /* said by the caller's look */
		if (ti.tcpi_unacked && (ctx->flags & CKPT_SKIP_IN_FLIGHT)) {
			char d[192];
			log_info(&ctx->log, "pid %d fd %d (inet): %s: %u connection(s) not accepted "
				 "yet are left out (--skip-in-flight)%s", fi->pid, fi->fd,
				 describe(s, IPPROTO_TCP, d, sizeof(d)), ti.tcpi_unacked,
				 (ctx->flags & CKPT_KILL) ? ": their peers get a reset" : "");
		} else if (ti.tcpi_unacked)
			return REFUSE(ctx, fi, s, IPPROTO_TCP,
				      "is listening with %u connection(s) not accepted yet; not "
				      "supported yet (retry once the program has accepted them, or "
				      "leave them out with --skip-in-flight)",
				      ti.tcpi_unacked);
		o->e.state = INET_ST_LISTEN;
		o->e.has_backlog = true;
		o->e.backlog = ti.tcpi_sacked;
		return 0;
	case TCP_ESTABLISHED: {
		o->e.state = INET_ST_CONNECTED;
		int r = collect_tcp(ctx, fi, o, &ti);
		/* reading shut down (by the program, or a CLOSE_WAIT restored) */
		struct pollfd p = { .fd = s, .events = POLLRDHUP };
		if (r == 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLRDHUP)) {
			o->tcp.has_fin = true;
			o->tcp.fin = TCP_FIN_RECEIVED;
		}
		return r;
	}
	case TCP_FIN_WAIT1:
	case TCP_FIN_WAIT2:
	case TCP_CLOSE_WAIT:
	case TCP_LAST_ACK:
	case TCP_CLOSING: {
		/* half-closed or closing: an established connection and the
		 * FINs replayed at restart (see "Inet sockets" in DESIGN.md):
		 * LAST_ACK and CLOSING have sent theirs (not acknowledged yet)
		 * and received the peer's */
		o->e.state = INET_ST_CONNECTED;
		int r = collect_tcp(ctx, fi, o, &ti);
		if (r < 0)
			return r;
		int st = ti.tcpi_state;
		o->tcp.has_fin = true;
		o->tcp.fin = st == TCP_CLOSE_WAIT ? TCP_FIN_RECEIVED
			     : st == TCP_LAST_ACK || st == TCP_CLOSING ? TCP_FIN_SENT | TCP_FIN_RECEIVED
			     : TCP_FIN_SENT;
		/* reading shut down too (a LAST_ACK or CLOSING restored) */
		struct pollfd p = { .fd = s, .events = POLLRDHUP };
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLRDHUP))
			o->tcp.fin |= TCP_FIN_RECEIVED;
		if ((o->tcp.fin & TCP_FIN_SENT) && o->tcp.unsent)
			return REFUSE(ctx, fi, s, IPPROTO_TCP,
				      "in state %s has %u bytes never sent before its FIN; not "
				      "supported yet", inet_tcp_state_name(st), o->tcp.unsent);
		return 0;
	}
	case TCP_SYN_SENT: {
		/* a connect in progress: connected again at restart */
		union inet_addr peer;
		size_t len;
		if (!ctx)
			return -EAGAIN; /* /proc/net/tcp: by the caller's look */
		if (inet_proc_peer(s, &peer) < 0)
			return REFUSE(ctx, fi, s, IPPROTO_TCP, "in state SYN_SENT: its peer is not "
				      "in /proc/net/tcp; not supported yet");
		split_addr(&peer, o->dst, &len, &o->e.dst_port);
		o->e.has_dst = o->e.has_dst_port = true;
		o->e.dst = (ProtobufCBinaryData){ .len = len, .data = o->dst };
		o->e.state = INET_ST_SYN_SENT;
		return 0;
	}
	default:
		return REFUSE(ctx, fi, s, IPPROTO_TCP, "in state %s is not supported yet",
			      inet_tcp_state_name(ti.tcpi_state));
	}
}

/* Queued datagrams (peeked), multicast groups, shutdown: see inet-udp.c. */
static int collect_udp_state(struct ckpt_ctx *ctx, const struct fd_info *fi, struct inet_obj *o,
			     int proto)
{
	int s = o->copy, outq = 0, family = (int)o->e.family;
	/* datagrams on their way out (named, its upstream's neighbour not
	 * resolved: refused for its first seconds) leave the host or are
	 * dropped, the tree stopped or not; what stays is corked */
	int r = inet_udp_wait_sent(s, proto, UDP_SENT_WAIT_MS, &outq);
	if (r == -EBUSY)
		return REFUSE(ctx, fi, s, proto, "has %d bytes corked or not sent yet (UDP_CORK "
			      "is set); not supported yet", outq);
	if (r == -ETIMEDOUT)
		return REFUSE(ctx, fi, s, proto, "has %d bytes corked or not sent yet (still after "
			      "%d ms); not supported yet", outq, UDP_SENT_WAIT_MS);
	if (r > 0)
		log_info(&ctx->log, "pid %d fd %d (inet): waited %d ms for the datagrams it sent "
			 "to leave the host", fi->pid, fi->fd, r);
	r = inet_udp_peek(s, family, &o->e.rcvq, &o->e.n_rcvq);
	if (r == -EOPNOTSUPP)
		return REFUSE(ctx, fi, s, proto,
			      "has datagrams in its receive queue; not supported yet (this kernel "
			      "has no SO_PEEK_OFF for UDP: they cannot be read without taking them; "
			      "retry once the program has read them)");
	if (r == -EFBIG || r == -EMSGSIZE)
		return REFUSE(ctx, fi, s, proto, "has %s in its receive queue; not supported yet",
			      r == -EFBIG ? "more than 64 MiB" : "a datagram larger than 64 KiB");
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (inet): cannot peek at its receive "
				"queue: %s", fi->pid, fi->fd, strerror(-r));
	r = inet_mcast_read(s, family, fi->pid, &o->e.mcast, &o->e.n_mcast);
	if (r == -E2BIG)
		return REFUSE(ctx, fi, s, proto, "has a multicast source filter of more than 64 "
			      "sources; not supported yet");
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (inet): cannot read its multicast "
				"groups: %s", fi->pid, fi->fd, strerror(-r));
	uint32_t shut = 0;
	r = inet_udp_shutdown(s, family, proto, &shut);
	if (r < 0 && r != -ENOENT)
		log_debug(&ctx->log, "pid %d fd %d (inet): sock_diag does not show its shutdown "
			  "state (%s): only a shutdown of reading is seen", fi->pid, fi->fd,
			  strerror(-r));
	if (shut) {
		o->e.has_shutdown = true;
		o->e.shutdown = shut;
	}
	if (o->e.n_rcvq || o->e.n_mcast)
		log_debug(&ctx->log, "pid %d fd %d (inet): %zu datagram(s) queued, %zu multicast "
			  "group(s)", fi->pid, fi->fd, o->e.n_rcvq, o->e.n_mcast);
	o->e.state = o->e.dst.len ? INET_ST_CONNECTED : INET_ST_CLOSED;
	return 0;
}

static int collect_addrs(struct ckpt_ctx *ctx, const struct fd_info *fi, struct inet_obj *o)
{
	union inet_addr a;
	socklen_t l = sizeof(a);
	size_t len;
	/* the lock's dump says them (a connection's never change; a state
	 * without a peer by the time TCP_INFO is read: read again, the usual
	 * way) */
	const struct tcp_seen *ts = o->seen;
	if (ts && has_peer(ts->state)) {
		len = ts->family == AF_INET ? 4 : 16;
		memcpy(o->src, ts->src, len);
		memcpy(o->dst, ts->dst, len);
		o->e.src_port = ts->sport;
		o->e.dst_port = ts->dport;
		o->e.has_src = o->e.has_src_port = o->e.has_dst = o->e.has_dst_port = true;
		o->e.src = (ProtobufCBinaryData){ .len = len, .data = o->src };
		o->e.dst = (ProtobufCBinaryData){ .len = len, .data = o->dst };
		return 0;
	}
	if (getsockname(o->copy, &a.sa, &l) < 0)
		return FAIL(ctx, -errno, "pid %d fd %d (inet): getsockname: %m", fi->pid, fi->fd);
	split_addr(&a, o->src, &len, &o->e.src_port);
	o->e.has_src = o->e.has_src_port = true;
	o->e.src = (ProtobufCBinaryData){ .len = len, .data = o->src };
	l = sizeof(a);
	if (getpeername(o->copy, &a.sa, &l) < 0)
		return errno == ENOTCONN ? 0
					 : FAIL(ctx, -errno, "pid %d fd %d (inet): getpeername: %m",
						fi->pid, fi->fd);
	split_addr(&a, o->dst, &len, &o->e.dst_port);
	o->e.has_dst = o->e.has_dst_port = true;
	o->e.dst = (ProtobufCBinaryData){ .len = len, .data = o->dst };
	return 0;
}

/* A raw socket, or an ICMP ping socket (SOCK_DGRAM, ICMP over IPv4,
 * ICMPv6 over IPv6). */
static bool is_raw_or_ping(int family, int type, int proto)
{
	return (type == SOCK_RAW && proto >= 0 && proto <= 255) ||
	       (type == SOCK_DGRAM && ((family == AF_INET && proto == IPPROTO_ICMP) ||
				       (family == AF_INET6 && proto == IPPROTO_ICMPV6)));
}

/* A raw or ping socket: its receive queue must be empty (there is no
 * SO_PEEK_OFF for them); an IPv6 ICMPv6 raw socket's filter. */
static int collect_raw_state(struct ckpt_ctx *ctx, const struct fd_info *fi, struct inet_obj *o,
			     int proto)
{
	int s = o->copy;
	char c;
	const char *what = o->e.type == SOCK_RAW ? "raw" : "ICMP ping";
	if (recv(s, &c, 1, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC) >= 0)
		return REFUSE(ctx, fi, s, proto, "(a %s socket) has datagrams in its receive "
			      "queue; not supported yet (they cannot be read without taking "
			      "them; retry once the program has read them)", what);
	if (o->e.family == AF_INET6 && o->e.type == SOCK_RAW && proto == IPPROTO_ICMPV6) {
		static const uint8_t none[sizeof(struct icmp6_filter)];
		socklen_t l = sizeof(o->icmp6f);
		if (getsockopt(s, IPPROTO_ICMPV6, ICMP6_FILTER, o->icmp6f, &l) == 0 &&
		    l == sizeof(o->icmp6f) && memcmp(o->icmp6f, none, l)) {
			o->e.has_icmp6_filter = true;
			o->e.icmp6_filter = (ProtobufCBinaryData){ .len = l, .data = o->icmp6f };
		}
	}
	o->e.state = INET_ST_CLOSED;
	return 0;
}

/* The family, type and protocol of s if this kind saves it; else refused. */
static int check_kind(struct ckpt_ctx *ctx, struct inet_task *it, const struct fd_info *fi,
		      int s, int *family, int *type, int *proto, uint32_t *netns)
{
	/* TCP's protocol names say all three (no getsockopt a socket) */
	bool tcp4 = fi->sockproto_read && !strcmp(fi->sockproto, "TCP");
	if (tcp4 || (fi->sockproto_read && !strcmp(fi->sockproto, "TCPv6"))) {
		*family = tcp4 ? AF_INET : AF_INET6;
		*type = SOCK_STREAM;
		*proto = IPPROTO_TCP;
	} else {
		*family = get_int(s, SOL_SOCKET, SO_DOMAIN);
		*type = get_int(s, SOL_SOCKET, SO_TYPE);
		*proto = get_int(s, SOL_SOCKET, SO_PROTOCOL);
	}
	if (*family != AF_INET && *family != AF_INET6)
		return refuse_other(ctx, fi, s, *family);
	/* the tree's namespace (ckpt's, or the root's own), or another of a
	 * task that the netns kind saves */
	struct inet_task one = { 0 };
	if (!it)
		it = &one;
	if (!it->netns) /* once a task: two stats a socket were 5% of 10,000 */
		it->netns = netns_of_task(ctx, fi->pid, &it->netns_id, &it->cookie) < 0 ? -1 : 1;
	if (it->netns < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (inet): a socket of a process in ckpt's network "
				"namespace while the tree's root has its own; not supported yet",
				fi->pid, fi->fd);
	*netns = it->netns_id;
	/* made in another namespace than its task's (setns there and back) */
	if (!netns_sock_saved(it->cookie, s))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (inet): a socket of another network namespace than "
				"its process's; not supported yet", fi->pid, fi->fd);
	bool ok = (*type == SOCK_STREAM && *proto == IPPROTO_TCP) ||
		  (*type == SOCK_DGRAM && (*proto == IPPROTO_UDP || *proto == IPPROTO_UDPLITE)) ||
		  is_raw_or_ping(*family, *type, *proto);
	if (ok)
		return 0;
	const char *what = *type == SOCK_RAW ? "a raw socket"
			   : *type == SOCK_DGRAM && (*proto == IPPROTO_ICMP || *proto == IPPROTO_ICMPV6)
				   ? "an ICMP ping socket"
				   : "a socket of this protocol";
	return REFUSE(ctx, fi, s, *proto, "(%s %s, protocol %d): %s is not supported yet",
		      family_name(*family), type_name(*type), *proto, what);
}

/* The options of o (family, type, proto set), its filter, addresses and
 * state. ctx NULL: quietly, for a prefetch thread (prefetch()): nothing
 * logged, -EAGAIN for what the caller's own look must say. */
static int read_obj(struct ckpt_ctx *ctx, const struct fd_info *fi, struct inet_obj *o,
		    struct inet_opt_defaults *defs)
{
	int family = (int)o->e.family, type = (int)o->e.type, proto = (int)o->e.proto;
	InetOpt opts[OPTS_MAX];
	size_t n = 0;
	int insns;
	/* options first: leaving repair mode changes SO_REUSEADDR */
	/* an IPv4 socket's IP options that the lock's dump said */
	struct inet_opt_val kn[5];
	size_t nk = 0;
	const struct tcp_seen *ts = o->seen;
	if (ts && family == AF_INET && ts->has_opts) {
		kn[nk++] = (struct inet_opt_val){ IPPROTO_IP, IP_RECVERR, ts->recverr };
		kn[nk++] = (struct inet_opt_val){ IPPROTO_IP, IP_FREEBIND, ts->freebind };
		kn[nk++] = (struct inet_opt_val){ IPPROTO_IP, IP_TRANSPARENT, ts->transparent };
		kn[nk++] = (struct inet_opt_val){ IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT,
						  ts->bind_no_port };
	}
	if (ts && family == AF_INET && ts->has_tos)
		kn[nk++] = (struct inet_opt_val){ IPPROTO_IP, IP_TOS, ts->tos };
	int r = inet_opts_read(o->copy, family, type, proto, defs, kn, nk, opts, OPTS_MAX, &n,
			       &o->e, o->dev, sizeof(o->dev), &insns);
	if (r < 0)
		return FAIL(ctx, r, "pid %d fd %d (inet): cannot read its options: %s", fi->pid,
			    fi->fd, strerror(-r));
	if (n) {
		o->opts = malloc(n * sizeof(*o->opts));
		o->popts = malloc(n * sizeof(*o->popts));
		if (!o->opts || !o->popts)
			return -ENOMEM;
		memcpy(o->opts, opts, n * sizeof(*o->opts));
		for (size_t i = 0; i < n; i++)
			o->popts[i] = &o->opts[i];
	}
	o->e.opts = o->popts;
	o->e.n_opts = n;
	bool locked = false;
	/* the batch said no filter: sk_filter_read's first question */
	r = insns ? sk_filter_read(o->copy, &o->e.filter.data, &o->e.filter.len, &locked) : 0;
	o->e.filter_locked = locked;
	if (r < 0)
		return FAIL(ctx, r, "pid %d fd %d (inet): %s", fi->pid, fi->fd,
			    r == -EACCES ? "an eBPF socket filter is attached (SO_ATTACH_BPF); not "
					   "supported yet" : "cannot read its socket filter");
	o->e.has_filter = o->e.has_filter_locked = o->e.filter.len != 0;
	r = collect_addrs(ctx, fi, o);
	if (r >= 0 && !ctx && proto != IPPROTO_TCP)
		r = -EAGAIN; /* UDP's, raw's: by the caller's look */
	if (r >= 0)
		r = is_raw_or_ping(family, type, proto) ? collect_raw_state(ctx, fi, o, proto)
		    : proto == IPPROTO_TCP		 ? collect_tcp_state(ctx, fi, o)
							 : collect_udp_state(ctx, fi, o, proto);
	return r;
}

static int new_obj(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		   struct inet_obj *o)
{
	int family, type, proto, r;

	o->copy = fdtable_copy(t, fi);
	if (o->copy < 0)
		return log_fail(&ctx->log, o->copy, "pid %d fd %d (inet): cannot take a copy: %s",
				t->pid, fi->fd, strerror(-o->copy));
	struct inet_task *it = task_state(t, KIND_inet, sizeof(*it));
	uint32_t netns;
	r = check_kind(ctx, it, fi, o->copy, &family, &type, &proto, &netns);
	if (r < 0)
		return r;
	o->e.has_netns = netns != 0;
	o->e.netns = netns;
	o->e.family = (uint32_t)family;
	o->e.type = (uint32_t)type;
	o->e.proto = (uint32_t)proto;
	o->e.flags = fi->fi.flags & O_NONBLOCK;
	r = read_obj(ctx, fi, o, it ? &it->defs : NULL);
	if (r >= 0 && o->e.tcp)
		log_tcp(ctx, o);
	return r;
}

static void inet_free_obj(void *ptr)
{
	struct inet_obj *o = ptr;
	if (!o)
		return;
	if (o->copy >= 0)
		close(o->copy);
	inet_tcp_free(&o->tcp);
	inet_udp_free(o->e.rcvq, o->e.n_rcvq);
	inet_mcast_free(o->e.mcast, o->e.n_mcast);
	free(o->e.filter.data);
	free(o->opts);
	free(o->popts);
	free(o);
}

/*
 * Prefetch: a task's TCP sockets read by threads, all at once, at its
 * first socket (inet_fd_collect), so that both cores of a server of
 * 10,000 connections read them (each is some 40 system calls). First
 * each fd is copied (pidfd_getfd), and kept if it is a TCP socket of the
 * task's namespace; then, each inode once and none the image has
 * already, read as new_obj() reads it (read_obj, quietly: no ctx), each
 * thread with its own option defaults and ring. inet_fd_collect takes
 * what was read; a socket that failed or is in a state the threads leave
 * (a listener with connections not accepted, a connect in progress) is
 * looked at again the usual way, which says why.
 */
#define PRE_MIN_FDS 1 /* every table: the tests see this way (par_for runs a few on the caller) */
#define PRE_THREADS 4

struct prefetch {
	const struct inet_task *it;
	int pidfd;
	pid_t pid;
	const int *fds;
	struct pre_ent *e;		/* one an fd; o NULL: nothing */
	int *copy;			/* one an fd, -1: none */
	bool *v4;			/* one an fd: "TCP", else "TCPv6" */
	struct inet_opt_defaults *defs; /* one a thread */
	/* one an fd or NULL: what the lock's dump saw of it (a TCP socket of
	 * the task's namespace: no stat, protocol name or namespace asked),
	 * or ino 0 and family AF_UNSPEC: no socket (not copied) */
	const struct tcp_seen **seen;
};

/* p->seen's marks of an fd the dump did not see: another socket (looked at
 * as without the dump), nothing of the kind */
static const struct tcp_seen slow_sock, no_sock;

static void pre_copy(void *arg, size_t i, unsigned slot)
{
	struct prefetch *p = arg;
	struct stat st;
	char name[32];
	(void)slot;
	const struct tcp_seen *ts = p->seen ? p->seen[i] : NULL;
	if (p->seen && (!ts || ts == &no_sock))
		return; /* no TCP socket of the task's namespace */
	int c = (int)syscall(SYS_pidfd_getfd, p->pidfd, p->fds[i], 0);
	if (ts && ts != &slow_sock) {
		if (c < 0)
			return;
		p->copy[i] = c;
		p->e[i].ino = ts->ino;
		p->v4[i] = ts->family == AF_INET;
		return;
	}
	ssize_t l = -1;
	if (c >= 0 && fstat(c, &st) == 0 && S_ISSOCK(st.st_mode))
		l = fgetxattr(c, "system.sockprotoname", name, sizeof(name) - 1);
	if (l > 0)
		name[l] = '\0';
	if (l <= 0 || (strcmp(name, "TCP") && strcmp(name, "TCPv6")) ||
	    !netns_sock_saved(p->it->cookie, c)) {
		if (c >= 0)
			close(c);
		return;
	}
	p->copy[i] = c;
	p->e[i].ino = st.st_ino;
	p->v4[i] = !strcmp(name, "TCP");
}

static void pre_read(void *arg, size_t i, unsigned slot)
{
	struct prefetch *p = arg;
	int c = p->copy[i];
	if (c < 0)
		return;
	p->copy[i] = -1;
	struct inet_obj *o = calloc(1, sizeof(*o));
	if (!o) {
		close(c);
		return;
	}
	inet_sk_entry__init(&o->e);
	tcp_repair__init(&o->tcp);
	o->copy = c;
	o->pid = p->pid;
	o->fd = p->fds[i];
	o->e.has_netns = p->it->netns_id != 0;
	o->e.netns = p->it->netns_id;
	o->e.family = p->v4[i] ? AF_INET : AF_INET6;
	if (p->seen && p->seen[i] != &slow_sock)
		o->seen = p->seen[i];
	o->e.type = SOCK_STREAM;
	o->e.proto = IPPROTO_TCP;
	if (read_obj(NULL, NULL, o, &p->defs[slot]) < 0) {
		inet_free_obj(o);
		return;
	}
	p->e[i].o = o;
}

static int cmp_pre(const void *a, const void *b)
{
	const struct pre_ent *x = a, *y = b;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void prefetch(struct ckpt_ctx *ctx, struct task *t, struct inet_task *it)
{
	_cleanup_free_ int *fds = NULL, *copy = NULL;
	_cleanup_free_ bool *v4 = NULL;
	_cleanup_free_ struct pre_ent *idx = NULL;
	struct inet_opt_defaults defs[PRE_THREADS];
	size_t n = 0, m = 0;
	unsigned th = par_cpus();

	it->pre_done = true;
	th = th < PRE_THREADS ? th : PRE_THREADS;
	if (th < 2 || it->netns <= 0)
		return;
	/* the links read at the freeze (fdtable_links), with what the lock's
	 * dump saw (the task in the root's namespace, which is ckpt's, its
	 * table its own) */
	_cleanup_free_ const struct tcp_seen **seen = NULL;
	const struct fd_link *lk;
	size_t nl;
	if (ctx->n_tcp_seen && it->netns_id == 0 && !t->files_with &&
	    fdtable_links(t, &lk, &nl) == 0 && nl && (fds = malloc(nl * sizeof(*fds))) &&
	    (seen = malloc(nl * sizeof(*seen)))) {
		for (size_t i = 0; i < nl; i++) {
			unsigned long ino;
			const struct tcp_seen *ts = NULL;
			fds[i] = lk[i].fd;
			if (!strncmp(lk[i].link, "socket:[", 8) &&
			    sscanf(lk[i].link, "socket:[%lu]", &ino) == 1)
				ts = ckpt_tcp_seen(ctx, ino);
			seen[i] = ts ? ts : strncmp(lk[i].link, "socket:[", 8) ? &no_sock : &slow_sock;
		}
		n = nl;
	} else {
		free(TAKE_PTR(fds));
		free(TAKE_PTR(seen));
		if (fdtable_list(t->pid, &fds, &n) < 0)
			return;
	}
	if (n < PRE_MIN_FDS)
		return;
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
	it->pre = calloc(n, sizeof(*it->pre));
	copy = malloc(n * sizeof(*copy));
	v4 = calloc(n, sizeof(*v4));
	idx = calloc(n, sizeof(*idx));
	if (pidfd < 0 || !it->pre || !copy || !v4 || !idx)
		return;
	for (size_t i = 0; i < n; i++)
		copy[i] = -1;
	memset(defs, 0, sizeof(defs));
	struct prefetch p = { it, pidfd, t->pid, fds, it->pre, copy, v4, defs, seen };
	par_for(n, th, pre_copy, &p);
	/* each inode once (two threads would read an fd and its dup at
	 * once), none the image has (shared with a task read before); idx's
	 * o is the fd's index */
	for (size_t i = 0; i < n; i++)
		if (copy[i] >= 0)
			idx[m++] = (struct pre_ent){ it->pre[i].ino, (void *)(uintptr_t)i };
	qsort(idx, m, sizeof(*idx), cmp_pre);
	for (size_t k = 0; k < m; k++) {
		size_t i = (uintptr_t)idx[k].o;
		if ((k && idx[k].ino == idx[k - 1].ino) ||
		    objhash_next_key(&ctx->objs, NULL, KIND_inet, idx[k].ino)) {
			close(copy[i]);
			copy[i] = -1;
		}
	}
	unsigned used = par_for(n, th, pre_read, &p);
	for (unsigned k = 0; k < th; k++)
		sockopts_free(defs[k].so);
	m = 0;
	for (size_t i = 0; i < n; i++)
		if (it->pre[i].o)
			it->pre[m++] = it->pre[i];
	it->npre = m;
	qsort(it->pre, m, sizeof(*it->pre), cmp_pre);
	size_t dumped = 0;
	for (size_t i = 0; seen && i < m; i++)
		dumped += it->pre[i].o->seen != NULL;
	log_debug(&ctx->log, "pid %d: %zu TCP socket(s) of %zu fds read ahead by %u thread(s), "
		  "%zu as the network lock's dump saw them", t->pid, m, n, used, dumped);
}

/* The socket of inode ino that prefetch() read, taken; NULL if none. */
static struct inet_obj *pre_take(struct inet_task *it, unsigned long ino)
{
	struct pre_ent key = { ino, NULL };
	struct pre_ent *e = it && it->npre ? bsearch(&key, it->pre, it->npre, sizeof(key), cmp_pre)
					   : NULL;
	struct inet_obj *o = e ? e->o : NULL;
	if (e)
		e->o = NULL;
	return o;
}

static int inet_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   uint32_t *ret_id)
{
	struct obj *ob = objhash_next_key(&ctx->objs, NULL, KIND_inet, fi->st.st_ino);
	if (ob) {
		*ret_id = ob->id;
		return 0;
	}
	struct inet_task *it = task_state(t, KIND_inet, sizeof(*it));
	if (it && !it->pre_done && fi->copy >= 0) { /* a table's walk, not a lent fd */
		if (!it->netns)
			it->netns = netns_of_task(ctx, t->pid, &it->netns_id, &it->cookie) < 0 ? -1 : 1;
		prefetch(ctx, t, it);
	}
	struct inet_obj *o = pre_take(it, fi->st.st_ino);
	int r = 0;
	if (o) {
		o->pid = t->pid;
		o->fd = fi->fd;
		o->e.flags = fi->fi.flags & O_NONBLOCK;
		if (o->e.tcp)
			log_tcp(ctx, o);
	} else {
		o = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		inet_sk_entry__init(&o->e);
		tcp_repair__init(&o->tcp);
		o->pid = t->pid;
		o->fd = fi->fd;
		r = new_obj(ctx, t, fi, o);
	}
	if (r >= 0)
		r = objhash_add(&ctx->objs, KIND_inet, fi->st.st_ino, 0, o, &ob);
	if (r < 0) {
		inet_free_obj(o);
		return r;
	}
	o->e.id = ob->id;
	*ret_id = ob->id;
	return 0;
}

/* every socket not written yet, after the fd table that uses it */
static int inet_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		if (ob->dumped)
			continue;
		struct inet_obj *o = ob->ptr;
		int r = ctx_write_msg(ctx, INET_SK_ENTRY, &o->e.base);
		if (r < 0)
			return r;
		ob->dumped = true;
	}
	return 0;
}

/* --kill: the tree is gone, ckpt's copies hold the sockets; closed in
 * repair mode, an established one sends nothing. By threads (par.h):
 * 10,000 connections are 20,000 system calls. */
struct kill_close {
	struct inet_obj **o;
	int *err; /* TCP_REPAIR's, said after */
};

static void close_one(void *arg, size_t i, unsigned slot)
{
	struct kill_close *k = arg;
	struct inet_obj *o = k->o[i];
	(void)slot;
	if (o->e.tcp)
		k->err[i] = inet_tcp_repair(o->copy, TCP_REPAIR_ON);
	close(o->copy);
	o->copy = -1;
}

static void inet_after_kill(struct ckpt_ctx *ctx)
{
	size_t n = 0, i = 0;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));)
		n += ((struct inet_obj *)ob->ptr)->copy >= 0;
	_cleanup_free_ struct inet_obj **v = calloc(n ? n : 1, sizeof(*v));
	_cleanup_free_ int *err = calloc(n ? n : 1, sizeof(*err));
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		struct inet_obj *o = ob->ptr;
		if (o->copy < 0)
			continue;
		if (v && err) {
			v[i++] = o;
			continue;
		}
		/* no memory for the list: one by one */
		int r = o->e.tcp ? inet_tcp_repair(o->copy, TCP_REPAIR_ON) : 0;
		if (r < 0)
			log_warn(&ctx->log, "pid %d fd %d (inet): cannot put it in repair mode to "
				 "close it quietly: %s", o->pid, o->fd, strerror(-r));
		close(o->copy);
		o->copy = -1;
	}
	struct kill_close k = { v, err };
	unsigned th = par_cpus();
	par_for(i, th < PRE_THREADS ? th : PRE_THREADS, close_one, &k);
	for (size_t j = 0; j < i; j++)
		if (err[j] < 0)
			log_warn(&ctx->log, "pid %d fd %d (inet): cannot put it in repair mode to "
				 "close it quietly: %s", v[j]->pid, v[j]->fd, strerror(-err[j]));
}

/* Is the other end of o's connection a socket of the tree (of o's network
 * namespace, or with any, of any)? */
static bool peer_in_tree_ns(struct ckpt_ctx *ctx, const struct inet_obj *o, bool any)
{
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		const struct inet_obj *p = ob->ptr;
		if (p != o && p->e.family == o->e.family && p->e.has_dst &&
		    (any || p->e.netns == o->e.netns) && p->e.src_port == o->e.dst_port &&
		    p->e.dst_port == o->e.src_port && p->e.src.len == o->e.dst.len &&
		    !memcmp(p->src, o->dst, o->e.dst.len) && !memcmp(p->dst, o->src, o->e.src.len))
			return true;
	}
	return false;
}

static bool peer_in_tree(struct ckpt_ctx *ctx, const struct inet_obj *o)
{
	return peer_in_tree_ns(ctx, o, false);
}

/*
 * A TCP connection of another network namespace than the root's whose
 * peer is not in the image. One whose peer is a socket of ckpt's namespace
 * (reached through the root's, routed) goes on: the lock of ckpt's
 * namespace holds its peer's packets while the tree's namespaces are gone
 * (netlock.c), and the restored namespace's veth pair and addresses
 * bring the route back; but not after a migration, which takes it away
 * from its peer. Any other is named: a peer in that same namespace stays
 * in the old one and cannot reach the restored socket; one elsewhere
 * (another host, another namespace, translated by a NAT) is not covered
 * by the lock.
 */
static int inner_peers(struct ckpt_ctx *ctx)
{
	int ret = 0;
	bool migration = (ctx->flags & CKPT_KILL) && ctx->opts && ctx->opts->committed;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		const struct inet_obj *o = ob->ptr;
		if (!o->e.netns || o->e.type != SOCK_STREAM || !o->e.has_dst || peer_in_tree(ctx, o))
			continue;
		int where = ckpt_netns_peer(ctx, (unsigned long)ob->key);
		if (where == NETNS_PEER_HOST && !migration)
			continue;
		bool other = where != NETNS_PEER_HOST && peer_in_tree_ns(ctx, o, true);
		const char *why =
		    other ? "its peer is a socket of the image in another of its network "
			    "namespaces, routed between them: not done yet"
		    : where == NETNS_PEER_HOST
			? "its peer is in ckpt's network namespace, on this host, which "
			  "a migration leaves"
		    : where == NETNS_PEER_ADDR
			? "its peer is in ckpt's network namespace but bound to another "
			  "address than the one that namespace reaches the connection's "
			  "from (an address that outlives the namespace's veth pair): not "
			  "tested, and seen to hang; not done yet"
		    : where == NETNS_PEER_SAME
			? "its peer is a socket of that same namespace outside the tree, "
			  "which stays in the old namespace and cannot reach the restored "
			  "one (put the peer in the tree, or reach it through the root's "
			  "network namespace)"
			: "its peer is neither a socket of the image, of that namespace nor "
			  "of ckpt's network namespace (another host, or a NAT between): "
			  "the network lock cannot hold it";
		int r = log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d fd %d (inet): a TCP connection of "
		    "a network namespace other than the tree's root's%s: %s; not supported",
		    o->pid, o->fd, other ? "" : ", to a peer outside the image", why);
		if (!log_gathers(&ctx->log, r))
			return r;
		ret = r;
	}
	return ret;
}

/* A migration of a tree in ckpt's network namespace (target_addrs): each
 * socket must be able to follow it (inet-move.h); every one that cannot is
 * named. First the connections of other namespaces (inner_peers). */
/* A migration of a tree with a network namespace of its own and NAT on
 * its host end (ckpt run --net --nat): a connection that leaves through
 * the NAT carries this host's address, which the target host's NAT does
 * not give it: the peer would answer the moved connection with a reset.
 * (A checkpoint --kill restarted on this host keeps them: the host's
 * conntrack keeps their translation.) */
static int nat_conns(struct ckpt_ctx *ctx)
{
	int ret = 0;
	if (!(ctx->flags & CKPT_KILL) || !ctx->opts || !ctx->opts->committed)
		return 0;
	struct ct_table ct = { 0 };
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		const struct inet_obj *o = ob->ptr;
		char via[IF_NAMESIZE + 1];
		if (!o->e.has_dst || !o->e.has_src || o->e.dst.len != o->e.src.len ||
		    (o->e.dst.len != 4 && o->e.dst.len != 16) || o->e.type == SOCK_RAW ||
		    !o->e.dst_port ||
		    !netns_via_nat(ctx, &ct, o->e.dst.len == 4 ? AF_INET : AF_INET6, o->src,
				   (uint16_t)o->e.src_port, o->dst, (uint16_t)o->e.dst_port, via,
				   sizeof(via)))
			continue;
		char peer[INET6_ADDRSTRLEN];
		inet_ntop(o->e.dst.len == 4 ? AF_INET : AF_INET6, o->dst, peer, sizeof(peer));
		int r = log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (inet): its peer %s port %u "
				 "is reached through this host's NAT (masquerade on the host end "
				 "%s): a migrated connection would reach it from another address, "
				 "and be reset; not supported (close it first, or checkpoint and "
				 "restart on this host)", o->pid, o->fd, peer, o->e.dst_port, via);
		ret = r;
		if (!log_gathers(&ctx->log, r))
			break;
	}
	free(ct.v);
	return ret;
}

static int inet_collect_end(struct ckpt_ctx *ctx)
{
	const struct ckpt_addr *addrs;
	size_t n = opts_target_addrs(ctx->opts, &addrs);
	int r0 = inner_peers(ctx);
	if (r0 >= 0)
		r0 = nat_conns(ctx);
	if (r0 < 0 || !addrs)
		return r0;
	if (!(ctx->flags & CKPT_KILL) || !ctx->opts->committed)
		return log_fail(&ctx->log, -EINVAL, "addresses to move (target_addrs) go with a "
				"migration: CKPT_KILL and a committed callback");
	if (!proc_same_netns(ctx->tasks[0].pid))
		return log_fail(&ctx->log, -EINVAL, "pid %d: the tree has a network namespace of "
				"its own, which moves whole: no addresses to move (target_addrs)",
				ctx->tasks[0].pid);
	int ret = 0;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		const struct inet_obj *o = ob->ptr;
		char why[160];
		if (!o->e.has_src || (o->e.src.len != 4 && o->e.src.len != 16))
			continue;
		bool conn = o->e.has_dst && o->e.dst.len == o->e.src.len;
		struct inet_move_sock s = {
			.family = (int)o->e.family,
			.src = o->src,
			.dst = conn ? o->dst : NULL,
			.dport = (uint16_t)o->e.dst_port,
		};
		if (!inet_move_refusal(&s, addrs, n, why, sizeof(why)))
			continue;
		s.peer_in_tree = conn && peer_in_tree(ctx, o);
		if (!inet_move_refusal(&s, addrs, n, why, sizeof(why)))
			continue;
		int r = log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (inet): %s", o->pid, o->fd,
				 why);
		if (!log_gathers(&ctx->log, r))
			return r;
		ret = r;
	}
	return ret;
}

static int inet_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		struct inet_obj *o = ob->ptr;
		if (o->pid == t->pid && o->e.tcp && !caller_can(ctx->caller, CAP_NET_ADMIN))
			return log_fail(&ctx->log, -EPERM,
					"pid %d fd %d (inet): an established TCP connection is "
					"restored with TCP_REPAIR, which needs CAP_NET_ADMIN; the "
					"caller lacks it", o->pid, o->fd);
		if (o->pid == t->pid && o->e.type == SOCK_RAW && !caller_can(ctx->caller, CAP_NET_RAW))
			return log_fail(&ctx->log, -EPERM,
					"pid %d fd %d (inet): a raw socket is made again with "
					"CAP_NET_RAW; the caller lacks it", o->pid, o->fd);
		if (o->pid == t->pid && o->e.n_rcvq && !caller_can(ctx->caller, CAP_NET_RAW))
			return log_fail(&ctx->log, -EPERM,
					"pid %d fd %d (inet): its %zu queued datagram(s) are sent "
					"again from their senders' addresses through a raw socket, "
					"which needs CAP_NET_RAW; the caller lacks it", o->pid,
					o->fd, o->e.n_rcvq);
	}
	return 0;
}

static void conn_of(int family, const uint8_t *src, uint32_t sport, const uint8_t *dst,
		    uint32_t dport, struct inet_conn *c)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	memset(c, 0, sizeof(*c));
	c->sport = (uint16_t)sport;
	c->dport = (uint16_t)dport;
	if (family == AF_INET6 && !memcmp(src, mapped, 12) && !memcmp(dst, mapped, 12)) {
		c->family = AF_INET;
		memcpy(c->src, src + 12, 4);
		memcpy(c->dst, dst + 12, 4);
		return;
	}
	c->family = family;
	memcpy(c->src, src, family == AF_INET ? 4 : 16);
	memcpy(c->dst, dst, family == AF_INET ? 4 : 16);
}

int inet_connections(struct ckpt_ctx *ctx, int (*cb)(const struct inet_conn *c, void *arg),
		     void *arg)
{
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		const struct inet_obj *o = ob->ptr;
		struct inet_conn c;
		if (!o->e.tcp)
			continue;
		conn_of((int)o->e.family, o->src, o->e.src_port, o->dst, o->e.dst_port, &c);
		int r = cb(&c, arg);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- restart --------------------------------------------------------------- */

static void inet_free_robj(void *ptr)
{
	struct inet_robj *o = ptr;
	if (!o)
		return;
	if (o->fd >= 0)
		close(o->fd);
	if (o->e)
		inet_sk_entry__free_unpacked(o->e, NULL);
	free(o);
}

static bool addr_ok(uint32_t family, bool has, const ProtobufCBinaryData *a, bool has_port,
		    uint32_t port)
{
	if (!has)
		return !has_port;
	return a->len == (family == AF_INET ? 4u : 16u) && has_port && port <= 65535;
}

static bool tcp_ok(const TcpRepair *t)
{
	return t->sendq.len <= INET_QUEUE_MAX && t->recvq.len <= INET_QUEUE_MAX &&
	       t->unsent <= t->sendq.len && t->snd_wscale <= 14 && t->rcv_wscale <= 14 &&
	       t->mss > 0 && t->mss <= 65535;
}

static const char *entry_invalid(const InetSkEntry *e)
{
	bool tcp = e->type == SOCK_STREAM && e->proto == IPPROTO_TCP;
	bool udp = e->type == SOCK_DGRAM && (e->proto == IPPROTO_UDP || e->proto == IPPROTO_UDPLITE);
	bool raw = is_raw_or_ping((int)e->family, (int)e->type, (int)e->proto);
	if ((e->family != AF_INET && e->family != AF_INET6) || (!tcp && !udp && !raw))
		return "family, type or protocol";
	if (raw && e->state != INET_ST_CLOSED)
		return "state";
	if (e->has_icmp6_filter && (!raw || e->icmp6_filter.len != sizeof(struct icmp6_filter)))
		return "ICMPv6 filter";
	if (e->state >= INET_ST_MAX || (e->state == INET_ST_LISTEN && !tcp))
		return "state";
	if (e->flags & ~(uint32_t)O_NONBLOCK)
		return "file flags";
	if (!addr_ok(e->family, e->has_src, &e->src, e->has_src_port, e->src_port) ||
	    !addr_ok(e->family, e->has_dst, &e->dst, e->has_dst_port, e->dst_port))
		return "address";
	if ((e->state == INET_ST_CONNECTED || e->state == INET_ST_SYN_SENT) &&
	    (!e->has_dst || !e->has_src))
		return "connection without addresses";
	if (e->state == INET_ST_SYN_SENT && !tcp)
		return "state";
	if ((e->state == INET_ST_CONNECTED && tcp) != (e->tcp != NULL) ||
	    (e->tcp && !tcp_ok(e->tcp)))
		return "TCP connection";
	if (e->bindtodevice && strlen(e->bindtodevice) >= IFNAMSIZ)
		return "device";
	if (e->buf_lock & ~3u || e->sndbuf > INT32_MAX || e->rcvbuf > INT32_MAX)
		return "buffers";
	for (size_t i = 0; i < e->n_opts; i++)
		if (!inet_opt_find(e->opts[i]->level, e->opts[i]->name))
			return "option";
	if ((e->n_rcvq || e->n_mcast || e->has_shutdown) && !udp)
		return "UDP state";
	if (e->has_shutdown && e->shutdown & ~3u)
		return "shutdown state";
	size_t total = 0;
	for (size_t i = 0; i < e->n_rcvq; i++) {
		const UdpDgram *d = e->rcvq[i];
		total += d->data.len;
		if ((d->src.len != 4 && d->src.len != 16) || d->src_port > 65535 ||
		    (d->has_dst && d->dst.len != d->src.len) || d->data.len > 65535 ||
		    total > INET_QUEUE_MAX)
			return "queued datagram";
	}
	for (size_t i = 0; i < e->n_mcast; i++) {
		const InetMcast *m = e->mcast[i];
		if ((m->group.len != 4 && (m->group.len != 16 || e->family != AF_INET6)) ||
		    m->n_sources > 64 || (m->fmode != MCAST_INCLUDE && m->fmode != MCAST_EXCLUDE) ||
		    (m->ifname && strlen(m->ifname) >= IFNAMSIZ))
			return "multicast group";
		for (size_t k = 0; k < m->n_sources; k++)
			if (m->sources[k].len != m->group.len)
				return "multicast source";
	}
	if (e->has_filter && !sk_filter_ok(e->filter.len))
		return "socket filter";
	return NULL;
}

static int inet_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != INET_SK_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown inet subtype", rec->index);
	struct inet_robj *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->fd = -1;
	o->e = rctx_unpack(ctx, rec, &inet_sk_entry__descriptor);
	const char *bad = o->e ? entry_invalid(o->e) : "record";
	if (bad) {
		inet_free_robj(o);
		return log_fail(&ctx->log, -EINVAL, "record %u: inet socket entry: its %s is not "
				"valid", rec->index, bad);
	}
	return fdobj_register(ctx, rec, KIND_inet, o->e->id, o, inet_free_robj);
}

/* "pid P fd F" of a task of the image holding object id, for messages */
static const char *holder(struct rst_ctx *ctx, uint32_t id, char *buf, size_t len)
{
	for (size_t i = 0; i < ctx->nimage; i++) {
		int fd;
		if (fdtable_rst_fd_of(&ctx->tasks[i], id, &fd) == 0) {
			snprintf(buf, len, "pid %d fd %d", ctx->tasks[i].pid, fd);
			return buf;
		}
	}
	snprintf(buf, len, "socket %u", id);
	return buf;
}

#define RFAIL(ctx, o, r, fmt, ...)                                                             \
	({                                                                                     \
		char h_[64], s_[64] = "", d_[64] = "";                                         \
		union inet_addr a_;                                                            \
		if ((o)->e->has_src) {                                                         \
			inet_mkaddr(&a_, (int)(o)->e->family, (o)->e->src.data, (o)->e->src.len, \
				    (uint16_t)(o)->e->src_port);                               \
			inet_addr_str(&a_, s_, sizeof(s_));                                    \
		}                                                                              \
		if ((o)->e->has_dst) {                                                         \
			inet_mkaddr(&a_, (int)(o)->e->family, (o)->e->dst.data, (o)->e->dst.len, \
				    (uint16_t)(o)->e->dst_port);                               \
			d_[0] = ' ', d_[1] = '-', d_[2] = '>', d_[3] = ' ';                    \
			inet_addr_str(&a_, d_ + 4, sizeof(d_) - 4);                            \
		}                                                                              \
		log_fail(&(ctx)->log, r, "%s (inet): %s %s%s: " fmt,                           \
			 holder(ctx, (o)->e->id, h_, sizeof(h_)), inet_proto_name((int)(o)->e->proto), \
			 s_[0] ? s_ : "unbound", d_, ##__VA_ARGS__);                           \
	})

static bool any_addr(const InetSkEntry *e)
{
	for (size_t i = 0; i < e->src.len; i++)
		if (e->src.data[i])
			return false;
	return true;
}

/*
 * A connect in progress whose local port another socket took meanwhile
 * (an ephemeral port, which connect() gives to every 4-tuple that differs):
 * the connection it makes is a 4-tuple of its own, which connect() checks,
 * so it may share the port, as it did: bound in repair mode (SK_FORCE_REUSE,
 * CAP_NET_ADMIN), then out of it, SO_REUSEADDR as it was. err: bind's.
 */
static int bind_forced(struct rst_ctx *ctx, struct inet_robj *o, const union inet_addr *a,
		       socklen_t al, int err)
{
	int on = 1, off = -1 /* TCP_REPAIR_OFF_NO_WP */, reuse = 0;
	socklen_t l = sizeof(reuse);
	if (getsockopt(o->fd, SOL_SOCKET, SO_REUSEADDR, &reuse, &l) < 0 ||
	    setsockopt(o->fd, IPPROTO_TCP, TCP_REPAIR, &on, sizeof(on)) < 0)
		return err;
	int r = bind(o->fd, &a->sa, al) < 0 ? -errno : 0;
	if (setsockopt(o->fd, IPPROTO_TCP, TCP_REPAIR, &off, sizeof(off)) < 0 ||
	    (reuse && setsockopt(o->fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)) < 0))
		return -errno;
	if (r < 0)
		return err;
	char h[64], s[64];
	log_info(&ctx->log, "%s (inet): tcp %s: its port is taken by another connection now; "
		 "bound beside it for its connect", holder(ctx, o->e->id, h, sizeof(h)),
		 inet_addr_str(a, s, sizeof(s)));
	return 0;
}

/*
 * bind, and for TCP once more if the port is taken and connections of it
 * in TIME_WAIT were destroyed: the program's own, closed before the
 * checkpoint, which keep a socket without SO_REUSEADDR from binding the
 * port (the original bound it before they existed); for a connect in
 * progress (SYN_SENT) also the orphans of its very connection, which an
 * earlier restart of the image left closing. Live sockets that hold the
 * port are left alone (EADDRINUSE).
 */
static int bind_tcp(struct rst_ctx *ctx, struct inet_robj *o, const union inet_addr *a,
		    socklen_t al)
{
	if (bind(o->fd, &a->sa, al) == 0)
		return 0;
	int r = -errno;
	if (r != -EADDRINUSE || o->e->proto != IPPROTO_TCP)
		return r;
	union inet_addr peer;
	const InetSkEntry *e = o->e;
	bool conn = e->has_dst && e->dst_port;
	if (conn)
		inet_mkaddr(&peer, (int)e->family, e->dst.data, e->dst.len, (uint16_t)e->dst_port);
	int n = inet_stale_destroy(a, conn ? &peer : NULL);
	if (n < 0 && n != -EPERM)
		return n;
	if (n > 0) {
		char h[64], s[64];
		log_info(&ctx->log, "%s (inet): tcp %s: %d connection(s) of its port in TIME_WAIT%s "
			 "destroyed to bind it again", holder(ctx, o->e->id, h, sizeof(h)),
			 inet_addr_str(a, s, sizeof(s)), n,
			 conn ? " or left of an earlier life of this connection" : "");
		if (bind(o->fd, &a->sa, al) == 0)
			return 0;
		r = -errno;
	}
	return conn && r == -EADDRINUSE ? bind_forced(ctx, o, a, al, r) : r;
}

/* A UDP socket, bound: its multicast groups joined, its queue refilled. */
static int udp_state(struct rst_ctx *ctx, struct inet_robj *o)
{
	const InetSkEntry *e = o->e;
	const InetMcast *bad = NULL;
	char g[INET6_ADDRSTRLEN] = "?";
	int r = inet_mcast_apply(o->fd, e, &bad);
	if (r < 0) {
		inet_ntop(bad->group.len == 4 ? AF_INET : AF_INET6, bad->group.data, g, sizeof(g));
		return RFAIL(ctx, o, r, "cannot join multicast group %s on %s: %s", g,
			     bad->ifname ? bad->ifname : "its interface", strerror(-r));
	}
	if (!e->n_rcvq)
		return 0;
	size_t got = 0;
	r = inet_udp_refill(o->fd, e, &got);
	if (r == -EPERM)
		return RFAIL(ctx, o, r, "its %zu queued datagram(s) are sent again through a raw "
			     "socket, which needs CAP_NET_RAW", e->n_rcvq);
	if (r < 0)
		return RFAIL(ctx, o, r, "cannot queue its %zu datagram(s) again (%zu arrived): %s",
			     e->n_rcvq, got, strerror(-r));
	return 0;
}

/* Options, bind, listen or connect: every socket but an established TCP one. */
static int make_plain(struct rst_ctx *ctx, struct inet_robj *o)
{
	const InetSkEntry *e = o->e;
	const InetOpt *bad = NULL;
	union inet_addr a;
	socklen_t al;
	int r;

	r = inet_opts_apply(o->fd, e, true, false, &bad);
	if (r == 0)
		r = inet_opts_apply_misc(o->fd, e);
	if (r < 0)
		return RFAIL(ctx, o, r, "cannot set option %s: %s",
			     bad ? inet_opt_find(bad->level, bad->name)->text : "(linger, timeouts or "
			     "device)", strerror(-r));
	if (e->has_icmp6_filter &&
	    setsockopt(o->fd, IPPROTO_ICMPV6, ICMP6_FILTER, e->icmp6_filter.data,
		       (socklen_t)e->icmp6_filter.len) < 0)
		return RFAIL(ctx, o, -errno, "cannot set its ICMPv6 filter: %m");
	if (e->has_src && (e->src_port || !any_addr(e))) {
		al = inet_mkaddr(&a, (int)e->family, e->src.data, e->src.len, (uint16_t)e->src_port);
		if ((r = bind_tcp(ctx, o, &a, al)) < 0)
			return RFAIL(ctx, o, r, "cannot bind the address: %s", strerror(-r));
	}
	if (e->state == INET_ST_LISTEN && listen(o->fd, (int)e->backlog) < 0)
		return RFAIL(ctx, o, -errno, "cannot listen: %m");
	/* before connect: a connected socket takes only its peer's */
	if ((r = udp_state(ctx, o)) < 0)
		return r;
	if ((r = inet_filter_apply(o->fd, e)) < 0)
		return RFAIL(ctx, o, r, "cannot attach its socket filter: %s", strerror(-r));
	if (e->state == INET_ST_CONNECTED) {
		al = inet_mkaddr(&a, (int)e->family, e->dst.data, e->dst.len, (uint16_t)e->dst_port);
		if (connect(o->fd, &a.sa, al) < 0)
			return RFAIL(ctx, o, -errno, "cannot connect: %m");
	}
	/* an unconnected socket is marked too (the kernel says ENOTCONN) */
	if (e->has_shutdown && e->shutdown &&
	    shutdown(o->fd, e->shutdown == 3 ? SHUT_RDWR : e->shutdown == 1 ? SHUT_RD : SHUT_WR) < 0 &&
	    errno != ENOTCONN)
		return RFAIL(ctx, o, -errno, "cannot shut it down again: %m");
	r = inet_opts_apply(o->fd, e, false, false, &bad);
	if (r < 0)
		return RFAIL(ctx, o, r, "cannot set option %s: %s",
			     inet_opt_find(bad->level, bad->name)->text, strerror(-r));
	return 0;
}

/* What make_tcp() failed at (its message). */
enum mk_step { MK_OPT = 1, MK_BUFS, MK_REPAIR };

/* An established connection, left in repair mode; nothing logged. */
static int make_tcp_core(struct inet_robj *o, const int *fresh, int *ret_what,
			 const InetOpt **bad, const char **step)
{
	const InetSkEntry *e = o->e;
	union inet_addr src, dst;
	int now[2] = { -1, -1 };

	*ret_what = MK_OPT;
	int r = inet_opts_apply(o->fd, e, true, false, bad);
	if (r == 0)
		r = inet_opts_apply_misc(o->fd, e);
	if (r == 0)
		r = inet_filter_apply(o->fd, e);
	if (r == 0)
		r = inet_opts_apply(o->fd, e, false, false, bad);
	if (r < 0)
		return r;
	/* before connect, which sizes the window (window clamp, receive
	 * threshold) by the receive buffer: a window the buffer cannot hold
	 * makes the receiver drop */
	*ret_what = MK_BUFS;
	r = inet_bufs_set(o->fd, e, fresh, now);
	if (r < 0)
		return r;
	socklen_t sl = inet_mkaddr(&src, (int)e->family, e->src.data, e->src.len, (uint16_t)e->src_port);
	socklen_t dl = inet_mkaddr(&dst, (int)e->family, e->dst.data, e->dst.len, (uint16_t)e->dst_port);
	*ret_what = MK_REPAIR;
	o->repair = true;
	return inet_tcp_restore(o->fd, e->tcp, &src, sl, &dst, dl, now, step);
}

/* An established connection, left in repair mode. */
static int make_tcp(struct rst_ctx *ctx, struct inet_robj *o)
{
	const InetOpt *bad = NULL;
	const char *step = NULL;
	int what = 0;
	int r = make_tcp_core(o, NULL, &what, &bad, &step);
	if (r >= 0)
		return 0;
	if (what == MK_OPT)
		return RFAIL(ctx, o, r, "cannot set option %s: %s",
			     bad ? inet_opt_find(bad->level, bad->name)->text : "(linger, timeouts or "
			     "device)", strerror(-r));
	if (what == MK_BUFS)
		return RFAIL(ctx, o, r, "cannot set its buffer sizes: %s", strerror(-r));
	if (r == -EPERM && step && !strcmp(step, "TCP_REPAIR"))
		return RFAIL(ctx, o, r, "restoring an established connection needs TCP_REPAIR, "
			     "which needs CAP_NET_ADMIN");
	return RFAIL(ctx, o, r, "cannot restore the connection (%s): %s", step,
		     r == -EADDRINUSE || r == -EADDRNOTAVAIL
			     ? "the address is in use or not available on this host"
			     : strerror(-r));
}

/*
 * The established connections of the root's namespace made by threads
 * (both cores: a socket in repair mode is independent of every other
 * until fdtable passes it in). One that fails is closed (in repair mode:
 * nothing goes out) and left for make_pass's loop, which makes it again
 * and says why it fails.
 */
#define MK_THREADS 4
#define MK_PIN_MIN 256 /* sockets from which restore_end unpins its threads */

struct mk {
	struct inet_robj **v;
	int fresh[2][2]; /* a new TCP socket's SO_SNDBUF, SO_RCVBUF: IPv4, IPv6 */
	bool have[2];	 /* fresh[f] known */
};

static void mk_one(void *arg, size_t i, unsigned slot)
{
	struct mk *m = arg;
	struct inet_robj *o = m->v[i];
	const InetOpt *bad;
	const char *step;
	int what;
	(void)slot;
	o->fd = socket((int)o->e->family, (int)o->e->type | SOCK_CLOEXEC, (int)o->e->proto);
	if (o->fd < 0 ||
	    make_tcp_core(o, m->have[o->e->family != AF_INET] ? m->fresh[o->e->family != AF_INET] : NULL,
			  &what, &bad, &step) >= 0)
		return;
	close(o->fd);
	o->fd = -1;
	o->repair = false;
}

static void make_tcp_par(struct rst_ctx *ctx)
{
	unsigned th = par_cpus();
	size_t n = 0;
	if (th < 2 || (ctx->flags & RESTART_VERIFY))
		return;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		struct inet_robj *o = ob->ptr;
		n += o->e->tcp && !o->e->netns && o->fd < 0;
	}
	_cleanup_free_ struct inet_robj **v = n ? malloc(n * sizeof(*v)) : NULL;
	if (!v)
		return;
	n = 0;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		struct inet_robj *o = ob->ptr;
		if (o->e->tcp && !o->e->netns && o->fd < 0)
			v[n++] = o;
	}
	/* a new socket's buffer sizes, the same for every one of a family
	 * (the namespace's tcp_wmem, tcp_rmem): two getsockopt fewer each */
	struct mk m = { .v = v };
	for (int f = 0; f < 2; f++) {
		_cleanup_close_ int s = socket(f ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		socklen_t l = sizeof(int);
		m.have[f] = s >= 0 && getsockopt(s, SOL_SOCKET, SO_SNDBUF, &m.fresh[f][0], &l) == 0 &&
			    getsockopt(s, SOL_SOCKET, SO_RCVBUF, &m.fresh[f][1], &l) == 0;
	}
	unsigned used = par_for(n, th < MK_THREADS ? th : MK_THREADS, mk_one, &m);
	log_debug(&ctx->log, "inet: %zu connection(s) made by %u thread(s)", n, used);
}

/* RESTART_VERIFY, a dry run beside the live original (which holds the
 * addresses): a bare socket of each, its options set, repair mode tried
 * for a connection; nothing is bound or connected. */
static int verify_one(struct rst_ctx *ctx, struct inet_robj *o)
{
	const InetOpt *bad = NULL;
	int r = inet_opts_apply(o->fd, o->e, true, false, &bad);
	if (r == 0)
		r = inet_opts_apply(o->fd, o->e, false, false, &bad);
	if (r < 0)
		return RFAIL(ctx, o, r, "cannot set option %s: %s",
			     inet_opt_find(bad->level, bad->name)->text, strerror(-r));
	if (o->e->tcp && (r = inet_tcp_repair(o->fd, TCP_REPAIR_ON)) < 0)
		return RFAIL(ctx, o, r, "restoring an established connection needs TCP_REPAIR: %s",
			     strerror(-r));
	o->repair = o->e->tcp != NULL;
	return 0;
}

/* One restored connection for the network lock (core/netlock.h), in the
 * namespace of that id (0: the root's). */
static int lock_conn_in(struct rst_ctx *ctx, uint32_t netns, const struct inet_conn *c)
{
	struct sockaddr_storage l = { 0 }, r = { 0 };
	if (c->family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&l, *b = (struct sockaddr_in *)&r;
		*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(c->sport) };
		*b = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(c->dport) };
		memcpy(&a->sin_addr, c->src, 4);
		memcpy(&b->sin_addr, c->dst, 4);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&l, *b = (struct sockaddr_in6 *)&r;
		*a = (struct sockaddr_in6){ .sin6_family = AF_INET6, .sin6_port = htons(c->sport) };
		*b = (struct sockaddr_in6){ .sin6_family = AF_INET6, .sin6_port = htons(c->dport) };
		memcpy(&a->sin6_addr, c->src, 16);
		memcpy(&b->sin6_addr, c->dst, 16);
	}
	return netns ? rst_netlock_add_ns(ctx, netns, (struct sockaddr *)&l, (struct sockaddr *)&r)
		     : rst_netlock_add(ctx, (struct sockaddr *)&l, (struct sockaddr *)&r);
}

static int lock_conn(const struct inet_conn *c, void *arg)
{
	return lock_conn_in(arg, 0, c);
}

/* The established connections of the other namespaces, each in its own. */
static int lock_others(struct rst_ctx *ctx)
{
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		const InetSkEntry *e = ((struct inet_robj *)ob->ptr)->e;
		struct inet_conn c;
		if (!e->tcp || !e->netns)
			continue;
		conn_of((int)e->family, e->src.data, e->src_port, e->dst.data, e->dst_port, &c);
		int r = lock_conn_in(ctx, e->netns, &c);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The sockets of one pass (0: all but established TCP, 1: those) of the
 * root's namespace (root) or of the others, by namespace. */
static int make_pass(struct rst_ctx *ctx, int pass, bool root)
{
	uint32_t cur = 0;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		struct inet_robj *o = ob->ptr;
		if (!o->e->tcp != !pass || root != !o->e->netns || o->fd >= 0)
			continue;
		if (!root && cur && cur != o->e->netns)
			continue; /* another namespace's: its own round */
		int r = root || cur ? 0 : netns_rst_enter(ctx, o->e->netns);
		if (r < 0)
			return RFAIL(ctx, o, r, "cannot enter its network namespace %u: %s",
				     o->e->netns, strerror(-r));
		cur = o->e->netns;
		o->fd = socket((int)o->e->family, (int)o->e->type | SOCK_CLOEXEC,
			       (int)o->e->proto);
		if (o->fd < 0)
			return RFAIL(ctx, o, -errno, "cannot make the socket: %m");
		r = (ctx->flags & RESTART_VERIFY) ? verify_one(ctx, o)
		    : pass			  ? make_tcp(ctx, o)
						  : make_plain(ctx, o);
		if (r < 0)
			return r;
	}
	/* another namespace's sockets left: another round */
	return cur ? make_pass(ctx, pass, root) : 0;
}

static int inet_prepare(struct rst_ctx *ctx)
{
	/* the connections' packets are dropped from the "network lock" step
	 * (right after prepare) until the tree runs; not beside a live
	 * original (RESTART_VERIFY), whose packets they are */
	if (!(ctx->flags & RESTART_VERIFY)) {
		int r = inet_rst_connections(ctx, lock_conn, ctx);
		if (r >= 0)
			r = lock_others(ctx);
		if (r < 0)
			return log_fail(&ctx->log, r, "inet: cannot lock the connections: %s",
					strerror(-r));
	}
	/* listeners and bound sockets first: an established socket bound in
	 * repair mode shares its port with anything; each made in its network
	 * namespace (ckpt's thread is in the root's, and enters another for
	 * the sockets of its tasks, once for each namespace and pass) */
	int r = 0;
	for (int pass = 0; r >= 0 && pass < 4; pass++) {
		if (pass == 1)
			make_tcp_par(ctx);
		r = make_pass(ctx, pass % 2, pass < 2);
	}
	int r2 = netns_rst_enter(ctx, 0);
	if (r2 < 0 && r >= 0)
		r = log_fail(&ctx->log, r2, "inet: cannot go back to the root's network namespace: "
			     "%s", strerror(-r2));
	return r;
}

static int send_all(int s, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = send(s, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int reuse_again(int s, const InetSkEntry *e)
{
	for (size_t i = 0; i < e->n_opts; i++) {
		int v = e->opts[i]->val;
		if (e->opts[i]->level == SOL_SOCKET && e->opts[i]->name == SO_REUSEADDR &&
		    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)) < 0)
			return -errno;
	}
	return 0;
}

/* A connect in progress (SYN_SENT), bound in prepare: connect again,
 * without waiting (the program waits as it did, in poll or in connect). */
static int connect_again(struct inet_robj *o)
{
	const InetSkEntry *e = o->e;
	union inet_addr a;
	socklen_t al = inet_mkaddr(&a, (int)e->family, e->dst.data, e->dst.len,
				   (uint16_t)e->dst_port);
	int fl = fcntl(o->fd, F_GETFL);
	if (fl < 0 || fcntl(o->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	int r = connect(o->fd, &a.sa, al) < 0 && errno != EINPROGRESS ? -errno : 0;
	if (fcntl(o->fd, F_SETFL, fl) < 0 && r == 0)
		r = -errno;
	return r;
}

/* Every socket exists: connections leave repair mode, then the rest. */
/* What finish_core() failed at (its message). */
enum fin_step { FIN_CONNECT = 1, FIN_RESET, FIN_REPAIR, FIN_SEND, FIN_BUFS, FIN_OPT, FIN_FLAGS };

/* One socket out of repair mode, its last options; nothing logged. */
static int finish_core(unsigned flags, struct inet_robj *o, int *ret_what, const InetOpt **bad)
{
	const InetSkEntry *e = o->e;
	int r;

	*ret_what = FIN_CONNECT;
	if (e->state == INET_ST_SYN_SENT && (r = connect_again(o)) < 0)
		return r;
	if (e->tcp && o->repair && (flags & RESTART_CONN_RESET)) {
		/* --tcp-close: out of repair mode without a probe, then a
		 * disconnect: a reset to the peer, ECONNRESET to the program */
		struct sockaddr un = { .sa_family = AF_UNSPEC };
		*ret_what = FIN_RESET;
		r = inet_tcp_repair(o->fd, TCP_REPAIR_OFF_NO_WP);
		if (r == 0 && connect(o->fd, &un, sizeof(un)) < 0)
			r = -errno;
		if (r < 0)
			return r;
		/* as a reset received leaves it: reads end of file after the
		 * error, writes EPIPE (on a closed socket shutdown says
		 * ENOTCONN, and still marks it) */
		shutdown(o->fd, SHUT_RDWR);
		o->repair = false;
	} else if (e->tcp && o->repair) {
		*ret_what = FIN_REPAIR;
		r = inet_tcp_repair(o->fd, TCP_REPAIR_OFF);
		if (r < 0)
			return r;
		o->repair = false;
		/* leaving repair mode cleared SO_REUSEADDR */
		*ret_what = FIN_SEND;
		r = reuse_again(o->fd, e);
		if (r == 0)
			r = send_all(o->fd, e->tcp->sendq.data + e->tcp->sendq.len - e->tcp->unsent,
				     e->tcp->unsent);
		if (r < 0)
			return r;
	}
	*ret_what = FIN_BUFS;
	r = inet_bufs_apply(o->fd, e);
	if (r < 0)
		return r;
	*ret_what = FIN_OPT;
	r = inet_opts_apply(o->fd, e, false, true, bad);
	if (r < 0)
		return r;
	/* added to what is there: fdtable's restore_end may set O_ASYNC */
	*ret_what = FIN_FLAGS;
	int fl = e->flags ? fcntl(o->fd, F_GETFL) : 0; /* none to add: no system call */
	if (e->flags && (fl < 0 || fcntl(o->fd, F_SETFL, fl | (int)e->flags) < 0))
		return -errno;
	return 0;
}

static int finish_fail(struct rst_ctx *ctx, struct inet_robj *o, int r, int what,
		       const InetOpt *bad)
{
	switch (what) {
	case FIN_CONNECT:
		return RFAIL(ctx, o, r, "cannot connect again: %s", strerror(-r));
	case FIN_RESET:
		return RFAIL(ctx, o, r, "cannot reset the connection: %s", strerror(-r));
	case FIN_REPAIR:
		return RFAIL(ctx, o, r, "cannot leave repair mode: %s", strerror(-r));
	case FIN_SEND:
		return RFAIL(ctx, o, r, "cannot send what was not sent yet: %s", strerror(-r));
	case FIN_BUFS:
		return RFAIL(ctx, o, r, "cannot set its buffer sizes: %s", strerror(-r));
	case FIN_OPT:
		return RFAIL(ctx, o, r, "cannot set option %s: %s",
			     inet_opt_find(bad->level, bad->name)->text, strerror(-r));
	default:
		return RFAIL(ctx, o, r, "cannot set its file flags: %s", strerror(-r));
	}
}

/*
 * The established connections finished by threads (each is independent
 * of the others; the network lock holds their packets until the tree
 * runs), the other sockets after them in order. A failure is kept in its
 * object and reported by the caller's thread, the first in order.
 */
struct fin {
	struct inet_robj **v;
	int *err, *what;
	const InetOpt **bad;
	unsigned flags;
};

static void fin_one(void *arg, size_t i, unsigned slot)
{
	struct fin *f = arg;
	(void)slot;
	f->err[i] = finish_core(f->flags, f->v[i], &f->what[i], &f->bad[i]);
	f->v[i]->finished = true;
}

static int inet_restore_end(struct rst_ctx *ctx)
{
	/* a dry run is torn down next: its connections stay in repair mode,
	 * so that no peer hears of them */
	if (ctx->flags & (RESTART_VERIFY | RESTART_GHOST))
		return 0;
	size_t n = 0;
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));)
		n++;
	_cleanup_free_ struct inet_robj **v = malloc((n ? n : 1) * sizeof(*v));
	_cleanup_free_ int *err = calloc(n ? n : 1, 2 * sizeof(*err));
	_cleanup_free_ const InetOpt **bad = calloc(n ? n : 1, sizeof(*bad));
	/* ckpt's thread pinned to one CPU while it makes a small tree
	 * (restart.c pin_cpu): its CPUs of before for the threads (which
	 * inherit them) while no task runs, then the one CPU again */
	cpu_set_t one;
	bool repin = ctx->affinity && n > MK_PIN_MIN &&
		     sched_getaffinity(0, sizeof(one), &one) == 0 &&
		     sched_setaffinity(0, sizeof(*ctx->affinity), ctx->affinity) == 0;
	unsigned th = par_cpus();
	size_t m = 0;
	if (v && err && bad && th > 1) {
		for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
			struct inet_robj *o = ob->ptr;
			if (o->e->tcp && o->repair && o->fd >= 0)
				v[m++] = o;
		}
		struct fin f = { v, err, err + n, bad, ctx->flags };
		par_for(m, th < MK_THREADS ? th : MK_THREADS, fin_one, &f);
		if (repin)
			(void)sched_setaffinity(0, sizeof(one), &one);
		repin = false;
		for (size_t i = 0; i < m; i++)
			if (err[i] < 0)
				return finish_fail(ctx, v[i], err[i], err[n + i], bad[i]);
	}
	if (repin)
		(void)sched_setaffinity(0, sizeof(one), &one);
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		struct inet_robj *o = ob->ptr;
		if (o->finished)
			continue;
		const InetOpt *b = NULL;
		int what = 0, r = finish_core(ctx->flags, o, &what, &b);
		if (r < 0)
			return finish_fail(ctx, o, r, what, b);
	}
	return 0;
}

/* the restart failed: connections closed in repair mode send nothing */
static void inet_restore_abort(struct rst_ctx *ctx)
{
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		struct inet_robj *o = ob->ptr;
		if (o->e->tcp && o->fd >= 0 && !o->repair && inet_tcp_repair(o->fd, TCP_REPAIR_ON) == 0)
			o->repair = true;
	}
}

static int inet_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct inet_robj *o = robj;
	return fdobj_fd(ctx, o->fd, "inet socket", o->e->id, ret_fd);
}

int inet_rst_connections(struct rst_ctx *ctx, int (*cb)(const struct inet_conn *c, void *arg),
			 void *arg)
{
	for (struct obj *ob = NULL; (ob = objhash_next_of(&ctx->objs, KIND_inet, ob));) {
		const InetSkEntry *e = ((struct inet_robj *)ob->ptr)->e;
		struct inet_conn c;
		/* another namespace's: locked in its own (lock_others) */
		if (!e->tcp || e->netns)
			continue;
		conn_of((int)e->family, e->src.data, e->src_port, e->dst.data, e->dst_port, &c);
		int r = cb(&c, arg);
		if (r < 0)
			return r;
	}
	return 0;
}

static const ProtobufCMessageDescriptor *inet_descriptor(uint32_t sub)
{
	return sub == REC_SUB(INET_SK_ENTRY) ? &inet_sk_entry__descriptor : NULL;
}

const struct kind_ops inet_ops = {
	.fd_claim = inet_fd_claim,
	.fd_collect = inet_fd_collect,
	.fd_get = inet_fd_get,
	.collect_end = inet_collect_end,
	.dump = inet_dump,
	.after_kill = inet_after_kill,
	.check_restore = inet_check_restore,
	.load = inet_load,
	.prepare = inet_prepare,
	.restore_end = inet_restore_end,
	.restore_abort = inet_restore_abort,
	.free_obj = inet_free_obj,
	.free_state = inet_free_state,
	.free_robj = inet_free_robj,
	.descriptor = inet_descriptor,
};
