/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A task that takes no ptrace stop: the parent vforks, and the child,
 * which borrows its memory, waits for SIGUSR1 instead of calling exec, so
 * the parent sleeps in the kernel (vfork) all along. The runner's
 * checkpoint must fail within the guardian's bound, naming the parent,
 * and leave both running and untraced; then SIGUSR1 to the child ends it,
 * and the parent goes on, reaps it and exits 0. Not the lib.h protocol:
 * the child (another pid) is the one that can answer, so it writes its pid
 * to the file "vforked" and the runner signals it.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t woken;

static void on_usr1(int sig)
{
	(void)sig;
	woken = 1;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &sa, NULL);
	pid_t c = vfork();
	if (c < 0)
		return 2;
	if (c == 0) {
		char buf[32];
		int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
		int fd = open("vforked.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd) < 0 ||
		    rename("vforked.tmp", "vforked") < 0)
			_exit(3);
		while (!woken)
			pause();
		_exit(0);
	}
	int status;
	if (waitpid(c, &status, 0) != c || !WIFEXITED(status) || WEXITSTATUS(status))
		return 4;
	return 0;
}
