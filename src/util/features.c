/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "util/features.h"

#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/kernel.h"

const char *const feature_names[FEAT_MAX] = {
	[FEAT_PTRACE_SEIZE] = "ptrace: PTRACE_SEIZE and PTRACE_INTERRUPT",
	[FEAT_PROCESS_VM] = "process_vm_readv/writev",
	[FEAT_PAGEMAP_SCAN] = "PAGEMAP_SCAN ioctl (Linux 6.7)",
	[FEAT_PIDFD_GETFD] = "pidfd_open and pidfd_getfd",
	[FEAT_KCMP] = "kcmp (CONFIG_CHECKPOINT_RESTORE)",
	[FEAT_CLONE3_SET_TID] = "clone3 with set_tid (chosen pids)",
	[FEAT_PR_SET_MM_MAP] = "prctl(PR_SET_MM_MAP)",
	[FEAT_RSEQ_CONFIG] = "PTRACE_GET_RSEQ_CONFIGURATION",
	[FEAT_SECCOMP_GET_FILTER] = "PTRACE_SECCOMP_GET_FILTER",
	[FEAT_MAP_FILES] = "/proc/PID/map_files",
	[FEAT_TIMER_RESTORE_IDS] = "prctl(PR_TIMER_CREATE_RESTORE_IDS) (Linux 6.16)",
};

uint64_t features_xcr0(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
		return 3; /* x87 and SSE */
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

uint32_t features_xsave_size(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid_count(0xd, 0, &a, &b, &c, &d))
		return 512;
	return b;
}

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif

static void set(struct features *f, enum feature which, bool present, bool required,
		const char *detail)
{
	f->f[which].present = present;
	f->f[which].required = required;
	snprintf(f->f[which].detail, sizeof(f->f[which].detail), "%s", detail ? detail : "");
}

static void set_errno(struct features *f, enum feature which, bool required, int err)
{
	set(f, which, false, required, strerror(err));
	f->f[which].denied = err == EPERM || err == EACCES;
}

static void probe_traced(struct features *f, pid_t child)
{
	int status;
	long data = 0;

	if (ptrace(PTRACE_SEIZE, child, 0, 0) < 0) {
		set_errno(f, FEAT_PTRACE_SEIZE, true, errno);
		return;
	}
	if (ptrace(PTRACE_INTERRUPT, child, 0, 0) < 0 || waitpid(child, &status, __WALL) < 0) {
		set_errno(f, FEAT_PTRACE_SEIZE, true, errno);
		return;
	}
	set(f, FEAT_PTRACE_SEIZE, true, true, NULL);

	struct iovec l = { &data, sizeof(data) }, r = { &data, sizeof(data) };
	if (process_vm_readv(child, &l, 1, &r, 1, 0) == sizeof(data))
		set(f, FEAT_PROCESS_VM, true, true, NULL);
	else
		set_errno(f, FEAT_PROCESS_VM, true, errno);

	struct {
		uint64_t ptr;
		uint32_t size, sig, flags, pad;
	} rc;
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, child, sizeof(rc), &rc) >= 0)
		set(f, FEAT_RSEQ_CONFIG, true, true, NULL);
	else
		set_errno(f, FEAT_RSEQ_CONFIG, true, errno);

	errno = 0;
	long n = ptrace(PTRACE_SECCOMP_GET_FILTER, child, 0, NULL);
	if (n >= 0 || errno == EINVAL || errno == ENOENT)
		set(f, FEAT_SECCOMP_GET_FILTER, true, false, NULL);
	else
		set_errno(f, FEAT_SECCOMP_GET_FILTER, false, errno);

	int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	int fd = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, 0, 0) : -1;
	if (fd >= 0)
		set(f, FEAT_PIDFD_GETFD, true, false, NULL);
	else
		set_errno(f, FEAT_PIDFD_GETFD, false, errno);
	if (fd >= 0)
		close(fd);
	if (pidfd >= 0)
		close(pidfd);
	ptrace(PTRACE_DETACH, child, 0, 0);
}

