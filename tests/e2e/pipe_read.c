/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpointed inside read() on an empty pipe whose write end the process
 * holds too. After restore the read is restarted (ERESTARTSYS): it neither
 * fails nor returns early; the SIGUSR1 handler (no SA_RESTART) then writes a
 * byte into the pipe and the loop reads exactly that byte. A second pipe
 * holds 3000 bytes written before the checkpoint, which must all come back,
 * in order, with the pipe's size (F_GETPIPE_SZ) and the O_NONBLOCK flag of
 * its read end.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int wake[2];

static void on_usr1(int sig)
{
	(void)sig;
	test_woken = 1;
	char c = 'x';
	if (write(wake[1], &c, 1) != 1)
		_exit(3);
}

int main(void)
{
	int full[2];
	char data[3000];

	if (pipe(wake) < 0 || pipe2(full, O_NONBLOCK) < 0)
		fail("pipe: %m");
	if (fcntl(full[1], F_SETPIPE_SZ, 65536 * 2) < 0)
		fail("F_SETPIPE_SZ: %m");
	test_fill_random(data, sizeof(data), 77);
	if (write(full[1], data, sizeof(data)) != (ssize_t)sizeof(data))
		fail("write: %m");
	int size = fcntl(full[1], F_GETPIPE_SZ);

	test_ready();
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &sa, NULL);
	char c = 0;
	ssize_t n;
	int eintr = 0;
	while ((n = read(wake[0], &c, 1)) < 0 && errno == EINTR)
		eintr++;
	if (n != 1 || c != 'x')
		fail("read on the empty pipe returned %zd ('%c', %m) before the wake-up byte", n, c);
	if (!test_woken)
		fail("read returned without the wake-up signal");
	test_check_common();

	char got[sizeof(data) + 1];
	n = read(full[0], got, sizeof(got));
	expect(n == (ssize_t)sizeof(data), "buffered pipe gave %zd bytes, want %zu", n, sizeof(data));
	expect(n > 0 && !memcmp(got, data, (size_t)n), "buffered pipe data differs");
	expect(fcntl(full[1], F_GETPIPE_SZ) == size, "pipe size %d, want %d",
	       fcntl(full[1], F_GETPIPE_SZ), size);
	expect(fcntl(full[0], F_GETFL) & O_NONBLOCK, "read end lost O_NONBLOCK");
	expect(!(fcntl(wake[0], F_GETFL) & O_NONBLOCK), "blocking read end became non-blocking");
	n = read(full[0], got, 1);
	expect(n < 0 && errno == EAGAIN, "empty non-blocking pipe: read gave %zd", n);
	/* the pipes still connect their ends */
	if (write(wake[1], "yz", 2) != 2 || read(wake[0], got, 2) != 2 || memcmp(got, "yz", 2))
		test_failf("the pipe no longer connects its ends");
	pass();
}
