/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The network lock: an nftables table of ckpt's own that drops every packet
 * of a list of TCP connections, both directions, in one network namespace,
 * so that while a tree is frozen (and until its restored sockets run) its
 * peers see neither an answer nor a reset: they retransmit.
 *
 *   table inet NAME {
 *     set c4 { type ipv4_addr . inet_service . ipv4_addr . inet_service }
 *     set c6 { type ipv6_addr . inet_service . ipv6_addr . inet_service }
 *     chain in  { type filter hook input  priority -350; policy accept;
 *                 meta mark NETLOCK_MARK_PASS accept
 *                 ip  saddr . tcp sport . ip  daddr . tcp dport @c4 counter drop
 *                 ip6 saddr . tcp sport . ip6 daddr . tcp dport @c6 counter drop }
 *     chain out { type filter hook output priority -350; ... the same }
 *     set p { type inet_proto . inet_service }   listeners' and UDP ports:
 *                                                 all that comes in dropped
 *     set s { type inet_service }                 ports whose new clients'
 *                                                 first SYN is dropped
 *   }
 *
 * Each connection (local L:l, remote R:r) puts two elements in its set:
 * R.r.L.l (what comes in) and L.l.R.r (what goes out). Priority -350 is
 * after defragmentation (-400) and before raw (-300), conntrack (-200) and
 * every filter table (0). A packet marked NETLOCK_MARK_PASS passes (what
 * ckpt itself must send to a locked peer while restoring).
 *
 * Invariants:
 * - The table is made and filled by libnftables in one transaction: it
 *   exists whole or not at all. It is removed by a raw nf_tables netlink
 *   request (NFT_MSG_DELTABLE, by name) built once at install time: the
 *   same bytes ckpt sends, or its guardian sends if ckpt died (the guardian
 *   may not call malloc, which libnftables does), see netlock_undo().
 * - Every netlink socket, libnftables' included, is opened in the network
 *   namespace the caller gave (a thread that enters it with setns), so
 *   the process itself never changes namespace.
 * - Nothing here logs and nothing is global: errors are -errno, and
 *   nft's own message for a failed install is in netlock_error().
 */
#ifndef CKPT_NET_LOCK_H
#define CKPT_NET_LOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NETLOCK_PRIORITY (-350)
#define NETLOCK_MARK_PASS 0xc114u /* packets with this fwmark are not dropped */
#define NETLOCK_NAME_MAX 64

struct netlock;

/*
 * A lock for the network namespace netns_fd (an fd of /proc/PID/ns/net; -1
 * for the caller's own), its table named name (letters, digits and '_',
 * shorter than NETLOCK_NAME_MAX; netlock_name() makes a unique one).
 * Installs nothing yet, but opens its netlink socket in the namespace.
 * netns_fd is duplicated.
 */
int netlock_new(int netns_fd, const char *name, struct netlock **ret)
	__attribute__((warn_unused_result));
/* Removes the table if it is installed (errors ignored) and not kept, frees;
 * NULL is fine. */
void netlock_free(struct netlock *nl);

/* "ckpt_lock_PID_XXXXXXXX": PID the caller's, the rest from the clock. */
void netlock_name(char *buf, size_t len);

/*
 * One TCP connection to drop: local and remote are sockaddr_in or
 * sockaddr_in6 of the same family (a v4-mapped IPv6 address is taken as
 * the IPv4 address its packets carry). Before netlock_install() only.
 */
int netlock_add(struct netlock *nl, const struct sockaddr *local, const struct sockaddr *remote)
	__attribute__((warn_unused_result));
/*
 * A listening TCP port or a bound UDP port of the tree: what comes in to it
 * (a new client's SYN, a datagram) is dropped, whatever the address, so
 * that nothing answers it with a reset or an ICMP error while the socket
 * is gone. proto: IPPROTO_TCP or IPPROTO_UDP. Before netlock_install() only.
 */
int netlock_add_port(struct netlock *nl, int proto, uint16_t port)
	__attribute__((warn_unused_result));
/*
 * A listening TCP port whose new clients are held out: only a first SYN
 * (SYN without ACK) to it is dropped, so that the connections already made
 * or being made go on and the listener's accept queue can only shrink.
 * Before netlock_install() only.
 */
int netlock_add_syn_port(struct netlock *nl, uint16_t port) __attribute__((warn_unused_result));
/* How many ports were added. */
size_t netlock_ports(const struct netlock *nl);
/* How many connections were added (duplicates counted once after install). */
size_t netlock_count(const struct netlock *nl);

/*
 * Makes the table, with every connection added, in one transaction; -EEXIST
 * if a table of that name exists. Then builds the removal request
 * (netlock_undo). A failure leaves nothing behind: netlock_error() says why.
 */
int netlock_install(struct netlock *nl) __attribute__((warn_unused_result));
/* Removes the table (a table already gone is not an error). */
int netlock_remove(struct netlock *nl) __attribute__((warn_unused_result));
/* Is the table installed (by this lock, and not removed since)? */
int netlock_installed(const struct netlock *nl);

/*
 * A netlink socket in the lock's namespace and the bytes which, sent on it
 * as one datagram, remove the table (or find none). For a process that must
 * be able to remove it without allocating (ckpt's guardian): it keeps a dup
 * of the socket. Ready from netlock_new(), so it can be handed over before
 * netlock_install(): no window where the table exists and only its maker
 * knows. The fd stays the lock's.
 */
int netlock_undo(const struct netlock *nl, int *ret_fd, const void **ret_msg, size_t *ret_len)
	__attribute__((warn_unused_result));

/* Microseconds since it was installed; 0 if it is not. */
uint64_t netlock_age_us(const struct netlock *nl);
/* The table's name. */
const char *netlock_name_of(const struct netlock *nl);
/* The table stays installed when the lock is freed (its owner goes, the
 * table is somebody else's to remove, by name). */
void netlock_keep(struct netlock *nl);

/* nft's message for the last failed install, "" if none. */
const char *netlock_error(const struct netlock *nl);

/* Packets dropped so far by the lock's rules (their counters). */
int netlock_dropped(struct netlock *nl, uint64_t *ret_packets) __attribute__((warn_unused_result));

/*
 * Removes the table inet name from the namespace netns_fd (-1: the
 * caller's), with no lock object: for another process, or a table a
 * previous run left. 0 if it was removed, -ENOENT if there was none.
 */
int netlock_remove_name(int netns_fd, const char *name) __attribute__((warn_unused_result));
/* Does the table inet name exist in the namespace netns_fd? 1, 0 or -errno. */
int netlock_exists(int netns_fd, const char *name) __attribute__((warn_unused_result));

/* A socket (close-on-exec) made in the network namespace netns_fd (-1:
 * the caller's), for a sock_diag or rtnetlink query there; -errno. */
int netns_socket(int netns_fd, int domain, int type, int proto) __attribute__((warn_unused_result));

/* Runs nft commands (libnftables, loaded on first use) in the network
 * namespace netns_fd (-1: the calling thread's); *ret_out gets what they
 * print (malloc'd) if ret_out is not NULL; error what libnftables said on
 * a failure (-EEXIST, -EPERM, -ENOENT, -EPROTO, -ENOPKG without it). */
int nft_run_in(int netns_fd, const char *cmd, char **ret_out, char *error, size_t error_len)
	__attribute__((warn_unused_result));

#endif
