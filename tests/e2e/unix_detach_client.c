/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A server whose client is outside the image: a listener bound to an
 * abstract name, and at fd 5 the connection it accepted from a grandchild
 * (reparented away, so outside the tree), which sent "hello" that the
 * server has not read. The runner checkpoints it with --detach-clients
 * (refuse_detach_client: without it, refused naming the option). After
 * restart the server reads "hello", then EOF, as if the client had sent it
 * and gone; the listener accepts new clients. Natively the client goes
 * when the server says "bye".
 */
#include "lib.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static socklen_t addr_of(struct sockaddr_un *a, pid_t pid)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "ckpt-detach-%d", (int)pid);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void client(const struct sockaddr_un *a, socklen_t len)
{
	char buf[16];
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (const struct sockaddr *)a, len) < 0 || write(s, "hello", 5) != 5)
		_exit(1);
	while (read(s, buf, sizeof(buf)) > 0) /* until "bye" or EOF */
		break;
	_exit(0);
}

int main(void)
{
	struct sockaddr_un a;
	socklen_t len = addr_of(&a, getpid());
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, len) < 0 || listen(l, 4) < 0)
		fail("listener: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		if (fork() == 0)
			client(&a, len);
		_exit(0);
	}
	if (waitpid(c, NULL, 0) != c)
		fail("waitpid: %m");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		fail("accept: %m");
	test_move_fd(s, 5);
	test_move_fd(l, 6);
	int queued = 0;
	for (int i = 0; i < 1000 && queued < 5; i++) {
		struct pollfd p = { .fd = 5, .events = POLLIN };
		poll(&p, 1, 10);
		ioctl(5, FIONREAD, &queued);
	}
	if (queued != 5)
		fail("the client's hello is not queued (%d bytes)", queued);

	test_ready();
	test_wait();

	char buf[16] = "";
	ssize_t n = send(5, "bye", 3, MSG_NOSIGNAL);
	expect(n == 3 || (n < 0 && errno == EPIPE), "send: %zd %m", n);
	expect(read(5, buf, sizeof(buf)) == 5 && !memcmp(buf, "hello", 5),
	       "the client's hello was lost");
	n = read(5, buf, sizeof(buf));
	expect(n == 0, "no EOF after the client's data: %zd %m", n);
	int s2 = socket(AF_UNIX, SOCK_STREAM, 0);
	expect(s2 >= 0 && connect(s2, (struct sockaddr *)&a, len) == 0, "connect again: %m");
	int s3 = accept(6, NULL, NULL);
	expect(s3 >= 0 && write(s2, "x", 1) == 1 && read(s3, buf, 1) == 1 && buf[0] == 'x',
	       "the listener does not serve new clients");
	pass();
}
