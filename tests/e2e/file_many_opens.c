/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One file opened 2,000 times, each its own open file at its own offset
 * (fd i at offset i), and every 7th also dup'd (sharing that open file).
 * ckpt tells open files of one inode apart by kcmp, in sorted order (one
 * by one it took seconds: 2,000 opens of /dev/null, 4 s). After the
 * restart every fd is at its offset, and a dup moves with its original
 * and with no other.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

enum { N = 2000, FD0 = 100 };

int main(void)
{
	struct rlimit rl = { N + FD0 + 600, N + FD0 + 600 };
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail("setrlimit: %m");
	int f = open("data", O_RDWR | O_CREAT, 0600);
	if (f < 0 || ftruncate(f, 2 * N) < 0)
		fail("data: %m");
	close(f);
	for (int i = 0; i < N; i++) {
		int fd = open("data", i % 2 ? O_RDONLY : O_RDWR);
		if (fd < 0 || dup2(fd, FD0 + i) < 0 || lseek(FD0 + i, i, SEEK_SET) != i)
			fail("open %d: %m", i);
		close(fd);
	}
	/* dups of every 7th above them */
	for (int i = 0; i < N; i += 7)
		if (dup2(FD0 + i, FD0 + N + i / 7) < 0)
			fail("dup2 %d: %m", i);

	test_ready();
	test_wait();

	for (int i = 0; i < N; i++)
		expect(lseek(FD0 + i, 0, SEEK_CUR) == i, "fd %d is at %ld, not %d", FD0 + i,
		       (long)lseek(FD0 + i, 0, SEEK_CUR), i);
	for (int i = 0; i < N; i += 7) {
		int d = FD0 + N + i / 7;
		expect(lseek(d, N + i, SEEK_SET) == N + i, "lseek %d: %m", d);
		expect(lseek(FD0 + i, 0, SEEK_CUR) == N + i, "fd %d does not move with its dup %d",
		       FD0 + i, d);
		if (i + 1 < N)
			expect(lseek(FD0 + i + 1, 0, SEEK_CUR) == i + 1,
			       "fd %d moved with the dup of fd %d", FD0 + i + 1, FD0 + i);
	}
	pass();
}
