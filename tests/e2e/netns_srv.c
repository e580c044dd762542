/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A TCP server as pid 1 of `ckpt run --net` (flow netns): it changes its
 * network namespace first (eth0's mtu, an IPv6 address on eth0, a route to
 * 198.51.100.0/24 through the host end, ten sysctls), notes what the
 * namespace holds (links with index, mtu and up state, addresses, the
 * IPv4 routes of /proc/net/route, the sysctls), listens on port 7777 and
 * accepts the runner's connection from the host. Checkpointed with --kill
 * and restarted, it checks from inside that the namespace holds the same,
 * reads what the runner sent up to "END\n" on the same connection and
 * answers, then accepts a new connection from the host and answers it.
 *
 * a route in table 100 too (rtnetlink), and an nftables table (nft, if
 * installed), listed in the notes.
 *
 * "netns_srv rules": the same, and policy routing rules of both families
 * with every kind of selector and action (`ip rule`), the IPv4 default rule
 * deleted, routes in tables 100 and 1000 of both families, permanent
 * neighbour entries of both families; the notes hold them as `ip` lists
 * them (rules, routes of those tables, permanent neighbours).
 *
 * "netns_srv held": the same as tcp, and fd 9 holds a network namespace no
 * process is in (a child made it, set lo up with 192.0.2.55/32, exited);
 * the notes hold its addresses (nsenter through fd 9).
 *
 * "netns_srv bridge": a bridge link (br7) is added to the namespace
 * (rtnetlink) before ready; the checkpoint must refuse it by name. (A
 * dummy link would do as well, but this kernel has no dummy driver.)
 */
#include "lib.h"

/* before the linux headers, which then leave its names alone */
#include <net/if.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_link.h>
#include <linux/ipv6.h>
#include <linux/netlink.h>
#include <linux/route.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/wait.h>
#include <signal.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT 7777

static size_t table_routes(char *out, size_t len, size_t at);
static void add_table_route(uint32_t gw);
static size_t ip_list(char *out, size_t len, size_t at);
static int rules_mode, held_mode;

static void write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		fail("write %s: %m", path);
	close(fd);
}

static size_t cat(const char *path, char *out, size_t len, size_t at)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("open %s: %m", path);
	ssize_t n;
	while (at < len - 1 && (n = read(fd, out + at, len - 1 - at)) > 0)
		at += (size_t)n;
	out[at] = 0;
	close(fd);
	return at;
}

/* sysctls set besides the three above, each to a value not a fresh
 * namespace's (the runner's checkpoint saves them by difference) */
static const char *const more[][2] = {
	{ "/proc/sys/net/ipv4/tcp_keepalive_time", "1234" },
	{ "/proc/sys/net/ipv4/tcp_rmem", "4096\t65536\t1048576" },
	{ "/proc/sys/net/unix/max_dgram_qlen", "77" },
	{ "/proc/sys/net/ipv4/conf/default/accept_redirects", "0" },
	{ "/proc/sys/net/ipv4/conf/eth0/arp_ignore", "1" },
	{ "/proc/sys/net/ipv6/conf/eth0/hop_limit", "33" },
	{ "/proc/sys/net/ipv4/neigh/eth0/mcast_solicit", "5" },
};

/* An nftables table of the container's (nft, when installed): a set, a
 * named counter with values, a chain with a counter; no timeouts, whose
 * "expires" would change between the two notes. */
#define NFT "/usr/sbin/nft"
static const char nft_table[] =
	"table inet ckpt_t {\n"
	"  set blocked { type ipv4_addr; elements = { 192.0.2.1, 192.0.2.7 } }\n"
	"  counter seen { packets 5 bytes 300 }\n"
	"  chain in { type filter hook input priority 0; policy accept;\n"
	"    ip saddr @blocked counter packets 3 bytes 100 drop; }\n"
	"}\n";

static void nft_add(void)
{
	if (access(NFT, X_OK) != 0)
		return;
	FILE *f = fopen("table.nft", "w");
	if (!f || fputs(nft_table, f) < 0 || fclose(f) != 0 || system(NFT " -f table.nft") != 0)
		fail("nft -f table.nft failed");
}

