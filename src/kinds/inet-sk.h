/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Helpers of the inet kind (inet.c), with no knowledge of images or tasks:
 *
 * - socket options: the table of those saved (int options at a level,
 *   with where they apply and whether they go before bind), read from a
 *   socket where they differ from a new socket of the same family, type
 *   and protocol, and set again;
 * - TCP_REPAIR: an established connection read (sequence numbers, both
 *   queues peeked, MSS, window scale, SACK, timestamps, window) and made
 *   again on a new socket in repair mode; leaving repair mode is the
 *   caller's, once every socket exists;
 * - addresses as text: "127.0.0.1:8080", "[::1]:8080".
 *
 * Functions return 0 or -errno and log nothing.
 */
#ifndef CKPT_INET_SK_H
#define CKPT_INET_SK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "inet.pb-c.h"

#ifndef TCP_REPAIR_OFF_NO_WP
#define TCP_REPAIR_OFF_NO_WP -1
#endif
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

/* kernel TCP states (include/net/tcp_states.h) and option codes of
 * TCP_REPAIR_OPTIONS (include/net/tcp.h) */
enum {
	TCP_ESTABLISHED = 1, TCP_SYN_SENT, TCP_SYN_RECV, TCP_FIN_WAIT1, TCP_FIN_WAIT2,
	TCP_TIME_WAIT, TCP_CLOSE, TCP_CLOSE_WAIT, TCP_LAST_ACK, TCP_LISTEN, TCP_CLOSING,
};
enum { TCPOPT_MAXSEG = 2, TCPOPT_WINDOW = 3, TCPOPT_SACK_PERM = 4, TCPOPT_TIMESTAMP = 8 };

#define INET_QUEUE_MAX (64u << 20) /* bytes per queue */

