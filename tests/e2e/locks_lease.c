/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * File leases (F_SETLEASE) across checkpoint and restart: a read lease on
 * "r" (open read-only at fd 5) and a write lease on "w" (open for writing
 * at fd 6, no other open of it), whose break signal is SIGRTMIN+1
 * (F_SETSIG) sent to this process (F_SETOWN). After the restart F_GETLEASE
 * reports both, and each lease still works: a child's non-blocking open of
 * "w" for reading and of "r" for writing each fail with EWOULDBLOCK and
 * start a break, which this process hears as SIGRTMIN+1 with si_fd naming
 * the fd; it then gives both leases up.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static int take(const char *path, int flags, int at, int lease)
{
	int fd = open(path, flags | O_CREAT, 0600);
	if (fd < 0 || dup2(fd, at) < 0)
		fail("open %s: %m", path);
	close(fd);
	if (fcntl(at, F_SETSIG, SIGRTMIN + 1) < 0 || fcntl(at, F_SETOWN, getpid()) < 0 ||
	    fcntl(at, F_SETLEASE, lease) < 0)
		fail("lease on %s: %m", path);
	return at;
}

/* A child opens path with flags, non-blocking: the lease must stop it. */
static void break_it(const char *path, int flags)
{
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		int fd = open(path, flags | O_NONBLOCK);
		_exit(fd < 0 && errno == EWOULDBLOCK ? 0 : 1);
	}
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("a child's open of %s was not stopped by the lease", path);
}

/* The break signal for fd arrives (within 10 s). */
static void heard(const sigset_t *set, int fd)
{
	struct timespec ts = { .tv_sec = 10 };
	siginfo_t si;
	int sig = sigtimedwait(set, &si, &ts);
	expect(sig == SIGRTMIN + 1, "no lease break signal for fd %d (%d: %m)", fd, sig);
	expect(sig != SIGRTMIN + 1 || si.si_fd == fd, "the break signal names fd %d, not %d",
	       si.si_fd, fd);
}

int main(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int r = take("r", O_RDONLY, 5, F_RDLCK), w = take("w", O_WRONLY, 6, F_WRLCK);
	expect(fcntl(r, F_GETLEASE) == F_RDLCK, "no read lease before");

	test_ready();
	test_wait();

	expect(fcntl(r, F_GETLEASE) == F_RDLCK, "fd 5: F_GETLEASE %d, want F_RDLCK",
	       fcntl(r, F_GETLEASE));
	expect(fcntl(w, F_GETLEASE) == F_WRLCK, "fd 6: F_GETLEASE %d, want F_WRLCK",
	       fcntl(w, F_GETLEASE));
	expect(fcntl(w, F_GETOWN) == getpid(), "fd 6: owner %d, want %d", fcntl(w, F_GETOWN),
	       getpid());
	expect(fcntl(w, F_GETSIG) == SIGRTMIN + 1, "fd 6: F_GETSIG %d", fcntl(w, F_GETSIG));
	break_it("w", O_RDONLY);
	heard(&set, w);
	break_it("r", O_WRONLY);
	heard(&set, r);
	if (fcntl(w, F_SETLEASE, F_UNLCK) < 0 || fcntl(r, F_SETLEASE, F_UNLCK) < 0)
		fail("give the leases up: %m");
	pass();
}
