/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POSIX record locks held by two processes on "f": the parent write-locks
 * bytes 0-99 and unlocks 50-59 again (the kernel splits the lock), and
 * read-locks 200 to EOF; its child read-locks 120-129 and write-locks
 * 150-159. After restart a third process, forked then, asks F_GETLK about
 * each range and is told the owner's pid, the type and the range of the
 * lock in the way, or F_UNLCK where there is none; the parent cannot
 * write-lock the child's 150-159 (EAGAIN) but can read-lock 120-129.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int go[2], back[2];

struct query {
	short type;
	off_t start, len;
	short want_type; /* the lock in the way */
	int who;	 /* 0 parent, 1 child */
	off_t want_start, want_len;
};

static const struct query queries[] = {
    {F_WRLCK, 0, 1, F_WRLCK, 0, 0, 50},	    {F_WRLCK, 50, 10, F_UNLCK, 0, 0, 0},
    {F_WRLCK, 99, 1, F_WRLCK, 0, 60, 40},   {F_WRLCK, 100, 20, F_UNLCK, 0, 0, 0},
    {F_WRLCK, 125, 1, F_RDLCK, 1, 120, 10}, {F_RDLCK, 125, 1, F_UNLCK, 0, 0, 0},
    {F_RDLCK, 155, 1, F_WRLCK, 1, 150, 10}, {F_WRLCK, 1000, 1, F_RDLCK, 0, 200, 0},
    {F_RDLCK, 1000, 1, F_UNLCK, 0, 0, 0},
};
#define NQ (sizeof(queries) / sizeof(queries[0]))

static int lock(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
	return fcntl(fd, cmd, &fl);
}

static void wait_byte(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

/* the third process: F_GETLK for every query, the answers into the pipe */
static void __attribute__((noreturn)) probe(int out)
{
	int fd = open("f", O_RDWR);
	for (size_t i = 0; i < NQ; i++) {
		struct flock fl = {.l_type = queries[i].type,
				   .l_whence = SEEK_SET,
				   .l_start = queries[i].start,
				   .l_len = queries[i].len};
		if (fd < 0 || fcntl(fd, F_GETLK, &fl) < 0)
			_exit(1);
		if (write(out, &fl, sizeof(fl)) != sizeof(fl))
			_exit(2);
	}
	_exit(0);
}

int main(void)
{
	if (pipe(go) || pipe(back))
		fail("pipe: %m");
	int fd = open("f", O_RDWR | O_CREAT, 0600);
	if (fd < 0 || lock(fd, F_SETLK, F_WRLCK, 0, 100) || lock(fd, F_SETLK, F_UNLCK, 50, 10) ||
	    lock(fd, F_SETLK, F_RDLCK, 200, 0))
		fail("setup: %m");
	pid_t c = fork();
	if (c == 0) {
		int cfd = open("f", O_RDWR);
		if (cfd < 0 || lock(cfd, F_SETLK, F_RDLCK, 120, 10) ||
		    lock(cfd, F_SETLK, F_WRLCK, 150, 10) || write(back[1], "r", 1) != 1)
			_exit(1);
		wait_byte(go[0]);
		_exit(0);
	}
	wait_byte(back[0]);

	test_ready();
	test_wait();

	int res[2];
	if (pipe(res) < 0)
		fail("pipe: %m");
	pid_t third = fork();
	if (third == 0)
		probe(res[1]);
	close(res[1]);
	for (size_t i = 0; i < NQ; i++) {
		const struct query *q = &queries[i];
		struct flock got;
		if (read(res[0], &got, sizeof(got)) != sizeof(got))
			fail("the probe did not answer query %zu", i);
		pid_t owner = q->who ? c : getpid();
		if (q->want_type == F_UNLCK)
			expect(got.l_type == F_UNLCK,
			       "query %zu (%lld+%lld): a lock of pid %d is in "
			       "the way",
			       i, (long long)q->start, (long long)q->len, got.l_pid);
		else
			expect(got.l_type == q->want_type && got.l_pid == owner &&
				   got.l_start == q->want_start && got.l_len == q->want_len,
			       "query %zu: type %d pid %d %lld+%lld, want type %d pid %d %lld+%lld",
			       i, got.l_type, got.l_pid, (long long)got.l_start,
			       (long long)got.l_len, q->want_type, owner, (long long)q->want_start,
			       (long long)q->want_len);
	}
	int st;
	expect(waitpid(third, &st, 0) == third && st == 0, "probe: status %#x", st);
	errno = 0;
	expect(lock(fd, F_SETLK, F_WRLCK, 150, 10) < 0 && (errno == EAGAIN || errno == EACCES),
	       "the parent write-locked the child's bytes 150-159 (%m)");
	expect(lock(fd, F_SETLK, F_RDLCK, 120, 10) == 0, "the parent cannot read-lock 120-129: %m");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	expect(waitpid(c, &st, 0) == c && st == 0, "child: status %#x", st);
	pass();
}
