/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfds held only by mappings. "shared map" (3 pages) is mapped
 * MAP_SHARED twice -- all of it at p, pages 1-2 at p2 -- and its fd
 * closed; a byte is written through p. "private map" (2 pages) is mapped
 * MAP_PRIVATE at q, page 0 written (a private copy), and its fd kept.
 * After restore: both mappings of "shared map" still show it and share
 * it, a write through p after restart lands in the object (read back
 * through /proc/self/map_files), q keeps its private page and still maps
 * the object for the other one (a write to the memfd shows through it),
 * and the private write never reached the memfd.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PG 4096ul

static void check_map(const char *what, void *addr, const char *perms, const char *path)
{
	struct test_map m;
	if (test_find_map((uintptr_t)addr, &m)) {
		test_failf("%s: no mapping at %p", what, addr);
		return;
	}
	expect(!strcmp(m.perms, perms), "%s: perms %s, want %s", what, m.perms, perms);
	expect(!strcmp(m.path, path), "%s: maps '%s', want '%s'", what, m.path, path);
}

int main(void)
{
	static char pat[3 * PG], bpat[2 * PG];
	test_fill_random(pat, sizeof(pat), 11);
	test_fill_random(bpat, sizeof(bpat), 12);
	int a = memfd_create("shared map", MFD_CLOEXEC);
	int b = memfd_create("private map", 0);
	if (a < 0 || b < 0 || write(a, pat, sizeof(pat)) != sizeof(pat) ||
	    write(b, bpat, sizeof(bpat)) != sizeof(bpat))
		fail("memfd: %m");
	char *p = test_mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, a, 0);
	char *p2 = test_mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, a, PG);
	char *q = test_mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, b, 0);
	close(a);
	test_move_fd(b, 9);
	p[0] = pat[0] = 'A';
	memset(q, 'P', PG);
	volatile char touch = q[PG]; /* read: the file page, no copy */
	(void)touch;

	test_ready();
	test_wait();

	check_map("p", p, "rw-s", "/memfd:shared map (deleted)");
	check_map("p2", p2, "rw-s", "/memfd:shared map (deleted)");
	check_map("q", q, "rw-p", "/memfd:private map (deleted)");
	expect(!memcmp(p, pat, sizeof(pat)), "the shared mapping's contents differ");
	expect(!memcmp(p2, pat + PG, 2 * PG), "the second shared mapping's contents differ");
	p[PG + 10] = 'Z';
	expect(p2[10] == 'Z', "the two shared mappings no longer share the memfd");
	char path[96], got[2] = { 0 };
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)p,
		 (unsigned long)p + 3 * PG);
	int fd = open(path, O_RDONLY);
	struct stat st;
	expect(fd >= 0, "open %s: %m", path);
	expect(fstat(fd, &st) == 0 && st.st_size == 3 * PG, "memfd size %lld, want %lu",
	       (long long)st.st_size, 3 * PG);
	expect(pread(fd, got, 1, PG + 10) == 1 && got[0] == 'Z',
	       "a write through the mapping after restart is not in the memfd");
	expect(pread(fd, got, 1, 0) == 1 && got[0] == 'A', "the write before the checkpoint is lost");
	close(fd);

	char page[PG];
	memset(page, 'P', PG);
	expect(!memcmp(q, page, PG), "the private mapping lost its private page");
	expect(!memcmp(q + PG, bpat + PG, PG), "the private mapping's file page differs");
	expect(pread(9, page, PG, 0) == (ssize_t)PG && !memcmp(page, bpat, PG),
	       "the private write reached the memfd");
	expect(pwrite(9, "W", 1, PG) == 1 && q[PG] == 'W',
	       "the private mapping no longer maps the memfd (a write to it is not seen)");
	q[PG + 1] = 'V';
	expect(pread(9, got, 1, PG + 1) == 1 && got[0] == bpat[PG + 1],
	       "a private write after restart reached the memfd");
	pass();
}