/* What cmd prints, appended to out at at. */
static size_t cmd_out(const char *cmd, char *out, size_t len, size_t at)
{
	FILE *p = popen(cmd, "r");
	size_t n;
	while (p && at < len - 1 && (n = fread(out + at, 1, len - 1 - at, p)) > 0)
		at += n;
	out[at] = 0;
	if (!p || pclose(p) != 0)
		fail("%s: %s", cmd, out);
	return at;
}

static size_t nft_list(char *out, size_t len, size_t at)
{
	if (access(NFT, X_OK) != 0)
		return at;
	return cmd_out(NFT " list table inet ckpt_t 2>&1", out, len, at);
}

/* Links, addresses, IPv4 routes, sysctls and nftables as text. */
static void snapshot(char *out, size_t len)
{
	struct ifaddrs *ifa, *i;
	size_t at = 0;
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (getifaddrs(&ifa) < 0 || s < 0)
		fail("getifaddrs: %m");
	for (i = ifa; i; i = i->ifa_next) {
		char a[INET6_ADDRSTRLEN] = "-", m[INET6_ADDRSTRLEN] = "-";
		int fam = i->ifa_addr ? i->ifa_addr->sa_family : 0;
		struct ifreq r = { 0 };
		snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", i->ifa_name);
		if (ioctl(s, SIOCGIFMTU, &r) < 0)
			fail("SIOCGIFMTU %s: %m", i->ifa_name);
		if (fam == AF_INET) {
			inet_ntop(fam, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof(a));
			inet_ntop(fam, &((struct sockaddr_in *)i->ifa_netmask)->sin_addr, m, sizeof(m));
		} else if (fam == AF_INET6) {
			inet_ntop(fam, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, a, sizeof(a));
			inet_ntop(fam, &((struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr, m, sizeof(m));
		}
		at += (size_t)snprintf(out + at, len - at, "%s index %u mtu %d %s fam %d %s %s\n",
				       i->ifa_name, if_nametoindex(i->ifa_name), r.ifr_mtu,
				       (i->ifa_flags & IFF_UP) ? "up" : "down", fam, a, m);
	}
	freeifaddrs(ifa);
	close(s);
	at = cat("/proc/net/route", out, len, at);
	at = cat("/proc/sys/net/ipv4/ip_forward", out, len, at);
	at = cat("/proc/sys/net/core/somaxconn", out, len, at);
	at = cat("/proc/sys/net/ipv4/ip_local_port_range", out, len, at);
	for (size_t i = 0; i < sizeof(more) / sizeof(*more); i++)
		at = cat(more[i][0], out, len, at);
	at = table_routes(out, len, at);
	at = ip_list(out, len, at);
	if (held_mode)
		at = cmd_out("nsenter --net=/proc/self/fd/9 ip -4 -o addr show | awk '{print $2, $4}'",
			     out, len, at);
	nft_list(out, len, at);
}

/* The namespace changed from what ckpt run made. */
static void change_netns(void)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0), s6 = socket(AF_INET6, SOCK_DGRAM, 0);
	struct ifreq r = { .ifr_name = "eth0" };
	r.ifr_mtu = 1400;
	if (s < 0 || s6 < 0 || ioctl(s, SIOCSIFMTU, &r) < 0)
		fail("eth0 mtu: %m");
	struct in6_ifreq a6 = { .ifr6_prefixlen = 64, .ifr6_ifindex = (int)if_nametoindex("eth0") };
	inet_pton(AF_INET6, "fd00:c0de::2", &a6.ifr6_addr);
	if (ioctl(s6, SIOCSIFADDR, &a6) < 0)
		fail("eth0 IPv6 address: %m");
	/* through the host end, eth0's gateway (the default route's) */
	FILE *f = fopen("/proc/net/route", "r");
	char line[256];
	unsigned gw = 0, dst;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %X %X", &dst, &gw) == 2 && dst == 0)
			break;
	if (f)
		fclose(f);
	if (!gw)
		fail("no default route in the container");
	struct rtentry rt = { .rt_flags = RTF_UP | RTF_GATEWAY, .rt_dev = "eth0" };
	struct sockaddr_in *d = (struct sockaddr_in *)&rt.rt_dst, *g = (struct sockaddr_in *)&rt.rt_gateway,
			   *m = (struct sockaddr_in *)&rt.rt_genmask;
	d->sin_family = g->sin_family = m->sin_family = AF_INET;
	inet_pton(AF_INET, "198.51.100.0", &d->sin_addr);
	inet_pton(AF_INET, "255.255.255.0", &m->sin_addr);
	g->sin_addr.s_addr = gw;
	if (ioctl(s, SIOCADDRT, &rt) < 0)
		fail("route to 198.51.100.0/24: %m");
	add_table_route(gw);
	nft_add();
	close(s);
	close(s6);
	write_file("/proc/sys/net/ipv4/ip_forward", "1");
	write_file("/proc/sys/net/core/somaxconn", "1234");
	write_file("/proc/sys/net/ipv4/ip_local_port_range", "40000 50000");
	/* more of the namespace's own: outside links' directories, default,
	 * eth0's own (IPv4, IPv6, neighbour table) */
	for (size_t i = 0; i < sizeof(more) / sizeof(*more); i++)
		write_file(more[i][0], more[i][1]);
}

