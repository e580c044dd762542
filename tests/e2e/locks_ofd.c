/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Open file description locks on "f": open file o1 write-locks bytes
 * 0-9, open file o2 (the same process) read-locks 100 to EOF; a child
 * shares o1 (fork). After restart, through a third open file, F_OFD_GETLK
 * reports o1's write lock (pid -1, 0-9) and o2's read lock (100, to EOF)
 * and nothing between; F_GETLK (a POSIX query) sees them too; o1 cannot
 * write-lock 100-109 (o2's lock: OFD locks of one process conflict), nor
 * can the child through the o1 it shares, while o1 can change its own
 * lock on 0-9.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#endif

static int go[2], back[2];

static int lock(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	return fcntl(fd, cmd, &fl);
}

static struct flock query(int fd, int cmd, short type, off_t start)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = 1};
	if (fcntl(fd, cmd, &fl) < 0)
		fl.l_type = -1;
	return fl;
}

static void wait_byte(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

int main(void)
{
	if (pipe(go) || pipe(back))
		fail("pipe: %m");
	int o1 = open("f", O_RDWR | O_CREAT, 0600), o2 = open("f", O_RDWR);
	if (o1 < 0 || o2 < 0 || lock(o1, F_OFD_SETLK, F_WRLCK, 0, 10) ||
	    lock(o2, F_OFD_SETLK, F_RDLCK, 100, 0))
		fail("setup: %m");
	pid_t c = fork();
	if (c == 0) {
		close(o2);
		wait_byte(go[0]);
		int blocked = lock(o1, F_OFD_SETLK, F_WRLCK, 100, 10) < 0 && errno == EAGAIN;
		_exit(blocked ? 0 : 1);
	}

	test_ready();
	test_wait();

	int o3 = open("f", O_RDWR);
	if (o3 < 0)
		fail("open: %m");
	struct flock w = query(o3, F_OFD_GETLK, F_WRLCK, 5);
	expect(w.l_type == F_WRLCK && w.l_pid == -1 && w.l_start == 0 && w.l_len == 10,
	       "F_OFD_GETLK at 5: type %d pid %d %lld+%lld, want o1's write lock 0+10", w.l_type,
	       w.l_pid, (long long)w.l_start, (long long)w.l_len);
	struct flock r = query(o3, F_OFD_GETLK, F_WRLCK, 5000);
	expect(r.l_type == F_RDLCK && r.l_pid == -1 && r.l_start == 100 && r.l_len == 0,
	       "F_OFD_GETLK at 5000: type %d pid %d %lld+%lld, want o2's read lock 100+0", r.l_type,
	       r.l_pid, (long long)r.l_start, (long long)r.l_len);
	expect(query(o3, F_OFD_GETLK, F_WRLCK, 50).l_type == F_UNLCK, "a lock on byte 50");
	expect(query(o3, F_OFD_GETLK, F_RDLCK, 5000).l_type == F_UNLCK,
	       "a read lock at 5000 is refused");
	struct flock p = query(o3, F_GETLK, F_WRLCK, 5);
	expect(p.l_type == F_WRLCK && p.l_pid == -1, "F_GETLK at 5: type %d pid %d", p.l_type,
	       p.l_pid);
	errno = 0;
	expect(lock(o1, F_OFD_SETLK, F_WRLCK, 100, 10) < 0 && errno == EAGAIN,
	       "o1 write-locked bytes o2 holds a read lock on (%m)");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && st == 0,
	       "the child, through o1, was not stopped by o2's lock (status %#x)", st);
	expect(lock(o1, F_OFD_SETLK, F_RDLCK, 0, 10) == 0, "o1 cannot change its own lock: %m");
	expect(query(o3, F_OFD_GETLK, F_RDLCK, 5).l_type == F_UNLCK,
	       "o1's lock is still a write lock");
	pass();
}
