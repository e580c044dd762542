/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the inet kind (inet.c) tells the rest of ckpt: the TCP connections
 * of an image, for the network lock, which must drop their packets from the
 * moment the tree is frozen until the restored sockets run.
 *
 * A connection is given as the packets on the wire see it: family AF_INET
 * with 4 bytes for a v4-mapped connection of an AF_INET6 socket, AF_INET6
 * with 16 bytes otherwise; addresses and ports in host order of bytes as
 * they are on the wire (network order), ports as numbers.
 */
#ifndef CKPT_INET_H
#define CKPT_INET_H

#include <stdint.h>

struct ckpt_ctx;
struct rst_ctx;

struct inet_conn {
	int family;         /* AF_INET, AF_INET6 */
	uint8_t src[16];    /* the socket's own address (4 bytes used for AF_INET) */
	uint8_t dst[16];    /* its peer's */
	uint16_t sport, dport;
};

/*
 * Checkpoint, after collect: calls cb for every established TCP connection
 * of the tree (each socket once; both ends of a loopback connection in the
 * tree each come once). Stops at, and returns, the first cb that returns
 * < 0.
 */
int inet_connections(struct ckpt_ctx *ctx, int (*cb)(const struct inet_conn *c, void *arg),
		     void *arg) __attribute__((warn_unused_result));
/* Restart, once the image is loaded: the same from the image, but those of
 * another network namespace than the root's (whose both ends are in it). */
int inet_rst_connections(struct rst_ctx *ctx, int (*cb)(const struct inet_conn *c, void *arg),
			 void *arg) __attribute__((warn_unused_result));

#endif
