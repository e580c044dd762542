/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The alternate signal stack: sigaltstack() with a 64 KiB mmap'd stack.
 * After restore sigaltstack() reports the same ss_sp, ss_size and ss_flags,
 * and a handler installed with SA_ONSTACK runs on it (a local variable of
 * the handler lies inside it and ss_flags says SS_ONSTACK there).
 */
#include "lib.h"

#include <sys/mman.h>

#define LEN (64ul << 10)

static unsigned char *stk;
static volatile uintptr_t local_addr;
static volatile int flags_in;

static void handler(int sig)
{
	(void)sig;
	volatile int local = 0;
	local_addr = (uintptr_t)&local;
	stack_t cur;
	sigaltstack(NULL, &cur);
	flags_in = cur.ss_flags;
}

int main(void)
{
	test_setup_wake();
	stk = test_mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	stack_t ss = {.ss_sp = stk, .ss_size = LEN, .ss_flags = 0};
	if (sigaltstack(&ss, NULL))
		fail("sigaltstack: %m");
	struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	stack_t before;
	sigaltstack(NULL, &before);

	test_ready();
	test_wait();

	stack_t after;
	if (sigaltstack(NULL, &after))
		fail("sigaltstack: %m");
	expect(after.ss_sp == before.ss_sp, "ss_sp is %p, was %p", after.ss_sp, before.ss_sp);
	expect(after.ss_size == before.ss_size, "ss_size is %zu, was %zu", after.ss_size,
	       before.ss_size);
	expect(after.ss_flags == before.ss_flags, "ss_flags is %#x, was %#x", after.ss_flags,
	       before.ss_flags);
	raise(SIGUSR2);
	expect(local_addr >= (uintptr_t)stk && local_addr < (uintptr_t)stk + LEN,
	       "SA_ONSTACK handler ran at %#lx, not on the alternate stack %p",
	       (unsigned long)local_addr, (void *)stk);
	expect(flags_in & SS_ONSTACK, "ss_flags in the handler is %#x, no SS_ONSTACK", flags_in);
	pass();
}
