/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kinds' pure record checks (kinds/checks.h) on good and forged records. */
#include <signal.h>
#include <stdbool.h>

#include "kinds/checks.h"
#include "unit.h"

TEST(rlimits)
{
	RlimitEntry l = RLIMIT_ENTRY__INIT, *pl = &l;
	RlimitsEntry e = RLIMITS_ENTRY__INIT;
	e.limits = &pl;
	e.n_limits = 1;
	l.resource = 7; /* RLIMIT_NOFILE */
	l.cur = 1024;
	l.max = 1024;
	CHECK(!rlimits_entry_invalid(&e));
	l.cur = 1025;
	CHECK_STR(rlimits_entry_invalid(&e), "a soft limit above its hard limit");
	l.cur = 1;
	l.resource = 16; /* RLIM_NLIMITS */
	CHECK_STR(rlimits_entry_invalid(&e), "a limit of no resource");
}

TEST(signals)
{
	SigactionEntry a = SIGACTION_ENTRY__INIT, *pa = &a;
	SiginfoEntry p = SIGINFO_ENTRY__INIT, *pp = &p;
	SignalsEntry e = SIGNALS_ENTRY__INIT;
	unsigned char info[128] = { 0 };
	e.actions = &pa;
	e.n_actions = 1;
	e.pending = &pp;
	e.n_pending = 1;
	p.siginfo.data = info;
	p.siginfo.len = sizeof(info);
	a.sig = 64;
	CHECK(!signals_entry_invalid(&e));
	for (uint32_t bad = 0; bad <= 65; bad++) {
		a.sig = bad;
		bool wrong = !bad || bad == SIGKILL || bad == SIGSTOP || bad > 64;
		CHECK(!!signals_entry_invalid(&e) == wrong);
	}
	a.sig = SIGUSR1;
	p.siginfo.len = 127;
	CHECK_STR(signals_entry_invalid(&e), "a pending siginfo that is not 128 bytes");
	p.siginfo.len = 128;
	e.n_pending = 4097;
	CHECK_STR(signals_entry_invalid(&e), "too many pending signals");
}

TEST(sched)
{
	SchedEntry e = SCHED_ENTRY__INIT;
	unsigned char mask[1025] = { 1 };
	e.affinity.data = mask;
	e.affinity.len = 8;
	e.nice = 19;
	CHECK(!sched_entry_invalid(&e));
	e.nice = -21;
	CHECK_STR(sched_entry_invalid(&e), "nice is out of range");
	e.nice = 0;
	e.affinity.len = 1025;
	CHECK_STR(sched_entry_invalid(&e), "an affinity mask of more than 8192 cpus");
	e.affinity.len = 1024;
	CHECK(!sched_entry_invalid(&e));
	e.has_util_max = true;
	e.util_min = 600;
	e.util_max = 500;
	CHECK_STR(sched_entry_invalid(&e), "utilization clamps are out of range");
	e.util_min = 0;
	e.util_max = 1025;
	CHECK_STR(sched_entry_invalid(&e), "utilization clamps are out of range");
	e.util_max = 1024;
	e.has_oom_score_adj = true;
	e.oom_score_adj = -1000;
	CHECK(!sched_entry_invalid(&e));
	e.oom_score_adj = 1001;
	CHECK_STR(sched_entry_invalid(&e), "oom_score_adj is out of range");
}

TEST(seccomp)
{
	unsigned char insns[8 * 3] = { 0 };
	SeccompFilter f = SECCOMP_FILTER__INIT, *pf = &f;
	SeccompEntry e = SECCOMP_ENTRY__INIT;
	e.mode = 2;
	e.filters = &pf;
	e.n_filters = 1;
	f.insns.data = insns;
	f.insns.len = sizeof(insns);
	CHECK(!seccomp_entry_invalid(&e));
	f.insns.len = 23; /* not whole instructions */
	CHECK(seccomp_entry_invalid(&e) != NULL);
	f.insns.len = 0;
	CHECK(seccomp_entry_invalid(&e) != NULL);
	f.insns.len = 8;
	e.mode = 1; /* strict mode has no filters */
	CHECK_STR(seccomp_entry_invalid(&e), "strict mode with filters");
	e.n_filters = 0;
	CHECK(!seccomp_entry_invalid(&e));
	e.mode = 3;
	CHECK_STR(seccomp_entry_invalid(&e), "a mode other than strict or filter");
	e.n_filters = 1;
	e.mode = 2;
	e.n_filters = 65;
	CHECK_STR(seccomp_entry_invalid(&e), "too many filters");
}