/* One rtnetlink request: fails the test on an error, but skips with
 * "skip_on" when the kernel cannot (-EOPNOTSUPP and the like). */
static void nl_req(struct nlmsghdr *h, const char *what)
{
	int s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	char buf[512];
	if (s < 0 || send(s, h, h->nlmsg_len, 0) < 0 || recv(s, buf, sizeof(buf), 0) < 0)
		fail("netlink (%s): %m", what);
	struct nlmsgerr *e = NLMSG_DATA((struct nlmsghdr *)buf);
	if (((struct nlmsghdr *)buf)->nlmsg_type == NLMSG_ERROR && e->error)
		fail("%s: %s", what, strerror(-e->error));
	close(s);
}

static void put_attr(struct nlmsghdr *h, unsigned short type, const void *data, size_t len)
{
	struct rtattr *ra = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
	ra->rta_type = type;
	ra->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(ra), data, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(ra->rta_len);
}

#define TABLE 100

/* 198.51.100.0/25 through gw (network order) in routing table 100. */
static void add_table_route(uint32_t gw)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
		char attrs[64];
	} req = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)), .nlmsg_type = RTM_NEWROUTE,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK },
		  .r = { .rtm_family = AF_INET, .rtm_dst_len = 25, .rtm_table = TABLE,
			 .rtm_protocol = RTPROT_STATIC, .rtm_scope = RT_SCOPE_UNIVERSE,
			 .rtm_type = RTN_UNICAST } };
	uint32_t dst;
	inet_pton(AF_INET, "198.51.100.0", &dst);
	put_attr(&req.h, RTA_DST, &dst, 4);
	put_attr(&req.h, RTA_GATEWAY, &gw, 4);
	nl_req(&req.h, "a route in table 100");
}

/* The routes of table 100 as text ("198.51.100.0/25\n"), read by a dump. */
static size_t table_routes(char *out, size_t len, size_t at)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
	} req = { .h = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETROUTE,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		  .r = { .rtm_family = AF_INET } };
	static char buf[65536];
	int s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	if (s < 0 || send(s, &req, sizeof(req), 0) < 0)
		fail("route dump: %m");
	for (;;) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		if (n <= 0)
			fail("route dump: %m");
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				close(s);
				return at;
			}
			struct rtmsg *r = NLMSG_DATA(h);
			if (h->nlmsg_type != RTM_NEWROUTE || r->rtm_table != TABLE)
				continue;
			char a[INET_ADDRSTRLEN] = "default";
			int alen = (int)RTM_PAYLOAD(h);
			for (struct rtattr *ra = RTM_RTA(r); RTA_OK(ra, alen); ra = RTA_NEXT(ra, alen))
				if (ra->rta_type == RTA_DST)
					inet_ntop(AF_INET, RTA_DATA(ra), a, sizeof(a));
			at += (size_t)snprintf(out + at, len - at, "table %d: %s/%u\n", TABLE, a,
					       r->rtm_dst_len);
		}
	}
}

