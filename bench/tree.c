/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench/ workload: `procs N` forks N-1 children, `threads N` starts N-1
 * threads; each waits. Prints "ready SECONDS" (the time creating them took,
 * the machine's own cost) on its stdout. On SIGUSR1 the root checks that
 * every child and thread is still there, stops them, and exits 0 (printing
 * "intact") or 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t go;
static atomic_int alive;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static void *idle(void *arg)
{
	(void)arg;
	alive++;
	for (;;)
		pause();
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "procs") && strcmp(argv[1], "threads")))
		return fprintf(stderr, "usage: %s procs|threads N\n", argv[0]), 2;
	int n = atoi(argv[2]);
	bool threads = !strcmp(argv[1], "threads");
	pid_t *kids = calloc(n, sizeof(*kids));
	signal(SIGUSR1, on_usr1);
	/* SIGUSR1 blocked but while the root waits for it in sigsuspend: no
	 * thread takes it in the root's stead, none is lost before a pause */
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &old);
	sigdelset(&old, SIGUSR1);
	double t0 = now();
	for (int i = 1; i < n; i++) {
		if (threads) {
			pthread_t t;
			if (pthread_create(&t, NULL, idle, NULL))
				return 3;
			continue;
		}
		kids[i] = fork();
		if (kids[i] == 0) {
			signal(SIGUSR1, SIG_DFL);
			sigprocmask(SIG_SETMASK, &old, NULL);
			for (;;)
				pause();
		}
	}
	while (threads && alive < n - 1)
		usleep(100);
	printf("ready %.6f\n", now() - t0);
	fflush(stdout);
	while (!go)
		sigsuspend(&old);
	int bad = threads ? alive != n - 1 : 0;
	for (int i = 1; !threads && i < n; i++) {
		int st;
		bad |= kill(kids[i], SIGTERM) != 0;
		bad |= waitpid(kids[i], &st, 0) != kids[i] || !WIFSIGNALED(st);
	}
	printf("%s\n", bad ? "CORRUPT" : "intact");
	return bad;
}
