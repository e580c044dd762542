/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Named FIFOs. "f" has a read end (fd 5, O_NONBLOCK) and a write end
 * (fd 6, blocking), a 128 KiB pipe size and 5000 bytes buffered; "g" is
 * held only O_RDWR (fd 7) with 10 bytes in it; "h" only by a non-blocking
 * reader (fd 8) that has never seen a writer. After restore: the links
 * name the paths, the data comes back in order and only once, sizes and
 * flags are kept, the ends are still connected and to the FIFO at the
 * path (a writer opening "f" reaches fd 5), and "h" does not poll POLLHUP.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void check_link(int fd, const char *dir, const char *name)
{
	char path[64], link[PATH_MAX], want[PATH_MAX + 64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	link[n < 0 ? 0 : n] = '\0';
	snprintf(want, sizeof(want), "%s/%s", dir, name);
	expect(!strcmp(link, want), "fd %d links to '%s', want '%s'", fd, link, want);
}

int main(void)
{
	char dir[PATH_MAX], data[5000], got[8192];
	if (!getcwd(dir, sizeof(dir)))
		fail("getcwd: %m");
	if (mkfifo("f", 0600) || mkfifo("g", 0600) || mkfifo("h", 0600))
		fail("mkfifo: %m");
	test_move_fd(open("f", O_RDONLY | O_NONBLOCK), 5);
	test_move_fd(open("f", O_WRONLY), 6);
	test_move_fd(open("g", O_RDWR), 7);
	test_move_fd(open("h", O_RDONLY | O_NONBLOCK), 8);
	if (fcntl(6, F_SETPIPE_SZ, 128 << 10) < 0)
		fail("F_SETPIPE_SZ: %m");
	int size = fcntl(6, F_GETPIPE_SZ);
	test_fill_random(data, sizeof(data), 31);
	if (write(6, data, sizeof(data)) != sizeof(data) || write(7, "0123456789", 10) != 10)
		fail("write: %m");

	test_ready();
	test_wait();

	check_link(5, dir, "f");
	check_link(6, dir, "f");
	check_link(7, dir, "g");
	struct stat st;
	expect(fstat(5, &st) == 0 && S_ISFIFO(st.st_mode), "fd 5 is not a FIFO");
	expect(fcntl(5, F_GETFL) & O_NONBLOCK, "the read end lost O_NONBLOCK");
	expect((fcntl(5, F_GETFL) & O_ACCMODE) == O_RDONLY, "fd 5 is not O_RDONLY");
	expect(!(fcntl(6, F_GETFL) & O_NONBLOCK), "the write end became non-blocking");
	expect((fcntl(6, F_GETFL) & O_ACCMODE) == O_WRONLY, "fd 6 is not O_WRONLY");
	expect((fcntl(7, F_GETFL) & O_ACCMODE) == O_RDWR, "fd 7 is not O_RDWR");
	expect(fcntl(6, F_GETPIPE_SZ) == size, "pipe size %d, want %d", fcntl(6, F_GETPIPE_SZ), size);
	ssize_t n = read(5, got, sizeof(got));
	expect(n == (ssize_t)sizeof(data) && !memcmp(got, data, sizeof(data)),
	       "f gave %zd bytes, want the %zu written", n, sizeof(data));
	n = read(5, got, 1);
	expect(n < 0 && errno == EAGAIN, "f: a second read gave %zd", n);
	expect(write(6, "abc", 3) == 3 && read(5, got, 3) == 3 && !memcmp(got, "abc", 3),
	       "f no longer connects its ends");
	int other = open("f", O_WRONLY | O_NONBLOCK);
	expect(other >= 0 && write(other, "xyz", 3) == 3 && read(5, got, 3) == 3 &&
		       !memcmp(got, "xyz", 3),
	       "a writer opening f does not reach fd 5");
	if (other >= 0)
		close(other);
	n = read(7, got, sizeof(got));
	expect(n == 10 && !memcmp(got, "0123456789", 10), "g gave %zd bytes, want its 10", n);
	struct pollfd p = { .fd = 8, .events = POLLIN };
	expect(poll(&p, 1, 0) == 0, "h polls %#x, want nothing (no writer ever came)", p.revents);
	pass();
}
