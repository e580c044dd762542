/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt migrate of a tree in the source's own network namespace (no
 * `ckpt run --net`): the local addresses of its sockets move with it.
 *
 * The source lists them before the freeze (every address a socket of the
 * tree has that is not a wildcard or loopback, with the link that holds it
 * and its prefix) and sends "addrs from ID" (migrate_host_id()); a target in
 * the same network namespace answers "addrs here" and nothing moves (the
 * migration is one of the host, as before). Else it answers "addrs send",
 * and the source sends one line each, "addr ADDR/PREFIX IFNAME", then
 * "addrs end". The target adds each address it does not hold to the link
 * of that name (IPv6 without duplicate address detection) and answers
 * "addrs ok", or "error WHY" having added nothing. The library's
 * checkpoint (ckpt_opts.target_addrs) then refuses any socket bound to
 * another address, deletes the addresses from the source host once the
 * tree is dead, and only then removes the network lock. The target deletes
 * what it added if the restart fails or the source does not commit; once
 * the copy runs it announces each address it added (gratuitous ARP,
 * unsolicited neighbour advertisement), so that neighbours that had the
 * source's mac for it take the target's.
 */
#ifndef CKPT_CLI_MIGRATE_ADDR_H
#define CKPT_CLI_MIGRATE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "ckpt.h"

/* The addresses of the sockets of pids (the tree, its root first, whose
 * /proc/ROOT/net is read), at most max, with their links; -errno and why. */
int migrate_addrs_of_tree(const pid_t *pids, size_t npids, struct ckpt_addr *out, size_t max,
			  size_t *ret_n, char *why, size_t why_len);

/* This kernel's boot id and this network namespace's device and inode:
 * equal at both ends of a migration within one network namespace, where
 * no address moves. */
int migrate_host_id(char *buf, size_t len);

/* "addr ADDR/PREFIX IFNAME\n" into buf; and the other way (-EPROTO). */
int migrate_addr_format(const struct ckpt_addr *a, char *buf, size_t len);
int migrate_addr_parse(const char *line, struct ckpt_addr *a);

/* An address at the target: held already (present), or added by us. */
struct migrate_addr {
	struct ckpt_addr a;
	int index;
	bool present, added;
};

/* Adds each address the host does not hold; on failure deletes what it
 * added and says why. */
int migrate_addrs_take(struct migrate_addr *v, size_t n, char *why, size_t why_len);
/* Deletes the addresses added. */
void migrate_addrs_drop(struct migrate_addr *v, size_t n);
/* Announces each address added: gratuitous ARP (IPv4), unsolicited
 * neighbour advertisement (IPv6). */
void migrate_addrs_announce(const struct migrate_addr *v, size_t n);

#endif
