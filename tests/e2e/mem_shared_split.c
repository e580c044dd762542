/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Shared anonymous memory in many vmas. A MAP_SHARED | MAP_ANONYMOUS area
 * of 6,000 pages with every other page made read-only (6,000 vmas of one
 * shmem object), shared with a forked child (6,000 more, the same pages);
 * and a memfd mapped as pages 0-1, then 2-3, then 1-2 (that third one
 * inside the first two together, in neither alone). ckpt writes a shmem
 * object's pages once, through the first vmas that hold them. After the
 * restart each page reads what was written, in each vma and each process,
 * and a write by the child shows in the parent.
 */
#include "lib.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { PAGES = 6000 };

static size_t pg;

static void check_area(const char *who, const uint8_t *a, uint8_t bias)
{
	for (size_t i = 0; i < PAGES; i++)
		if (a[i * pg] != (uint8_t)(i * 7 + bias) || a[i * pg + pg - 1] != (uint8_t)i)
			fail("%s: page %zu reads %u/%u", who, i, a[i * pg], a[i * pg + pg - 1]);
}

int main(void)
{
	pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *a = mmap(NULL, PAGES * pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			  -1, 0);
	if (a == MAP_FAILED)
		fail("mmap: %m");
	for (size_t i = 0; i < PAGES; i++) {
		a[i * pg] = (uint8_t)(i * 7);
		a[i * pg + pg - 1] = (uint8_t)i;
	}
	for (size_t i = 1; i < PAGES; i += 2)
		if (mprotect(a + i * pg, pg, PROT_READ) < 0)
			fail("mprotect: %m");

	int mfd = memfd_create("split", 0);
	if (mfd < 0 || ftruncate(mfd, 4 * (off_t)pg) < 0)
		fail("memfd: %m");
	uint8_t *m01 = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	uint8_t *m23 = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 2 * (off_t)pg);
	uint8_t *m12 = mmap(NULL, 2 * pg, PROT_READ, MAP_SHARED, mfd, (off_t)pg);
	if (m01 == MAP_FAILED || m23 == MAP_FAILED || m12 == MAP_FAILED)
		fail("mmap memfd: %m");
	close(mfd);
	for (int i = 0; i < 2; i++) {
		memset(m01 + i * pg, 'a' + i, pg);
		memset(m23 + i * pg, 'c' + i, pg);
	}

	int go[2], done[2];
	if (pipe(go) || pipe(done))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		char ch;
		if (read(go[0], &ch, 1) != 1)
			_exit(2);
		for (size_t i = 0; i < PAGES; i++)
			if (a[i * pg] != (uint8_t)(i * 7) || a[i * pg + pg - 1] != (uint8_t)i)
				_exit(3);
		for (size_t i = 0; i < PAGES; i += 2) /* the writable ones */
			a[i * pg] = (uint8_t)(i * 7 + 1);
		_exit(write(done[1], "d", 1) == 1 ? 0 : 4);
	}

	test_ready();
	test_wait();

	check_area("parent", a, 0);
	for (int i = 0; i < 2; i++) {
		expect(m01[i * pg] == 'a' + i && m01[i * pg + pg - 1] == 'a' + i, "m01 page %d", i);
		expect(m23[i * pg] == 'c' + i && m23[i * pg + pg - 1] == 'c' + i, "m23 page %d", i);
		expect(m12[i * pg] == 'b' + i && m12[i * pg + pg - 1] == 'b' + i,
		       "m12 page %d reads %c", i, m12[i * pg]);
	}
	m01[pg] = 'x'; /* one object: seen through the other vma */
	expect(m12[0] == 'x', "m12 does not share m01's page 1");
	char ch;
	int st;
	if (write(go[1], "g", 1) != 1 || read(done[0], &ch, 1) != 1 || waitpid(c, &st, 0) != c)
		fail("child: %m");
	expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	for (size_t i = 0; i < PAGES; i++) {
		uint8_t want = (uint8_t)(i * 7 + (i % 2 ? 0 : 1));
		if (a[i * pg] != want)
			fail("page %zu: %u after the child's write, want %u", i, a[i * pg], want);
	}
	pass();
}
