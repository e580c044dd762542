/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/kernel.h"
#include "util/sigfwd.h"

/* what sigfwd_stop queues to the thread: no process sends itself this */
#define SIGFWD_STOP 0x53544f50 /* "STOP" */

static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

static bool is_stop(const siginfo_t *si)
{
	return si->si_code == SI_QUEUE && si->si_pid == getpid() &&
	       si->si_value.sival_int == SIGFWD_STOP;
}

static void *forward(void *arg)
{
	struct sigfwd *f = arg;
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&f->set, &si);
		if (sig < 0)
			continue; /* EINTR: a signal outside the set */
		if (is_stop(&si))
			return NULL;
		if (!sigismember(&f->pass, sig))
			continue;
		/* the terminal signalled ckpt's group: if the target is in it,
		 * it has this signal already */
		if (si.si_code == SI_KERNEL && getpgid(f->target) == getpgrp())
			continue;
		syscall(SYS_pidfd_send_signal, f->pidfd, sig, NULL, 0);
	}
}

/* The set, blocked in the calling thread (the caller's mask kept). */
static int hold(struct sigfwd *f)
{
	sigemptyset(&f->set);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&f->set, forwarded[i]);
	int r = -pthread_sigmask(SIG_BLOCK, &f->set, &f->old);
	f->held = r == 0;
	return r;
}

int sigfwd_hold(struct sigfwd *f)
{
	*f = (struct sigfwd){ .pidfd = -1 };
	return hold(f);
}

int sigfwd_start(struct sigfwd *f, pid_t target)
{
	if (!f->held)
		*f = (struct sigfwd){ .pidfd = -1 };
	bool held = f->held;
	f->target = target;
	/* one the caller ignores stays ignored: nohup's SIGHUP, the SIGINT
	 * of a job a shell started in the background (blocked, it is queued
	 * all the same, and taken here: dropped) */
	sigemptyset(&f->pass);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		struct sigaction sa;
		if (sigaction(forwarded[i], NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
			sigaddset(&f->pass, forwarded[i]);
	}
	f->pidfd = (int)syscall(SYS_pidfd_open, target, 0);
	int r = f->pidfd < 0 ? -errno : held ? 0 : hold(f);
	if (r == 0 && (r = -pthread_create(&f->thread, NULL, forward, f)) < 0 && !held) {
		pthread_sigmask(SIG_SETMASK, &f->old, NULL);
		f->held = false;
	}
	if (r < 0) {
		if (f->pidfd >= 0)
			close(f->pidfd);
		f->pidfd = -1;
		return r;
	}
	f->on = true;
	return 0;
}

void sigfwd_stop(struct sigfwd *f)
{
	if (f->on) {
		union sigval v = { .sival_int = SIGFWD_STOP };
		if (pthread_sigqueue(f->thread, SIGUSR2, v) < 0)
			pthread_cancel(f->thread); /* sigwaitinfo is a cancellation point */
		pthread_join(f->thread, NULL);
		close(f->pidfd);
		f->on = false;
		f->pidfd = -1;
	}
	if (!f->held)
		return;
	/* what came after the thread's last look (or while the set was only
	 * held) would otherwise act on ckpt (a SIGTERM would end it) once the
	 * mask is put back */
	const struct timespec zero = { 0 };
	while (sigtimedwait(&f->set, NULL, &zero) > 0)
		;
	pthread_sigmask(SIG_SETMASK, &f->old, NULL);
	f->held = false;
}
