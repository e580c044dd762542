/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memfds held by fds. "ckpt test memfd" (MFD_ALLOW_SEALING) is 64 MiB and
 * sparse: 72 KiB of data at 0, 8 KiB at 40 MiB, holes elsewhere; sealed
 * F_SEAL_SHRINK | F_SEAL_GROW. fd 5 is at offset 12345, fd 6 a dup of it
 * (one open file), fd 7 a second open file of it (O_RDONLY, offset 77).
 * "plain" (no MFD_ALLOW_SEALING: seals F_SEAL_SEAL) is fd 8, O_APPEND.
 * After restore: contents, size and holes, seals (and that they still
 * hold), the fd links "/memfd:NAME (deleted)", offsets and flags, 5 and 6
 * one open file and 7 another. The runner checks that the image stays
 * small (the holes are not saved).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SIZE (64ul << 20)
#define FAR (40ul << 20)
#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW)

static int same_file(int a, int b)
{
	pid_t p = getpid();
	return syscall(SYS_kcmp, p, p, KCMP_FILE, a, b) == 0;
}

static void check_link(int fd, const char *name)
{
	char path[64], link[512], want[512];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	link[n < 0 ? 0 : n] = '\0';
	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	expect(!strcmp(link, want), "fd %d links to '%s', want '%s'", fd, link, want);
}

static uint64_t hash_at(int fd, off_t off, size_t len)
{
	static char buf[80 << 10];
	ssize_t n = pread(fd, buf, len, off);
	return n == (ssize_t)len ? test_hash(buf, len, 1) : 0;
}

int main(void)
{
	static char a[72 << 10], b[8 << 10];
	int fd = memfd_create("ckpt test memfd", MFD_ALLOW_SEALING);
	int plain = memfd_create("plain", 0);
	if (fd < 0 || plain < 0)
		fail("memfd_create: %m");
	test_fill_random(a, sizeof(a), 5);
	test_fill_random(b, sizeof(b), 6);
	if (ftruncate(fd, SIZE) || pwrite(fd, a, sizeof(a), 0) != sizeof(a) ||
	    pwrite(fd, b, sizeof(b), FAR) != sizeof(b) || pwrite(plain, "0123456789", 10, 0) != 10)
		fail("write: %m");
	if (fcntl(fd, F_ADD_SEALS, SEALS) < 0)
		fail("F_ADD_SEALS: %m");
	test_move_fd(fd, 5);
	if (dup2(5, 6) != 6)
		fail("dup2: %m");
	int other = open("/proc/self/fd/5", O_RDONLY);
	if (other < 0)
		fail("reopen: %m");
	test_move_fd(other, 7);
	test_move_fd(plain, 8);
	fcntl(8, F_SETFL, O_APPEND);
	lseek(5, 12345, SEEK_SET);
	lseek(7, 77, SEEK_SET);
	uint64_t ha = test_hash(a, sizeof(a), 1), hb = test_hash(b, sizeof(b), 1);

	test_ready();
	test_wait();

	struct stat st;
	expect(fstat(5, &st) == 0 && st.st_size == (off_t)SIZE, "size %lld, want %lu",
	       (long long)st.st_size, SIZE);
	expect(hash_at(7, 0, sizeof(a)) == ha, "the data at 0 differs");
	expect(hash_at(7, FAR, sizeof(b)) == hb, "the data at 40 MiB differs");
	int probe = open("/proc/self/fd/5", O_RDONLY); /* an offset of its own */
	off_t d = lseek(probe, sizeof(a), SEEK_DATA);
	expect(d == (off_t)FAR, "after the first 72 KiB the next data is at %lld, want %lu (a hole)",
	       (long long)d, FAR);
	close(probe);
	expect(fcntl(5, F_GET_SEALS) == SEALS, "seals %#x, want %#x", fcntl(5, F_GET_SEALS), SEALS);
	expect(fcntl(8, F_GET_SEALS) == F_SEAL_SEAL, "plain memfd seals %#x, want F_SEAL_SEAL",
	       fcntl(8, F_GET_SEALS));
	expect(ftruncate(5, SIZE * 2) < 0 && errno == EPERM, "F_SEAL_GROW no longer holds");
	expect(fcntl(8, F_ADD_SEALS, F_SEAL_WRITE) < 0, "the plain memfd can be sealed");
	check_link(5, "ckpt test memfd");
	check_link(7, "ckpt test memfd");
	check_link(8, "plain");
	expect(lseek(6, 0, SEEK_CUR) == 12345 && lseek(5, 0, SEEK_CUR) == 12345,
	       "offsets of 5 and 6 are %lld and %lld, want 12345", (long long)lseek(5, 0, SEEK_CUR),
	       (long long)lseek(6, 0, SEEK_CUR));
	expect(lseek(7, 0, SEEK_CUR) == 77, "offset of 7 is %lld, want 77",
	       (long long)lseek(7, 0, SEEK_CUR));
	expect(same_file(5, 6) && !same_file(5, 7), "5 and 6 are not one open file, or 7 is too");
	lseek(6, 999, SEEK_SET);
	expect(lseek(5, 0, SEEK_CUR) == 999 && lseek(7, 0, SEEK_CUR) == 77,
	       "lseek on 6 did not move 5, or moved 7");
	expect((fcntl(5, F_GETFL) & O_ACCMODE) == O_RDWR, "fd 5 is not O_RDWR");
	expect((fcntl(7, F_GETFL) & O_ACCMODE) == O_RDONLY, "fd 7 is not O_RDONLY");
	expect(fcntl(8, F_GETFL) & O_APPEND, "fd 8 lost O_APPEND");
	/* the object is one: a write through 5 is read through 7 */
	expect(pwrite(5, "XY", 2, 100) == 2, "write through fd 5: %m");
	char got[2] = { 0 };
	expect(pread(7, got, 2, 100) == 2 && !memcmp(got, "XY", 2), "fd 7 does not see fd 5's write");
	expect(write(8, "ab", 2) == 2 && pread(8, got, 2, 10) == 2 && !memcmp(got, "ab", 2),
	       "append to the plain memfd");
	pass();
}
