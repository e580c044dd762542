/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * NAT for a `ckpt run --net --nat` container (see nat.h): a table of its
 * own per host end, with one rule in a postrouting nat chain: what comes
 * in from the host end and goes out by another link is masqueraded.
 */
#include "net/nat.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/lock.h"
#include "util/cleanup.h"

#define FORWARDING "/proc/sys/net/ipv4/ip_forward"

/* A link name that can go between double quotes in an nft command. */
static bool quotable(const char *ifname)
{
	size_t n = strlen(ifname);
	if (n == 0 || n >= IF_NAMESIZE)
		return false;
	for (size_t i = 0; i < n; i++)
		if (ifname[i] <= ' ' || ifname[i] == '"' || ifname[i] == '\\' || ifname[i] == 0x7f)
			return false;
	return true;
}

static void table_of(const char *ifname, char *buf, size_t len)
{
	int n = snprintf(buf, len, "ckpt_nat_%s", ifname);
	for (int i = 9; i < n && (size_t)i < len; i++) {
		char c = buf[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			buf[i] = '_';
	}
}

static int forwarding_on(bool *was_off)
{
	char c = '1';
	_cleanup_close_ int fd = open(FORWARDING, O_RDWR | O_CLOEXEC);
	if (fd < 0 || pread(fd, &c, 1, 0) != 1)
		return -errno;
	*was_off = c == '0';
	if (*was_off && pwrite(fd, "1\n", 2, 0) != 2)
		return -errno;
	return 0;
}

int netnat_add(const char *ifname, bool *forwarding_was_off, char *error, size_t error_len)
{
	char table[32], cmd[512];
	*forwarding_was_off = false;
	if (!quotable(ifname)) {
		snprintf(error, error_len, "'%s' is not a link name", ifname);
		return -EINVAL;
	}
	table_of(ifname, table, sizeof(table));
	snprintf(
	    cmd, sizeof(cmd),
	    "add table ip %s\n"
	    "flush table ip %s\n"
	    "add chain ip %s post { type nat hook postrouting priority srcnat; policy accept; }\n"
	    "add rule ip %s post iifname \"%s\" oifname != \"%s\" masquerade\n",
	    table, table, table, table, ifname, ifname);
	int r = nft_run_in(-1, cmd, NULL, error, error_len);
	if (r >= 0 && (r = forwarding_on(forwarding_was_off)) < 0)
		snprintf(error, error_len, "cannot turn IPv4 forwarding on (%s): %s", FORWARDING,
			 strerror(-r));
	return r;
}

int netnat_remove(const char *ifname)
{
	char table[32], cmd[64], err[256];
	if (!quotable(ifname))
		return -EINVAL;
	table_of(ifname, table, sizeof(table));
	snprintf(cmd, sizeof(cmd), "delete table ip %s", table);
	return nft_run_in(-1, cmd, NULL, err, sizeof(err));
}

int netnat_exists(const char *ifname)
{
	char table[32], cmd[64], err[256];
	if (!quotable(ifname))
		return -EINVAL;
	table_of(ifname, table, sizeof(table));
	snprintf(cmd, sizeof(cmd), "list table ip %s", table);
	char *out = NULL;
	int r = nft_run_in(-1, cmd, &out, err, sizeof(err));
	free(out);
	return r >= 0 ? 1 : r == -ENOENT ? 0 : r;
}
