/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * epoll watches whose file has left the fd they are keyed by: pipe A's
 * read end watched at fd 20, dup'ed to fd 21, fd 20 closed; pipe B's
 * read end watched at fd 22, dup'ed to fd 23, fd 22 closed and pipe C's
 * read end opened at fd 22 and watched there too (two watches of fd 22,
 * of different files). After restart the epoll fdinfo lists the same
 * watches, fd 20 is still closed and fd 22 still holds pipe C, and a
 * write to each pipe is reported with that watch's data.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

static void watch(int ep, int fd, uint64_t data)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = data };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fail("epoll_ctl(%d): %m", fd);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the "tfd: N events: E data: D" parts of the fdinfo, sorted */
static void watches(int ep, char *out, size_t size)
{
	char path[64], text[8192], *lines[16];
	int n = 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	if (test_read_file(path, text, sizeof(text)) <= 0)
		fail("read %s: %m", path);
	for (char *l = strtok(text, "\n"); l && n < 16; l = strtok(NULL, "\n"))
		if (!strncmp(l, "tfd:", 4)) {
			char *pos = strstr(l, " pos:");
			if (pos)
				*pos = '\0';
			lines[n++] = l;
		}
	qsort(lines, n, sizeof(*lines), cmp_str);
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		snprintf(out + strlen(out), size - strlen(out), "%s|", lines[i]);
}

static void expect_event(int ep, int wfd, uint64_t data)
{
	struct epoll_event ev;
	if (write(wfd, "x", 1) != 1)
		fail("write: %m");
	int n = epoll_wait(ep, &ev, 1, 5000);
	expect(n == 1 && ev.data.u64 == data, "write to the pipe of watch %llu: %d events, data %llu",
	       (unsigned long long)data, n, n == 1 ? (unsigned long long)ev.data.u64 : 0ull);
}

int main(void)
{
	int a[2], b[2], c[2];
	int ep = epoll_create1(0);
	if (ep < 0 || pipe(a) || pipe(b) || pipe(c))
		fail("epoll/pipe: %m");
	test_move_fd(a[0], 20);
	watch(ep, 20, 1);
	if (dup2(20, 21) != 21 || close(20) < 0)
		fail("dup2/close: %m");
	test_move_fd(b[0], 22);
	watch(ep, 22, 2);
	if (dup2(22, 23) != 23 || close(22) < 0)
		fail("dup2/close: %m");
	test_move_fd(c[0], 22);
	watch(ep, 22, 3);
	char before[1024], after[1024];
	watches(ep, before, sizeof(before));

	test_ready();
	test_wait();

	watches(ep, after, sizeof(after));
	expect(!strcmp(before, after), "watches '%s', were '%s'", after, before);
	expect(fcntl(20, F_GETFD) < 0, "fd 20 is open again");
	struct stat x, y;
	expect(fstat(22, &x) == 0 && fstat(c[1], &y) == 0 && x.st_ino == y.st_ino,
	       "fd 22 no longer holds pipe C");
	expect_event(ep, a[1], 1);
	char buf[4];
	if (read(21, buf, 1) != 1)
		fail("read: %m");
	expect_event(ep, b[1], 2);
	if (read(23, buf, 1) != 1)
		fail("read: %m");
	expect_event(ep, c[1], 3);
	pass();
}
