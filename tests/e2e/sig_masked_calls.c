/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Calls that set a signal mask of their caller's for their time: the main
 * thread waits for SIGUSR1 in sigsuspend(), four threads wait on a pipe in
 * ppoll(), pselect(), epoll_pwait() and epoll_pwait2(), each with a mask
 * for the call that differs from its own. The kernel keeps the thread's own
 * mask aside and puts it back when the call ends; ckpt must save that one,
 * not the call's, and must leave it to the original after a checkpoint.
 *
 * After the wake: the main thread's mask is its own, each pipe gets a byte,
 * and each thread checks that the mask it has after its call is its own.
 * Before test_ready(), the main thread waits until every thread is inside
 * its call (/proc/self/task/TID/syscall), so the checkpoint finds them there.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { T_PPOLL, T_PSELECT, T_EPOLL, T_EPOLL2, NT };

static const char *const names[NT] = {"ppoll", "pselect6", "epoll_pwait", "epoll_pwait2"};
static const long nrs[NT] = {SYS_ppoll, SYS_pselect6, SYS_epoll_pwait, SYS_epoll_pwait2};

struct waiter {
	int kind;
	int pipe[2];
	sigset_t own, during;
	pid_t tid;
	volatile int tid_known;
	int calls;     /* returns with EINTR (a signal, or ckpt's stop) */
	char err[160]; /* empty: its mask was its own after each return */
};

static sigset_t set_of(int a, int b, int c)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, a);
	sigaddset(&s, b);
	if (c)
		sigaddset(&s, c);
	return s;
}

static bool same(const sigset_t *a, const sigset_t *b)
{
	for (int s = 1; s < 65; s++)
		if (sigismember(a, s) != sigismember(b, s))
			return false;
	return true;
}

static unsigned long long bits(const sigset_t *a)
{
	unsigned long long m = 0;
	for (int s = 1; s < 65; s++)
		if (sigismember(a, s) == 1)
			m |= 1ull << (s - 1);
	return m;
}

/* One wait in the thread's call: > 0 the pipe is readable, -1 EINTR. */
static int wait_once(struct waiter *w, int ep)
{
	int fd = w->pipe[0];
	switch (w->kind) {
	case T_PPOLL: {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		return ppoll(&p, 1, NULL, &w->during);
	}
	case T_PSELECT: {
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		return pselect(fd + 1, &rd, NULL, NULL, NULL, &w->during);
	}
	case T_EPOLL: {
		struct epoll_event ev;
		return epoll_pwait(ep, &ev, 1, -1, &w->during);
	}
	default: {
		struct epoll_event ev;
		return epoll_pwait2(ep, &ev, 1, NULL, &w->during);
	}
	}
}

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	int ep = -1;

	if (pthread_sigmask(SIG_SETMASK, &w->own, NULL))
		fail("pthread_sigmask: %m");
	if (w->kind == T_EPOLL || w->kind == T_EPOLL2) {
		struct epoll_event ev = {.events = EPOLLIN};
		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, w->pipe[0], &ev))
			fail("epoll: %m");
	}
	w->tid = (pid_t)syscall(SYS_gettid);
	__atomic_store_n(&w->tid_known, 1, __ATOMIC_RELEASE);
	for (;;) {
		int r = wait_once(w, ep);
		if (r < 0 && errno != EINTR) {
			snprintf(w->err, sizeof(w->err), "%s: %s", names[w->kind], strerror(errno));
			return NULL;
		}
		sigset_t now;
		pthread_sigmask(SIG_SETMASK, NULL, &now);
		if (!same(&now, &w->own) && !w->err[0])
			snprintf(w->err, sizeof(w->err),
				 "%s: the thread's mask after the call is %#llx, its own is %#llx"
				 " (the call's was %#llx)",
				 names[w->kind], bits(&now), bits(&w->own), bits(&w->during));
		if (r > 0)
			break;
		w->calls++;
	}
	if (ep >= 0)
		close(ep);
	return NULL;
}

/* Is task tid blocked in call nr now? */
static bool in_call(pid_t tid, long nr)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	if (test_read_file(path, buf, sizeof(buf)) <= 0)
		return false;
	return strtol(buf, NULL, 10) == nr;
}

int main(void)
{
	static struct waiter ws[NT];
	pthread_t th[NT];

	/* every thread blocks SIGUSR1 in both masks: the runner's goes to
	 * the main thread */
	ws[T_PPOLL].own = set_of(SIGUSR1, SIGUSR2, SIGWINCH);
	ws[T_PPOLL].during = set_of(SIGUSR1, SIGALRM, 0);
	ws[T_PSELECT].own = set_of(SIGUSR1, SIGPIPE, 0);
	ws[T_PSELECT].during = set_of(SIGUSR1, SIGURG, SIGTTOU);
	ws[T_EPOLL].own = set_of(SIGUSR1, SIGTERM, 0);
	ws[T_EPOLL].during = set_of(SIGUSR1, SIGQUIT, 0);
	ws[T_EPOLL2].own = set_of(SIGUSR1, SIGHUP, SIGPROF);
	ws[T_EPOLL2].during = set_of(SIGUSR1, SIGCHLD, 0);
	for (int i = 0; i < NT; i++) {
		ws[i].kind = i;
		if (pipe2(ws[i].pipe, O_CLOEXEC))
			fail("pipe: %m");
		if (pthread_create(&th[i], NULL, waiter_main, &ws[i]))
			fail("pthread_create");
	}
	for (int i = 0; i < NT; i++)
		while (!__atomic_load_n(&ws[i].tid_known, __ATOMIC_ACQUIRE) ||
		       !in_call(ws[i].tid, nrs[i]))
			usleep(1000);

	/* the main thread's own mask blocks SIGUSR2 and SIGINT; sigsuspend's
	 * lets SIGUSR1 (and SIGUSR2) through */
	sigset_t own = set_of(SIGUSR2, SIGINT, 0), during = set_of(SIGINT, SIGIO, 0);
	test_setup_wake();
	if (sigprocmask(SIG_SETMASK, &own, NULL))
		fail("sigprocmask: %m");
	/* SIGUSR1 blocked until the sigsuspend, so that none is lost before */
	sigset_t with_usr1 = own;
	sigaddset(&with_usr1, SIGUSR1);
	sigprocmask(SIG_SETMASK, &with_usr1, NULL);
	test_ready();
	while (!test_woken)
		sigsuspend(&during);
	test_check_common();

	sigset_t now;
	sigprocmask(SIG_SETMASK, NULL, &now);
	expect(same(&now, &with_usr1),
	       "main thread: mask after sigsuspend is %#llx, its own is %#llx (sigsuspend's %#llx)",
	       bits(&now), bits(&with_usr1), bits(&during));
	for (int i = 0; i < NT; i++) {
		if (write(ws[i].pipe[1], "x", 1) != 1)
			fail("write: %m");
		pthread_join(th[i], NULL);
		expect(!ws[i].err[0], "%s", ws[i].err);
	}
	pass();
}
