/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The subject of `ckpt inspect`'s summary and --diff: a process with a
 * second thread that counts (its memory changes between two checkpoints),
 * a child joined to it by a pipe holding "hello", and a pty pair. Its name
 * (comm) is "insp-parent", the child's "insp-child". After restart: the
 * pipe still holds "hello", the child is alive, the counter counts.
 */
#include "lib.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long counter;

static void *count(void *arg)
{
	struct timespec ms = { 0, 1000000 };
	(void)arg;
	for (;;) {
		counter++;
		nanosleep(&ms, NULL);
	}
	return NULL;
}

int main(void)
{
	int p[2], zero = 0;
	pthread_t th;

	if (pipe(p) < 0 || write(p[1], "hello", 5) != 5)
		fail("pipe: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		prctl(PR_SET_NAME, "insp-child");
		close(p[0]);
		for (;;)
			pause();
	}
	prctl(PR_SET_NAME, "insp-parent");
	close(p[1]);
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY);
	if (m < 0 || ioctl(m, TIOCSPTLCK, &zero) < 0)
		fail("ptmx: %m");
	char name[32];
	if (ptsname_r(m, name, sizeof(name)) || open(name, O_RDWR | O_NOCTTY) < 0)
		fail("open the pty's slave: %m");
	if (pthread_create(&th, NULL, count, NULL))
		fail("pthread_create");
	test_ready();
	test_wait();

	unsigned long before = counter;
	char buf[8] = { 0 };
	if (read(p[0], buf, sizeof(buf)) != 5 || memcmp(buf, "hello", 5))
		test_failf("the pipe holds '%s', not hello", buf);
	expect(kill(child, 0) == 0, "the child is gone");
	struct timespec ms = { 0, 20000000 };
	for (int i = 0; i < 500 && counter == before; i++)
		nanosleep(&ms, NULL);
	expect(counter != before, "the counting thread stopped");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	pass();
}