static pid_t free_pid(void)
{
	char path[32];
	struct stat st;
	for (pid_t p = 30000; p > 1000; p -= 7) {
		snprintf(path, sizeof(path), "/proc/%d", p);
		if (stat(path, &st) < 0)
			return p;
	}
	return 0;
}

static void probe_set_tid(struct features *f)
{
	pid_t want = free_pid();
	struct clone_args args = { .exit_signal = SIGCHLD };
	args.set_tid = (uint64_t)(uintptr_t)&want;
	args.set_tid_size = 1;
	long r = syscall(SYS_clone3, &args, sizeof(args));
	if (r == 0)
		_exit(0);
	if (r < 0) {
		bool denied = errno == EPERM;
		set(f, FEAT_CLONE3_SET_TID, false, true,
		    denied ? "not permitted: needs CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN"
			   : strerror(errno));
		f->f[FEAT_CLONE3_SET_TID].denied = denied;
		return;
	}
	waitpid((pid_t)r, NULL, 0);
	set(f, FEAT_CLONE3_SET_TID, r == want, true, r == want ? NULL : "got another pid");
}

void features_probe(struct features *ret)
{
	memset(ret, 0, sizeof(*ret));

	pid_t child = fork();
	if (child == 0) {
		for (;;)
			pause();
	}
	if (child > 0) {
		probe_traced(ret, child);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	} else {
		set_errno(ret, FEAT_PTRACE_SEIZE, true, errno);
	}

	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	struct page_region reg;
	static const char probe_page[4096] __attribute__((aligned(4096)));
	struct pm_scan_arg arg = {
		.size = sizeof(arg),
		.start = (uint64_t)(uintptr_t)probe_page,
		.end = (uint64_t)(uintptr_t)probe_page + 4096,
		.vec = (uint64_t)(uintptr_t)&reg,
		.vec_len = 1,
		.category_anyof_mask = PAGE_IS_PRESENT,
		.return_mask = PAGE_IS_PRESENT,
	};
	if (pm >= 0 && ioctl(pm, PAGEMAP_SCAN, &arg) >= 0)
		set(ret, FEAT_PAGEMAP_SCAN, true, true, NULL);
	else
		set_errno(ret, FEAT_PAGEMAP_SCAN, true, errno);
	if (pm >= 0)
		close(pm);

	pid_t self = getpid();
	if (syscall(SYS_kcmp, self, self, KCMP_FILE, 0, 0) >= 0 || errno == EBADF)
		set(ret, FEAT_KCMP, true, true, NULL);
	else
		set_errno(ret, FEAT_KCMP, true, errno);

	probe_set_tid(ret);

	unsigned int size = 0;
	if (prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE, &size, 0, 0) == 0 && size)
		set(ret, FEAT_PR_SET_MM_MAP, true, true, NULL);
	else
		set_errno(ret, FEAT_PR_SET_MM_MAP, true, errno);

	_cleanup_closedir_ DIR *d = opendir("/proc/self/map_files");
	struct dirent *de = NULL;
	char link[300], target[256];
	while (d && (de = readdir(d)) && de->d_name[0] == '.')
		;
	if (de) {
		snprintf(link, sizeof(link), "/proc/self/map_files/%s", de->d_name);
		if (readlink(link, target, sizeof(target)) > 0)
			set(ret, FEAT_MAP_FILES, true, true, NULL);
		else
			set_errno(ret, FEAT_MAP_FILES, true, errno);
	} else {
		set_errno(ret, FEAT_MAP_FILES, true, errno ? errno : ENOENT);
	}

	/* without it, timers are restored only if their ids have no holes */
	if (prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_GET, 0, 0, 0) >= 0)
		set(ret, FEAT_TIMER_RESTORE_IDS, true, false, NULL);
	else
		set_errno(ret, FEAT_TIMER_RESTORE_IDS, false, errno);
}
