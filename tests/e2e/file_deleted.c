/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Files deleted while open. "victim" (mode 0640, 100 KiB of data, a hole,
 * 4 KiB at 1 MiB, an odd size) is held by fd 5 (O_RDWR, offset 4242) and
 * fd 6 (a second open file, O_RDONLY | O_NOFOLLOW, as SQLite opens its
 * journal), mapped MAP_SHARED (2 pages at m)
 * and MAP_PRIVATE (page 3 at w, written), then unlinked. "reused" is
 * deleted while fd 7 holds it, and a new file takes its name. After
 * restore: the links read "DIR/victim (deleted)", size, mode, nlink 0,
 * contents, offsets and access; the mapping still maps the file (writes go
 * both ways), the private page is kept; fd 7 is still deleted with its
 * contents, the new "reused" is untouched; nothing is left in the
 * directory.
 */
#include "lib.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PG 4096ul
#define FAR (1ul << 20)
#define SIZE (FAR + PG + 100)

static void check_link(int fd, const char *dir, const char *name)
{
	char path[64], link[PATH_MAX], want[PATH_MAX + 64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	link[n < 0 ? 0 : n] = '\0';
	snprintf(want, sizeof(want), "%s/%s (deleted)", dir, name);
	if (name)
		expect(!strcmp(link, want), "fd %d links to '%s', want '%s'", fd, link, want);
	else
		expect(!strncmp(link, dir, strlen(dir)) && strstr(link, " (deleted)"),
		       "fd %d links to '%s', want a deleted file in %s", fd, link, dir);
}

int main(void)
{
	static char a[100 << 10], b[PG], c[PG];
	char dir[PATH_MAX];
	if (!getcwd(dir, sizeof(dir)))
		fail("getcwd: %m");
	test_fill_random(a, sizeof(a), 21);
	test_fill_random(b, sizeof(b), 22);
	int fd = open("victim", O_RDWR | O_CREAT | O_EXCL, 0640);
	if (fd < 0 || fchmod(fd, 0640) || pwrite(fd, a, sizeof(a), 0) != sizeof(a) ||
	    pwrite(fd, b, sizeof(b), FAR) != sizeof(b) || ftruncate(fd, SIZE))
		fail("victim: %m");
	test_move_fd(fd, 5);
	int ro = open("victim", O_RDONLY | O_NOFOLLOW);
	if (ro < 0)
		fail("open: %m");
	test_move_fd(ro, 6);
	lseek(5, 4242, SEEK_SET);
	char *m = test_mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, 5, 0);
	char *w = test_mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, 5, 3 * PG);
	memset(w, 'P', PG);
	m[1] = a[1] = 'M';
	int r = open("reused", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (r < 0 || write(r, "old contents", 12) != 12)
		fail("reused: %m");
	test_move_fd(r, 7);
	if (unlink("victim") || unlink("reused"))
		fail("unlink: %m");
	int n = open("reused", O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (n < 0 || write(n, "new file", 8) != 8 || close(n))
		fail("new reused: %m");

	test_ready();
	test_wait();

	check_link(5, dir, "victim");
	check_link(6, dir, "victim");
	check_link(7, dir, NULL);
	struct stat st;
	expect(fstat(5, &st) == 0, "fstat: %m");
	expect(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640, "mode %o, want 0640",
	       st.st_mode);
	expect(st.st_size == (off_t)SIZE, "size %lld, want %lu", (long long)st.st_size, SIZE);
	expect(st.st_nlink == 0, "nlink %lu, want 0", (unsigned long)st.st_nlink);
	static char got[100 << 10];
	expect(pread(6, got, sizeof(a), 0) == sizeof(a) && !memcmp(got, a, sizeof(a)),
	       "the first 100 KiB differ");
	expect(pread(6, got, PG, FAR) == (ssize_t)PG && !memcmp(got, b, PG),
	       "the data at 1 MiB differs");
	memset(c, 0, sizeof(c));
	expect(pread(6, got, PG, FAR - PG) == (ssize_t)PG && !memcmp(got, c, PG),
	       "the hole does not read as zeros");
	expect(pread(6, got, 200, FAR + PG) == 100, "the tail is not 100 bytes");
	expect(lseek(5, 0, SEEK_CUR) == 4242 && lseek(6, 0, SEEK_CUR) == 0,
	       "offsets %lld and %lld, want 4242 and 0", (long long)lseek(5, 0, SEEK_CUR),
	       (long long)lseek(6, 0, SEEK_CUR));
	expect((fcntl(6, F_GETFL) & O_ACCMODE) == O_RDONLY, "fd 6 is not O_RDONLY");
	expect(fcntl(6, F_GETFL) & O_NOFOLLOW, "fd 6 lost O_NOFOLLOW");
	expect(m[1] == 'M' && !memcmp(m + 2, a + 2, PG - 2), "the shared mapping's contents differ");
	m[PG + 5] = 'S';
	expect(pread(6, got, 1, PG + 5) == 1 && got[0] == 'S',
	       "a write through the mapping does not reach the file");
	expect(pwrite(5, "F", 1, 7) == 1 && m[7] == 'F', "a write to the file is not in the mapping");
	memset(c, 'P', PG);
	expect(!memcmp(w, c, PG), "the private mapping lost its private page");
	expect(pread(7, got, 12, 0) == 12 && !memcmp(got, "old contents", 12),
	       "the deleted 'reused' lost its contents");
	int nf = open("reused", O_RDONLY);
	expect(nf >= 0 && read(nf, got, sizeof(got)) == 8 && !memcmp(got, "new file", 8),
	       "the new 'reused' was changed");
	DIR *d = opendir(".");
	for (struct dirent *de; d && (de = readdir(d));)
		expect(strcmp(de->d_name, "victim") && strncmp(de->d_name, ".ckpt", 5),
		       "'%s' was left in the directory", de->d_name);
	if (d)
		closedir(d);
	pass();
}
