/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an AF_UNIX stream socket at fd 5 whose peer is held by a
 * process outside the image (a grandchild, reparented away, so that the
 * test has no children), with a message (an echo) queued in it. The runner expects
 * the checkpoint to fail naming the pid, fd 5 and the socket; the process
 * lives on: memory intact, not left traced, the queued message is still
 * there and the connection still carries data. The grandchild echoes what
 * it reads and exits at EOF, when the test does.
 */
#include "lib.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN (1ul << 20)
static unsigned char mem[LEN];

static void echo(int fd)
{
	char buf[64];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n)
			break;
	_exit(0);
}

int main(void)
{
	test_fill_random(mem, LEN, 6);
	const uint64_t h = test_hash(mem, LEN, 0);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		fail("socketpair: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		close(sv[0]);
		if (fork() == 0)
			echo(sv[1]);
		_exit(0);
	}
	close(sv[1]);
	if (waitpid(c, NULL, 0) != c)
		fail("waitpid: %m");
	test_move_fd(sv[0], 5);
	char buf[16] = "";
	if (write(5, "ping", 4) != 4 || read(5, buf, 4) != 4 || memcmp(buf, "ping", 4))
		fail("the grandchild does not echo");
	/* echoed back: queued at fd 5 */
	if (write(5, "queued", 6) != 6)
		fail("write: %m");
	usleep(100000);

	test_ready();
	test_wait();

	expect(test_hash(mem, LEN, 0) == h, "memory changed");
	expect(read(5, buf, 6) == 6 && !memcmp(buf, "queued", 6), "queued message lost");
	expect(write(5, "back", 4) == 4 && read(5, buf, 4) == 4 && !memcmp(buf, "back", 4),
	       "the connection does not carry data");
	pass();
}
