/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a Linux AIO context (io_setup), whose ring is mapped in the
 * process as "/[aio] (deleted)". The runner expects the checkpoint to fail
 * naming the pid and AIO; afterwards the context still works (io_destroy).
 */
#include "lib.h"

#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	aio_context_t ctx = 0;
	if (syscall(SYS_io_setup, 8, &ctx) < 0)
		skip("io_setup: %m");

	test_ready();
	test_wait();

	expect(syscall(SYS_io_destroy, ctx) == 0, "io_destroy: %m");
	pass();
}
