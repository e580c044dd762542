/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The audit of docs/AUDIT.md as a test: the program changes as much of
 * its /proc-visible state as it can (umask, nice and policy, affinity,
 * signal mask, ignored and caught signals, a pending signal, rlimits,
 * prctl TSC / MCE kill / THP / timer slack / subreaper / keepcaps / no new
 * privileges, oom_score_adj, coredump_filter, personality, a process
 * memory policy, mlock, comm, madvise flags and an anon vma name (where
 * the kernel has them), an
 * eventfd, a signalfd and a file opened O_APPEND at an offset) and compares
 * /proc/self/status, limits, oom_score_adj, coredump_filter,
 * timerslack_ns, personality, the scheduling lines of sched, the fields
 * of stat a restart keeps (priority, nice, threads, code/stack/data/brk/
 * args/env addresses, exit signal, real-time priority, policy), every
 * vma's smaps header and VmFlags, and the fdinfo of those fds (without
 * their inode numbers) before and after the restart. Only the fields
 * AUDIT.md lists as not kept (counters, high-water marks, the fd table's
 * size, resident set sizes) may differ.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const files[] = { "status",	  "limits",	 "oom_score_adj",
				     "coredump_filter", "timerslack_ns", "personality",
				     "sched",		  "stat",	 "smaps",
				     "fdinfo/20",	  "fdinfo/21",	 "fdinfo/22" };
#define NFILES (sizeof(files) / sizeof(files[0]))

/* fields whose values are not kept (docs/AUDIT.md) */
static const char *const not_kept[] = {
	"FDSize:", "VmPeak:", "VmHWM:", "VmRSS:", "RssAnon:", "RssFile:", "RssShmem:", "VmPTE:",
	"VmSwap:", "VmSize:", "VmData:", "voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:",
	"State:", "PPid:", /* the root's parent is the restart */
	"SigQ:",  /* signals queued by the whole user, every process of it */
};

/* stat's fields (1-based) a restart keeps */
static const int stat_kept[] = { 18, 19, 20, 26, 27, 28, 38, 40, 41, 45, 46, 47, 48, 49, 50, 51 };

/* The kept fields of a stat line, after the comm's closing parenthesis. */
static void stat_fields(const char *line, char *out, size_t size)
{
	const char *p = strrchr(line, ')');
	size_t o = 0;
	out[0] = '\0';
	for (int field = 3; p && *p; field++) {
		p += strspn(p, ") ");
		size_t n = strcspn(p, " ");
		for (size_t i = 0; i < sizeof(stat_kept) / sizeof(stat_kept[0]); i++)
			if (stat_kept[i] == field && o < size)
				o += (size_t)snprintf(out + o, size - o, "%d=%.*s ", field, (int)n, p);
		p += n;
	}
}

static bool kept_line(const char *file, const char *line)
{
	if (!strcmp(file, "sched"))
		return !strncmp(line, "policy", 6) || !strncmp(line, "prio", 4);
	if (!strcmp(file, "smaps")) /* the vma headers and their flags */
		return strchr("0123456789abcdef", line[0]) || !strncmp(line, "VmFlags:", 8);
	if (!strncmp(file, "fdinfo/", 7))
		return strncmp(line, "ino:", 4) && strncmp(line, "eventfd-id:", 11);
	for (size_t i = 0; i < sizeof(not_kept) / sizeof(not_kept[0]); i++)
		if (!strncmp(line, not_kept[i], strlen(not_kept[i])))
			return false;
	return true;
}

static void snapshot(char (*out)[8192])
{
	for (size_t i = 0; i < NFILES; i++) {
		char path[64];
		static char text[1 << 16];
		snprintf(path, sizeof(path), "/proc/self/%s", files[i]);
		out[i][0] = '\0';
		if (test_read_file(path, text, sizeof(text)) < 0)
			fail("read %s: %m", path);
		if (!strcmp(files[i], "stat")) {
			stat_fields(text, out[i], 8192);
			continue;
		}
		for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
			if (kept_line(files[i], l))
				snprintf(out[i] + strlen(out[i]), 8192 - strlen(out[i]), "%s\n", l);
	}
}

