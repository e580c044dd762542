/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pending signals, all blocked so they stay queued across the checkpoint:
 *   SIGUSR2       kill() twice          process-wide, SI_USER, merged into one
 *   SIGRTMIN+1    sigqueue(), value 0x1234          process-wide, SI_QUEUE
 *   SIGRTMIN+4    sigqueue() twice, values 1 and 2  process-wide, queued twice
 *   SIGRTMIN+2    tgkill()                          thread-directed, SI_TKILL
 *   SIGRTMIN+3    rt_tgsigqueueinfo(), value 0xbeef thread-directed, SI_QUEUE
 * After restore sigpending() shows them, /proc/self/status puts each in the
 * right set (ShdPnd process-wide, SigPnd thread), and rt_sigtimedwait()
 * returns each with the same si_code, si_pid, si_uid and si_value, the two
 * SIGRTMIN+4 in order, and no extra instance of anything.
 */
#include "lib.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct want {
	const char *name;
	int sig, code, value, thread;
};

static uint64_t status_mask(const char *field)
{
	char v[64];
	if (test_status_field(field, v, sizeof(v)))
		fail("no %s in /proc/self/status", field);
	return strtoull(v, NULL, 16);
}

#define BIT(s) (1ull << ((s) - 1))

/* glibc's sigtimedwait() turns SI_TKILL into SI_USER: ask the kernel */
static int raw_sigtimedwait(const sigset_t *set, siginfo_t *si, const struct timespec *ts)
{
	return (int)syscall(SYS_rt_sigtimedwait, set, si, ts, 8);
}

int main(void)
{
	test_setup_wake();
	const int rt = SIGRTMIN;
	const pid_t pid = getpid();
	const uid_t uid = getuid();
	const struct want w[] = {
		{"SIGUSR2", SIGUSR2, SI_USER, 0, 0},
		{"SIGRTMIN+1", rt + 1, SI_QUEUE, 0x1234, 0},
		{"SIGRTMIN+4 #1", rt + 4, SI_QUEUE, 1, 0},
		{"SIGRTMIN+4 #2", rt + 4, SI_QUEUE, 2, 0},
		{"SIGRTMIN+2", rt + 2, SI_TKILL, 0, 1},
		{"SIGRTMIN+3", rt + 3, SI_QUEUE, 0xbeef, 1},
	};
	const int n = sizeof(w) / sizeof(w[0]);
	sigset_t set;
	sigemptyset(&set);
	for (int i = 0; i < n; i++)
		sigaddset(&set, w[i].sig);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		fail("sigprocmask: %m");

	kill(pid, SIGUSR2);
	kill(pid, SIGUSR2);
	sigqueue(pid, rt + 1, (union sigval){.sival_int = 0x1234});
	sigqueue(pid, rt + 4, (union sigval){.sival_int = 1});
	sigqueue(pid, rt + 4, (union sigval){.sival_int = 2});
	if (syscall(SYS_tgkill, pid, gettid(), rt + 2))
		fail("tgkill: %m");
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = rt + 3;
	si.si_code = SI_QUEUE;
	si.si_pid = pid;
	si.si_uid = uid;
	si.si_value.sival_int = 0xbeef;
	if (syscall(SYS_rt_tgsigqueueinfo, pid, gettid(), rt + 3, &si))
		fail("rt_tgsigqueueinfo: %m");
	uint64_t shd = 0, thr = 0;
	for (int i = 0; i < n; i++)
		*(w[i].thread ? &thr : &shd) |= BIT(w[i].sig);
	if (status_mask("ShdPnd") != shd || status_mask("SigPnd") != thr)
		fail("pending sets not as expected before the checkpoint");

	test_ready();
	test_wait();

	sigset_t pend;
	sigpending(&pend);
	for (int i = 0; i < n; i++)
		expect(sigismember(&pend, w[i].sig), "%s not pending", w[i].name);
	uint64_t s = status_mask("ShdPnd"), t = status_mask("SigPnd");
	expect(s == shd, "ShdPnd (process-wide) is %#llx, want %#llx", (unsigned long long)s,
	       (unsigned long long)shd);
	expect(t == thr, "SigPnd (thread) is %#llx, want %#llx", (unsigned long long)t,
	       (unsigned long long)thr);
	const struct timespec zero = {0, 0};
	for (int i = 0; i < n; i++) {
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, w[i].sig);
		memset(&si, 0, sizeof(si));
		int r = raw_sigtimedwait(&one, &si, &zero);
		if (r != w[i].sig) {
			test_failf("%s: sigtimedwait returned %d (%m)", w[i].name, r);
			continue;
		}
		expect(si.si_code == w[i].code, "%s: si_code %d, want %d", w[i].name, si.si_code,
		       w[i].code);
		expect(si.si_pid == pid, "%s: si_pid %d, want %d", w[i].name, (int)si.si_pid,
		       (int)pid);
		expect(si.si_uid == uid, "%s: si_uid %d, want %d", w[i].name, (int)si.si_uid,
		       (int)uid);
		if (w[i].code == SI_QUEUE)
			expect(si.si_value.sival_int == w[i].value, "%s: si_value %#x, want %#x",
			       w[i].name, si.si_value.sival_int, w[i].value);
	}
	/* nothing left: no duplicates */
	memset(&si, 0, sizeof(si));
	int r = raw_sigtimedwait(&set, &si, &zero);
	expect(r < 0 && errno == EAGAIN, "an extra signal %d (code %d) was pending", r, si.si_code);
	pass();
}
