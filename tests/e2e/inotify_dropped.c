/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An inotify instance at fd 5 with events queued, unread, checkpointed
 * with --drop-queued-events (the runner also checks that the checkpoint's
 * log says how many bytes were left out). After restart the queue is
 * empty, the watch is still there (its wd unchanged) and reports a new
 * event on the watched directory.
 */
#include "lib.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
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
	int f = open("d/before", O_CREAT | O_WRONLY, 0644);
	if (f < 0)
		fail("create: %m");
	close(f);
	int queued = 0;
	if (ioctl(in, FIONREAD, &queued) < 0 || queued <= 0)
		fail("no event queued");

	test_ready();
	test_wait();

	expect(ioctl(in, FIONREAD, &queued) == 0 && queued == 0,
	       "%d bytes of events queued after restart, expected none", queued);
	f = open("d/after", O_CREAT | O_WRONLY, 0644);
	if (f < 0)
		fail("create: %m");
	close(f);
	struct pollfd p = { .fd = in, .events = POLLIN };
	expect(poll(&p, 1, 5000) == 1, "no event after restart");
	ssize_t n = read(in, buf, sizeof(buf));
	const struct inotify_event *ev = (const void *)buf;
	expect(n > 0 && ev->wd == wd && (ev->mask & IN_CREATE) && !strcmp(ev->name, "after"),
	       "event: %zd bytes, wd %d, mask %#x, name '%s'", n, n > 0 ? ev->wd : -1,
	       n > 0 ? ev->mask : 0, n > 0 ? ev->name : "");
	pass();
}
