/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The vDSO: after restore [vdso], [vvar] (and [vvar_vclock] if present) are
 * where they were, AT_SYSINFO_EHDR still points at the vDSO's ELF header,
 * and the vDSO clocks work: they agree with the clock_gettime system call,
 * they did not go backwards, gettimeofday() and time() agree with them.
 */
#include "lib.h"

#include <elf.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *const special[] = {"[vdso]", "[vvar]", "[vvar_vclock]"};
#define NSPECIAL 3

static int64_t sys_ns(clockid_t c)
{
	struct timespec ts;
	if (syscall(SYS_clock_gettime, c, &ts))
		fail("clock_gettime syscall: %m");
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* vdso <= syscall <= vdso, give or take a little */
static void check_clock(const char *name, clockid_t c, int64_t before)
{
	int64_t v1 = test_now_ns(c), s = sys_ns(c), v2 = test_now_ns(c);
	const int64_t slack = 1000000; /* 1 ms */
	expect(v1 <= s + slack && s <= v2 + slack,
	       "%s: vdso %lld, syscall %lld, vdso %lld disagree", name, (long long)v1,
	       (long long)s, (long long)v2);
	expect(v1 >= before, "%s went backwards: %lld before, %lld after", name,
	       (long long)before, (long long)v1);
}

int main(void)
{
	struct test_map before[NSPECIAL];
	int have[NSPECIAL];
	for (int i = 0; i < NSPECIAL; i++)
		have[i] = !test_find_map_named(special[i], &before[i]);
	if (!have[0])
		fail("no [vdso] mapping");
	const unsigned long aux = getauxval(AT_SYSINFO_EHDR);
	if (aux != before[0].start)
		fail("AT_SYSINFO_EHDR %lx is not [vdso] %lx", aux, (unsigned long)before[0].start);
	const int64_t mono = test_now_ns(CLOCK_MONOTONIC), real = test_now_ns(CLOCK_REALTIME);
	const int64_t boot = test_now_ns(CLOCK_BOOTTIME);

	test_ready();
	test_wait();

	for (int i = 0; i < NSPECIAL; i++) {
		struct test_map m;
		int h = !test_find_map_named(special[i], &m);
		if (h != have[i]) {
			test_failf("%s %s after restore", special[i], h ? "appeared" : "vanished");
			continue;
		}
		if (h)
			expect(m.start == before[i].start && m.end == before[i].end,
			       "%s is %lx-%lx, was %lx-%lx", special[i], (unsigned long)m.start,
			       (unsigned long)m.end, (unsigned long)before[i].start,
			       (unsigned long)before[i].end);
	}
	expect(getauxval(AT_SYSINFO_EHDR) == aux, "AT_SYSINFO_EHDR changed");
	expect(!memcmp((void *)aux, ELFMAG, SELFMAG), "no ELF header at AT_SYSINFO_EHDR");

	check_clock("CLOCK_MONOTONIC", CLOCK_MONOTONIC, mono);
	check_clock("CLOCK_REALTIME", CLOCK_REALTIME, real);
	check_clock("CLOCK_BOOTTIME", CLOCK_BOOTTIME, boot);
	struct timeval tv;
	gettimeofday(&tv, NULL);
	int64_t tod = (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000;
	int64_t r = sys_ns(CLOCK_REALTIME);
	expect(tod <= r + 1000000 && r - tod < 1000000000, "gettimeofday %lld vs realtime %lld",
	       (long long)tod, (long long)r);
	time_t t = time(NULL);
	expect(t >= real / 1000000000 && t <= r / 1000000000 + 1, "time() is %lld",
	       (long long)t);
	pass();
}
