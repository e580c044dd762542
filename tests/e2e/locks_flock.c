/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * flock() locks. The parent holds LOCK_EX on "a" and LOCK_SH on "b"; its
 * child holds LOCK_SH on "b" through an open file of its own. After
 * restart the child, through new open files, gets EWOULDBLOCK for
 * LOCK_SH | LOCK_NB on "a" and LOCK_EX | LOCK_NB on "b"; once the parent
 * has unlocked both, it gets LOCK_EX on "a", still not on "b" (its own
 * shared lock is in the way), and gets it once it drops that one.
 * /proc/locks shows the parent's lock on "a" with the parent's pid.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static int go[2], back[2];

static void wait_byte(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static bool would_block(int fd, int op)
{
	return flock(fd, op | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

static void __attribute__((noreturn)) child(void)
{
	int bad = 0, b_sh = open("b", O_RDWR);
	if (b_sh < 0 || flock(b_sh, LOCK_SH) < 0)
		_exit(100);
	if (write(back[1], "r", 1) != 1)
		_exit(101);
	wait_byte(go[0]); /* after the restart */
	int a2 = open("a", O_RDWR), b2 = open("b", O_RDWR);
	if (a2 < 0 || b2 < 0)
		_exit(102);
	bad |= !would_block(a2, LOCK_SH) << 0;
	bad |= !would_block(b2, LOCK_EX) << 1;
	if (write(back[1], "s", 1) != 1)
		_exit(103);
	wait_byte(go[0]); /* the parent has unlocked */
	bad |= (flock(a2, LOCK_EX | LOCK_NB) < 0) << 2;
	bad |= !would_block(b2, LOCK_EX) << 3;
	flock(b_sh, LOCK_UN);
	bad |= (flock(b2, LOCK_EX | LOCK_NB) < 0) << 4;
	_exit(bad);
}

/* Is there a line "FLOCK ADVISORY WRITE pid dev" in /proc/locks? */
static bool in_proc_locks(int fd, pid_t pid)
{
	static char buf[1 << 16];
	char want[128];
	struct stat st;
	if (fstat(fd, &st) < 0 || test_read_file("/proc/locks", buf, sizeof(buf)) < 0)
		return false;
	snprintf(want, sizeof(want), "WRITE %d %02x:%02x:%llu ", pid, major(st.st_dev),
		 minor(st.st_dev), (unsigned long long)st.st_ino);
	for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (strstr(l, "FLOCK") && strstr(l, want) && strstr(l, want) < strchr(l, '\n'))
			return true;
	return false;
}

int main(void)
{
	if (pipe(go) || pipe(back))
		fail("pipe: %m");
	int a = open("a", O_RDWR | O_CREAT, 0600), b = open("b", O_RDWR | O_CREAT, 0600);
	if (a < 0 || b < 0 || flock(a, LOCK_EX) < 0 || flock(b, LOCK_SH) < 0)
		fail("setup: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0)
		child();
	wait_byte(back[0]);

	test_ready();
	test_wait();

	expect(in_proc_locks(a, getpid()), "/proc/locks lacks the flock of \"a\" by pid %d",
	       getpid());
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	wait_byte(back[0]);
	if (flock(a, LOCK_UN) < 0 || flock(b, LOCK_UN) < 0)
		fail("unlock: %m");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st = 0;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st))
		fail("child: status %#x", st);
	int bad = WEXITSTATUS(st);
	expect(!(bad & 1),
	       "the child got a shared lock on \"a\", which the parent holds exclusively");
	expect(!(bad & 2), "the child got an exclusive lock on \"b\", which two hold shared");
	expect(!(bad & 4), "the child could not lock \"a\" once the parent unlocked it");
	expect(!(bad & 8), "the child's own shared lock on \"b\" is gone");
	expect(!(bad & 16), "the child could not lock \"b\" once both shared locks were gone");
	expect(bad < 32, "the child failed (%d)", bad);
	pass();
}
