/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A deleted file larger than 1 GiB, sparse: "big" is 3 GiB + 100 bytes
 * with 1 MiB of data at 0, 1 MiB at 1.5 GiB and 4 KiB at its end, held
 * by fd 5 (O_RDWR, offset 2 GiB), then unlinked. After restore: the link
 * reads "DIR/big (deleted)", the size, offset and data are the same, and
 * the holes are holes still (SEEK_DATA from just past the first extent
 * finds the second; the file takes no more blocks than its data).
 */
#define _FILE_OFFSET_BITS 64
#include "lib.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define SIZE (3 * GiB + 100)
#define MID (3 * GiB / 2)
#define TAIL (SIZE - 4096)

static char a[MiB], b[MiB], c[4096], got[MiB];

static void check_at(uint64_t off, const char *want, size_t len, const char *what)
{
	ssize_t n = pread(5, got, len, (off_t)off);
	expect(n == (ssize_t)len && !memcmp(got, want, len), "%s at %llu: %zd bytes, %s", what,
	       (unsigned long long)off, n, n == (ssize_t)len ? "different" : "short");
}

int main(void)
{
	char dir[PATH_MAX], path[64], link[PATH_MAX], want[PATH_MAX + 32];
	if (!getcwd(dir, sizeof(dir)))
		fail("getcwd: %m");
	test_fill_random(a, sizeof(a), 31);
	test_fill_random(b, sizeof(b), 32);
	test_fill_random(c, sizeof(c), 33);
	int fd = open("big", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)SIZE) || pwrite(fd, a, sizeof(a), 0) != sizeof(a) ||
	    pwrite(fd, b, sizeof(b), (off_t)MID) != sizeof(b) ||
	    pwrite(fd, c, sizeof(c), (off_t)TAIL) != sizeof(c))
		fail("big: %m");
	test_move_fd(fd, 5);
	if (unlink("big") || lseek(5, (off_t)(2 * GiB), SEEK_SET) != (off_t)(2 * GiB))
		fail("unlink: %m");

	test_ready();
	test_wait();

	snprintf(path, sizeof(path), "/proc/self/fd/5");
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	link[n < 0 ? 0 : n] = '\0';
	snprintf(want, sizeof(want), "%s/big (deleted)", dir);
	expect(!strcmp(link, want), "fd 5 links to '%s', want '%s'", link, want);
	struct stat st;
	expect(!fstat(5, &st) && (uint64_t)st.st_size == SIZE && st.st_nlink == 0,
	       "size %lld nlink %lu, want %llu and 0", (long long)st.st_size,
	       (unsigned long)st.st_nlink, (unsigned long long)SIZE);
	expect(lseek(5, 0, SEEK_CUR) == (off_t)(2 * GiB), "offset %lld, want 2 GiB",
	       (long long)lseek(5, 0, SEEK_CUR));
	check_at(0, a, sizeof(a), "the first MiB");
	check_at(MID, b, sizeof(b), "the MiB at 1.5 GiB");
	check_at(TAIL, c, sizeof(c), "the last 4 KiB");
	static const char zero[4096];
	check_at(GiB, zero, sizeof(zero), "a hole at 1 GiB");
	off_t d = lseek(5, (off_t)(MiB + 4096), SEEK_DATA);
	expect(d >= (off_t)(MID - MiB) && d <= (off_t)MID,
	       "SEEK_DATA after the first MiB finds %lld, want the MiB at 1.5 GiB", (long long)d);
	/* 2 MiB + 4 KiB of data; a file filled up would take 3 GiB */
	expect((uint64_t)st.st_blocks * 512 < 64 * MiB, "it takes %llu bytes of disk: holes filled",
	       (unsigned long long)st.st_blocks * 512);
	pass();
}
