/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What tasks share: a child made with CLONE_FILES | CLONE_FS shares the
 * root's fd table and cwd; a forked child shares an open file (one offset)
 * with the root. After restart: an fd the root opens is seen by the
 * CLONE_FILES child, a chdir() of that child moves the root too, and the
 * forked child's write moves the root's offset of the shared file.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int go[2], back[2], shared_fd;
static char stack[256 * 1024] __attribute__((aligned(16)));

static void wait_go(void)
{
	char c;
	while (read(go[0], &c, 1) < 0 && errno == EINTR)
		;
}

/* CLONE_FILES | CLONE_FS child: reports fd 40's validity, then chdirs */
static int sharer(void *arg)
{
	(void)arg;
	wait_go();
	char ok = fcntl(40, F_GETFD) >= 0 ? 'y' : 'n';
	if (chdir("sub") < 0)
		ok = 'c';
	return write(back[1], &ok, 1) == 1 ? 0 : 1;
}

int main(void)
{
	if (pipe(go) || pipe(back) || mkdir("sub", 0700))
		fail("setup: %m");
	shared_fd = open("shared", O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (shared_fd < 0)
		fail("open: %m");
	pid_t c1 = clone(sharer, stack + sizeof(stack), CLONE_FILES | CLONE_FS | SIGCHLD, NULL);
	if (c1 < 0)
		fail("clone: %m");
	pid_t c2 = fork();
	if (c2 == 0) {
		wait_go();
		_exit(write(shared_fd, "0123456789", 10) == 10 ? 0 : 1);
	}
	char before[4096];
	if (!getcwd(before, sizeof(before)))
		fail("getcwd: %m");

	test_ready();
	test_wait();

	int fd = open("/dev/null", O_RDONLY);
	if (fd < 0 || dup2(fd, 40) != 40)
		fail("dup2: %m");
	close(fd);
	if (write(go[1], "gg", 2) != 2)
		fail("write: %m");
	char ok = 0;
	expect(read(back[0], &ok, 1) == 1 && ok == 'y',
	       "the CLONE_FILES child does not see the root's new fd (%c)", ok);
	int st;
	expect(waitpid(c1, &st, 0) == c1 && st == 0, "sharer: status %#x", st);
	expect(waitpid(c2, &st, 0) == c2 && st == 0, "writer: status %#x", st);
	char now[4096];
	expect(getcwd(now, sizeof(now)) && !strcmp(now + strlen(now) - 4, "/sub"),
	       "the CLONE_FS child's chdir did not move the root (cwd %s)", now);
	expect(lseek(shared_fd, 0, SEEK_CUR) == 10, "the shared file's offset is %lld, want 10",
	       (long long)lseek(shared_fd, 0, SEEK_CUR));
	pass();
}
