/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal inside a tree: the root's child holds a packet socket with a
 * receive ring at fd 5 (not supported; the NETLINK_ROUTE socket used
 * before, then a plain packet socket, are saved now).
 * The checkpoint must fail naming the child's pid, fd 5 and the socket,
 * and every task must go on: after SIGUSR1 the root
 * tells the child to finish, and the child exits 0 if its socket is
 * intact.
 */
#include "lib.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int go[2];
	if (pipe(go))
		fail("pipe: %m");
	pid_t c = fork();
	if (c == 0) {
		int s = socket(AF_PACKET, SOCK_RAW, 0);
		struct tpacket_req rq = { .tp_block_size = 4096, .tp_block_nr = 4,
					  .tp_frame_size = 2048, .tp_frame_nr = 8 };
		if (s < 0 || setsockopt(s, SOL_PACKET, PACKET_RX_RING, &rq, sizeof(rq)) < 0 ||
		    dup2(s, 5) != 5)
			_exit(2);
		char ch;
		while (read(go[0], &ch, 1) < 0 && errno == EINTR)
			;
		int type = 0;
		socklen_t len = sizeof(type);
		_exit(getsockopt(5, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_RAW ? 0
													  : 3);
	}
	/* the child is ready when it holds fd 5 */
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/5", (int)c);
	for (int i = 0; i < 2000 && readlink(path, link, sizeof(link)) < 0; i++)
		usleep(1000);
	char pidbuf[32];
	snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)c);
	FILE *f = fopen("child", "w");
	if (!f || fputs(pidbuf, f) < 0 || fclose(f))
		fail("child file: %m");

	test_ready();
	test_wait();

	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "the child: status %#x", st);
	pass();
}
