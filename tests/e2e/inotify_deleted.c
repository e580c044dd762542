/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An inotify watch on a file deleted since, which the program still holds
 * open: wd 1 watches the directory "sub" (by path), wd 2 the file "gone"
 * (IN_MODIFY | IN_DELETE_SELF), unlinked after the watch was added (its
 * IN_ATTRIB read off). After restart a write through the fd queues
 * IN_MODIFY for wd 2, and closing the fd (the last reference) queues
 * IN_DELETE_SELF and IN_IGNORED for wd 2: the watch is on the same
 * (remade, deleted) file the program holds.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/inotify.h>
#include <unistd.h>

/* The next event, waited for up to 10 s; mask 0 if none came. */
static struct inotify_event next_event(int in)
{
	static char buf[4096] __attribute__((aligned(8)));
	static size_t len, off;
	struct inotify_event ev = { 0 };
	if (off >= len) {
		struct pollfd p = { .fd = in, .events = POLLIN };
		ssize_t n = poll(&p, 1, 10000) == 1 ? read(in, buf, sizeof(buf)) : -1;
		len = n > 0 ? (size_t)n : 0;
		off = 0;
		if (!len)
			return ev;
	}
	memcpy(&ev, buf + off, sizeof(ev));
	off += sizeof(ev) + ev.len;
	return ev;
}

int main(void)
{
	int in = inotify_init1(IN_NONBLOCK);
	int fd = open("gone", O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (in < 0 || fd < 0)
		fail("setup: %m");
	if (mkdir("sub", 0700) < 0)
		fail("mkdir: %m");
	int wd1 = inotify_add_watch(in, "sub", IN_CREATE);
	int wd2 = inotify_add_watch(in, "gone", IN_MODIFY | IN_DELETE_SELF);
	if (wd1 != 1 || wd2 != 2)
		fail("watches: %d %d: %m", wd1, wd2);
	if (unlink("gone") < 0)
		fail("unlink: %m");
	char drain[4096];
	while (read(in, drain, sizeof(drain)) > 0)
		;
	test_ready();
	test_wait();

	expect(write(fd, "x", 1) == 1, "write: %m");
	struct inotify_event ev = next_event(in);
	expect(ev.wd == 2 && (ev.mask & IN_MODIFY), "after the write: wd %d mask %#x, want wd 2 "
	       "IN_MODIFY", ev.wd, ev.mask);
	close(fd);
	ev = next_event(in);
	expect(ev.wd == 2 && (ev.mask & IN_DELETE_SELF),
	       "after the close: wd %d mask %#x, want wd 2 IN_DELETE_SELF", ev.wd, ev.mask);
	ev = next_event(in);
	expect(ev.wd == 2 && (ev.mask & IN_IGNORED),
	       "after the close: wd %d mask %#x, want wd 2 IN_IGNORED", ev.wd, ev.mask);
	pass();
}
