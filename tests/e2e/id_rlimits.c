/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Resource limits, each changed from what the runner (and so ckpt restart)
 * has: RLIMIT_NOFILE soft 200, RLIMIT_CORE 0 with a lowered hard limit,
 * RLIMIT_STACK soft 4 MiB, RLIMIT_MEMLOCK soft 64 KiB, RLIMIT_MSGQUEUE soft
 * 1000 bytes. After restore every limit (prlimit, soft and hard) and
 * /proc/self/limits are the same as before.
 */
#include "lib.h"

#include <string.h>
#include <sys/resource.h>

static const char *const names[RLIM_NLIMITS] = {
	"CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE",
	"MEMLOCK", "AS", "LOCKS", "SIGPENDING", "MSGQUEUE", "NICE", "RTPRIO", "RTTIME"};

static void lower(int res, rlim_t soft, rlim_t hard)
{
	struct rlimit r;
	getrlimit(res, &r);
	if (hard != RLIM_INFINITY && (r.rlim_max == RLIM_INFINITY || hard < r.rlim_max))
		r.rlim_max = hard;
	if (soft < r.rlim_cur || r.rlim_cur == RLIM_INFINITY)
		r.rlim_cur = soft;
	if (r.rlim_cur > r.rlim_max)
		r.rlim_cur = r.rlim_max;
	if (setrlimit(res, &r))
		fail("setrlimit(%s): %m", names[res]);
}

int main(void)
{
	lower(RLIMIT_NOFILE, 200, RLIM_INFINITY);
	lower(RLIMIT_CORE, 0, 1ul << 20);
	lower(RLIMIT_STACK, 4ul << 20, RLIM_INFINITY);
	lower(RLIMIT_MEMLOCK, 64ul << 10, RLIM_INFINITY);
	lower(RLIMIT_MSGQUEUE, 1000, RLIM_INFINITY);
	struct rlimit before[RLIM_NLIMITS];
	for (int i = 0; i < RLIM_NLIMITS; i++)
		prlimit(0, i, NULL, &before[i]);
	static char limits_before[8192], limits_after[8192];
	if (test_read_file("/proc/self/limits", limits_before, sizeof(limits_before)) <= 0)
		fail("read /proc/self/limits: %m");

	test_ready();
	test_wait();

	for (int i = 0; i < RLIM_NLIMITS; i++) {
		struct rlimit r;
		prlimit(0, i, NULL, &r);
		expect(r.rlim_cur == before[i].rlim_cur && r.rlim_max == before[i].rlim_max,
		       "RLIMIT_%s is %llu/%llu, was %llu/%llu", names[i],
		       (unsigned long long)r.rlim_cur, (unsigned long long)r.rlim_max,
		       (unsigned long long)before[i].rlim_cur,
		       (unsigned long long)before[i].rlim_max);
	}
	test_read_file("/proc/self/limits", limits_after, sizeof(limits_after));
	expect(!strcmp(limits_before, limits_after), "/proc/self/limits differs");
	pass();
}
