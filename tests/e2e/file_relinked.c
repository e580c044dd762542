/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A file deleted under one name but still linked under another in the same
 * directory, the way glibc's sem_open() makes a semaphore (a temporary
 * /dev/shm/sem.XXXXXX, linked to sem.NAME, then unlinked): its mapping
 * and fd read "DIR/tmp.XXXXXX (deleted)". "final" here (8 KiB, fd 5 O_RDWR
 * at offset 1234, mapped MAP_SHARED at m), and a named POSIX semaphore
 * with the value 2. After restore: fd 5 and the mapping are the file
 * "final" (the same inode: a write through the mapping is read through
 * the name, and back), the offset is kept; the semaphore still counts 2,
 * and sem_open() of its name gives the same semaphore.
 */
#include "lib.h"

#include <fcntl.h>
#include <limits.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PG 4096ul

int main(void)
{
	static char a[2 * PG], got[2 * PG];
	char tmp[] = "tmp.XXXXXX", sname[64];
	test_fill_random(a, sizeof(a), 31);
	int fd = mkstemp(tmp);
	if (fd < 0 || pwrite(fd, a, sizeof(a), 0) != sizeof(a))
		fail("%s: %m", tmp);
	test_move_fd(fd, 5);
	lseek(5, 1234, SEEK_SET);
	char *m = test_mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, 5, 0);
	if (link(tmp, "final") || unlink(tmp))
		fail("link, unlink: %m");
	m[7] = a[7] = 'M';
	snprintf(sname, sizeof(sname), "/ckpt-e2e-relinked-%d", (int)getpid());
	sem_t *s = sem_open(sname, O_CREAT | O_EXCL, 0600, 3);
	if (s == SEM_FAILED || sem_wait(s))
		fail("sem_open %s: %m", sname);

	test_ready();
	test_wait();

	struct stat fs, ns;
	if (fstat(5, &fs) || stat("final", &ns))
		fail("stat: %m");
	expect(fs.st_ino == ns.st_ino && fs.st_dev == ns.st_dev, "fd 5 is not the file 'final'");
	expect(lseek(5, 0, SEEK_CUR) == 1234, "fd 5 at %lld, want 1234",
	       (long long)lseek(5, 0, SEEK_CUR));
	expect(!memcmp(m, a, sizeof(a)), "the mapping's contents differ");
	int f = open("final", O_RDWR);
	if (f < 0 || pread(f, got, sizeof(got), 0) != sizeof(got))
		fail("final: %m");
	expect(!memcmp(got, a, sizeof(a)), "the contents of 'final' differ");
	m[PG + 3] = 'W';
	if (pread(f, got, 8, PG) != 8 || got[3] != 'W')
		expect(0, "a write through the mapping is not in 'final'");
	if (pwrite(f, "R", 1, 9) != 1 || m[9] != 'R')
		expect(0, "a write to 'final' is not in the mapping");
	close(f);

	int v = -1;
	expect(!sem_getvalue(s, &v) && v == 2, "the semaphore counts %d, want 2", v);
	sem_t *s2 = sem_open(sname, 0);
	expect(s2 != SEM_FAILED, "sem_open %s again: %m", sname);
	if (s2 != SEM_FAILED) {
		expect(!sem_post(s2) && !sem_getvalue(s, &v) && v == 3,
		       "a post through the name is not seen: %d", v);
		sem_close(s2);
	}
	sem_unlink(sname);
	pass();
}
