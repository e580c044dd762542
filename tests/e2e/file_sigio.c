/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Signal-driven I/O: the read end of a pipe with O_ASYNC, owned by this
 * process (F_SETOWN) and signalling SIGRTMIN+1 (F_SETSIG); another pipe's
 * read end with O_ASYNC owned by the main thread (F_OWNER_TID) with the
 * default SIGIO; a third with an owner but no O_ASYNC. After restart each
 * keeps its owner, signal and flags, and writing to the first two pipes
 * raises their signals, with si_fd naming the read end.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct setting {
	struct f_owner_ex own;
	int sig, flags;
};

static void get(int fd, struct setting *s)
{
	memset(s, 0, sizeof(*s));
	if (fcntl(fd, F_GETOWN_EX, &s->own) < 0 || (s->sig = fcntl(fd, F_GETSIG)) < 0 ||
	    (s->flags = fcntl(fd, F_GETFL)) < 0)
		fail("fcntl on fd %d: %m", fd);
}

static void expect_signal(sigset_t *set, int sig, int fd, int wfd)
{
	if (write(wfd, "x", 1) != 1)
		fail("write: %m");
	siginfo_t si;
	struct timespec ts = { .tv_sec = 20 };
	int got = sigtimedwait(set, &si, &ts);
	expect(got == sig, "writing to the pipe of fd %d raised signal %d, expected %d", fd, got,
	       sig);
	if (got == sig && sig != SIGIO)
		expect(si.si_fd == fd && si.si_code == POLL_IN, "siginfo: fd %d code %d", si.si_fd,
		       si.si_code);
}

int main(void)
{
	int a[2], b[2], c[2];
	if (pipe(a) || pipe(b) || pipe(c))
		fail("pipe: %m");
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 1);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);

	struct f_owner_ex tid = { .type = F_OWNER_TID, .pid = (pid_t)syscall(SYS_gettid) };
	if (fcntl(a[0], F_SETOWN, getpid()) < 0 || fcntl(a[0], F_SETSIG, SIGRTMIN + 1) < 0 ||
	    fcntl(a[0], F_SETFL, O_ASYNC | O_NONBLOCK) < 0 ||
	    fcntl(b[0], F_SETOWN_EX, &tid) < 0 || fcntl(b[0], F_SETFL, O_ASYNC) < 0 ||
	    fcntl(c[0], F_SETOWN, getpid()) < 0)
		fail("fcntl: %m");
	struct setting before[3], after[3];
	int rd[3] = { a[0], b[0], c[0] };
	for (int i = 0; i < 3; i++)
		get(rd[i], &before[i]);

	test_ready();
	test_wait();

	for (int i = 0; i < 3; i++) {
		get(rd[i], &after[i]);
		expect(after[i].own.type == before[i].own.type && after[i].own.pid == before[i].own.pid,
		       "fd %d: owner %d/%d, was %d/%d", rd[i], after[i].own.type, after[i].own.pid,
		       before[i].own.type, before[i].own.pid);
		expect(after[i].sig == before[i].sig, "fd %d: F_GETSIG %d, was %d", rd[i],
		       after[i].sig, before[i].sig);
		/* a pipe made again is opened, which adds the kernel's O_LARGEFILE
		 * (glibc's O_LARGEFILE is 0 on 64-bit) */
		expect((after[i].flags & ~0100000) == (before[i].flags & ~0100000),
		       "fd %d: flags 0%o, was 0%o", rd[i], after[i].flags, before[i].flags);
	}
	/* nothing was raised by the restart itself */
	sigset_t pend;
	sigpending(&pend);
	expect(!sigismember(&pend, SIGIO) && !sigismember(&pend, SIGRTMIN + 1),
	       "a SIGIO was pending after restart");
	expect_signal(&set, SIGRTMIN + 1, a[0], a[1]);
	expect_signal(&set, SIGIO, b[0], b[1]);
	pass();
}
