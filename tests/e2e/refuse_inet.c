/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a listening TCP socket on 127.0.0.1 at fd 5 with a connection
 * not accepted yet (the inet kind refuses such a listener). The runner
 * expects `ckpt checkpoint --kill` to fail, naming the pid, fd 5 and the
 * socket, and the process to live on unharmed: after SIGUSR1 its memory is
 * intact, it is not left traced or stopped (test_check_common), and the
 * socket still works (same address, accepts a connection).
 */
#include "lib.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LEN (1ul << 20)
static unsigned char mem[LEN];

int main(void)
{
	test_fill_random(mem, LEN, 5);
	const uint64_t h = test_hash(mem, LEN, 0);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 4))
		fail("socket/bind/listen: %m");
	test_move_fd(s, 5);
	socklen_t al = sizeof(a);
	getsockname(5, (struct sockaddr *)&a, &al);
	int pending = socket(AF_INET, SOCK_STREAM, 0);
	if (pending < 0 || connect(pending, (struct sockaddr *)&a, sizeof(a)))
		fail("connect: %m");

	test_ready();
	test_wait();

	expect(test_hash(mem, LEN, 0) == h, "memory changed");
	struct sockaddr_in b;
	socklen_t bl = sizeof(b);
	expect(!getsockname(5, (struct sockaddr *)&b, &bl) && b.sin_port == a.sin_port,
	       "fd 5 is not the listening socket any more");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	expect(c >= 0 && !connect(c, (struct sockaddr *)&a, sizeof(a)), "connect: %m");
	fcntl(5, F_SETFL, O_NONBLOCK);
	int acc = accept(5, NULL, NULL);
	expect(acc >= 0, "accept: %m");
	pass();
}
