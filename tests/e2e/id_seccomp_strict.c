/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * seccomp strict mode: the root's child enters it (SECCOMP_MODE_STRICT)
 * and waits in read() on a pipe. After restart the child reads the byte
 * the root sends, writes it back (read and write are allowed), then makes
 * a system call strict mode forbids and must die by SIGKILL: it is still
 * in strict mode.
 */
#include "lib.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int go[2], back[2];
	if (pipe(go) || pipe(back))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		char b = 0;
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL))
			_exit(1);
		if (write(back[1], "s", 1) != 1)
			syscall(SYS_exit, 2);
		while (syscall(SYS_read, go[0], &b, 1) != 1)
			;
		syscall(SYS_write, back[1], &b, 1);
		syscall(SYS_getpid); /* forbidden: SIGKILL */
		syscall(SYS_exit, 3);
	}
	char s = 0;
	if (read(back[0], &s, 1) != 1 || s != 's')
		fail("the child did not enter strict mode");
	test_ready();
	test_wait();

	if (write(go[1], "x", 1) != 1)
		fail("write: %m");
	char b = 0;
	expect(read(back[0], &b, 1) == 1 && b == 'x', "the child did not echo the byte (%c)", b);
	int st;
	expect(waitpid(c, &st, 0) == c && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	       "the child's forbidden call did not kill it: status %#x (no longer strict)", st);
	pass();
}
