/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The blocked signal mask: SIGHUP, SIGUSR2, SIGTERM, SIGRTMIN+3, signal 40
 * and SIGRTMAX are blocked. After restore sigprocmask reports the same set
 * (and /proc/self/status SigBlk agrees), and a blocked signal stays pending
 * instead of being delivered.
 */
#include "lib.h"

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void handler(int sig)
{
	(void)sig;
	got++;
}

static uint64_t raw_mask(void)
{
	uint64_t m = 0;
	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &m, 8))
		fail("rt_sigprocmask: %m");
	return m;
}

int main(void)
{
	test_setup_wake();
	signal(SIGUSR2, handler);
	sigset_t set;
	sigemptyset(&set);
	const int sigs[] = {SIGHUP, SIGUSR2, SIGTERM, SIGRTMIN + 3, 40, SIGRTMAX};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&set, sigs[i]);
	if (sigprocmask(SIG_SETMASK, &set, NULL))
		fail("sigprocmask: %m");
	const uint64_t before = raw_mask();
	char blk_before[64];
	if (test_status_field("SigBlk", blk_before, sizeof(blk_before)))
		fail("no SigBlk");

	test_ready();
	test_wait();

	const uint64_t after = raw_mask();
	expect(after == before, "blocked mask is %#llx, was %#llx", (unsigned long long)after,
	       (unsigned long long)before);
	char blk[64] = "";
	test_status_field("SigBlk", blk, sizeof(blk));
	expect(!strcmp(blk, blk_before), "SigBlk is %s, was %s", blk, blk_before);
	raise(SIGUSR2);
	expect(got == 0, "blocked SIGUSR2 was delivered");
	sigset_t pend;
	sigpending(&pend);
	expect(sigismember(&pend, SIGUSR2), "blocked SIGUSR2 is not pending");
	pass();
}