/* "netns_srv rules": what `ip` sets, each command checked. */
static const char *const rule_cmds[] = {
	"ip rule add pref 100 from 10.1.0.0/16 to 198.51.100.0/24 lookup 100",
	"ip rule add pref 101 fwmark 0x10/0xff lookup 1000",
	"ip rule add pref 102 iif lo oif eth0 lookup 100",
	"ip rule add pref 103 from 192.0.2.0/24 tos 0x10 prohibit",
	"ip rule add pref 104 ipproto tcp sport 1000-2000 dport 8000-8080 blackhole",
	"ip rule add pref 105 uidrange 1000-2000 lookup main suppress_prefixlength 0",
	"ip rule add pref 106 from 203.0.113.0/24 goto 32766",
	"ip rule add pref 107 not to 198.51.100.128/25 lookup 100 protocol 150",
	"ip rule add pref 108 to 192.0.2.8 unreachable",
	"ip rule add pref 108 fwmark 3 lookup 1000",
	"ip rule add pref 0 from 192.0.2.99 lookup 1000",
	"ip rule del pref 32767",
	"ip -6 rule add pref 200 from fd00:c0de::/64 lookup 100",
	"ip -6 rule add pref 201 fwmark 7 iif eth0 lookup 1000",
	"ip -6 rule add pref 202 to fd00:beef::/48 prohibit",
	"ip route add blackhole 203.0.113.0/24 table 1000",
	"ip route add 192.0.2.0/24 dev eth0 table 1000 metric 5",
	"ip -6 route add fd00:beef::/64 dev eth0 table 100",
	"ip -6 route add unreachable fd00:dead::/64 table 1000",
	"ip neigh add 198.51.100.77 lladdr 02:00:00:00:00:77 dev eth0 nud permanent",
	"ip -6 neigh add fd00:c0de::77 lladdr 02:00:00:00:00:78 dev eth0 nud permanent router",
};

/* What the notes must hold (what the commands above made). */
static const char *const rule_want[] = {
	"100:\tfrom 10.1.0.0/16 to 198.51.100.0/24 lookup 100",
	"101:\tfrom all fwmark 0x10/0xff lookup 1000",
	"102:\tfrom all iif lo oif eth0 lookup 100",
	"103:\tfrom 192.0.2.0/24 tos 0x10 prohibit",
	"104:\tfrom all ipproto tcp sport 1000-2000 dport 8000-8080 blackhole",
	"105:\tfrom all uidrange 1000-2000 lookup main suppress_prefixlength 0",
	"106:\tfrom 203.0.113.0/24 goto 32766",
	"107:\tnot from all to 198.51.100.128/25 lookup 100 proto 150",
	"0:\tfrom 192.0.2.99 lookup 1000",
	"200:\tfrom fd00:c0de::/64 lookup 100",
	"201:\tfrom all fwmark 0x7 iif eth0 lookup 1000",
	"blackhole 203.0.113.0/24",
	"fd00:beef::/64 dev eth0",
	"198.51.100.77 dev eth0 lladdr 02:00:00:00:00:77 PERMANENT",
	"fd00:c0de::77 dev eth0 lladdr 02:00:00:00:00:78 router PERMANENT",
};

static void add_rules(void)
{
	for (size_t i = 0; i < sizeof(rule_cmds) / sizeof(*rule_cmds); i++) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "%s 2>&1", rule_cmds[i]);
		if (system(cmd) != 0)
			fail("%s failed", rule_cmds[i]);
	}
}

/* `ip`'s lists of rules, routes of tables 100 and 1000, permanent
 * neighbours ("netns_srv rules" only). */
static size_t ip_list(char *out, size_t len, size_t at)
{
	if (!rules_mode)
		return at;
	return cmd_out("ip rule; ip -6 rule; ip route show table 100; ip route show table 1000; "
		       "ip -6 route show table 100; ip -6 route show table 1000; "
		       "ip neigh show nud permanent; ip -6 neigh show nud permanent",
		       out, len, at);
}

