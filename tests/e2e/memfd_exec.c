/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A memfd holding a program (a copy of /bin/true), written, then opened
 * again read-only through /proc/self/fd and its writable fd closed, as a
 * program does before it runs one (fexecve): after restart a child runs
 * it with execveat(AT_EMPTY_PATH) and exits 0 (not ETXTBSY: no writer is
 * left on the memfd).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	int src = open("/bin/true", O_RDONLY);
	int m = memfd_create("prog", MFD_CLOEXEC);
	if (src < 0 || m < 0)
		fail("open/memfd_create: %m");
	char buf[65536];
	ssize_t n;
	while ((n = read(src, buf, sizeof(buf))) > 0)
		if (write(m, buf, (size_t)n) != n)
			fail("write: %m");
	close(src);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", m);
	int ro = open(path, O_RDONLY | O_CLOEXEC);
	if (ro < 0)
		fail("reopen: %m");
	close(m);
	test_move_fd(ro, 10);

	test_ready();
	test_wait();

	pid_t c = fork();
	if (c == 0) {
		char *argv[] = { "true", NULL }, *envp[] = { NULL };
		syscall(SYS_execveat, 10, "", argv, envp, AT_EMPTY_PATH);
		_exit(100 + (errno & 0x1f));
	}
	int st = 0;
	waitpid(c, &st, 0);
	expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "running the memfd: exit %d (100 + errno)",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	pass();
}
