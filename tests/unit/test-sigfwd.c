/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util/sigfwd.c: signals sent to this process while forwarding reach the
 * target, in order, and not this process; after the stop the caller's
 * mask is what it was and a late signal of the set did not end it; a
 * target already reaped gets nothing (and nothing else does); a signal
 * the caller ignores is not passed on; a signal sent while the set is
 * only held (sigfwd_hold: the target not running yet) is passed on once
 * forwarding starts, and a hold stopped without a start leaves this
 * process alive with its mask back.
 */
#include "util/sigfwd.h"
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int hup_pipe = -1;

static void on_hup(int sig)
{
	(void)sig;
	char c = 'H';
	if (write(hup_pipe, &c, 1) != 1)
		_exit(3);
}

/* a child that reports each SIGHUP on the pipe and dies of SIGTERM */
static pid_t child(int *ret_rd)
{
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		hup_pipe = p[1];
		signal(SIGHUP, on_hup);
		signal(SIGTERM, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		char c = 'r';
		if (write(p[1], &c, 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(p[1]);
	char c = 0;
	CHECK(read(p[0], &c, 1) == 1 && c == 'r');
	*ret_rd = p[0];
	return pid;
}

static bool blocked(int sig)
{
	sigset_t cur;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	return sigismember(&cur, sig);
}

TEST(forwards)
{
	int rd;
	pid_t pid = child(&rd);
	struct sigfwd f = { 0 };
	CHECK_EQ(sigfwd_start(&f, pid), 0);
	CHECK(blocked(SIGTERM));
	CHECK_EQ(kill(getpid(), SIGHUP), 0);
	char c = 0;
	CHECK(read(rd, &c, 1) == 1 && c == 'H');
	CHECK_EQ(kill(getpid(), SIGTERM), 0);
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	sigfwd_stop(&f);
	CHECK(!blocked(SIGTERM));
	CHECK(!blocked(SIGHUP));
	close(rd);
}

/* nohup's SIGHUP: ignored by the caller, not passed on */
TEST(ignored_stays)
{
	int rd;
	pid_t pid = child(&rd);
	signal(SIGHUP, SIG_IGN);
	struct sigfwd f = { 0 };
	CHECK_EQ(sigfwd_start(&f, pid), 0);
	CHECK_EQ(kill(getpid(), SIGHUP), 0);
	CHECK_EQ(kill(getpid(), SIGTERM), 0);
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	char c = 0;
	CHECK_EQ(read(rd, &c, 1), 0); /* no 'H' before its end */
	sigfwd_stop(&f);
	signal(SIGHUP, SIG_DFL);
	close(rd);
}

TEST(reaped_target)
{
	int rd;
	pid_t pid = child(&rd);
	struct sigfwd f = { 0 };
	CHECK_EQ(sigfwd_start(&f, pid), 0);
	CHECK_EQ(kill(pid, SIGKILL), 0);
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	/* forwarded to nobody, or dropped by the stop: this process lives */
	CHECK_EQ(kill(getpid(), SIGTERM), 0);
	sigfwd_stop(&f);
	CHECK(!blocked(SIGTERM));
	close(rd);
}

TEST(no_target)
{
	int rd;
	pid_t pid = child(&rd);
	CHECK_EQ(kill(pid, SIGKILL), 0);
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	struct sigfwd f = { 0 };
	CHECK_EQ(sigfwd_start(&f, pid), -ESRCH);
	CHECK(!blocked(SIGTERM));
	sigfwd_stop(&f); /* not started: nothing to undo */
	close(rd);
}

/* held before the target runs: a SIGHUP then is passed on at the start */
TEST(held_first)
{
	int rd;
	pid_t pid = child(&rd);
	struct sigfwd f;
	CHECK_EQ(sigfwd_hold(&f), 0);
	CHECK(blocked(SIGHUP));
	CHECK_EQ(kill(getpid(), SIGHUP), 0); /* pending in this process */
	CHECK_EQ(sigfwd_start(&f, pid), 0);
	char c = 0;
	CHECK(read(rd, &c, 1) == 1 && c == 'H');
	CHECK_EQ(kill(pid, SIGTERM), 0);
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	sigfwd_stop(&f);
	CHECK(!blocked(SIGHUP));
	close(rd);
}

/* a hold that never starts (the restart failed): dropped, mask back */
TEST(held_only)
{
	struct sigfwd f;
	CHECK_EQ(sigfwd_hold(&f), 0);
	CHECK_EQ(kill(getpid(), SIGTERM), 0);
	sigfwd_stop(&f);
	CHECK(!blocked(SIGTERM));
}

int main(void)
{
	RUN(forwards);
	RUN(ignored_stays);
	RUN(reaped_target);
	RUN(no_target);
	RUN(held_first);
	RUN(held_only);
	return unit_done();
}
