/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Refusals: keys ckpt cannot make again, in keyrings of the process's own
 * (argv[1]): "logon", a logon key in its session keyring (its payload
 * cannot be read back); "timeout", a user key that expires in an hour
 * (/proc/keys tells only "60m"); "thread", a thread's keyring holding a key.
 * The runner expects the checkpoint to fail naming the pid (or the thread)
 * and the key; the process lives on and still finds its key.
 */
#include "lib.h"

#include <linux/keyctl.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long keyctl(long op, long a2, long a3, long a4)
{
	return syscall(SYS_keyctl, op, a2, a3, a4, 0);
}

static volatile long thread_key;

static void *thread_main(void *arg)
{
	(void)arg;
	thread_key = syscall(SYS_add_key, "user", "thread-key", "t", 1, KEY_SPEC_THREAD_KEYRING);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "logon";
	long key = 0;
	if (keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0) < 0)
		fail("KEYCTL_JOIN_SESSION_KEYRING: %m");
	if (strcmp(how, "logon") == 0) {
		key = syscall(SYS_add_key, "logon", "ckpt:secret", "s3cret", 6,
			      KEY_SPEC_SESSION_KEYRING);
	} else if (strcmp(how, "timeout") == 0) {
		key = syscall(SYS_add_key, "user", "ckpt-test:expiring", "soon", 4,
			      KEY_SPEC_SESSION_KEYRING);
		if (key >= 0 && keyctl(KEYCTL_SET_TIMEOUT, key, 3600, 0) < 0)
			fail("KEYCTL_SET_TIMEOUT: %m");
	} else {
		pthread_t th;
		if (pthread_create(&th, NULL, thread_main, NULL) != 0)
			fail("pthread_create");
		while (!thread_key)
			usleep(1000);
		key = thread_key;
	}
	if (key < 0)
		fail("add_key: %m");

	test_ready();
	test_wait();

	char d[256];
	if (keyctl(KEYCTL_DESCRIBE, key, (long)d, sizeof(d)) < 0)
		fail("the key is gone: %m");
	pass();
}
