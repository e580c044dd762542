/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A dgram server bound to the relative path "dgram.sock", with datagrams
 * queued at the checkpoint from an unbound unconnected client (three, one
 * of them empty), from a client bound to an abstract name, and from an
 * unbound client connect()ed to the server; a second server with an
 * abstract name holds one more. After the restart recvfrom() returns them
 * in order, each with its sender's name (or none), the connected client is
 * still connected, and every socket still sends and receives.
 */
#include "lib.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static socklen_t addr_of(struct sockaddr_un *a, const char *name, bool abstract)
{
	*a = (struct sockaddr_un){.sun_family = AF_UNIX};
	size_t len = strlen(name);
	memcpy(a->sun_path + abstract, name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + len + !abstract);
}

static int dgram(const struct sockaddr_un *bind_to, socklen_t len)
{
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (s < 0 || (bind_to && bind(s, (const struct sockaddr *)bind_to, len) < 0))
		fail("dgram socket: %m");
	return s;
}

static void to(int s, const char *msg, const struct sockaddr_un *a, socklen_t len)
{
	if (sendto(s, msg, strlen(msg), 0, (const struct sockaddr *)a, len) != (ssize_t)strlen(msg))
		fail("sendto: %m");
}

/* the next datagram is msg, from the socket named from (NULL: unnamed) */
static void expect_from(int s, const char *msg, const struct sockaddr_un *from, socklen_t flen,
			const char *what)
{
	char got[64];
	struct sockaddr_un a;
	socklen_t al = sizeof(a);
	ssize_t n = recvfrom(s, got, sizeof(got), MSG_DONTWAIT, (struct sockaddr *)&a, &al);
	expect(n == (ssize_t)strlen(msg) && !memcmp(got, msg, (size_t)n), "%s: got %zd bytes (%m)",
	       what, n);
	if (from)
		expect(al == flen && !memcmp(&a, from, flen), "%s: not from the right name", what);
	else
		expect(al <= sizeof(sa_family_t), "%s: from a named socket (%u)", what, al);
}

int main(void)
{
	struct sockaddr_un sa, na, s2a;
	char nname[64], s2name[64];
	snprintf(nname, sizeof(nname), "ckpt-e2e-dgram-client-%d", (int)getpid());
	snprintf(s2name, sizeof(s2name), "ckpt-e2e-dgram-server-%d", (int)getpid());
	socklen_t sl = addr_of(&sa, "dgram.sock", false), nl = addr_of(&na, nname, true),
		  s2l = addr_of(&s2a, s2name, true);

	int srv = dgram(&sa, sl), srv2 = dgram(&s2a, s2l);
	int u = dgram(NULL, 0), named = dgram(&na, nl), k = dgram(NULL, 0);
	if (connect(k, (struct sockaddr *)&sa, sl) < 0)
		fail("connect: %m");
	to(u, "u1", &sa, sl);
	to(u, "", &sa, sl);
	to(u, "u3 longer", &sa, sl);
	to(named, "from named", &sa, sl);
	if (send(k, "connected", 9, 0) != 9)
		fail("send: %m");
	to(u, "to the other", &s2a, s2l);

	test_ready();
	test_wait();

	expect_from(srv, "u1", NULL, 0, "datagram 1");
	expect_from(srv, "", NULL, 0, "datagram 2 (empty)");
	expect_from(srv, "u3 longer", NULL, 0, "datagram 3");
	expect_from(srv, "from named", &na, nl, "datagram 4");
	expect_from(srv, "connected", NULL, 0, "datagram 5");
	expect(recv(srv, (char[4]){0}, 4, MSG_DONTWAIT) < 0 && errno == EAGAIN,
	       "server: more datagrams");
	expect_from(srv2, "to the other", NULL, 0, "abstract server's datagram");

	struct sockaddr_un pa;
	socklen_t pl = sizeof(pa);
	expect(!getpeername(k, (struct sockaddr *)&pa, &pl) && pl == sl && !memcmp(&pa, &sa, sl),
	       "connected client lost its peer");
	expect(send(k, "again", 5, 0) == 5, "connected client cannot send: %m");
	expect_from(srv, "again", NULL, 0, "connected client, after");
	to(u, "u again", &sa, sl);
	expect_from(srv, "u again", NULL, 0, "unbound client, after");
	to(srv, "reply", &na, nl);
	expect_from(named, "reply", &sa, sl, "reply to the named client");
	unlink("dgram.sock");
	pass();
}
