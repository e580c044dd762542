/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Regular files at fd numbers with holes: 3 (O_RDWR), 7 (O_WRONLY|O_APPEND,
 * close-on-exec), 100 (O_RDONLY|O_NONBLOCK|O_NOATIME), each at its own
 * offset. After restore exactly the same fds are open (0, 1, 2, 3, 7, 100),
 * each on the same file (path, dev, inode) with the same offset, status
 * flags (F_GETFL) and FD_CLOEXEC (F_GETFD); a read on 100 returns the
 * data at its offset; a write on 3 lands in the file at its offset and a
 * write on 7 at the end of the file. The files are put back afterwards.
 */
#include "lib.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fdinfo {
	int fd;
	const char *name;
	int oflags, cloexec;
	off_t size, off;
	off_t cur;
	int fl, fdfl;
	dev_t dev;
	ino_t ino;
	char path[4096];
};

static struct fdinfo fds[] = {
	{3, "a", O_RDWR, 0, 10000, 4321},
	{7, "b", O_WRONLY | O_APPEND, 1, 300, 0},
	{100, "c", O_RDONLY | O_NONBLOCK | O_NOATIME, 0, 50000, 20000},
};
#define NFDS 3

static unsigned char content[3][50000];

static void snap(struct fdinfo *f)
{
	struct stat st;
	f->cur = lseek(f->fd, 0, SEEK_CUR);
	f->fl = fcntl(f->fd, F_GETFL);
	f->fdfl = fcntl(f->fd, F_GETFD);
	if (fstat(f->fd, &st)) {
		f->dev = 0;
		f->ino = 0;
	} else {
		f->dev = st.st_dev;
		f->ino = st.st_ino;
	}
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", f->fd);
	ssize_t n = readlink(link, f->path, sizeof(f->path) - 1);
	f->path[n > 0 ? n : 0] = 0;
}

/* the open fds, as a sorted list */
static int list_fds(int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		fail("opendir /proc/self/fd: %m");
	int n = 0, self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != self && n < max)
			out[n++] = atoi(e->d_name);
	closedir(d);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
			int t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

int main(void)
{
	for (int i = 0; i < NFDS; i++) {
		struct fdinfo *f = &fds[i];
		test_fill_random(content[i], (size_t)f->size, 0xf0 + (unsigned)i);
		int w = open(f->name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (w < 0 || write(w, content[i], (size_t)f->size) != f->size)
			fail("create %s: %m", f->name);
		close(w);
		int fd = open(f->name, f->oflags | (f->cloexec ? O_CLOEXEC : 0));
		if (fd < 0)
			fail("open %s: %m", f->name);
		if (fd != f->fd) {
			if (dup2(fd, f->fd) < 0)
				fail("dup2: %m");
			close(fd);
		}
		if (f->cloexec && fcntl(f->fd, F_SETFD, FD_CLOEXEC))
			fail("F_SETFD: %m");
		if (lseek(f->fd, f->off, SEEK_SET) != f->off)
			fail("lseek: %m");
	}
	if (write(7, "appended!", 9) != 9) /* moves fd 7 to the end: 309 */
		fail("write 7: %m");
	struct fdinfo before[NFDS];
	for (int i = 0; i < NFDS; i++) {
		snap(&fds[i]);
		before[i] = fds[i];
	}
	int open_before[64], nb = list_fds(open_before, 64);

	test_ready();
	test_wait();

	int open_after[64], na = list_fds(open_after, 64);
	expect(na == nb && !memcmp(open_before, open_after, sizeof(int) * (size_t)nb),
	       "%d fds open after restore, %d before (or different numbers)", na, nb);
	for (int fd = 4; fd < 100; fd++)
		if (fd != 7)
			expect(fcntl(fd, F_GETFD) < 0, "fd %d is open", fd);
	for (int i = 0; i < NFDS; i++) {
		struct fdinfo now = fds[i], *b = &before[i];
		snap(&now);
		expect(now.cur == b->cur, "fd %d: offset %lld, was %lld", b->fd, (long long)now.cur,
		       (long long)b->cur);
		expect(now.fl == b->fl, "fd %d: F_GETFL %#o, was %#o", b->fd, now.fl, b->fl);
		expect(now.fdfl == b->fdfl, "fd %d: F_GETFD %#x, was %#x", b->fd, now.fdfl,
		       b->fdfl);
		expect(now.dev == b->dev && now.ino == b->ino, "fd %d: a different file", b->fd);
		expect(!strcmp(now.path, b->path), "fd %d: path '%s', was '%s'", b->fd, now.path,
		       b->path);
	}
	/* read on 100 at its offset */
	unsigned char buf[64];
	if (read(100, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		test_failf("read fd 100: %m");
	else
		expect(!memcmp(buf, content[2] + 20000, sizeof(buf)), "fd 100 read the wrong data");
	/* write on 3 at its offset */
	int chk = open("a", O_RDWR);
	if (chk < 0)
		fail("open a: %m");
	if (write(3, "AFTER", 5) != 5)
		test_failf("write fd 3: %m");
	if (pread(chk, buf, 5, 4321) != 5 || memcmp(buf, "AFTER", 5))
		test_failf("write on fd 3 is not in the file at offset 4321");
	pwrite(chk, content[0] + 4321, 5, 4321);
	close(chk);
	/* write on 7 at the end */
	chk = open("b", O_RDWR);
	if (chk < 0)
		fail("open b: %m");
	lseek(7, 0, SEEK_SET);
	if (write(7, "TAIL", 4) != 4)
		test_failf("write fd 7: %m");
	struct stat st;
	fstat(chk, &st);
	expect(st.st_size == 313, "b is %lld bytes after an O_APPEND write, want 313",
	       (long long)st.st_size);
	if (pread(chk, buf, 4, 309) != 4 || memcmp(buf, "TAIL", 4))
		test_failf("write on fd 7 (O_APPEND) is not at the end of the file");
	if (ftruncate(chk, 309))
		fail("ftruncate: %m");
	close(chk);
	pass();
}
