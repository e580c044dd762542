/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Eventfds. fd 5: EFD_SEMAPHORE | EFD_NONBLOCK with count 7: after restore
 * it reads 1 seven times, then EAGAIN. fd 6: a blocking eventfd whose count
 * 0x123456789 does not fit eventfd()'s unsigned int, and fd 7 a dup of it:
 * the count is read through the dup, after which fd 6 is empty too, and a
 * value written to fd 6 is read from fd 7 (one counter). fd 8: empty and
 * non-blocking, reads EAGAIN. fdinfo's eventfd-semaphore matches.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int fdinfo_int(int fd, const char *key)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	const char *p = strstr(buf, key);
	return p ? atoi(p + strlen(key)) : -1;
}

static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int main(void)
{
	const uint64_t big = 0x123456789ull;
	int sem = test_move_fd(eventfd(7, EFD_SEMAPHORE | EFD_NONBLOCK), 5);
	int cnt = test_move_fd(eventfd(0, 0), 6);
	if (write(cnt, &big, sizeof(big)) != sizeof(big))
		fail("write: %m");
	int dup1 = test_move_fd(dup(cnt), 7);
	int empty = test_move_fd(eventfd(0, EFD_NONBLOCK), 8);

	test_ready();
	test_wait();

	uint64_t v;
	expect(fdinfo_int(sem, "eventfd-semaphore:") == 1, "fd 5 is no longer a semaphore");
	expect(fdinfo_int(cnt, "eventfd-semaphore:") == 0, "fd 6 became a semaphore");
	expect(fcntl(sem, F_GETFL) & O_NONBLOCK, "fd 5 lost O_NONBLOCK");
	expect(!(fcntl(cnt, F_GETFL) & O_NONBLOCK), "fd 6 became non-blocking");
	for (int i = 0; i < 7; i++) {
		ssize_t n = read(sem, &v, sizeof(v));
		if (n != sizeof(v) || v != 1) {
			test_failf("semaphore read %d gave %zd (%m), value %llu", i, n,
				   (unsigned long long)v);
			break;
		}
	}
	expect(read(sem, &v, sizeof(v)) < 0 && errno == EAGAIN,
	       "semaphore still readable after 7 reads");

	expect(readable(dup1), "the dup of fd 6 is not readable");
	if (readable(dup1)) {
		expect(read(dup1, &v, sizeof(v)) == sizeof(v) && v == big,
		       "count through the dup %#llx, want %#llx", (unsigned long long)v,
		       (unsigned long long)big);
		expect(!readable(cnt), "fd 6 still has a count after its dup was read");
	}
	v = 3;
	if (write(cnt, &v, sizeof(v)) != sizeof(v))
		test_failf("write to fd 6: %m");
	v = 0;
	expect(readable(dup1) && read(dup1, &v, sizeof(v)) == sizeof(v) && v == 3,
	       "fd 6 and its dup no longer share a counter (read %llu)", (unsigned long long)v);
	expect(read(empty, &v, sizeof(v)) < 0 && errno == EAGAIN, "empty eventfd was readable");
	pass();
}
