/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A shared file mapping. Pages 1 and 3 of the file "shared" are written
 * through a MAP_SHARED mapping before the checkpoint (and are then in the
 * file). After restore the mapping is the same file mapping (rw-s), shows
 * the file, and is still shared both ways: a write through it shows up in
 * the file (pread), a pwrite to the file shows up in it. The two pages
 * written for that check are put back afterwards.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096ul
#define NPAGES 8

static unsigned char content[NPAGES][PAGE];

int main(void)
{
	char path[4096];
	if (!getcwd(path, sizeof(path) - 8))
		fail("getcwd: %m");
	strcat(path, "/shared");
	int fd = open("shared", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("open: %m");
	for (int pg = 0; pg < NPAGES; pg++)
		test_fill_random(content[pg], PAGE, 0x5ba3ed00u + (unsigned)pg);
	if (pwrite(fd, content, sizeof(content), 0) != (ssize_t)sizeof(content))
		fail("write: %m");
	unsigned char *m = test_mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
				     0);
	close(fd);
	for (int pg = 1; pg <= 3; pg += 2) {
		test_fill_random(content[pg], PAGE, 0xabc00 + (unsigned)pg);
		memcpy(m + pg * PAGE, content[pg], PAGE);
	}
	fd = open("shared", O_RDONLY | O_CLOEXEC);
	unsigned char buf[PAGE];
	if (fd < 0 || pread(fd, buf, PAGE, 3 * PAGE) != (ssize_t)PAGE ||
	    memcmp(buf, content[3], PAGE))
		fail("write through MAP_SHARED not in the file before checkpoint");
	close(fd);

	test_ready();
	test_wait();

	struct test_map map;
	if (test_find_map((uintptr_t)m, &map)) {
		test_failf("no mapping at %p", (void *)m);
	} else {
		expect(map.start == (uintptr_t)m && map.end == (uintptr_t)m + NPAGES * PAGE,
		       "mapping is %lx-%lx", (unsigned long)map.start, (unsigned long)map.end);
		expect(!strcmp(map.perms, "rw-s"), "perms %s, want rw-s", map.perms);
		expect(!strcmp(map.path, path), "maps path '%s', want '%s'", map.path, path);
	}
	fd = open("shared", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fail("reopen: %m");
	for (int pg = 0; pg < NPAGES; pg++) {
		expect(!memcmp(m + pg * PAGE, content[pg], PAGE), "mapping page %d differs", pg);
		if (pread(fd, buf, PAGE, (off_t)(pg * PAGE)) != (ssize_t)PAGE)
			fail("pread: %m");
		expect(!memcmp(buf, content[pg], PAGE), "file page %d differs", pg);
	}
	/* mapping -> file */
	memset(m + 6 * PAGE, 0x66, PAGE);
	if (pread(fd, buf, PAGE, 6 * PAGE) != (ssize_t)PAGE)
		fail("pread: %m");
	expect(buf[0] == 0x66 && buf[PAGE - 1] == 0x66,
	       "write through the mapping after restore is not in the file (not shared)");
	/* file -> mapping */
	memset(buf, 0x77, PAGE);
	if (pwrite(fd, buf, PAGE, 7 * PAGE) != (ssize_t)PAGE)
		fail("pwrite: %m");
	expect(m[7 * PAGE] == 0x77 && m[8 * PAGE - 1] == 0x77,
	       "pwrite to the file after restore is not seen in the mapping");
	if (pwrite(fd, content[6], PAGE, 6 * PAGE) != (ssize_t)PAGE ||
	    pwrite(fd, content[7], PAGE, 7 * PAGE) != (ssize_t)PAGE)
		fail("restore file: %m");
	close(fd);
	pass();
}
