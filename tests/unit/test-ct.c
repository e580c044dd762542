/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* net/ct.c: the translated entries of a conntrack table's text. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/ct.h"
#include "unit.h"

static const char table[] =
	/* masqueraded: the reply goes to the host's address, port kept */
	"ipv4     2 tcp      6 431999 ESTABLISHED src=10.200.0.2 dst=10.9.0.3 sport=40000 "
	"dport=5000 src=10.9.0.3 dst=10.9.0.1 sport=5000 dport=40000 [ASSURED] mark=0 zone=0 "
	"use=2\n"
	/* not translated: the reply goes back to the source */
	"ipv4     2 tcp      6 300 ESTABLISHED src=10.9.0.3 dst=10.9.0.1 sport=6000 dport=22 "
	"src=10.9.0.1 dst=10.9.0.3 sport=22 dport=6000 [ASSURED] mark=0 zone=0 use=2\n"
	/* with counters between the tuples, port translated */
	"ipv4     2 udp      17 29 src=10.200.0.2 dst=10.9.0.3 sport=53 dport=53 packets=1 "
	"bytes=60 src=10.9.0.3 dst=10.9.0.1 sport=53 dport=1024 packets=1 bytes=70 mark=0 use=1\n"
	/* IPv6, and an ICMP entry: not ours */
	"ipv6     10 tcp      6 10 ESTABLISHED src=fd00::2 dst=fd00::3 sport=1 dport=2 "
	"src=fd00::3 dst=fd00::9 sport=2 dport=1 mark=0 use=2\n"
	"ipv4     2 icmp     1 29 src=10.200.0.2 dst=10.9.0.3 type=8 code=0 id=7 "
	"src=10.9.0.3 dst=10.9.0.1 type=0 code=0 id=7 mark=0 use=1\n"
	/* damaged: a reply tuple cut short, an address that is none */
	"ipv4     2 tcp      6 1 ESTABLISHED src=10.200.0.2 dst=10.9.0.3 sport=1 dport=2 "
	"src=10.9.0.3\n"
	"ipv4     2 tcp      6 1 ESTABLISHED src=10.200.0.999 dst=10.9.0.3 sport=1 dport=2 "
	"src=10.9.0.3 dst=10.9.0.1 sport=2 dport=7\n";

static const struct ct_nat *find(const struct ct_nat *v, size_t n, int proto, const char *src,
				 unsigned sport, const char *dst, unsigned dport)
{
	uint8_t s[4], d[4];
	inet_pton(AF_INET, src, s);
	inet_pton(AF_INET, dst, d);
	return ct_nat_find(v, n, proto, s, (uint16_t)sport, d, (uint16_t)dport);
}

TEST(translated)
{
	FILE *f = fmemopen((void *)table, sizeof(table) - 1, "r");
	struct ct_nat *v = NULL;
	size_t n = 0;
	CHECK(f && ct_nat_read(f, &v, &n) == 0);
	fclose(f);
	CHECK(n == 2);
	const struct ct_nat *e = find(v, n, IPPROTO_TCP, "10.200.0.2", 40000, "10.9.0.3", 5000);
	uint8_t host[4];
	inet_pton(AF_INET, "10.9.0.1", host);
	CHECK(e && !memcmp(e->to, host, 4) && e->toport == 40000);
	CHECK(find(v, n, 0, "10.200.0.2", 40000, "10.9.0.3", 5000) == e);
	CHECK(!find(v, n, IPPROTO_UDP, "10.200.0.2", 40000, "10.9.0.3", 5000));
	e = find(v, n, IPPROTO_UDP, "10.200.0.2", 53, "10.9.0.3", 53);
	CHECK(e && e->toport == 1024);
	CHECK(!find(v, n, 0, "10.9.0.3", 6000, "10.9.0.1", 22)); /* not translated */
	CHECK(!find(v, n, 0, "10.200.0.2", 1, "10.9.0.3", 2));   /* damaged lines */
	free(v);
}

TEST(empty)
{
	FILE *f = fmemopen((void *)"", 0, "r");
	struct ct_nat *v = (void *)1;
	size_t n = 1;
	CHECK(f && ct_nat_read(f, &v, &n) == 0 && !v && !n);
	CHECK(!ct_nat_find(v, n, 0, (const uint8_t *)"\1\2\3\4", 1, (const uint8_t *)"\1\2\3\4", 2));
	fclose(f);
}

int main(void)
{
	RUN(translated);
	RUN(empty);
	return unit_done();
}
