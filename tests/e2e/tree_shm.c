/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memory shared between processes: a MAP_SHARED anonymous area (4 MiB of
 * known data) mapped by the root and its child since fork, and a
 * MAP_SHARED file mapping. After restart both hold the data, and what the
 * child writes into either is seen by the root.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN (4u << 20)

int main(void)
{
	int go[2];
	if (pipe(go))
		fail("pipe: %m");
	uint8_t *anon = test_mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	test_fill_random(anon, LEN, 1);
	const uint64_t h = test_hash(anon, LEN, 0);
	int fd = open("file", O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 65536))
		fail("file: %m");
	uint8_t *file = test_mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	pid_t c = fork();
	if (c == 0) {
		char b;
		while (read(go[0], &b, 1) < 0 && errno == EINTR)
			;
		if (test_hash(anon, LEN, 0) != h)
			_exit(2);
		anon[12345] ^= 0xff;
		file[4321] = 'c';
		_exit(0);
	}

	test_ready();
	test_wait();

	expect(test_hash(anon, LEN, 0) == h, "the root's shared memory changed");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (2: its copy of the data differs)", st);
	expect(test_hash(anon, LEN, 0) != h, "the child's write to shared anonymous memory is not seen");
	expect(file[4321] == 'c', "the child's write to the shared file mapping is not seen");
	pass();
}
