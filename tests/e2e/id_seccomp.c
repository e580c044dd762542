/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * seccomp: with no_new_privs, two stacked filters: the first makes
 * getppid() fail with EPERM, the second makes sysinfo() fail with EACCES;
 * everything else is allowed. After restore both still hold (and the
 * other system calls work), and /proc/self/status says Seccomp: 2,
 * Seccomp_filters: 2.
 */
#include "lib.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

static void install(int nr, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
		fail("seccomp: %m");
}

static void check(const char *when)
{
	errno = 0;
	long pp = syscall(SYS_getppid); /* glibc's getppid() does not set errno */
	expect(pp == -1 && errno == EPERM, "%s: getppid = %ld, errno %d: filter 1 not in effect",
	       when, pp, errno);
	struct sysinfo si;
	errno = 0;
	int r = sysinfo(&si);
	expect(r == -1 && errno == EACCES, "%s: sysinfo() = %d, errno %d: filter 2 not in effect",
	       when, r, errno);
	expect(getpid() > 0 && syscall(SYS_getpid) == getpid(), "%s: getpid fails", when);
	char v[32] = "";
	test_status_field("Seccomp", v, sizeof(v));
	expect(!strcmp(v, "2"), "%s: Seccomp: %s", when, v);
	v[0] = 0;
	test_status_field("Seccomp_filters", v, sizeof(v));
	expect(!strcmp(v, "2"), "%s: Seccomp_filters: %s", when, v);
}

int main(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		fail("no_new_privs: %m");
	install(__NR_getppid, EPERM);
	install(__NR_sysinfo, EACCES);
	check("before the checkpoint");
	if (test_failures())
		fail("seccomp does not behave as expected before the checkpoint");

	test_ready();
	test_wait();

	check("after restore");
	pass();
}
