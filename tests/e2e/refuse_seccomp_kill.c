/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A sandboxed program, checkpointed by its own user without privilege: a
 * seccomp filter that kills the process on keyctl, add_key, sigaltstack
 * and get_mempolicy (calls it never makes, and that ckpt injects to read
 * its state). ckpt cannot suspend the filter without CAP_SYS_ADMIN, so
 * it must refuse before it injects anything (it used to inject, and the
 * filter killed the program). The runner runs it and ckpt as nobody and
 * expects the refusal naming the pid; the program lives on.
 */
#include "lib.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KILL_ON(nr)                                                                                \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),                                           \
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

int main(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    KILL_ON(SYS_keyctl),
	    KILL_ON(SYS_add_key),
	    KILL_ON(SYS_sigaltstack),
	    KILL_ON(SYS_get_mempolicy),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail("PR_SET_NO_NEW_PRIVS: %m");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		fail("seccomp: %m");

	test_ready();
	test_wait();
	pass();
}
