/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the programs that drive libckpt themselves (api_*.c) share. */
#ifndef CKPT_E2E_API_H
#define CKPT_E2E_API_H

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

/* In a child to be checkpointed: hold nothing ckpt cannot save (the
 * runner's stdout is a pipe): /dev/null at 0-2, no other fd. */
static inline void api_child_quiet(void)
{
	int null = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 3; fd++)
		dup2(null, fd);
	syscall(SYS_close_range, 3, ~0u, 0);
}

/* The parent's side of a child's "ready" (a SIGUSR2 to its parent):
 * blocked before the fork, then taken by sigwait(set). */
static inline void api_ready_block(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGUSR2);
	sigprocmask(SIG_BLOCK, set, NULL);
}

#endif
