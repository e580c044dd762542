/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A tree without a network namespace of its own migrated to another host
 * (ckpt_opts.target_addrs): which of its inet sockets can follow it.
 *
 * A socket moves when its local address is a wildcard, one of the
 * addresses that move with the tree (the target holds them before the
 * restart, the source deletes them after the kill), or loopback without a
 * peer outside the tree (a listener on 127.0.0.1, or both ends of a
 * loopback connection in the tree). Anything else would be restored on
 * the target with an address that is not the peers' way to it: refused,
 * naming the socket. Addresses are compared as the wire has them: a
 * v4-mapped IPv6 address is its IPv4 address.
 */
#ifndef CKPT_INET_MOVE_H
#define CKPT_INET_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

/* One socket, as the check sees it. */
struct inet_move_sock {
	int family;	    /* AF_INET, AF_INET6 */
	const uint8_t *src; /* its local address (4 or 16 bytes by family) */
	const uint8_t *dst; /* its peer's, NULL if not connected */
	uint16_t dport;
	bool peer_in_tree; /* a connection whose other end is a socket of the tree */
};

/*
 * NULL if s can move with the addresses addrs (n of them); else why not,
 * in buf ("its address 10.0.0.5 is not one that moves with it").
 */
const char *inet_move_refusal(const struct inet_move_sock *s, const struct ckpt_addr *addrs,
			      size_t n, char *buf, size_t len);

/* The caller's target_addrs (0 and NULL when its ckpt_opts is too old to
 * have them). */
static inline size_t opts_target_addrs(const struct ckpt_opts *o, const struct ckpt_addr **ret)
{
	*ret = NULL;
	if (!o || o->size < offsetof(struct ckpt_opts, n_target_addrs) + sizeof(size_t) ||
	    !o->target_addrs)
		return 0;
	*ret = o->target_addrs;
	return o->n_target_addrs;
}

#endif
