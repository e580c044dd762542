/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which inet sockets can move with a migrated tree (see inet-move.h). */
#include "kinds/inet-move.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static const uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* An address as the wire has it: a v4-mapped one is IPv4. */
static void wire(int family, const uint8_t *a, int *ret_family, const uint8_t **ret_a)
{
	if (family == AF_INET6 && !memcmp(a, mapped_prefix, 12)) {
		*ret_family = AF_INET;
		*ret_a = a + 12;
		return;
	}
	*ret_family = family;
	*ret_a = a;
}

static bool is_any(int family, const uint8_t *a)
{
	static const uint8_t zero[16];
	return !memcmp(a, zero, family == AF_INET ? 4 : 16);
}

static bool is_loopback(int family, const uint8_t *a)
{
	static const uint8_t lo6[16] = {[15] = 1};
	return family == AF_INET ? a[0] == 127 : !memcmp(a, lo6, 16);
}

const char *inet_move_refusal(const struct inet_move_sock *s, const struct ckpt_addr *addrs,
			      size_t n, char *buf, size_t len)
{
	int fam;
	const uint8_t *src;
	char text[INET6_ADDRSTRLEN] = "?";
	wire(s->family, s->src, &fam, &src);
	if (is_any(fam, src))
		return NULL;
	if (is_loopback(fam, src)) {
		if (!s->dst || s->peer_in_tree)
			return NULL;
		int dfam;
		const uint8_t *dst;
		wire(s->family, s->dst, &dfam, &dst);
		inet_ntop(dfam, dst, text, sizeof(text));
		snprintf(buf, len,
			 "a loopback connection to %s%s%s:%u, a process outside the tree, "
			 "cannot move to another host",
			 dfam == AF_INET6 ? "[" : "", text, dfam == AF_INET6 ? "]" : "", s->dport);
		return buf;
	}
	for (size_t i = 0; i < n; i++)
		if (addrs[i].family == fam && !memcmp(addrs[i].addr, src, fam == AF_INET ? 4 : 16))
			return NULL;
	inet_ntop(fam, src, text, sizeof(text));
	snprintf(buf, len,
		 "its local address %s is not one that moves with the tree to the "
		 "target host",
		 text);
	return buf;
}
