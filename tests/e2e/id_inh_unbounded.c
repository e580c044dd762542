/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Inheritable capabilities that the bounding set lacks: raised while the
 * bounding set had them, then dropped from it (capsh --inh=X --drop=X;
 * a service whose manager raised inheritable caps before its bounding
 * set was cut). A capset may add to the inheritable set only what the
 * bounding set holds, so the restart has to raise them before it drops
 * the bounding caps; it raised them after, and failed with EPERM once
 * checkpoint --kill had killed the original. After restore the
 * inheritable, permitted, effective and bounding sets are as they were,
 * in the process and in a thread it started after (threads take their
 * creator's view of the puppet's sets, not a read of their own).
 */
#include "lib.h"

#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OUT ((1ull << CAP_SYS_PTRACE) | (1ull << CAP_NET_ADMIN))

struct sets {
	uint64_t eff, prm, inh, bnd;
};

static struct sets read_sets(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	struct sets s = {0, 0, 0, 0};
	if (syscall(SYS_capget, &h, d))
		fail("capget: %m");
	s.eff = d[0].effective | (uint64_t)d[1].effective << 32;
	s.prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
	s.inh = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
			s.bnd |= 1ull << cap;
	return s;
}

static volatile pid_t thread_tid;

static void *idle(void *arg)
{
	(void)arg;
	thread_tid = gettid();
	for (;;)
		pause();
	return NULL;
}

/* The thread's sets, from its status: "CapInh CapPrm CapEff CapBnd" */
static void thread_sets(pid_t tid, char *out, size_t size)
{
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	out[0] = '\0';
	if (test_read_file(path, text, sizeof(text)) < 0)
		return;
	size_t used = 0;
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		if (!strncmp(l, "Cap", 3) && strncmp(l, "CapAmb", 6) && used + strlen(l) + 2 < size)
			used += (size_t)snprintf(out + used, size - used, "%s ", l);
}

int main(void)
{
	struct sets s = read_sets();
	if ((s.prm & OUT) != OUT || !(s.eff & (1ull << CAP_SETPCAP)))
		skip("needs CAP_SYS_PTRACE, CAP_NET_ADMIN and CAP_SETPCAP");
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {
	    {(uint32_t)s.eff, (uint32_t)s.prm, (uint32_t)(s.inh | OUT)},
	    {(uint32_t)(s.eff >> 32), (uint32_t)(s.prm >> 32), (uint32_t)((s.inh | OUT) >> 32)},
	};
	if (syscall(SYS_capset, &h, d))
		fail("capset: %m");
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) ||
	    prctl(PR_CAPBSET_DROP, CAP_NET_ADMIN, 0, 0, 0))
		fail("PR_CAPBSET_DROP: %m");
	struct sets before = read_sets();
	if ((before.inh & OUT) != OUT || (before.bnd & OUT))
		fail("inheritable %#llx, bounding %#llx before the checkpoint",
		     (unsigned long long)before.inh, (unsigned long long)before.bnd);

	pthread_t th;
	if (pthread_create(&th, NULL, idle, NULL))
		fail("pthread_create");
	while (!thread_tid)
		usleep(1000);
	char th_before[512], th_after[512];
	thread_sets(thread_tid, th_before, sizeof(th_before));
	if (!strstr(th_before, "CapInh"))
		fail("cannot read the thread's capabilities");

	test_ready();
	test_wait();

	struct sets after = read_sets();
	expect(after.inh == before.inh, "inheritable %#llx, was %#llx",
	       (unsigned long long)after.inh, (unsigned long long)before.inh);
	expect(after.prm == before.prm, "permitted %#llx, was %#llx", (unsigned long long)after.prm,
	       (unsigned long long)before.prm);
	expect(after.eff == before.eff, "effective %#llx, was %#llx", (unsigned long long)after.eff,
	       (unsigned long long)before.eff);
	expect(after.bnd == before.bnd, "bounding %#llx, was %#llx", (unsigned long long)after.bnd,
	       (unsigned long long)before.bnd);
	thread_sets(thread_tid, th_after, sizeof(th_after));
	expect(!strcmp(th_after, th_before), "the thread's sets: %s, were %s", th_after, th_before);
	pass();
}
