/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: fd 5 is a directory (the test's own) with a dnotify watch
 * (F_NOTIFY, DN_CREATE | DN_MULTISHOT, its signal left at SIGIO). Nothing
 * of it shows in /proc but the fd's owner, and ckpt could not set it
 * again. The runner expects the checkpoint to fail naming the pid and fd
 * 5; the process lives on, and a file made in the directory after the
 * wake still brings SIGIO.
 */
#include "lib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t notified;

static void on_sigio(int sig)
{
	(void)sig;
	notified = 1;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_sigio };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGIO, &sa, NULL) < 0)
		fail("sigaction: %m");
	int fd = open(".", O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		fail("open .: %m");
	test_move_fd(fd, 5);
	if (fcntl(5, F_NOTIFY, DN_CREATE | DN_MULTISHOT) < 0)
		fail("F_NOTIFY: %m");

	test_ready();
	test_wait();

	notified = 0;
	int nf = open("made-after", O_WRONLY | O_CREAT, 0600);
	if (nf < 0)
		fail("open made-after: %m");
	close(nf);
	/* the signal is queued to this process by the open itself */
	for (int i = 0; i < 1000 && !notified; i++)
		usleep(1000);
	expect(notified, "no SIGIO for a file made in the watched directory");
	pass();
}
