/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What this CPU and kernel offer. The CPU facts are read when asked (they
 * cannot change); the kernel features are probed by features_probe(), which
 * fills a table the caller owns.
 */
#ifndef CKPT_FEATURES_H
#define CKPT_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

/* XCR0: the xsave features the kernel enabled for user space */
uint64_t features_xcr0(void);
/* size of the NT_X86_XSTATE regset (CPUID 0xd, ebx) */
uint32_t features_xsave_size(void);

enum feature {
	FEAT_PTRACE_SEIZE,
	FEAT_PROCESS_VM,
	FEAT_PAGEMAP_SCAN,
	FEAT_PIDFD_GETFD,
	FEAT_KCMP,
	FEAT_CLONE3_SET_TID,
	FEAT_PR_SET_MM_MAP,
	FEAT_RSEQ_CONFIG,
	FEAT_SECCOMP_GET_FILTER,
	FEAT_MAP_FILES,
	FEAT_TIMER_RESTORE_IDS,
	FEAT_MAX,
};

struct feature_result {
	bool present;
	bool required;
	bool denied;            /* not present for this user (EPERM, EACCES): the
				 * kernel has it, a privilege is missing */
	char detail[120];
};

struct features {
	struct feature_result f[FEAT_MAX];
};

extern const char *const feature_names[FEAT_MAX];

/* Probes every feature (forks short-lived children to do so). */
void features_probe(struct features *ret);

#endif
