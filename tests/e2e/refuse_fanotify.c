/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a fanotify group at fd 5 with an event queued, unread (a
 * checkpoint cannot save it without taking it). The runner expects the
 * checkpoint to fail naming the pid, fd 5 and fanotify; afterwards the
 * event is still there to read, with an fd for the file.
 */
#include "lib.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <unistd.h>

int main(void)
{
	char buf[4096] __attribute__((aligned(8))), path[64], got[PATH_MAX], want[PATH_MAX];

	int fan = test_move_fd(fanotify_init(FAN_CLASS_NOTIF | FAN_NONBLOCK, O_RDONLY), 5);
	int fd = open("f", O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || !getcwd(want, sizeof(want) - 2))
		fail("create: %m");
	close(fd);
	if (fanotify_mark(fan, FAN_MARK_ADD, FAN_CLOSE_WRITE, AT_FDCWD, "f") < 0)
		fail("fanotify_mark: %m");
	fd = open("f", O_WRONLY);
	if (fd < 0)
		fail("open: %m");
	close(fd);

	test_ready();
	test_wait();

	const struct fanotify_event_metadata *m = (const void *)buf;
	ssize_t n = read(fan, buf, sizeof(buf));
	if (n < (ssize_t)sizeof(*m) || !(m->mask & FAN_CLOSE_WRITE) || m->fd < 0)
		fail("the queued event is lost (%zd)", n);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", m->fd);
	ssize_t len = readlink(path, got, sizeof(got) - 1);
	got[len > 0 ? len : 0] = '\0';
	strcat(want, "/f");
	expect(!strcmp(got, want), "the event's fd is '%s', want '%s'", got, want);
	pass();
}
