/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A private file mapping. The file "data" has 16 known pages; it is mapped
 * MAP_PRIVATE read-write, and pages 2, 5 and 9 are modified through the
 * mapping; pages 8-11 are also mapped read-only at file offset 8 pages.
 * After restore:
 * - the mappings are file mappings of "data" at the same offsets and perms,
 * - modified pages keep their new content, the others show the file,
 * - the file itself is unchanged,
 * - the mapping is still private (a write through it does not reach the
 *   file) and still backed by the file: a page never written through the
 *   mapping shows a later pwrite() to the file (Linux semantics for pages
 *   not yet copied-on-write). The file is put back as it was afterwards.
 * With an argument N, the file also has N MiB of hole after its pages.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096ul
#define NPAGES 16
#define RO_OFF 8
#define RO_PAGES 4

static unsigned char file_page[NPAGES][PAGE];
static unsigned char new_page[NPAGES][PAGE];

static int modified(int pg)
{
	return pg == 2 || pg == 5 || pg == 9;
}

static void check_map(const char *what, void *p, const char *perms, unsigned long long off,
		      const char *path)
{
	struct test_map m;
	if (test_find_map((uintptr_t)p, &m)) {
		test_failf("%s: no mapping at %p", what, p);
		return;
	}
	expect(m.start == (uintptr_t)p, "%s: mapping starts at %lx, not %p", what,
	       (unsigned long)m.start, p);
	expect(!strcmp(m.perms, perms), "%s: perms %s, want %s", what, m.perms, perms);
	expect(m.offset == off, "%s: file offset %llx, want %llx", what, m.offset, off);
	expect(!strcmp(m.path, path), "%s: maps path '%s', want '%s'", what, m.path, path);
}

int main(int argc, char **argv)
{
	const char *dir = getenv("CKPT_TEST_DIR");
	char path[4096];
	if (!dir || !getcwd(path, sizeof(path) - 8))
		fail("no CKPT_TEST_DIR or getcwd");
	strcat(path, "/data");

	int fd = open("data", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("open data: %m");
	for (int pg = 0; pg < NPAGES; pg++) {
		test_fill_random(file_page[pg], PAGE, 0xf11e0000u + (unsigned)pg);
		test_fill_random(new_page[pg], PAGE, 0x0e110000u + (unsigned)pg);
	}
	if (pwrite(fd, file_page, sizeof(file_page), 0) != (ssize_t)sizeof(file_page))
		fail("write data: %m");
	/* argv[1]: MiB of hole after the pages (a file too big for its crc) */
	if (argc > 1 && ftruncate(fd, (off_t)sizeof(file_page) + (atol(argv[1]) << 20)) < 0)
		fail("extend data: %m");
	unsigned char *m = test_mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE,
				     fd, 0);
	unsigned char *ro = test_mmap(NULL, RO_PAGES * PAGE, PROT_READ, MAP_PRIVATE, fd,
				      RO_OFF * PAGE);
	close(fd);
	volatile unsigned char sink = 0;
	for (int pg = 0; pg < NPAGES; pg++) {
		if (modified(pg))
			memcpy(m + pg * PAGE, new_page[pg], PAGE);
		else if (pg % 2)
			sink ^= m[pg * PAGE]; /* some pages read, some never touched */
	}
	sink ^= ro[PAGE];
	(void)sink;

	test_ready();
	test_wait();

	check_map("rw mapping", m, "rw-p", 0, path);
	check_map("ro mapping", ro, "r--p", RO_OFF * PAGE, path);
	for (int pg = 0; pg < NPAGES; pg++) {
		const unsigned char *want = modified(pg) ? new_page[pg] : file_page[pg];
		expect(!memcmp(m + pg * PAGE, want, PAGE), "rw mapping page %d: %s content", pg,
		       modified(pg) ? "lost the modified" : "wrong file");
	}
	for (int pg = 0; pg < RO_PAGES; pg++)
		expect(!memcmp(ro + pg * PAGE, file_page[RO_OFF + pg], PAGE),
		       "ro mapping page %d: wrong file content", pg);

	fd = open("data", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fail("reopen data: %m");
	static unsigned char now[NPAGES][PAGE];
	if (pread(fd, now, sizeof(now), 0) != (ssize_t)sizeof(now))
		fail("read data: %m");
	for (int pg = 0; pg < NPAGES; pg++)
		expect(!memcmp(now[pg], file_page[pg], PAGE), "file page %d changed", pg);

	/* still private: a write through the mapping stays out of the file */
	memset(m + 3 * PAGE, 0xee, PAGE);
	if (pread(fd, now[3], PAGE, 3 * PAGE) != (ssize_t)PAGE)
		fail("read data: %m");
	expect(!memcmp(now[3], file_page[3], PAGE), "write through MAP_PRIVATE reached the file");

	/* still file-backed: untouched pages follow the file */
	unsigned char marker[PAGE];
	memset(marker, 0x5a, PAGE);
	if (pwrite(fd, marker, PAGE, 12 * PAGE) != (ssize_t)PAGE ||
	    pwrite(fd, marker, PAGE, (RO_OFF + 2) * PAGE) != (ssize_t)PAGE)
		fail("pwrite data: %m");
	expect(!memcmp(m + 12 * PAGE, marker, PAGE),
	       "rw mapping page 12 does not follow the file (copied instead of mapped?)");
	expect(!memcmp(ro + 2 * PAGE, marker, PAGE),
	       "ro mapping page 2 does not follow the file (copied instead of mapped?)");
	if (pwrite(fd, file_page, sizeof(file_page), 0) != (ssize_t)sizeof(file_page))
		fail("restore data: %m");
	close(fd);
	pass();
}
