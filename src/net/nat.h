/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * NAT for a `ckpt run --net --nat` container (nat.c): what the container
 * sends through the host end of its veth pair to beyond the host leaves
 * with the host's address (masquerade). One nftables table per host end,
 * "ip ckpt_nat_IF" (IF with every byte but a letter, digit or '_' as '_'),
 * made through libnftables in the caller's network namespace; the host's
 * IPv4 forwarding is turned on with it. The table matches the host end by
 * name, so it serves the container restored with the same host end too.
 */
#ifndef CKPT_NET_NAT_H
#define CKPT_NET_NAT_H

#include <stdbool.h>
#include <stddef.h>

/* Makes (or remakes) the table of host end ifname and turns forwarding on;
 * *forwarding_was_off is set if it was off. -errno, with libnftables'
 * message in error. */
int netnat_add(const char *ifname, bool *forwarding_was_off, char *error, size_t error_len)
    __attribute__((warn_unused_result));
/* Removes it: 0, -ENOENT if there was none. */
int netnat_remove(const char *ifname) __attribute__((warn_unused_result));
/* Is there one? 1, 0 or -errno. */
int netnat_exists(const char *ifname) __attribute__((warn_unused_result));

#endif
