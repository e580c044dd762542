/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Signal dispositions. Handlers with SA_SIGINFO, SA_RESTART, SA_ONSTACK,
 * SA_NODEFER, SA_RESETHAND and various sa_mask sets, and some SIG_IGN.
 * After restore the kernel's view (handler, flags, restorer, mask, read
 * with the raw rt_sigaction for every signal but SIGKILL and SIGSTOP) is
 * identical, and the dispositions are in effect: delivered signals run
 * their handlers with the right mask and siginfo, an ignored one is
 * ignored, SA_RESETHAND resets.
 */
#include "lib.h"

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ksa {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

static struct ksa before[65];

static volatile sig_atomic_t hits[65];
static volatile int last_code[65], last_signo[65];
static volatile uint64_t mask_in[65];

static uint64_t cur_mask(void)
{
	uint64_t m = 0;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &m, 8);
	return m;
}

static void h_info(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	hits[sig]++;
	last_signo[sig] = si->si_signo;
	last_code[sig] = si->si_code;
	mask_in[sig] = cur_mask();
}

static void h_plain(int sig)
{
	hits[sig]++;
	mask_in[sig] = cur_mask();
}

static void set(int sig, int info, int flags, const int *mask_sigs, int ign)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	if (ign)
		sa.sa_handler = SIG_IGN;
	else if (info)
		sa.sa_sigaction = h_info;
	else
		sa.sa_handler = h_plain;
	sa.sa_flags = flags | (info ? SA_SIGINFO : 0);
	sigemptyset(&sa.sa_mask);
	for (; mask_sigs && *mask_sigs; mask_sigs++)
		sigaddset(&sa.sa_mask, *mask_sigs);
	if (sigaction(sig, &sa, NULL))
		fail("sigaction(%d): %m", sig);
}

static int get(int sig, struct ksa *k)
{
	return (int)syscall(SYS_rt_sigaction, sig, NULL, k, 8);
}

#define BIT(s) (1ull << ((s) - 1))

int main(void)
{
	test_setup_wake();
	const int rt = SIGRTMIN;
	const int m_hup[] = {SIGINT, SIGQUIT, 0};
	const int m_alrm[] = {SIGUSR2, SIGTERM, rt + 5, 0};
	const int m_rt[] = {rt, rt + 1, rt + 2, SIGRTMAX, 0};
	set(SIGHUP, 1, SA_RESTART, m_hup, 0);
	set(SIGINT, 0, 0, NULL, 1);
	set(SIGQUIT, 0, SA_ONSTACK | SA_NODEFER, NULL, 0);
	set(SIGUSR2, 1, 0, NULL, 0);
	set(SIGPIPE, 0, 0, NULL, 1);
	set(SIGTERM, 0, SA_RESETHAND, NULL, 0);
	set(SIGCHLD, 0, SA_NOCLDSTOP | SA_RESTART, NULL, 0);
	set(SIGWINCH, 0, 0, m_hup, 1);
	set(SIGALRM, 0, SA_RESTART, m_alrm, 0);
	set(rt + 5, 1, SA_NODEFER | SA_RESTART, m_rt, 0);
	set(SIGRTMAX, 0, 0, NULL, 1);
	for (int s = 1; s <= 64; s++)
		if (s != SIGKILL && s != SIGSTOP && get(s, &before[s]))
			fail("rt_sigaction(%d): %m", s);

	test_ready();
	test_wait();

	for (int s = 1; s <= 64; s++) {
		struct ksa k;
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		if (get(s, &k)) {
			test_failf("rt_sigaction(%d): %m", s);
			continue;
		}
		expect(k.handler == before[s].handler, "signal %d: handler %p, was %p", s,
		       k.handler, before[s].handler);
		expect(k.flags == before[s].flags, "signal %d: flags %#lx, was %#lx", s, k.flags,
		       before[s].flags);
		expect(k.restorer == before[s].restorer, "signal %d: restorer %p, was %p", s,
		       k.restorer, before[s].restorer);
		expect(k.mask == before[s].mask, "signal %d: mask %#llx, was %#llx", s,
		       (unsigned long long)k.mask, (unsigned long long)before[s].mask);
	}

	/* in effect */
	raise(SIGUSR2);
	expect(hits[SIGUSR2] == 1 && last_signo[SIGUSR2] == SIGUSR2 &&
		       last_code[SIGUSR2] == SI_TKILL,
	       "SIGUSR2 handler: %d hits, signo %d, code %d", hits[SIGUSR2], last_signo[SIGUSR2],
	       last_code[SIGUSR2]);
	raise(SIGHUP);
	expect(hits[SIGHUP] == 1, "SIGHUP handler did not run");
	expect((mask_in[SIGHUP] & (BIT(SIGHUP) | BIT(SIGINT) | BIT(SIGQUIT))) ==
		       (BIT(SIGHUP) | BIT(SIGINT) | BIT(SIGQUIT)),
	       "SIGHUP handler ran with mask %#llx: sa_mask lost",
	       (unsigned long long)mask_in[SIGHUP]);
	raise(SIGQUIT);
	expect(hits[SIGQUIT] == 1 && !(mask_in[SIGQUIT] & BIT(SIGQUIT)),
	       "SIGQUIT handler (SA_NODEFER): %d hits, mask %#llx", hits[SIGQUIT],
	       (unsigned long long)mask_in[SIGQUIT]);
	raise(SIGALRM);
	expect(hits[SIGALRM] == 1 && (mask_in[SIGALRM] & BIT(SIGUSR2)) &&
		       (mask_in[SIGALRM] & BIT(rt + 5)),
	       "SIGALRM handler: %d hits, mask %#llx", hits[SIGALRM],
	       (unsigned long long)mask_in[SIGALRM]);
	raise(rt + 5);
	expect(hits[rt + 5] == 1 && last_code[rt + 5] == SI_TKILL &&
		       !(mask_in[rt + 5] & BIT(rt + 5)) && (mask_in[rt + 5] & BIT(SIGRTMAX)),
	       "SIGRTMIN+5 handler: %d hits, mask %#llx", hits[rt + 5],
	       (unsigned long long)mask_in[rt + 5]);
	raise(SIGINT);  /* ignored: we live on */
	raise(SIGPIPE);
	raise(SIGRTMAX);
	raise(SIGTERM); /* SA_RESETHAND: runs once, then the default */
	expect(hits[SIGTERM] == 1, "SIGTERM handler did not run");
	struct sigaction sa;
	sigaction(SIGTERM, NULL, &sa);
	expect(sa.sa_handler == SIG_DFL, "SIGTERM not reset to SIG_DFL (SA_RESETHAND lost)");
	pass();
}