TEST(creds)
{
	CredsEntry e = CREDS_ENTRY__INIT;
	CHECK(!creds_entry_invalid(&e));
	e.n_groups = 65537;
	CHECK_STR(creds_entry_invalid(&e), "more than 65536 supplementary groups");
	e.n_groups = 0;
	e.has_pdeathsig = true;
	e.pdeathsig = 64;
	CHECK(!creds_entry_invalid(&e));
	e.pdeathsig = 65;
	CHECK_STR(creds_entry_invalid(&e), "a parent-death signal above 64");
}

TEST(regs)
{
	RegsEntry e = REGS_ENTRY__INIT;
	unsigned char xs[577] = { 0 };
	e.cs = 0x33;
	e.ss = 0x2b;
	e.rip = 0x7fffffffffffull;
	CHECK(!regs_entry_invalid(&e));
	e.cs = 0x23; /* a 32-bit task */
	CHECK_STR(regs_entry_invalid(&e), "segments of other than a 64-bit user task");
	e.cs = 0x33;
	e.rip = 0xffffffff81000000ull;
	CHECK(regs_entry_invalid(&e) != NULL);
	e.rip = 0x401000;
	e.fs_base = 0x800000000000ull;
	CHECK(regs_entry_invalid(&e) != NULL);
	e.fs_base = 0;
	e.has_xstate = true;
	e.xstate.data = xs;
	e.xstate.len = 575;
	CHECK_STR(regs_entry_invalid(&e), "an xstate of a bad size");
	e.xstate.len = 576;
	CHECK(!regs_entry_invalid(&e));
}

TEST(fs)
{
	FsEntry e = FS_ENTRY__INIT;
	e.cwd = "/tmp";
	e.root = "/";
	e.umask = 022;
	CHECK(!fs_entry_invalid(&e));
	e.cwd = "tmp";
	CHECK_STR(fs_entry_invalid(&e), "a cwd or root that is not an absolute path");
	e.cwd = "";
	CHECK(fs_entry_invalid(&e) != NULL);
	e.cwd = "/";
	e.umask = 01000;
	CHECK_STR(fs_entry_invalid(&e), "a umask above 0777");
}

TEST(lsm_label)
{
	/* AppArmor's text ends in a newline, SELinux's in a NUL */
	static const char un[] = "unconfined\n", conf[] = "/usr/sbin/chronyd (enforce)\n";
	static const char se[] = "system_u:system_r:unconfined_t:s0",
			  se2[] = "system_u:system_r:chronyd_t:s0";
	CHECK(!lsm_label_refusal(un, sizeof(un) - 1, un, sizeof(un) - 1));
	CHECK(!lsm_label_refusal("unconfined", 10, un, sizeof(un) - 1));
	CHECK_STR(lsm_label_refusal(conf, sizeof(conf) - 1, un, sizeof(un) - 1),
		  "its security label is not ckpt's");
	CHECK(!lsm_label_refusal(se, sizeof(se), se, sizeof(se) - 1));
	CHECK_STR(lsm_label_refusal(se2, sizeof(se2), se, sizeof(se)),
		  "its security label is not ckpt's");
	CHECK(!lsm_label_refusal("", 0, NULL, 0));
	CHECK_STR(lsm_label_refusal(un, sizeof(un) - 1, NULL, 0),
		  "it has a security label and ckpt's own cannot be read");
}

int main(void)
{
	RUN(rlimits);
	RUN(signals);
	RUN(sched);
	RUN(seccomp);
	RUN(creds);
	RUN(regs);
	RUN(fs);
	RUN(lsm_label);
	return unit_done();
}