/* one bound or connected address: sin or sin6 */
union inet_addr {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

/* which sockets an option applies to */
enum {
	OPT_TCP = 1,
	OPT_UDP = 2,
	OPT_V4 = 4,   /* IPPROTO_IP: AF_INET sockets only */
	OPT_V6 = 8,   /* IPPROTO_IPV6: AF_INET6 sockets only */
	OPT_BIND = 16, /* set before bind */
	OPT_LISTEN = 32, /* TCP listeners only */
	OPT_LAST = 64, /* set after the queues are refilled (TCP_CORK) */
	OPT_RAW = 128, /* raw and ICMP ping sockets only (which take OPT_UDP ones too) */
};

/* TcpRepair.fin: what a half-closed connection has done (bits) */
#define TCP_FIN_SENT 1u     /* FIN_WAIT1, FIN_WAIT2: shutdown(SHUT_WR) */
#define TCP_FIN_RECEIVED 2u /* CLOSE_WAIT: the peer's FIN in rcv_seq */

struct inet_opt_desc {
	int level, name;
	unsigned flags;
	const char *text;
};

/* The option at (level, name), or NULL if it is not one saved. */
const struct inet_opt_desc *inet_opt_find(uint32_t level, uint32_t name);

/*
 * The int options of s (family, proto) that differ from those of a new
 * socket like it, into v (room for cap; *ret_n set). The rest: buffer
 * sizes and locks, linger, timeouts, device, into e.
 */
/* What a new socket of one family, type and protocol holds for each option
 * of the table (read once a checkpoint: a socket and ~60 getsockopt calls a
 * socket were most of the time of a checkpoint of 10,000 connections). */
#define INET_OPTS_TABLE 64
struct inet_opt_defaults {
	size_t n;
	struct {
		int family, type, proto;
		int val[INET_OPTS_TABLE];
		bool ok[INET_OPTS_TABLE];
	} e[6];
	struct sockopts *so; /* the batches' ring (sockopts.h), freed with the cache */
	bool no_ring;        /* none to be had */
};
/* defs: the cache (a task's kind state), NULL to read a new socket. */
/* *ret_filter: the number of instructions of its socket filter
 * (SO_GET_FILTER with no room, asked in the batch), or -errno. */
/* known: nknown options of the table whose values are known already (the
 * network lock's sock_diag dump), not asked. */
struct inet_opt_val {
	int level, name, val;
};
int inet_opts_read(int s, int family, int type, int proto, struct inet_opt_defaults *defs,
		   const struct inet_opt_val *known, size_t nknown, InetOpt *v, size_t cap,
		   size_t *ret_n, InetSkEntry *e, char *dev, size_t devlen, int *ret_filter)
	__attribute__((warn_unused_result));
/* Sets the options of e whose OPT_BIND flag is bind (and not OPT_LAST), or
 * with last, the OPT_LAST ones. *ret_bad: the option that failed. */
int inet_opts_apply(int s, const InetSkEntry *e, bool bind, bool last,
		    const InetOpt **ret_bad) __attribute__((warn_unused_result));
/* linger, timeouts, device (before bind) */
int inet_opts_apply_misc(int s, const InetSkEntry *e) __attribute__((warn_unused_result));
/* The classic BPF filter and its lock (sk-filter.c), if saved: after a UDP
 * socket's queue is refilled (a datagram queued before the program
 * attached it would not pass it again). */
int inet_filter_apply(int s, const InetSkEntry *e) __attribute__((warn_unused_result));
/* Buffer sizes and their locks as saved; forced (CAP_NET_ADMIN) when the
 * limits are lower. */
int inet_bufs_apply(int s, const InetSkEntry *e) __attribute__((warn_unused_result));
/* The same on a new socket whose SO_SNDBUF and SO_RCVBUF are fresh[0], [1]
 * (no getsockopt; nor SO_BUF_LOCK if it stays 0); now[0], [1]: what they
 * are after, -1 if not known. */
int inet_bufs_set(int s, const InetSkEntry *e, const int *fresh, int *now)
	__attribute__((warn_unused_result));
/* Raises both buffers for a refill of sndq and rcvq bytes. */
int inet_bufs_raise(int s, size_t sndq, size_t rcvq) __attribute__((warn_unused_result));
/* The same, now[0], [1] the sizes (-1 or now NULL: asked). */
int inet_bufs_raise_at(int s, size_t sndq, size_t rcvq, const int *now)
	__attribute__((warn_unused_result));

/* An address of family with raw bytes (4 or 16) and port into a. */
socklen_t inet_mkaddr(union inet_addr *a, int family, const uint8_t *addr, size_t len,
		      uint16_t port);
/* "127.0.0.1:80", "[::1]:80", into buf */
const char *inet_addr_str(const union inet_addr *a, char *buf, size_t len);
const char *inet_tcp_state_name(int state);
/* The peer of TCP socket s as /proc/net/tcp{,6} shows it (also in SYN_SENT,
 * where getpeername says ENOTCONN); -ENOENT if it has none. */
int inet_proc_peer(int s, union inet_addr *ret);

/*
 * Destroys (SOCK_DESTROY of sock_diag) every TCP connection of the
 * caller's network namespace in TIME_WAIT whose local port is that of a
 * and whose local address is a's (a v4-mapped one its IPv4 address) or
 * any if a's is the any address: they keep a socket of a program that did
 * not set SO_REUSEADDR from binding its port again, which the original
 * could when it bound it. With rem (a connection's peer), also the
 * orphans (held by no process: closed, in FIN_WAIT1/2, CLOSING, LAST_ACK)
 * of exactly the connection a -> rem: what is left of an earlier life of
 * the connection being restored (the original, killed, or an earlier
 * restart of the same image that ended). Live sockets are left alone.
 * Returns how many, or -errno (-EPERM without CAP_NET_ADMIN).
 */
int inet_stale_destroy(const union inet_addr *a, const union inet_addr *rem);
const char *inet_proto_name(int proto);

/*
 * Reads the established connection of s, which must be in repair mode
 * (the caller turns it on and off): *t filled, its queues malloc'ed (free
 * with inet_tcp_free). ti0, if not NULL, is its tcp_info read before repair
 * mode, used instead of another read when it says ESTABLISHED. -EAGAIN:
 * data arrived while it was read (read it again); -EFBIG: a queue is
 * larger than INET_QUEUE_MAX.
 */
struct tcp_info;
int inet_tcp_read(int s, const struct tcp_info *ti0, TcpRepair *t)
	__attribute__((warn_unused_result));
void inet_tcp_free(TcpRepair *t);

/*
 * On a new TCP socket with its options set: repair mode, sequence
 * numbers, bind to src, connect to dst (no packet is sent), the TCP
 * options, the timestamp, the receive queue and the part of the send
 * queue that was sent, the window. The socket stays in repair mode; what
 * was never sent (t->unsent bytes at the end of sendq) is the caller's to
 * send once it has left it. bufs: its SO_SNDBUF and SO_RCVBUF (-1, or bufs
 * NULL: asked). *ret_step: what failed.
 */
int inet_tcp_restore(int s, const TcpRepair *t, const union inet_addr *src, socklen_t srclen,
		     const union inet_addr *dst, socklen_t dstlen, const int *bufs,
		     const char **ret_step) __attribute__((warn_unused_result));
/* ---- UDP and UDP-Lite (inet-udp.c) ---- */

/*
 * The datagrams in the receive queue of s, oldest first, without taking
 * them (MSG_PEEK from SO_PEEK_OFF 0, then the program's offset again),
 * each with its sender and the address it was sent to (IP_PKTINFO, turned
 * on for the peek). -EOPNOTSUPP: the kernel has no SO_PEEK_OFF for UDP;
 * -EFBIG: over INET_QUEUE_MAX bytes; -EMSGSIZE: one larger than 64 KiB.
 * Free with inet_udp_free.
 */
int inet_udp_peek(int s, int family, UdpDgram ***ret, size_t *ret_n)
	__attribute__((warn_unused_result));
void inet_udp_free(UdpDgram **v, size_t n);
/*
 * Sends the datagrams of e->rcvq to s (bound, not connected yet) from their
 * senders' addresses through a raw socket (CAP_NET_RAW; its packets carry
 * the network lock's pass mark), one at a time, each waited for in the
 * queue (SO_MEMINFO: what the queue holds grew). *ret_got: how many came.
 * -ETIMEDOUT: one did not come (5 s in all); -ENOBUFS: s dropped one.
 */
int inet_udp_refill(int s, const InetSkEntry *e, size_t *ret_got)
	__attribute__((warn_unused_result));
/* The multicast groups s joined: candidates from /proc/PID/net/igmp (and
 * igmp6 for AF_INET6), each asked of s with MCAST_MSFILTER, which fails
 * for a group it did not join. -E2BIG: a filter of over 64 sources. */
int inet_mcast_read(int s, int family, pid_t pid, InetMcast ***ret, size_t *ret_n)
	__attribute__((warn_unused_result));
void inet_mcast_free(InetMcast **v, size_t n);
/* Joins e's groups again (MCAST_JOIN_GROUP, then MCAST_MSFILTER for a
 * source filter); the interface by name if saved. *ret_bad: what failed. */
int inet_mcast_apply(int s, const InetSkEntry *e, const InetMcast **ret_bad)
	__attribute__((warn_unused_result));
/* Waits (up to max_ms) until nothing s sent is charged to it any more: a
 * datagram handed to the kernel is until the host lets it go (a neighbour
 * not resolved yet holds it up to 3 s by default, then drops it), and is
 * no state of the socket's then. Data corked (UDP_CORK, or MSG_MORE), held
 * until the program sends again, is: it never goes. 0 if nothing was
 * charged, else the ms waited; -EBUSY (UDP_CORK set) or -ETIMEDOUT with
 * *ret_outq the bytes still charged. */
int inet_udp_wait_sent(int s, int proto, int max_ms, int *ret_outq)
	__attribute__((warn_unused_result));
/* What of s is shut down (bit 1 reading, 2 writing): poll(POLLRDHUP), and
 * sock_diag's INET_DIAG_SHUTDOWN when the socket is found by its addresses
 * and cookie (-ENOENT if not: *ret has what poll said). */
int inet_udp_shutdown(int s, int family, int proto, uint32_t *ret)
	__attribute__((warn_unused_result));

/* TCP_REPAIR on s: TCP_REPAIR_ON, TCP_REPAIR_OFF, TCP_REPAIR_OFF_NO_WP */
int inet_tcp_repair(int s, int mode) __attribute__((warn_unused_result));

#endif
