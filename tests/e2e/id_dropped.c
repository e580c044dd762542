/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Root dropped to a normal user, as daemons and `su` do: starting as root
 * the program sets no_new_privs, starts a thread, then sets groups
 * {65534}, gids and uids 65534 (setgroups, setresgid, setresuid: no
 * keepcaps, so every capability goes); the thread waits on a condition
 * variable meanwhile. Restored by root, both threads are still 65534 everywhere
 * (real, effective, saved, fs), with the one group, with empty permitted,
 * effective, inheritable and ambient sets, the same bounding set,
 * securebits 0, keepcaps off and no_new_privs on, as /proc/self/status
 * and the calls themselves say.
 */
#include "lib.h"

#include <grp.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOBODY 65534

static const char *const status_names[] = {"Uid",    "Gid",    "Groups", "CapInh",
					   "CapPrm", "CapEff", "CapAmb", "NoNewPrivs"};
static const char *const status_want[] = {"65534\t65534\t65534\t65534",
					  "65534\t65534\t65534\t65534",
					  "65534",
					  "0000000000000000",
					  "0000000000000000",
					  "0000000000000000",
					  "0000000000000000",
					  "1"};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase; /* 1: main woke up, check yourself; 2: the thread is done */
static char thread_err[512];
static int cap_last = 40;
static uint64_t bounding; /* as it was before the drop */

/* The value of "name:" in /proc/thread-self/status; 0 or -1. */
static int thread_status(const char *name, char *out, size_t size)
{
	char buf[8192], key[64];
	if (test_read_file("/proc/thread-self/status", buf, sizeof(buf)) < 0)
		return -1;
	snprintf(key, sizeof(key), "\n%s:", name);
	char *v = strstr(buf, key);
	if (!v)
		return -1;
	v += strlen(key);
	v += strspn(v, " \t");
	size_t n = strcspn(v, "\n");
	while (n > 0 && v[n - 1] == ' ')
		n--;
	snprintf(out, size, "%.*s", (int)n, v);
	return 0;
}

/* The ids, capabilities and bits of the calling thread; "" if as wanted. */
static void check_self(const char *who, char *err, size_t size)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;
	gid_t groups[8];
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct cap[2];
	char v[128];
	size_t n = 0;

	err[0] = '\0';
#define BAD(...) (n += (size_t)snprintf(err + n, n < size ? size - n : 0, __VA_ARGS__))
	getresuid(&r, &e, &s);
	getresgid(&rg, &eg, &sg);
	if (r != NOBODY || e != NOBODY || s != NOBODY)
		BAD("%s: uids %u/%u/%u; ", who, r, e, s);
	if (rg != NOBODY || eg != NOBODY || sg != NOBODY)
		BAD("%s: gids %u/%u/%u; ", who, rg, eg, sg);
	if ((uid_t)setfsuid((uid_t)-1) != NOBODY || (gid_t)setfsgid((gid_t)-1) != NOBODY)
		BAD("%s: fsuid/fsgid not 65534; ", who);
	int ng = getgroups(8, groups);
	if (ng != 1 || groups[0] != NOBODY)
		BAD("%s: %d supplementary groups; ", who, ng);
	if (syscall(SYS_capget, &h, cap))
		BAD("%s: capget: %m; ", who);
	else if (cap[0].effective | cap[0].permitted | cap[0].inheritable | cap[1].effective |
		 cap[1].permitted | cap[1].inheritable)
		BAD("%s: capabilities left (prm %#x); ", who, cap[0].permitted);
	for (int c = 0; c <= cap_last; c++) {
		if ((prctl(PR_CAPBSET_READ, c) == 1) != !!(bounding & (1ull << c)))
			BAD("%s: cap %d: bounding set changed; ", who, c);
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) != 0)
			BAD("%s: cap %d ambient; ", who, c);
	}
	if (prctl(PR_GET_SECUREBITS) != 0 || prctl(PR_GET_KEEPCAPS) != 0)
		BAD("%s: securebits %#x, keepcaps %d; ", who, prctl(PR_GET_SECUREBITS),
		    prctl(PR_GET_KEEPCAPS));
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		BAD("%s: no_new_privs is not set; ", who);
	for (int i = 0; i < 8; i++) {
		if (thread_status(status_names[i], v, sizeof(v)) || strcmp(v, status_want[i]))
			BAD("%s: %s: '%s', want '%s'; ", who, status_names[i], v, status_want[i]);
	}
#undef BAD
}

static void *thread_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (phase != 1)
		pthread_cond_wait(&cv, &mu);
	check_self("thread", thread_err, sizeof(thread_err));
	phase = 2;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(void)
{
	char err[1024];
	pthread_t th;

	if (getuid() != 0)
		skip("needs root");
	/* "ready" is created after the ids change: let nobody write it */
	const char *dir = getenv("CKPT_TEST_DIR");
	if (dir && chmod(dir, 0777))
		fail("chmod: %m");
	char buf[16];
	if (test_read_file("/proc/sys/kernel/cap_last_cap", buf, sizeof(buf)) > 0)
		cap_last = atoi(buf);
	for (int c = 0; c <= cap_last; c++)
		if (prctl(PR_CAPBSET_READ, c) == 1)
			bounding |= 1ull << c;
	/* per thread: before the thread, which inherits it */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		fail("PR_SET_NO_NEW_PRIVS: %m");
	/* SIGUSR1 is main's: the thread starts with it blocked */
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	if (pthread_create(&th, NULL, thread_main, NULL))
		fail("pthread_create");
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	const gid_t groups[] = {NOBODY};
	/* glibc applies each of these to every thread */
	if (setgroups(1, groups) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		fail("dropping root: %m");
	check_self("main", err, sizeof(err));
	if (err[0])
		fail("before the checkpoint: %s", err);

	test_ready();
	test_wait();

	check_self("main", err, sizeof(err));
	expect(!err[0], "%s", err);
	pthread_mutex_lock(&mu);
	phase = 1;
	pthread_cond_broadcast(&cv);
	while (phase != 2)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	expect(!thread_err[0], "%s", thread_err);
	pass();
}
