/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * seccomp filters stacked as SystemCallFilter= and SystemCallLog= leave
 * them: their order and their flags. Three filters, oldest first:
 *   1. getppid() fails with EPERM;
 *   2. getppid() fails with EACCES, installed with SECCOMP_FILTER_FLAG_LOG;
 *   3. sysinfo() fails with ENOENT.
 * Of two filters that return the same action the newer one's data wins,
 * so getppid() fails with EACCES only while filter 2 is newer than filter
 * 1 (restored in reverse, it failed with EPERM). A helper child, forked
 * before the filters (so not under seccomp, which PTRACE_SECCOMP_GET_METADATA
 * requires of its caller), reads each filter's flags and length by ptrace
 * before and after: the same, filter 2 still with its LOG flag.
 */
#include "lib.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#define NFILT 3

static void install(int nr, int err, unsigned flags, int pad)
{
	struct sock_filter f[16] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
	};
	/* filters of distinct lengths, so that the helper can tell them apart */
	int n = 5;
	for (int i = 0; i < pad; i++)
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog))
		fail("seccomp: %m");
}

/* The helper: for each byte on fd in, reads pid's filters (flags, length),
 * one line on fd out. */
static void helper(pid_t pid, int in, int out)
{
	char c;
	while (read(in, &c, 1) == 1) {
		char line[256] = "";
		size_t used = 0;
		if (ptrace(PTRACE_SEIZE, pid, 0, 0) < 0 ||
		    ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0 || waitpid(pid, NULL, __WALL) < 0) {
			snprintf(line, sizeof(line), "ptrace: %m\n");
		} else {
			for (int i = 0; i < NFILT + 1 && used < sizeof(line) - 40; i++) {
				struct __ptrace_seccomp_metadata m = {.filter_off = (uint64_t)i};
				long r = ptrace(PTRACE_SECCOMP_GET_METADATA, pid, sizeof(m), &m);
				long len = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, i, 0);
				used += (size_t)snprintf(
				    line + used, sizeof(line) - used, "%d:%ld/%llx/%ld ", i,
				    r < 0 ? (long)-errno : 0L, (unsigned long long)m.flags, len);
			}
			used += (size_t)snprintf(line + used, sizeof(line) - used, "\n");
			ptrace(PTRACE_DETACH, pid, 0, 0);
		}
		if (write(out, line, strlen(line)) < 0)
			_exit(1);
	}
	_exit(0);
}

static int to_helper, from_helper;

static void filters(char *out, size_t size)
{
	ssize_t n;
	if (write(to_helper, "x", 1) != 1)
		fail("write to helper: %m");
	do
		n = read(from_helper, out, size - 1);
	while (n < 0 && errno == EINTR);
	out[n > 0 ? n : 0] = '\0';
}

static void check(const char *when, const char *ref)
{
	errno = 0;
	long pp = syscall(SYS_getppid);
	expect(pp == -1 && errno == EACCES,
	       "%s: getppid = %ld, errno %d (not EACCES: the filters are not in their order)", when,
	       pp, errno);
	struct sysinfo si;
	errno = 0;
	int r = sysinfo(&si);
	expect(r == -1 && errno == ENOENT, "%s: sysinfo() = %d, errno %d", when, r, errno);
	char v[32] = "";
	test_status_field("Seccomp_filters", v, sizeof(v));
	expect(!strcmp(v, "3"), "%s: Seccomp_filters: %s", when, v);
	if (ref) {
		char now[256];
		filters(now, sizeof(now));
		expect(!strcmp(now, ref), "%s: filters (index:ret/flags/len) %s, were %s", when,
		       now, ref);
	}
}

int main(void)
{
	int down[2], up[2];
	if (pipe(down) || pipe(up))
		fail("pipe: %m");
	pid_t parent = getpid();
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		close(down[1]);
		close(up[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		helper(parent, down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	to_helper = down[1];
	from_helper = up[0];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		fail("no_new_privs: %m");
	install(__NR_getppid, EPERM, 0, 0);
	install(__NR_getppid, EACCES, SECCOMP_FILTER_FLAG_LOG, 1);
	install(__NR_sysinfo, ENOENT, 0, 2);
	char before[256];
	filters(before, sizeof(before));
	/* oldest at index 0: filter 2 alone has the LOG flag */
	expect(strstr(before, "0:0/0/6 1:0/2/7 2:0/0/8 3:-2/") == before,
	       "before the checkpoint: filters (index:ret/flags/len) %s", before);
	check("before the checkpoint", NULL);
	if (test_failures())
		fail("seccomp does not behave as expected before the checkpoint");

	test_ready();
	test_wait();

	check("after restore", before);
	close(to_helper);
	waitpid(child, NULL, 0);
	pass();
}
