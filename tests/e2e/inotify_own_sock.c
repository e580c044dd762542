/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An inotify watch (IN_DELETE | IN_CREATE) on a directory of the test's
 * ("home"), where the program's own unix listener is bound, as gpg-agent watches
 * its home for the removal of its socket and shuts down when it sees one.
 * The restart removes the stale socket file and binds the listener again
 * there: that is ckpt's work, not an event of the program's life. After
 * the restart the watch has seen nothing, and a client connects to the
 * listener by its path; a file removed after the wake is seen.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int main(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "home/sock");
	if (mkdir("home", 0700) < 0)
		fail("mkdir home: %m");
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
		fail("listener: %m");
	int in = inotify_init1(IN_NONBLOCK);
	if (in < 0 || inotify_add_watch(in, "home", IN_DELETE | IN_CREATE) != 1)
		fail("inotify: %m");
	int f = open("home/gone", O_WRONLY | O_CREAT, 0600);
	if (f < 0)
		fail("open gone: %m");
	close(f);
	char buf[4096];
	while (read(in, buf, sizeof(buf)) > 0) /* its own creations */
		;

	test_ready();
	test_wait();

	int queued = -1;
	expect(ioctl(in, FIONREAD, &queued) == 0 && queued == 0,
	       "%d bytes of events queued after the restart", queued);
	ssize_t n = read(in, buf, sizeof(buf));
	if (n > 0) {
		const struct inotify_event *ev = (const void *)buf;
		fail("an event after the restart: mask %#x name '%s'", ev->mask,
		     ev->len ? ev->name : "");
	}
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	expect(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof(a)) == 0,
	       "cannot connect to the listener by its path: %m");
	if (unlink("home/gone") < 0)
		fail("unlink home/gone: %m");
	n = read(in, buf, sizeof(buf));
	const struct inotify_event *ev = (const void *)buf;
	expect(n > 0 && (ev->mask & IN_DELETE) && !strcmp(ev->name, "gone"),
	       "the removal of 'gone' after the wake is not seen (read %zd)", n);
	pass();
}
