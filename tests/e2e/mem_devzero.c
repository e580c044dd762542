/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A shared mapping of /dev/zero made through an fd the process keeps open
 * (mmap of /dev/zero MAP_SHARED: shared anonymous memory), written before
 * a fork and shared with the child. After restart the contents are there,
 * a write by the child is seen by the root, and the fd still reads zeros.
 * The same shared memory is also held through an fd of its own (opened
 * through /proc/self/map_files, "/dev/zero (deleted)"), mapped again at a
 * second address: after restart a pwrite through that fd shows in both
 * mappings.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN (64 << 10)

int main(void)
{
	int go[2], fd = open("/dev/zero", O_RDWR);
	if (fd < 0 || pipe(go))
		fail("setup: %m");
	unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap: %m");
	test_fill_random(m, LEN, 42);
	uint64_t sum = test_hash(m, LEN, 0);
	char link[128];
	snprintf(link, sizeof(link), "/proc/self/map_files/%lx-%lx", (unsigned long)m,
		 (unsigned long)m + LEN);
	int sfd = open(link, O_RDWR);
	if (sfd < 0)
		fail("open %s: %m", link);
	unsigned char *m2 = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	if (m2 == MAP_FAILED)
		fail("mmap of the map_files fd: %m");
	pid_t c = fork();
	if (c == 0) {
		char b;
		while (read(go[0], &b, 1) < 0 && errno == EINTR)
			;
		m[100] = 0xab;
		_exit(0);
	}
	test_ready();
	test_wait();

	expect(test_hash(m, LEN, 0) == sum, "the shared /dev/zero mapping's contents changed");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && st == 0, "child: %#x", st);
	expect(m[100] == 0xab, "the child's write is not seen: the mapping is no longer shared");
	expect(pwrite(sfd, "\x5a", 1, 200) == 1, "pwrite: %m");
	expect(m[200] == 0x5a && m2[200] == 0x5a && m2[100] == 0xab,
	       "the fd of the shared memory is not the same object (%#x %#x %#x)", m[200], m2[200],
	       m2[100]);
	unsigned char z[16] = { 1 };
	expect(read(fd, z, sizeof(z)) == sizeof(z) && !z[0] && !z[15], "fd does not read zeros");
	pass();
}
