/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an AF_UNIX socketpair at fds 5 and 6, with a message queued
 * in it. The runner expects the checkpoint to fail naming the pid, fd 5
 * and the socket; the process lives on: memory intact, not left traced,
 * the queued message is still there and the pair still carries data.
 */
#include "lib.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LEN (1ul << 20)
static unsigned char mem[LEN];

int main(void)
{
	test_fill_random(mem, LEN, 6);
	const uint64_t h = test_hash(mem, LEN, 0);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair: %m");
	if (sv[1] == 5) /* then sv[0] is 4 or lower: 5 is taken by the wrong end */
		sv[1] = test_move_fd(sv[1], 7);
	test_move_fd(sv[0], 5);
	test_move_fd(sv[1], 6);
	if (write(5, "queued", 6) != 6)
		fail("write: %m");

	test_ready();
	test_wait();

	expect(test_hash(mem, LEN, 0) == h, "memory changed");
	char buf[16] = "";
	expect(read(6, buf, 6) == 6 && !memcmp(buf, "queued", 6), "queued message lost");
	expect(write(6, "back", 4) == 4 && read(5, buf, 4) == 4 && !memcmp(buf, "back", 4),
	       "the socketpair does not carry data");
	pass();
}
