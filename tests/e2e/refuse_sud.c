/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Syscall user dispatch (PR_SET_SYSCALL_USER_DISPATCH) is not saved: a
 * process that turned it on (its selector set to allow every call, so it
 * runs on as before) is refused by name, and goes on unharmed.
 */
#include "lib.h"

#include <errno.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#endif

static volatile char selector = 0; /* SYSCALL_DISPATCH_FILTER_ALLOW */

int main(void)
{
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, 0, 0, &selector) < 0)
		skip("syscall user dispatch: %m");
	test_ready();
	test_wait();
	pass();
}
