/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A network namespace's policy routing rules and permanent neighbour
 * entries (NetnsEntry.rules, rules_gone, neighs; netns.c tells the whole
 * kind), read and made again through rtnetlink.
 *
 * Rules: every rule but the ones a namespace starts with (lookup local at
 * 0, main at 32766, and for IPv4 default at 32767, selecting nothing) is
 * saved with its header (family, action, source and destination prefix
 * lengths, tos, flags) and its attributes as the kernel gave them
 * (priority, table, fwmark and mask, from and to prefixes, iif and oif by
 * name, goto, protocol, suppress_prefixlength, uid range, ip proto, port
 * ranges...). An attribute these headers do not know is refused by number.
 * Of the ones it starts with, those deleted are saved in rules_gone (for
 * a family the dump shows rules of at all). At restart, after the routes:
 * the gone ones deleted, the others added in the order of the dump (the
 * kernel's: by priority), each with its priority.
 *
 * Neighbour entries: the ones set by hand (NUD_PERMANENT) with their link
 * (by name), address, link-layer address and flags; the others the kernel
 * learns again. Made again after the rules.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/fib_rules.h>
#include <linux/neighbour.h>
#include <net/if.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "kinds/netns.h"
#include "net/rtnl.h"
#include "netns.pb-c.h"

#define RULES_MAX 256
#define NEIGHS_MAX 256

struct rule_buf {
	NetnsRule m; /* first: freed through it */
	NetnsRuleAttr *ptrs[RTNL_RULE_ATTRS];
	NetnsRuleAttr a[RTNL_RULE_ATTRS];
	uint8_t data[RTNL_RULE_ATTRS][16];
};

struct neigh_buf {
	NetnsNeigh m; /* first */
	uint8_t dst[16], ll[32];
};

struct reader {
	struct ckpt_log *log;
	pid_t root;
	NetnsEntry *e;
	int err;
	/* the fresh rules seen: [family is 6][local, main, default] */
	bool seen[2][3];
	bool any[2]; /* a rule of that family dumped */
};

static const char *fam_name(int family)
{
	return family == AF_INET6 ? "an IPv6" : "an IPv4";
}

/* The index (0..2) of the fresh rule ru is, -1 if none. */
static int fresh_rule(const struct rtnl_rule *ru)
{
	if (ru->selects || ru->action != FR_ACT_TO_TBL)
		return -1;
	if (ru->priority == 0 && ru->table == RT_TABLE_LOCAL)
		return 0;
	if (ru->priority == 32766 && ru->table == RT_TABLE_MAIN)
		return 1;
	if (ru->priority == 32767 && ru->table == RT_TABLE_DEFAULT && ru->family == AF_INET)
		return 2;
	return -1;
}

static NetnsRule *new_rule(const struct rtnl_rule *ru)
{
	struct rule_buf *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	netns_rule__init(&b->m);
	b->m.family = (uint32_t)ru->family;
	b->m.action = ru->action;
	b->m.has_src_len = b->m.has_dst_len = b->m.has_tos = b->m.has_flags = true;
	b->m.has_table = true;
	b->m.src_len = ru->src_len;
	b->m.dst_len = ru->dst_len;
	b->m.tos = ru->tos;
	b->m.flags = ru->flags;
	b->m.table = ru->hdr_table;
	b->m.attrs = b->ptrs;
	for (unsigned i = 0; i < ru->nattrs; i++) {
		NetnsRuleAttr *a = &b->a[i];
		netns_rule_attr__init(a);
		a->type = ru->attrs[i].type;
		memcpy(b->data[i], ru->attrs[i].data, ru->attrs[i].len);
		a->data = (ProtobufCBinaryData){ ru->attrs[i].len, b->data[i] };
		b->ptrs[b->m.n_attrs++] = a;
	}
	return &b->m;
}

static int push(struct reader *rd, void ***arr, size_t *n, void *item)
{
	void **p = item ? realloc(*arr, (*n + 1) * sizeof(*p)) : NULL;
	if (!p) {
		free(item);
		return rd->err = -ENOMEM;
	}
	p[(*n)++] = item;
	*arr = p;
	return 0;
}

static int note_rule(const struct rtnl_rule *ru, void *arg)
{
	struct reader *rd = arg;
	int v6 = ru->family == AF_INET6;
	if (ru->family != AF_INET && ru->family != AF_INET6)
		return 0;
	rd->any[v6] = true;
	int fresh = fresh_rule(ru);
	if (fresh >= 0) {
		rd->seen[v6][fresh] = true;
		return 0;
	}
	if (ru->unknown) { /* every such rule named, the dump goes on */
		log_error(rd->log, "pid %d: network namespace: %s policy routing rule %u (table %u, "
			  "action %u): its attribute %u is unknown to ckpt; not supported",
			  rd->root, fam_name(ru->family), ru->priority, ru->table, ru->action,
			  ru->unknown);
		rd->err = -EOPNOTSUPP;
		return 0;
	}
	if (rd->e->n_rules == RULES_MAX) {
		log_error(rd->log, "pid %d: network namespace: more than %d policy routing rules",
			  rd->root, RULES_MAX);
		return rd->err = -EOPNOTSUPP;
	}
	return push(rd, (void ***)&rd->e->rules, &rd->e->n_rules, new_rule(ru));
}

static const NetnsLink *link_index(const NetnsEntry *e, int index)
{
	for (size_t i = 0; i < e->n_links; i++)
		if ((int)e->links[i]->index == index)
			return e->links[i];
	return NULL;
}

static int note_neigh(const struct rtnl_neigh *nb, void *arg)
{
	struct reader *rd = arg;
	if (!(nb->state & NUD_PERMANENT) || (nb->family != AF_INET && nb->family != AF_INET6))
		return 0;
	const NetnsLink *l = link_index(rd->e, nb->index);
	char a[INET6_ADDRSTRLEN] = "?";
	inet_ntop(nb->family, nb->dst, a, sizeof(a));
	if (!l || rd->e->n_neighs == NEIGHS_MAX) {
		log_error(rd->log, "pid %d: network namespace: a permanent neighbour entry %s: %s",
			  rd->root, a, l ? "more than 256" : "on a link not saved");
		return rd->err = -EOPNOTSUPP;
	}
	struct neigh_buf *b = calloc(1, sizeof(*b));
	if (b) {
		size_t len = nb->family == AF_INET ? 4 : 16;
		netns_neigh__init(&b->m);
		b->m.family = (uint32_t)nb->family;
		b->m.link = l->name;
		memcpy(b->dst, nb->dst, len);
		b->m.dst = (ProtobufCBinaryData){ len, b->dst };
		if (nb->lladdr_len) {
			memcpy(b->ll, nb->lladdr, nb->lladdr_len);
			b->m.has_lladdr = true;
			b->m.lladdr = (ProtobufCBinaryData){ nb->lladdr_len, b->ll };
		}
		b->m.state = nb->state & (NUD_PERMANENT | NUD_NOARP);
		b->m.has_flags = true;
		b->m.flags = nb->flags & NTF_ROUTER;
	}
	return push(rd, (void ***)&rd->e->neighs, &rd->e->n_neighs, b);
}

/* The fresh rules of a family the dump showed rules of, that are gone. */
static int note_gone(struct reader *rd)
{
	static const unsigned prio[3] = { 0, 32766, 32767 }, table[3] = { RT_TABLE_LOCAL,
									  RT_TABLE_MAIN,
									  RT_TABLE_DEFAULT };
	for (int v6 = 0; v6 < 2; v6++)
		for (int i = 0; rd->any[v6] && i < (v6 ? 2 : 3); i++) {
			if (rd->seen[v6][i])
				continue;
			struct rtnl_rule ru = { .family = v6 ? AF_INET6 : AF_INET,
						.action = FR_ACT_TO_TBL, .hdr_table = table[i],
						.nattrs = 2 };
			ru.attrs[0] = (struct rtnl_rule_attr){ .type = FRA_PRIORITY, .len = 4 };
			ru.attrs[1] = (struct rtnl_rule_attr){ .type = FRA_TABLE, .len = 4 };
			memcpy(ru.attrs[0].data, &prio[i], 4);
			memcpy(ru.attrs[1].data, &table[i], 4);
			if (push(rd, (void ***)&rd->e->rules_gone, &rd->e->n_rules_gone,
				 new_rule(&ru)) < 0)
				return rd->err;
		}
	return 0;
}

int netns_rules_read(struct ckpt_log *log, pid_t root, struct rtnl *in, NetnsEntry *e)
{
	struct reader rd = { .log = log, .root = root, .e = e };
	/* both dumps name each refusal */
	int r = rtnl_rules(in, note_rule, &rd), r2 = rtnl_neighs(in, note_neigh, &rd);
	if (rd.err < 0)
		return rd.err;
	if (r < 0 || r2 < 0)
		return log_fail(log, r < 0 ? r : r2, "pid %d: network namespace: cannot list its %s: "
				"%s", root, r < 0 ? "policy routing rules" : "neighbour entries",
				strerror(r < 0 ? -r : -r2));
	return note_gone(&rd);
}

void netns_rules_free(NetnsEntry *e)
{
	for (size_t i = 0; i < e->n_rules; i++)
		free(e->rules[i]);
	for (size_t i = 0; i < e->n_rules_gone; i++)
		free(e->rules_gone[i]);
	for (size_t i = 0; i < e->n_neighs; i++)
		free(e->neighs[i]);
	free(e->rules);
	free(e->rules_gone);
	free(e->neighs);
	e->rules = e->rules_gone = NULL;
	e->neighs = NULL;
	e->n_rules = e->n_rules_gone = e->n_neighs = 0;
}

/* --- restart ------------------------------------------------------------ */

static bool rule_ok(const NetnsRule *m)
{
	unsigned bits = m->family == AF_INET ? 32 : m->family == AF_INET6 ? 128 : 0;
	if (!bits || m->action > FR_ACT_MAX || m->src_len > bits || m->dst_len > bits ||
	    m->tos > 255 || m->table > 255 || m->n_attrs > RTNL_RULE_ATTRS)
		return false;
	for (size_t i = 0; i < m->n_attrs; i++) {
		uint32_t t = m->attrs[i]->type;
		if (!t || t > FRA_MAX || t == FRA_PAD || m->attrs[i]->data.len > 16)
			return false;
	}
	return true;
}

bool netns_rules_ok(const NetnsEntry *e)
{
	if (e->n_rules > RULES_MAX || e->n_rules_gone > 3 * 2 || e->n_neighs > NEIGHS_MAX)
		return false;
	for (size_t i = 0; i < e->n_rules; i++)
		if (!rule_ok(e->rules[i]))
			return false;
	for (size_t i = 0; i < e->n_rules_gone; i++)
		if (!rule_ok(e->rules_gone[i]))
			return false;
	for (size_t i = 0; i < e->n_neighs; i++) {
		const NetnsNeigh *n = e->neighs[i];
		size_t len = n->family == AF_INET ? 4 : n->family == AF_INET6 ? 16 : 0;
		if (!len || n->dst.len != len || !netns_link_named(e, n->link) ||
		    (n->has_lladdr && n->lladdr.len > 32) || !(n->state & NUD_PERMANENT) ||
		    n->state > 0xff || n->flags > 0xff)
			return false;
	}
	return true;
}

static void to_rule(const NetnsRule *m, struct rtnl_rule *ru)
{
	*ru = (struct rtnl_rule){ .family = (int)m->family, .action = m->action,
				  .src_len = m->src_len, .dst_len = m->dst_len, .tos = m->tos,
				  .flags = m->flags, .hdr_table = m->table,
				  .nattrs = (unsigned)m->n_attrs };
	for (size_t i = 0; i < m->n_attrs; i++) {
		ru->attrs[i].type = (uint16_t)m->attrs[i]->type;
		ru->attrs[i].len = (uint16_t)m->attrs[i]->data.len;
		memcpy(ru->attrs[i].data, m->attrs[i]->data.data, m->attrs[i]->data.len);
		if (m->attrs[i]->type == FRA_PRIORITY && m->attrs[i]->data.len == 4)
			memcpy(&ru->priority, m->attrs[i]->data.data, 4);
		if (m->attrs[i]->type == FRA_TABLE && m->attrs[i]->data.len == 4)
			memcpy(&ru->table, m->attrs[i]->data.data, 4);
	}
	if (!ru->table)
		ru->table = ru->hdr_table;
	/* priority 0 has no attribute in dumps; without one the kernel would
	 * pick a priority of its own */
	bool has_prio = false;
	for (unsigned i = 0; i < ru->nattrs; i++)
		has_prio |= ru->attrs[i].type == FRA_PRIORITY;
	if (!has_prio && ru->nattrs < RTNL_RULE_ATTRS)
		ru->attrs[ru->nattrs++] = (struct rtnl_rule_attr){ .type = FRA_PRIORITY, .len = 4 };
}

int netns_rules_write(struct rst_ctx *ctx, const NetnsEntry *e, struct rtnl *in)
{
	struct rtnl_rule ru;
	int r;
	for (size_t i = 0; i < e->n_rules_gone; i++) {
		to_rule(e->rules_gone[i], &ru);
		if ((r = rtnl_rule_del(in, &ru)) < 0 && r != -ENOENT)
			return log_fail(&ctx->log, r, "network namespace: cannot delete %s policy "
					"routing rule %u (table %u): %s", fam_name(ru.family),
					ru.priority, ru.table, strerror(-r));
	}
	for (size_t i = 0; i < e->n_rules; i++) {
		to_rule(e->rules[i], &ru);
		if ((r = rtnl_rule_add(in, &ru)) < 0)
			return log_fail(&ctx->log, r, "network namespace: cannot add %s policy routing "
					"rule %u (table %u, action %u): %s", fam_name(ru.family),
					ru.priority, ru.table, ru.action, strerror(-r));
	}
	for (size_t i = 0; i < e->n_neighs; i++) {
		const NetnsNeigh *m = e->neighs[i];
		struct rtnl_neigh n = { .family = (int)m->family,
					.index = (int)netns_link_named(e, m->link)->index,
					.state = m->state, .flags = m->flags };
		memcpy(n.dst, m->dst.data, m->dst.len);
		if (m->has_lladdr) {
			memcpy(n.lladdr, m->lladdr.data, m->lladdr.len);
			n.lladdr_len = (unsigned)m->lladdr.len;
		}
		if ((r = rtnl_neigh_add(in, &n)) < 0) {
			char a[INET6_ADDRSTRLEN] = "?";
			inet_ntop(n.family, n.dst, a, sizeof(a));
			return log_fail(&ctx->log, r, "network namespace: cannot add the permanent "
					"neighbour entry %s on %s: %s", a, m->link, strerror(-r));
		}
	}
	return 0;
}
