/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an inotify instance at fd 5 with an event queued, unread (a
 * checkpoint cannot save it without taking it). The runner expects the
 * checkpoint to fail naming the pid, fd 5 and inotify; afterwards the event
 * is still there to read.
 */
#include "lib.h"

#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	char buf[4096] __attribute__((aligned(8)));

	if (mkdir("d", 0755) < 0)
		fail("mkdir: %m");
	int in = test_move_fd(inotify_init1(IN_NONBLOCK), 5);
	int wd = inotify_add_watch(in, "d", IN_CREATE);
	if (wd < 0)
		fail("inotify_add_watch: %m");
	int fd = open("d/x", O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		fail("create: %m");
	close(fd);

	test_ready();
	test_wait();

	const struct inotify_event *e = (const void *)buf;
	ssize_t n = read(in, buf, sizeof(buf));
	expect(n > (ssize_t)sizeof(*e) && e->wd == wd && (e->mask & IN_CREATE) &&
		   !strcmp(e->name, "x"),
	       "the queued event is lost (%zd)", n);
	pass();
}