/* A bridge named br7, by RTM_NEWLINK. */
static void add_bridge(void)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
		char attrs[64];
	} req = { .h = { .nlmsg_type = RTM_NEWLINK,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK } };
	size_t at = NLMSG_LENGTH(sizeof(req.i));
	struct rtattr *ra = (struct rtattr *)((char *)&req + at);
	ra->rta_type = IFLA_IFNAME;
	ra->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(ra), "br7", 4);
	at += RTA_ALIGN(ra->rta_len);
	struct rtattr *info = (struct rtattr *)((char *)&req + at);
	info->rta_type = IFLA_LINKINFO;
	struct rtattr *kind = RTA_DATA(info);
	kind->rta_type = IFLA_INFO_KIND;
	kind->rta_len = RTA_LENGTH(7);
	memcpy(RTA_DATA(kind), "bridge", 7);
	info->rta_len = RTA_LENGTH(RTA_ALIGN(kind->rta_len));
	at += RTA_ALIGN(info->rta_len);
	req.h.nlmsg_len = (uint32_t)at;
	int s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	char buf[512];
	if (s < 0 || send(s, &req, at, 0) < 0 || recv(s, buf, sizeof(buf), 0) < 0)
		fail("netlink: %m");
	struct nlmsgerr *e = NLMSG_DATA((struct nlmsghdr *)buf);
	if (((struct nlmsghdr *)buf)->nlmsg_type == NLMSG_ERROR && e->error)
		skip("cannot add a bridge: %s", strerror(-e->error));
	close(s);
}

/* "netns_srv held": fd 9, a network namespace no process is in. */
static void hold_netns(void)
{
	test_hold_netns(test_netns_child("ip link set lo up && ip addr add 192.0.2.55/32 dev lo"), 9);
}

static int accept_one(int l)
{
	struct pollfd p = { .fd = l, .events = POLLIN };
	if (poll(&p, 1, 30000) != 1)
		fail("no connection from the host");
	int c = accept(l, NULL, NULL);
	if (c < 0)
		fail("accept: %m");
	return c;
}

int main(int argc, char **argv)
{
	static char before[65536], after[65536];
	char buf[4096] = "";
	size_t n = 0;

	if (argc > 1 && !strcmp(argv[1], "bridge")) {
		add_bridge();
		test_ready();
		test_wait();
		pass();
	}
	rules_mode = argc > 1 && !strcmp(argv[1], "rules");
	held_mode = argc > 1 && !strcmp(argv[1], "held");
	if (held_mode)
		hold_netns();
	change_netns();
	if (rules_mode)
		add_rules();
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
		fail("listen: %m");
	FILE *f = fopen("listening.tmp", "w");
	if (!f || fprintf(f, "%d\n", PORT) < 0 || fclose(f) || rename("listening.tmp", "listening"))
		fail("listening file: %m");
	int c = accept_one(l);
	struct pollfd p = { .fd = c, .events = POLLIN };
	if (poll(&p, 1, 20000) != 1)
		fail("the client sent nothing");
	snapshot(before, sizeof(before));
	expect(!held_mode || strstr(before, "lo 192.0.2.55/32"), "no held namespace in the notes:\n%s",
	       before);
	for (size_t i = 0; rules_mode && i < sizeof(rule_want) / sizeof(*rule_want); i++)
		expect(strstr(before, rule_want[i]) != NULL, "no '%s' in the notes:\n%s", rule_want[i],
		       before);

	test_ready();
	test_wait();

	snapshot(after, sizeof(after));
	expect(!strcmp(before, after), "the namespace changed:\n--- before\n%s--- after\n%s", before,
	       after);
	while (n < sizeof(buf) - 1 && !strstr(buf, "END\n")) {
		p = (struct pollfd){ .fd = c, .events = POLLIN };
		if (poll(&p, 1, 30000) != 1)
			fail("no data after %zu bytes: '%s'", n, buf);
		ssize_t r = recv(c, buf + n, sizeof(buf) - 1 - n, 0);
		if (r <= 0)
			fail("recv after %zu bytes: %s", n, r < 0 ? strerror(errno) : "end of file");
		n += (size_t)r;
		buf[n] = 0;
	}
	char reply[4200];
	int len = snprintf(reply, sizeof(reply), "got:%s", buf);
	if (send(c, reply, (size_t)len, 0) != len)
		fail("send the reply: %m");
	close(c);
	/* the address answers again: a new connection from the host */
	c = accept_one(l);
	if (send(c, "again\n", 6, 0) != 6)
		fail("send on the new connection: %m");
	close(c);
	pass();
}
