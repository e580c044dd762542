/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a fanotify group of class FAN_CLASS_CONTENT at fd 5 with a
 * FAN_OPEN_PERM mark (the restart would open files and wait on answers
 * nobody gives yet). The runner expects the checkpoint to fail naming the
 * pid, fd 5, fanotify and permission events; afterwards the mark is still
 * there.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <unistd.h>

int main(void)
{
	char path[64], text[4096];

	int fan = test_move_fd(fanotify_init(FAN_CLASS_CONTENT | FAN_NONBLOCK, O_RDONLY), 5);
	int fd = open("f", O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		fail("create: %m");
	close(fd);
	if (fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, "f") < 0)
		fail("fanotify_mark: %m");

	test_ready();
	test_wait();

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fan);
	if (test_read_file(path, text, sizeof(text)) < 0)
		fail("read %s: %m", path);
	expect(strstr(text, "mask:10000 "), "the permission mark is gone:\n%s", text);
	pass();
}
