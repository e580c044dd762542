/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A small tree for the CLI's summary line and JSON (flow cli_summary):
 * the root, with 2 more threads and 16 MiB of written memory, and 2
 * children; 3 processes, 5 threads. On SIGUSR1 the root closes the pipe
 * its threads and children read, joins and reaps them, and checks its
 * memory.
 */
#include "lib.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MEM (16u << 20)

static int hold[2];

static void block_on_pipe(void)
{
	char c;
	while (read(hold[0], &c, 1) < 0 && errno == EINTR)
		;
}

static void *thread_main(void *arg)
{
	(void)arg;
	block_on_pipe();
	return NULL;
}

int main(void)
{
	pthread_t th[2];
	pid_t kids[2];
	char *mem = malloc(MEM);

	if (!mem || pipe(hold) < 0)
		fail("setup: %m");
	test_fill_random(mem, MEM, 42);
	uint64_t sum = test_hash(mem, MEM, 0);
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			fail("fork: %m");
		if (kids[i] == 0) {
			close(hold[1]);
			block_on_pipe();
			_exit(0);
		}
	}
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, thread_main, NULL))
			fail("pthread_create");
	test_ready();
	test_wait();
	close(hold[1]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		int st;
		expect(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && !WEXITSTATUS(st),
		       "child %d did not exit cleanly", (int)kids[i]);
	}
	expect(test_hash(mem, MEM, 0) == sum, "the memory changed");
	pass();
}
