/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* inet-move.c (which sockets follow a migrated tree) and the migrate
 * protocol's addr lines (cli/migrate-addr.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>

#include "cli/migrate-addr.h"
#include "kinds/inet-move.h"
#include "unit.h"

static struct ckpt_addr v4(const char *text)
{
	struct ckpt_addr a = {.family = AF_INET, .prefixlen = 24, .ifname = "eth0"};
	inet_pton(AF_INET, text, a.addr);
	return a;
}

static const char *why(int family, const char *src, const char *dst, bool peer_in_tree,
		       const struct ckpt_addr *addrs, size_t n, char *buf, size_t len)
{
	uint8_t s[16] = {0}, d[16] = {0};
	inet_pton(family, src, s);
	if (dst)
		inet_pton(family, dst, d);
	struct inet_move_sock k = {.family = family,
				   .src = s,
				   .dst = dst ? d : NULL,
				   .dport = 80,
				   .peer_in_tree = peer_in_tree};
	return inet_move_refusal(&k, addrs, n, buf, len);
}

TEST(refusal)
{
	struct ckpt_addr addrs[] = {v4("10.214.0.100")};
	char buf[200];
	/* wildcards, moved addresses, loopback without an outside peer: follow */
	CHECK(!why(AF_INET, "0.0.0.0", NULL, false, addrs, 1, buf, sizeof(buf)));
	CHECK(!why(AF_INET6, "::", NULL, false, addrs, 1, buf, sizeof(buf)));
	CHECK(!why(AF_INET, "10.214.0.100", "10.214.0.3", false, addrs, 1, buf, sizeof(buf)));
	CHECK(!why(AF_INET6, "::ffff:10.214.0.100", "::ffff:10.214.0.3", false, addrs, 1, buf,
		   sizeof(buf)));
	CHECK(!why(AF_INET, "127.0.0.1", NULL, false, addrs, 1, buf, sizeof(buf)));
	CHECK(!why(AF_INET, "127.0.0.1", "127.0.0.1", true, addrs, 1, buf, sizeof(buf)));
	CHECK(!why(AF_INET6, "::1", "::1", true, NULL, 0, buf, sizeof(buf)));
	/* a loopback connection to a process outside the tree */
	CHECK_STR(why(AF_INET, "127.0.0.1", "127.0.0.1", false, addrs, 1, buf, sizeof(buf)),
		  "a loopback connection to 127.0.0.1:80, a process outside the tree, cannot move "
		  "to another host");
	CHECK_STR(why(AF_INET6, "::1", "::1", false, NULL, 0, buf, sizeof(buf)),
		  "a loopback connection to [::1]:80, a process outside the tree, cannot move to "
		  "another host");
	/* an address that does not move */
	CHECK_STR(why(AF_INET, "10.214.0.1", "10.214.0.3", false, addrs, 1, buf, sizeof(buf)),
		  "its local address 10.214.0.1 is not one that moves with the tree to the target "
		  "host");
	CHECK(why(AF_INET6, "fd00::1", NULL, false, addrs, 1, buf, sizeof(buf)) != NULL);
	CHECK(why(AF_INET, "10.214.0.100", NULL, false, NULL, 0, buf, sizeof(buf)) != NULL);
}

TEST(lines)
{
	struct ckpt_addr a = v4("10.214.0.100"), b;
	char line[128];
	CHECK_EQ(migrate_addr_format(&a, line, sizeof(line)), 0);
	CHECK_STR(line, "addr 10.214.0.100/24 eth0\n");
	line[strlen(line) - 1] = 0;
	CHECK_EQ(migrate_addr_parse(line, &b), 0);
	CHECK(!memcmp(&a, &b, sizeof(a)));
	CHECK_EQ(migrate_addr_parse("addr fd00::5/64 ens3", &b), 0);
	CHECK_EQ(b.family, AF_INET6);
	CHECK_EQ(b.prefixlen, 64);
	CHECK_STR(b.ifname, "ens3");
	/* refused: no prefix, too long a prefix, loopback or wildcard, a bad
	 * name, more after the name */
	CHECK_EQ(migrate_addr_parse("addr 10.0.0.1 eth0", &b), -EPROTO);
	CHECK_EQ(migrate_addr_parse("addr 10.0.0.1/33 eth0", &b), -EPROTO);
	CHECK_EQ(migrate_addr_parse("addr 127.0.0.1/8 lo", &b), -EPROTO);
	CHECK_EQ(migrate_addr_parse("addr 0.0.0.0/0 eth0", &b), -EPROTO);
	CHECK_EQ(migrate_addr_parse("addr ::1/128 lo", &b), -EPROTO);
	CHECK_EQ(migrate_addr_parse("addr 10.0.0.1/24 averyveryverylongname", &b), -EPROTO);
	CHECK_EQ(migrate_addr_parse("addr 10.0.0.1/24 eth0 x", &b), -EPROTO);
	CHECK_EQ(migrate_addr_parse("addr 10.0.0.999/24 eth0", &b), -EPROTO);
}

/* The same in one namespace; another network namespace would differ in its
 * inode (not made here: no privilege needed for this test). */
TEST(host_id)
{
	char a[128], b[128];
	CHECK_EQ(migrate_host_id(a, sizeof(a)), 0);
	CHECK_EQ(migrate_host_id(b, sizeof(b)), 0);
	CHECK_STR(a, b);
	CHECK(strchr(a, ' ') && strchr(a, ':'));
	CHECK_EQ(migrate_host_id(a, 8), -EMSGSIZE);
}

int main(void)
{
	RUN(refusal);
	RUN(lines);
	RUN(host_id);
	return unit_done();
}
