/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A root with 40 children: more processes at one depth than one request to
 * the guardian takes (16), so that checkpoint --kill kills them all before
 * it waits for any death (puppet_kill_many) and the restart finds every
 * pid free again. Each child records its pid, says it is ready and blocks
 * in read() on a shared "go" pipe. After restart the root sends one byte
 * per child; each checks that its pid and parent are as recorded and exits
 * 0; the root reaps exactly its 40 children, each with status 0.
 * With "threads", the root has three more threads, started before the
 * children: checkpoint seizes them before it lists the children, which
 * then outgrow its first table of tasks (16). After restart each thread
 * answers a byte sent to it, and is joined.
 */
#include "lib.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 40
#define NT 3

static int thread_go[2], thread_back[2];

/* a thread of the root: waits for a byte, sends it back plus one */
static void *thread_main(void *arg)
{
	(void)arg;
	unsigned char c;
	ssize_t r;
	while ((r = read(thread_go[0], &c, 1)) < 0 && errno == EINTR)
		;
	if (r != 1)
		return (void *)1;
	c++;
	return write(thread_back[1], &c, 1) == 1 ? NULL : (void *)1;
}

static int child(pid_t root, int ready_w, int go_r)
{
	const pid_t self = getpid();
	if (write(ready_w, "r", 1) != 1)
		return 2;
	char c;
	ssize_t r;
	while ((r = read(go_r, &c, 1)) < 0 && errno == EINTR)
		;
	if (r != 1) {
		test_log("FAIL: child %d: read of go: %zd %m\n", (int)self, r);
		return 1;
	}
	if (getppid() != root || getpid() != self) {
		test_log("FAIL: child %d: pid %d, parent %d (root %d)\n", (int)self, (int)getpid(),
			 (int)getppid(), (int)root);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const bool threads = argc > 1 && !strcmp(argv[1], "threads");
	int rp[2], gp[2];
	pthread_t th[NT];
	if (pipe(rp) || pipe(gp) || pipe(thread_go) || pipe(thread_back))
		fail("setup: %m");
	for (int i = 0; threads && i < NT; i++)
		if ((errno = pthread_create(&th[i], NULL, thread_main, NULL)))
			fail("pthread_create: %m");
	const pid_t root = getpid();
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			fail("fork: %m");
		if (kids[i] == 0) {
			close(rp[0]);
			close(gp[1]);
			_exit(child(root, rp[1], gp[0]));
		}
	}
	close(rp[1]);
	close(gp[0]);
	for (int i = 0; i < N; i++) {
		char c;
		if (read(rp[0], &c, 1) != 1)
			fail("only %d of %d children got ready", i, N);
	}

	test_ready();
	test_wait();

	for (int i = 0; i < N; i++)
		if (write(gp[1], "g", 1) != 1)
			fail("go: %m");
	for (int i = 0; i < N; i++) {
		int st;
		pid_t w;
		while ((w = waitpid(kids[i], &st, 0)) < 0 && errno == EINTR)
			;
		expect(w == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		       "child %d: status %#x", (int)kids[i], w == kids[i] ? st : -1);
	}
	expect(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD,
	       "the root has children it did not make");
	for (int i = 0; threads && i < NT; i++) {
		unsigned char c = (unsigned char)(10 * i);
		expect(write(thread_go[1], &c, 1) == 1, "to a thread: %m");
	}
	int sum = 0;
	for (int i = 0; threads && i < NT; i++) {
		unsigned char c;
		expect(read(thread_back[0], &c, 1) == 1, "from a thread: %m");
		sum += c;
	}
	expect(sum == (threads ? 0 + 10 + 20 + NT : 0), "the threads answered %d", sum);
	for (int i = 0; threads && i < NT; i++) {
		void *ret;
		expect(pthread_join(th[i], &ret) == 0 && !ret, "thread %d did not end well", i);
	}
	pass();
}
