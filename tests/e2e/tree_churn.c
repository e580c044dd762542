/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A tree that changes all the time: 4 workers each fork a child every
 * millisecond or so; the child forks a grandchild, both exit at once, and
 * the worker reaps the child (the grandchild goes to the root, a
 * subreaper, which reaps everything it gets). At most a few hundred
 * processes live at any time. The runner checkpoints it while it churns,
 * then kills and restarts it. After SIGUSR1 the root stops the workers:
 * each must have seen every child exit 0, none lost.
 */
#include "lib.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKERS 4

static volatile sig_atomic_t stop;
static void on_term(int s)
{
	(void)s;
	stop = 1;
}

static int worker(void)
{
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	long forks = 0;
	while (!stop) {
		pid_t c = fork();
		if (c < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return 2;
		}
		if (c == 0) {
			if (fork() == 0)
				_exit(0);
			_exit(0);
		}
		int st;
		pid_t w;
		while ((w = waitpid(c, &st, 0)) < 0 && errno == EINTR)
			;
		if (w != c || !WIFEXITED(st) || WEXITSTATUS(st))
			return 3;
		forks++;
		usleep(500);
	}
	return forks > 0 ? 0 : 4;
}

int main(void)
{
	pid_t w[WORKERS];
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		fail("subreaper: %m");
	for (int i = 0; i < WORKERS; i++) {
		w[i] = fork();
		if (w[i] == 0)
			_exit(worker());
	}
	test_setup_wake();
	usleep(200000);

	test_ready();
	/* reap the orphaned grandchildren until woken */
	while (!test_woken) {
		pid_t r = waitpid(-1, NULL, WNOHANG);
		if (r <= 0)
			usleep(2000);
		for (int i = 0; i < WORKERS; i++)
			if (r == w[i])
				fail("worker %d died early", i);
	}
	test_check_common();

	for (int i = 0; i < WORKERS; i++)
		kill(w[i], SIGTERM);
	int left = WORKERS;
	while (left > 0) {
		int st;
		pid_t r = waitpid(-1, &st, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		for (int i = 0; i < WORKERS; i++) {
			if (r != w[i])
				continue;
			left--;
			expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: status %#x", i, st);
		}
	}
	expect(left == 0, "%d workers were lost", left);
	pass();
}
