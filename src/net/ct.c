/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Translated conntrack entries (see ct.h), from the text of
 * /proc/net/nf_conntrack:
 *
 *   ipv4 2 tcp 6 431999 ESTABLISHED src=A dst=B sport=a dport=b [packets=..]
 *        src=B dst=X sport=b dport=x [ASSURED] mark=0 zone=0 use=2
 *
 * The first src/dst/sport/dport are the original tuple, the next four the
 * reply's; counters and flags may sit between them.
 */
#include "net/ct.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

static int key_cmp(const struct ct_nat *a, const struct ct_nat *b, bool proto)
{
	int c = memcmp(a->src, b->src, 4);
	if (!c)
		c = memcmp(a->dst, b->dst, 4);
	if (!c)
		c = (a->sport > b->sport) - (a->sport < b->sport);
	if (!c)
		c = (a->dport > b->dport) - (a->dport < b->dport);
	if (!c && proto)
		c = (a->proto > b->proto) - (a->proto < b->proto);
	return c;
}

static int cmp_nat(const void *a, const void *b)
{
	return key_cmp(a, b, true);
}

/* One line into e; false if it is not a translated IPv4 TCP or UDP entry. */
static bool parse_line(char *line, struct ct_nat *e)
{
	char *save = NULL, *tok = strtok_r(line, " \n", &save);
	if (!tok || strcmp(tok, "ipv4"))
		return false;
	uint8_t addr[2][2][4]; /* [original, reply][src, dst] */
	unsigned port[2][2];
	unsigned seen[2] = { 0 }; /* bits: src, dst, sport, dport */
	int dir = 0;
	e->proto = 0;
	while ((tok = strtok_r(NULL, " \n", &save))) {
		if (!e->proto && (!strcmp(tok, "tcp") || !strcmp(tok, "udp")))
			e->proto = tok[0] == 't' ? IPPROTO_TCP : IPPROTO_UDP;
		static const char *const keys[] = { "src=", "dst=", "sport=", "dport=" };
		for (int k = 0; k < 4; k++) {
			size_t kl = strlen(keys[k]);
			if (strncmp(tok, keys[k], kl))
				continue;
			if (seen[dir] & (1u << k)) {
				if (dir == 1)
					return false;
				dir = 1; /* the reply tuple begins */
			}
			seen[dir] |= 1u << k;
			const char *v = tok + kl;
			if (k < 2) {
				if (inet_pton(AF_INET, v, addr[dir][k]) != 1)
					return false;
			} else {
				char *end;
				unsigned long p = strtoul(v, &end, 10);
				if (*end || p > 65535)
					return false;
				port[dir][k - 2] = (unsigned)p;
			}
		}
	}
	if (!e->proto || seen[0] != 15 || seen[1] != 15)
		return false;
	memcpy(e->src, addr[0][0], 4);
	memcpy(e->dst, addr[0][1], 4);
	e->sport = (uint16_t)port[0][0];
	e->dport = (uint16_t)port[0][1];
	memcpy(e->to, addr[1][1], 4);
	e->toport = (uint16_t)port[1][1];
	return memcmp(e->to, e->src, 4) || e->toport != e->sport;
}

int ct_nat_read(FILE *f, struct ct_nat **ret, size_t *n)
{
	struct ct_nat *v = NULL;
	size_t len = 0, cap = 0, lcap = 0;
	_cleanup_free_ char *line = NULL;
	*ret = NULL;
	*n = 0;
	while (getline(&line, &lcap, f) > 0) {
		struct ct_nat e;
		if (!parse_line(line, &e))
			continue;
		if (len == cap) {
			cap = cap ? 2 * cap : 16;
			struct ct_nat *more = realloc(v, cap * sizeof(*v));
			if (!more) {
				free(v);
				return -ENOMEM;
			}
			v = more;
		}
		v[len++] = e;
	}
	if (ferror(f)) {
		free(v);
		return -EIO;
	}
	if (len)
		qsort(v, len, sizeof(*v), cmp_nat);
	*ret = v;
	*n = len;
	return 0;
}

int ct_nat_list(struct ct_nat **ret, size_t *n)
{
	*ret = NULL;
	*n = 0;
	_cleanup_fclose_ FILE *f = fopen("/proc/net/nf_conntrack", "re");
	return f ? ct_nat_read(f, ret, n) : -errno;
}

const struct ct_nat *ct_nat_find(const struct ct_nat *v, size_t n, int proto, const uint8_t *src,
				 uint16_t sport, const uint8_t *dst, uint16_t dport)
{
	struct ct_nat k = { .proto = (uint8_t)proto, .sport = sport, .dport = dport };
	memcpy(k.src, src, 4);
	memcpy(k.dst, dst, 4);
	size_t lo = 0, hi = n;
	while (lo < hi) { /* the first entry not below k, proto ignored */
		size_t mid = lo + (hi - lo) / 2;
		if (key_cmp(&v[mid], &k, false) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && !key_cmp(&v[lo], &k, false); lo++)
		if (!proto || v[lo].proto == proto)
			return &v[lo];
	return NULL;
}
