/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The audit of docs/AUDIT.md as a test: the program changes as much of
 * its /proc-visible state as it can (umask, nice and policy, affinity,
 * signal mask, ignored and caught signals, a pending signal, rlimits,
 * prctl TSC / MCE kill / THP / timer slack / subreaper / keepcaps / no new
 * privileges, oom_score_adj, coredump_filter, personality, a process
 * memory policy, mlock) and compares /proc/self/status, limits,
 * oom_score_adj, coredump_filter, timerslack_ns, personality and the
 * scheduling lines of sched before and after the restart. Only the fields
 * AUDIT.md lists as not kept (counters, high-water marks, the fd table's
 * size, resident set sizes) may differ.
 */
#include "lib.h"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const files[] = { "status", "limits", "oom_score_adj", "coredump_filter",
				     "timerslack_ns", "personality", "sched" };
#define NFILES (sizeof(files) / sizeof(files[0]))

/* fields whose values are not kept (docs/AUDIT.md) */
static const char *const not_kept[] = {
	"FDSize:", "VmPeak:", "VmHWM:", "VmRSS:", "RssAnon:", "RssFile:", "RssShmem:", "VmPTE:",
	"VmSwap:", "VmSize:", "VmData:", "voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:",
	"State:", "PPid:", /* the root's parent is the restart */
	"SigQ:",  /* signals queued by the whole user, every process of it */
};

static bool kept_line(const char *file, const char *line)
{
	if (!strcmp(file, "sched"))
		return !strncmp(line, "policy", 6) || !strncmp(line, "prio", 4);
	for (size_t i = 0; i < sizeof(not_kept) / sizeof(not_kept[0]); i++)
		if (!strncmp(line, not_kept[i], strlen(not_kept[i])))
			return false;
	return true;
}

static void snapshot(char (*out)[8192])
{
	for (size_t i = 0; i < NFILES; i++) {
		char path[64], text[8192];
		snprintf(path, sizeof(path), "/proc/self/%s", files[i]);
		out[i][0] = '\0';
		if (test_read_file(path, text, sizeof(text)) < 0)
			fail("read %s: %m", path);
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
		test_failf("/proc/self/%s: '%.*s' became '%.*s'", files[i], (int)strcspn(a, "\n"), a,
			   (int)strcspn(b, "\n"), b);
	}
	pass();
}
