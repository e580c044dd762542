/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A program under a foreground `ckpt restart`, as a service manager runs
 * it: a SIGHUP (reload) and then a SIGTERM (stop) are sent to ckpt, not to
 * the program, and must reach it. The program notes where each came from:
 * after the restart its parent is ckpt, which sent them (SI_USER from
 * getppid()). On SIGTERM it checks that the SIGHUP came first, prints its
 * verdict and dies of SIGTERM, so that ckpt's exit status (128 + 15) shows
 * the program's end was passed on too. Run without ckpt, the runner sends
 * the same two signals to the program itself (its parent then).
 */
#include "lib.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t hups, terms, bad_sender;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (si->si_code != SI_USER || si->si_pid != getppid())
		bad_sender = sig;
	if (sig == SIGHUP)
		hups++;
	else if (!hups)
		bad_sender = -1; /* TERM before HUP */
	else
		terms++;
}

int main(void)
{
	struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGHUP);
	sigaddset(&sa.sa_mask, SIGTERM);
	if (sigaction(SIGHUP, &sa, NULL) || sigaction(SIGTERM, &sa, NULL))
		fail("sigaction: %m");
	test_ready();
	/* no SIGUSR1: the runner sends SIGHUP, then SIGTERM */
	while (!terms && bad_sender == 0)
		pause();
	expect(bad_sender == 0,
	       bad_sender < 0 ? "SIGTERM came before SIGHUP"
			      : "signal %d: not sent by its parent (pid %d) with kill()",
	       (int)bad_sender, (int)getppid());
	expect(hups == 1, "%d SIGHUPs, want 1", (int)hups);
	test_check_common();
	if (test_failures())
		pass(); /* exits 1 */
	test_log("PASS\n");
	if (getpid() == 1) /* a namespace's init ignores its own default signals */
		_exit(128 + SIGTERM);
	signal(SIGTERM, SIG_DFL);
	raise(SIGTERM);
	fail("still alive after raise(SIGTERM)");
}
