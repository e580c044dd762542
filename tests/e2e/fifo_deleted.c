/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Named FIFOs whose name was removed while open: "f" (mode 0640) has a
 * read end (fd 15, O_NONBLOCK) and a write end (fd 16) with "hello"
 * buffered; "g" is held only by a non-blocking reader (fd 17), no data.
 * Both names are unlinked. After restart, from inside: each fd still
 * reads "DIR/NAME (deleted)", is a FIFO with no links and the same mode,
 * fds 15 and 16 are ends of one FIFO holding "hello", what fd 16 writes now
 * is read at fd 15, "g" does not poll POLLHUP (never had a writer), and
 * neither name exists again.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void expect_gone_fifo(int fd, const char *name, mode_t mode)
{
	char link[64], target[4096], cwd[4000], want[4100];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = 0;
	if (!getcwd(cwd, sizeof(cwd)))
		fail("getcwd: %m");
	snprintf(want, sizeof(want), "%s/%s (deleted)", cwd, name);
	expect(!strcmp(target, want), "fd %d reads %s, not %s", fd, target, want);
	struct stat st;
	expect(fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_nlink == 0 &&
		   (st.st_mode & 07777) == mode,
	       "fd %d: mode %o, %lu links", fd, st.st_mode, (unsigned long)st.st_nlink);
	expect(access(name, F_OK) < 0 && errno == ENOENT, "%s exists again", name);
}

int main(void)
{
	if (mkfifo("f", 0600) < 0 || mkfifo("g", 0600) < 0 || chmod("f", 0640) < 0)
		fail("mkfifo: %m");
	int r = open("f", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	int w = open("f", O_WRONLY | O_CLOEXEC);
	int g = open("g", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (r < 0 || w < 0 || g < 0)
		fail("open: %m");
	test_move_fd(r, 15);
	test_move_fd(w, 16);
	test_move_fd(g, 17);
	if (write(16, "hello", 5) != 5)
		fail("write: %m");
	if (unlink("f") < 0 || unlink("g") < 0)
		fail("unlink: %m");

	test_ready();
	test_wait();

	expect_gone_fifo(15, "f", 0640);
	expect_gone_fifo(16, "f", 0640);
	expect_gone_fifo(17, "g", 0600);
	struct stat a, b;
	expect(fstat(15, &a) == 0 && fstat(16, &b) == 0 && a.st_ino == b.st_ino,
	       "fds 15 and 16 are not one FIFO");
	char buf[16] = {0};
	expect(read(15, buf, sizeof(buf)) == 5 && !memcmp(buf, "hello", 5), "read %s", buf);
	expect(write(16, "more", 4) == 4, "write: %m");
	memset(buf, 0, sizeof(buf));
	expect(read(15, buf, sizeof(buf)) == 4 && !memcmp(buf, "more", 4),
	       "after the restart: read %s", buf);
	struct pollfd p = {.fd = 17, .events = POLLIN};
	expect(poll(&p, 1, 0) == 0, "g polls %#x", p.revents);
	pass();
}
