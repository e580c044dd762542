/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A network namespace's nftables tables (netns.c tells the whole kind).
 *
 * Checkpoint: libnftables (net/lock.h, nft_run_in) lists the namespace's
 * tables, then each one but ckpt's own locks (ckpt_lock_*: the
 * checkpoint's lock is in there now) as text, rules, sets and their
 * elements (with what is left of their timeouts), maps, named counters and
 * quotas with their values, chains' counters too: the ruleset as `nft list
 * table` prints it, which nft reads back. The text goes in
 * NetnsEntry.nftables. A table owned by a process's netlink socket (flags
 * owner) cannot be there: a tree holding an nfnetlink socket is refused by
 * the netlink kind.
 *
 * Restart: the text is run in the new namespace, after its links, routes
 * and sysctls (a netdev chain or a flowtable names links), in one
 * transaction, before any socket exists and before the host ends come up.
 * An image cannot reach beyond the new namespace this way: nft commands
 * act on the namespace they run in; a text holding an `include` (a file of
 * this host read in) is refused at load.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "kinds/netns.h"
#include "net/lock.h"
#include "netns.pb-c.h"
#include "util/cleanup.h"

#define NFT_TEXT_MAX (4u << 20)

static bool is_lock(const char *name)
{
	return !strncmp(name, "ckpt_lock_", 10);
}

/* "table FAMILY NAME" lines: each table's listing appended to *text. */
static int list_each(struct ckpt_log *log, pid_t root, int ns_fd, const char *tables,
		     FILE *text)
{
	char err[512];
	for (const char *p = tables; *p;) {
		size_t len = strcspn(p, "\n");
		char fam[16], name[256];
		char line[300];
		snprintf(line, sizeof(line), "%.*s", (int)(len < 299 ? len : 299), p);
		p += len + (p[len] == '\n');
		if (sscanf(line, "table %15s %255s", fam, name) != 2 || is_lock(name))
			continue;
		if (strspn(fam, "abcdefghijklmnopqrstuvwxyz") != strlen(fam) ||
		    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-") !=
			    strlen(name))
			return log_fail(log, -EOPNOTSUPP, "pid %d: network namespace: nftables table "
					"'%s %s': a name nft cannot take back", root, fam, name);
		char cmd[320];
		snprintf(cmd, sizeof(cmd), "list table %s %s", fam, name);
		_cleanup_free_ char *out = NULL;
		int r = nft_run_in(ns_fd, cmd, &out, err, sizeof(err));
		if (r < 0)
			return log_fail(log, r, "pid %d: network namespace: cannot list nftables table "
					"%s %s: %s", root, fam, name, err[0] ? err : strerror(-r));
		fputs(out, text);
	}
	return 0;
}

int netns_nft_read(struct ckpt_log *log, pid_t root, int ns_fd, NetnsEntry *e)
{
	char err[512];
	_cleanup_free_ char *tables = NULL;
	int r = nft_run_in(ns_fd, "list tables", &tables, err, sizeof(err));
	if (r < 0)
		return log_fail(log, r, "pid %d: network namespace: cannot list its nftables tables: %s",
				root, err[0] ? err : strerror(-r));
	char *buf = NULL;
	size_t len = 0;
	FILE *text = open_memstream(&buf, &len);
	if (!text)
		return -ENOMEM;
	r = list_each(log, root, ns_fd, tables, text);
	if (fclose(text) != 0 && r >= 0)
		r = -ENOMEM;
	if (r >= 0 && len > NFT_TEXT_MAX)
		r = log_fail(log, -EFBIG, "pid %d: network namespace: its nftables tables take %zu "
			     "bytes as text, more than %u", root, len, NFT_TEXT_MAX);
	if (r < 0 || !len) {
		free(buf);
		return r < 0 ? r : 0;
	}
	e->nftables = buf;
	return 0;
}

/* No `include`: it would read a file of the restarting host. */
bool netns_nft_ok(const char *text)
{
	if (!text)
		return true;
	if (strlen(text) > NFT_TEXT_MAX)
		return false;
	for (const char *p = text; (p = strstr(p, "include")) != NULL; p += 7) {
		bool start = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
		bool end = !(isalnum((unsigned char)p[7]) || p[7] == '_');
		if (start && end)
			return false;
	}
	return true;
}

int netns_nft_write(struct rst_ctx *ctx, const NetnsEntry *e)
{
	char err[512];
	if (!e->nftables || !e->nftables[0])
		return 0;
	int r = nft_run_in(-1, e->nftables, NULL, err, sizeof(err));
	if (r < 0)
		return log_fail(&ctx->log, r, "network namespace: cannot make its nftables tables "
				"again: %s", err[0] ? err : strerror(-r));
	return 0;
}