static void write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		fail("write %s: %m", path);
	close(fd);
}

static void on_usr2(int s)
{
	(void)s;
}

int main(void)
{
	umask(027);
	if (setpriority(PRIO_PROCESS, 0, 5) < 0)
		fail("setpriority: %m");
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof(one), &one) < 0)
		fail("affinity: %m");
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGRTMIN + 3);
	sigaddset(&m, SIGHUP);
	sigprocmask(SIG_BLOCK, &m, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR2, on_usr2);
	raise(SIGHUP); /* blocked: stays pending */
	struct rlimit rl = { 1000, 2000 };
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fail("setrlimit: %m");
	if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV) < 0 ||
	    prctl(PR_MCE_KILL, PR_MCE_KILL_SET, PR_MCE_KILL_LATE, 0, 0) < 0 ||
	    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) < 0 || prctl(PR_SET_TIMERSLACK, 123456) < 0 ||
	    prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 || prctl(PR_SET_KEEPCAPS, 1) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail("prctl: %m");
	write_str("/proc/self/oom_score_adj", "123");
	write_str("/proc/self/coredump_filter", "0x21");
	if (personality(ADDR_NO_RANDOMIZE | PER_LINUX) < 0)
		fail("personality: %m");
	unsigned long node0 = 1;
	if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, &node0, 64) < 0)
		fail("set_mempolicy: %m");
	static char locked[4096 * 4] __attribute__((aligned(4096)));
	locked[0] = 1;
	if (mlock(locked, sizeof(locked)) < 0)
		fail("mlock: %m");
	if (prctl(PR_SET_NAME, "audited") < 0)
		fail("PR_SET_NAME: %m");
	static char area[4096 * 3] __attribute__((aligned(4096)));
	area[0] = area[4096] = 1;
	if (madvise(area, 4096, MADV_DONTFORK) < 0 || madvise(area + 4096, 4096, MADV_DONTDUMP) < 0)
		fail("madvise: %m");
	void *named = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (named == MAP_FAILED)
		fail("mmap: %m");
	/* a kernel without CONFIG_ANON_VMA_NAME says EINVAL: then unnamed */
	if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)named, 8192, "audited") < 0 &&
	    errno != EINVAL)
		fail("PR_SET_VMA: %m");
	sigset_t sfm;
	sigemptyset(&sfm);
	sigaddset(&sfm, SIGRTMIN + 3);
	int efd = eventfd(77, EFD_NONBLOCK | EFD_SEMAPHORE), sfd = signalfd(-1, &sfm, SFD_NONBLOCK);
	int ffd = open("appended", O_RDWR | O_CREAT | O_APPEND, 0600);
	if (efd < 0 || sfd < 0 || ffd < 0 || dup2(efd, 20) != 20 || dup2(sfd, 21) != 21 ||
	    dup2(ffd, 22) != 22 || write(22, "0123456789", 10) != 10 || lseek(22, 3, SEEK_SET) != 3)
		fail("fds: %m");
	close(efd);
	close(sfd);
	close(ffd);
	static char before[NFILES][8192], after[NFILES][8192];
	test_setup_wake(); /* its SIGUSR1 handler is part of the state */
	snapshot(before);

	test_ready();
	test_wait();

	snapshot(after);
	for (size_t i = 0; i < NFILES; i++) {
		if (!strcmp(before[i], after[i]))
			continue;
		/* name the first line that differs */
		char *a = before[i], *b = after[i];
		while (*a && *a == *b)
			a++, b++;
		while (a > before[i] && a[-1] != '\n')
			a--, b--;
		/* and the line before it (a vma's header, for its VmFlags) */
		const char *prev = a > before[i] ? a - 1 : a;
		while (prev > before[i] && prev[-1] != '\n')
			prev--;
		test_failf("/proc/self/%s: '%.*s' became '%.*s' (after '%.*s')", files[i],
			   (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b,
			   (int)(a - prev > 0 ? a - prev - 1 : 0), prev);
	}
	pass();
}
