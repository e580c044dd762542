/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The network lock's place in checkpoint and restart (src/net/lock.h is
 * the lock itself). Each function is one step of the drivers' order:
 *
 * checkpoint
 *   ckpt_netlock_hold()     before the seize: new clients of the tree's
 *                           listeners held out (their first SYN dropped)
 *                           until the program has accepted what its
 *                           listeners queued (netdrain.c)
 *   ckpt_netlock_lock()     the tree is frozen: drop the packets of its TCP
 *                           connections (before any kind reads a socket)
 *   ckpt_netlock_unlock()   the tasks are released (or the checkpoint
 *                           failed): remove it. With CKPT_KILL and an image
 *                           made, it stays: the image names it, and the
 *                           restart removes it once the restored sockets run
 *   ckpt_netlock_moved()    after the kill of a migrated tree of ckpt's own
 *                           namespace (ckpt_opts.target_addrs): its addresses
 *                           deleted from this host, then the lock removed
 * restart
 *   rst_netlock_add()       a kind loading its records: a connection that
 *                           comes back (the inet kind)
 *   rst_netlock_lock()      before any socket is restored
 *   rst_netlock_unlock()    the tasks run (or the restart failed): remove
 *                           the restart's lock, and once they run the lock
 *                           the checkpoint left
 *
 * While a lock is installed the guardian holds a prebuilt request that
 * removes it, sent if ckpt dies before commit (checkpoint --kill with the
 * image safe: the lock stays, as on success) or done.
 */
#ifndef CKPT_CORE_NETLOCK_H
#define CKPT_CORE_NETLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* The network namespaces other than the root's that may hold a lock (each
 * takes one of the guardian's GUARD_UNDO_SLOTS, which the hold, the root's
 * lock, its copy in ckpt's namespace and a migration's requests share):
 * ckpt_ctx.netlock_ns, rst_ctx.netlock_ns */
#define CKPT_NETLOCK_NS 32

struct ckpt_ctx;
struct rst_ctx;

int ckpt_netlock_hold(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
/* The hold's table removed (the network lock in place, or a failure). */
void ckpt_netlock_unhold(struct ckpt_ctx *ctx);
int ckpt_netlock_lock(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
/* A TCP socket of the tree as the lock's sock_diag dump saw it (the root
 * in ckpt's network namespace): ctx->tcp_seen, sorted by inode, kept
 * until the lock is removed. */
struct tcp_seen {
	unsigned long ino;
	uint8_t family, state;
	uint16_t sport, dport;	  /* host order */
	uint8_t src[16], dst[16]; /* 4 bytes for AF_INET */
	bool has_tos, has_opts;	  /* INET_DIAG_TOS, INET_DIAG_SOCKOPT came */
	uint8_t tos;		  /* IP_TOS */
	/* IP_RECVERR, IP_FREEBIND, IP_TRANSPARENT, IP_BIND_ADDRESS_NO_PORT */
	uint8_t recverr, freebind, transparent, bind_no_port;
};
const struct tcp_seen *ckpt_tcp_seen(const struct ckpt_ctx *ctx, unsigned long ino);
/*
 * A TCP connection of a task in another network namespace than the root's
 * (and ckpt's), whose peer is not a socket of the tree: where the lock
 * found the peer, by the connection's inode. NETNS_PEER_HOST: a socket of
 * ckpt's namespace, reached through the root's (routed); with CKPT_KILL
 * the connection is locked in ckpt's namespace too, where the peer's
 * packets pass while the killed tree's namespaces are gone. NETNS_PEER_SAME:
 * a socket of the connection's own namespace outside the tree.
 * NETNS_PEER_ADDR: a socket of ckpt's namespace bound to another address
 * than the one ckpt's namespace reaches the connection's from (not
 * tested: refused). NETNS_PEER_UNKNOWN: none (or not looked at).
 */
enum { NETNS_PEER_UNKNOWN, NETNS_PEER_SAME, NETNS_PEER_HOST, NETNS_PEER_ADDR };
struct netns_peer {
	unsigned long ino;
	int where;
};
int ckpt_netns_peer(const struct ckpt_ctx *ctx, unsigned long ino);
/* Gives the guardian the request that removes nl if ckpt dies. */
struct puppet_guard;
struct netlock;
int ckpt_netlock_arm(struct puppet_guard *g, struct netlock *nl) __attribute__((warn_unused_result));
void ckpt_netlock_unlock(struct ckpt_ctx *ctx, bool ok);
int ckpt_netlock_moved(struct ckpt_ctx *ctx);
/* Before the commit of a migration whose addresses move: the guardian is
 * given what ckpt_netlock_moved() does, for if ckpt dies after the commit. */
int ckpt_netlock_arm_moved(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));

int rst_netlock_add(struct rst_ctx *ctx, const struct sockaddr *local,
		    const struct sockaddr *remote) __attribute__((warn_unused_result));
/* The same for a connection of another network namespace of the image
 * than the root's (NetnsEntry.id netns): locked in that namespace. */
int rst_netlock_add_ns(struct rst_ctx *ctx, uint32_t netns, const struct sockaddr *local,
		       const struct sockaddr *remote) __attribute__((warn_unused_result));
int rst_netlock_lock(struct rst_ctx *ctx) __attribute__((warn_unused_result));
void rst_netlock_unlock(struct rst_ctx *ctx, bool ok);
/* The restart's step "network unlock": rst_netlock_unlock(ctx, true). */
int rst_netlock_open(struct rst_ctx *ctx);

#endif
