/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The IPv4 connections a network namespace's conntrack translates (NAT):
 * an entry whose reply tuple goes to another address or port than its
 * original's source. What the network lock adds for a `ckpt run --nat`
 * container's connections (src/core/netlock.c), and what a migration
 * refuses (src/kinds/netns.c).
 */
#ifndef CKPT_NET_CT_H
#define CKPT_NET_CT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct ct_nat {
	uint8_t proto; /* IPPROTO_TCP or IPPROTO_UDP */
	uint8_t src[4], dst[4]; /* the original direction, as the tree sent it */
	uint16_t sport, dport;  /* host order */
	uint8_t to[4];          /* where the peer's replies go: the translated source */
	uint16_t toport;
};

/*
 * Reads the caller's namespace's /proc/net/nf_conntrack: its translated
 * IPv4 TCP and UDP entries, sorted for ct_nat_find(); *ret malloc'd (NULL
 * when none). -ENOENT without conntrack, -errno.
 */
int ct_nat_list(struct ct_nat **ret, size_t *n) __attribute__((warn_unused_result));
/* The same from f, a text in that file's format. */
int ct_nat_read(FILE *f, struct ct_nat **ret, size_t *n) __attribute__((warn_unused_result));

/* The entry of src:sport -> dst:dport (proto 0: either), or NULL. */
const struct ct_nat *ct_nat_find(const struct ct_nat *v, size_t n, int proto, const uint8_t *src,
				 uint16_t sport, const uint8_t *dst, uint16_t dport);

#endif
