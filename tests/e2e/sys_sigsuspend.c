/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checkpointed inside sigsuspend(). SIGUSR1 and SIGHUP are blocked; the
 * program waits with sigsuspend(mask without SIGUSR1). While it waits, the
 * kernel's current mask is the temporary one and the real one is saved
 * aside: a restore that takes the temporary mask for the real one leaves
 * SIGUSR1 unblocked after sigsuspend returns. After wake-up sigsuspend
 * returned -1/EINTR and the mask is the real one again.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>

int main(void)
{
	test_setup_wake();
	sigset_t block, wait_mask, now;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &block, NULL))
		fail("sigprocmask: %m");
	sigprocmask(SIG_BLOCK, NULL, &wait_mask);
	sigdelset(&wait_mask, SIGUSR1);

	test_ready();
	while (!test_woken) {
		int r = sigsuspend(&wait_mask);
		if (r != -1 || errno != EINTR)
			fail("sigsuspend returned %d, errno %d (%s)", r, errno, strerror(errno));
	}
	sigprocmask(SIG_BLOCK, NULL, &now);
	test_check_common();
	expect(sigismember(&now, SIGUSR1), "SIGUSR1 not blocked after sigsuspend returned");
	expect(sigismember(&now, SIGHUP), "SIGHUP not blocked after sigsuspend returned");
	pass();
}
