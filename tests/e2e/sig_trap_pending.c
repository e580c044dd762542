/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A blocked SIGTRAP pending, thread-directed (value 42) and process-directed
 * (value 43), and a SIGTRAP handler. Every injected system call ends in a
 * forced single-step SIGTRAP: it must neither take the program's own
 * pending SIGTRAP (legacy signals coalesce) nor reset the handler (forcing
 * a blocked signal resets it to SIG_DFL). Checked in the original after a
 * checkpoint without --kill, and again after a restart of that image.
 */
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"

static void on_trap(int sig)
{
	(void)sig;
}

static void expect_trap(int value)
{
	sigset_t set;
	siginfo_t si;
	struct timespec zero = { 0, 0 };
	sigemptyset(&set);
	sigaddset(&set, SIGTRAP);
	int r = sigtimedwait(&set, &si, &zero);
	expect(r == SIGTRAP, "SIGTRAP (value %d) not pending any more", value);
	if (r == SIGTRAP)
		expect(si.si_code == SI_QUEUE && si.si_value.sival_int == value &&
			       si.si_pid == getpid(),
		       "SIGTRAP siginfo: code %d value %d pid %d, want %d %d %d", si.si_code,
		       si.si_value.sival_int, si.si_pid, SI_QUEUE, value, getpid());
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_trap };
	sigaction(SIGTRAP, &sa, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTRAP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	siginfo_t si = { .si_signo = SIGTRAP, .si_code = SI_QUEUE, .si_pid = getpid(),
			 .si_uid = getuid() };
	si.si_value.sival_int = 42;
	if (syscall(SYS_rt_tgsigqueueinfo, getpid(), getpid(), SIGTRAP, &si) < 0)
		fail("rt_tgsigqueueinfo: %m");
	union sigval v = { .sival_int = 43 };
	if (sigqueue(getpid(), SIGTRAP, v) < 0)
		fail("sigqueue: %m");

	test_ready();
	test_wait();

	sigaction(SIGTRAP, NULL, &sa);
	expect(sa.sa_handler == on_trap, "the SIGTRAP handler was reset");
	expect_trap(42); /* the thread's queue first */
	expect_trap(43);
	pass();
}
