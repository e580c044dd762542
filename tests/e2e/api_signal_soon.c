/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A signal sent the moment a restart returns is not lost. A child waits
 * in `while (!go) pause();` for SIGUSR1 (its handler sets go); it is
 * checkpointed with CKPT_KILL and restarted detached (the caller's child
 * again), and the caller signals it as soon as ckpt_restart() returns,
 * then waits for it to exit 42. The restart returns only once the child is
 * asleep in pause() again: a handler that ran before that found no call
 * to interrupt, and the child then slept in pause() with go set, for ever
 * (the restart had taken a task that the release had just woken, whose
 * syscall file still showed the pause() it was seized in, for one asleep
 * there). That window is short: CYCLES rounds, each a fresh child; it came
 * about once in 150 here.
 *
 * Every other round the child blocks SIGUSR1 and waits in
 * `while (!go) sigsuspend(mask without it)` instead: a task that blocks
 * every signal it has a handler for is not waited for (its SIGUSR1, sent
 * before it is in sigsuspend again, stays pending and is taken there),
 * and that must hold too.
 */
#include <ckpt.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"

#define CYCLES 150
#define EXIT_WAIT_MS 10000

static volatile sig_atomic_t go;
static void on_usr1(int s)
{
	(void)s;
	go = 1;
}

static pid_t start_child(bool suspend)
{
	pid_t pid = fork();
	if (pid == 0) {
		api_child_quiet();
		signal(SIGUSR1, on_usr1);
		sigset_t usr1, without;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		if (suspend)
			sigprocmask(SIG_BLOCK, &usr1, &without);
		kill(getppid(), SIGUSR2); /* ready */
		while (!go) {
			if (suspend)
				sigsuspend(&without);
			else
				pause();
		}
		_exit(42);
	}
	return pid;
}

/* Its exit status, or -1 if it has not ended within EXIT_WAIT_MS */
static int wait_exit(pid_t pid)
{
	int st;
	for (int ms = 0; ms < EXIT_WAIT_MS; ms++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0)
			return -2;
		usleep(1000);
	}
	return -1;
}

int main(void)
{
	sigset_t s2;
	int sig;
	api_ready_block(&s2);
	int img = memfd_create("image", MFD_CLOEXEC);
	if (img < 0) {
		printf("FAIL: memfd_create: %m\n");
		return 1;
	}
	for (int i = 0; i < CYCLES; i++) {
		char err[256] = "";
		go = 0;
		bool suspend = i % 2;
		pid_t child = start_child(suspend);
		if (child < 0) {
			printf("FAIL: fork: %m\n");
			return 1;
		}
		sigwait(&s2, &sig);
		/* 34: pause, 130: rt_sigsuspend */
		if (!api_asleep_in_call(child, suspend ? "130 " : "34 ", EXIT_WAIT_MS)) {
			printf("FAIL: round %d: child %d not asleep in %s after %d s\n", i, child,
			       suspend ? "sigsuspend()" : "pause()", EXIT_WAIT_MS / 1000);
			kill(child, SIGKILL);
			return 1;
		}
		if (ftruncate(img, 0) < 0 || lseek(img, 0, SEEK_SET) < 0) {
			printf("FAIL: the image memfd: %m\n");
			return 1;
		}
		struct ckpt_opts o = { .size = sizeof(o), .flags = CKPT_SUBTREE | CKPT_KILL,
				       .logfd = -1, .errbuf = err, .errbuf_len = sizeof(err) };
		int r = ckpt_checkpoint_opts(child, img, &o);
		if (r < 0) {
			printf("FAIL: round %d: ckpt_checkpoint: %d '%s'\n", i, r, err);
			kill(child, SIGKILL);
			return 1;
		}
		waitpid(child, NULL, 0); /* the original, killed */
		lseek(img, 0, SEEK_SET);
		struct ckpt_opts ro = { .size = sizeof(ro), .flags = RESTART_DETACH, .logfd = -1,
					.errbuf = err, .errbuf_len = sizeof(err) };
		pid_t got = ckpt_restart_opts(0, img, &ro);
		if (got != child) {
			printf("FAIL: round %d: ckpt_restart: %d '%s', want pid %d\n", i, got, err,
			       child);
			return 1;
		}
		kill(got, SIGUSR1);
		int st = wait_exit(got);
		if (st == -1) {
			printf("FAIL: round %d: the SIGUSR1 sent as the restart returned was lost "
			       "(pid %d still in %s %d s later)\n",
			       i, got, suspend ? "sigsuspend()" : "pause()", EXIT_WAIT_MS / 1000);
			kill(got, SIGKILL);
			waitpid(got, NULL, 0);
			return 1;
		}
		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 42) {
			printf("FAIL: round %d: restored child ended with status %#x, want exit 42\n",
			       i, st);
			return 1;
		}
	}
	printf("PASS\n");
	return 0;
}
