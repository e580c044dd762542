/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SIGTRAP ignored (SIG_IGN). ckpt's injections end in a single-step trap
 * or an int3, both forced SIGTRAPs, and the kernel resets an ignored
 * signal it forces to SIG_DFL: the disposition must come back SIG_IGN
 * from a checkpoint (the original checks itself) and from a restart, and
 * a raised SIGTRAP must still be ignored. A second thread sleeps in
 * nanosleep, which must come back restarted or with EINTR (as a restart
 * makes of a restart_block call), never with a leaked -ERESTART... (516):
 * a task released from a syscall-exit stop would not be restarted.
 * With "handler": after the restart, a SIGTRAP handler is installed and
 * must be called by raise(SIGTRAP).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"

static volatile sig_atomic_t trapped;
static volatile long slept_ret = 1;

static void on_trap(int sig)
{
	(void)sig;
	trapped++;
}

static void *sleeper(void *arg)
{
	(void)arg;
	struct timespec ts = {0, 300 * 1000 * 1000}; /* slept in pieces: some is interrupted */
	long r = 0;
	for (int i = 0; i < 1000000 && !r; i++)
		r = nanosleep(&ts, NULL) < 0 && errno != EINTR ? -errno : 0;
	slept_ret = r;
	return NULL;
}

int main(int argc, char **argv)
{
	bool handler = argc > 1 && !strcmp(argv[1], "handler");
	struct sigaction sa = {.sa_handler = SIG_IGN};
	if (sigaction(SIGTRAP, &sa, NULL) < 0)
		fail("sigaction: %m");
	pthread_t th;
	if (pthread_create(&th, NULL, sleeper, NULL))
		fail("pthread_create");

	test_ready();
	test_wait();

	sigaction(SIGTRAP, NULL, &sa);
	expect(sa.sa_handler == SIG_IGN, "SIGTRAP is not ignored any more (handler %p)",
	       (void *)sa.sa_handler);
	raise(SIGTRAP); /* ignored: nothing happens */
	expect(slept_ret == 1, "nanosleep in the other thread returned %ld (%s)", slept_ret,
	       strerror((int)-slept_ret));
	if (handler) {
		struct sigaction h = {.sa_handler = on_trap};
		expect(sigaction(SIGTRAP, &h, NULL) == 0, "sigaction: %m");
		raise(SIGTRAP);
		expect(trapped == 1, "the SIGTRAP handler ran %d times, not once", (int)trapped);
	}
	pass();
}
