/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memory locked in RAM: an area mlock'ed after it was filled, one mapped
 * MAP_LOCKED, one locked with mlock2(MLOCK_ONFAULT) with half its pages
 * touched. After restart each keeps its VmFlags ("lo", and "lf" for the
 * on-fault one), its contents, and /proc/self/status's VmLck is the same.
 */
#include "lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define LEN (16 * 4096)

static long vmlck(void)
{
	static char status[8192];
	if (test_read_file("/proc/self/status", status, sizeof(status)) <= 0)
		fail("read status: %m");
	char *p = strstr(status, "VmLck:");
	return p ? strtol(p + 6, NULL, 10) : -1;
}

int main(void)
{
	char *a = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED,
		       -1, 0);
	char *c = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED || b == MAP_FAILED || c == MAP_FAILED)
		fail("mmap: %m");
	test_fill_random(a, LEN, 1);
	test_fill_random(b, LEN, 2);
	if (mlock(a, LEN) < 0 || mlock2(c, LEN, MLOCK_ONFAULT) < 0)
		fail("mlock: %m");
	test_fill_random(c, LEN / 2, 3);
	uint64_t ha = test_hash(a, LEN, 0), hb = test_hash(b, LEN, 0), hc = test_hash(c, LEN, 0);
	char fa[128], fb[128], fc[128], ga[128], gb[128], gc[128];
	test_vmflags(a, fa, sizeof(fa));
	test_vmflags(b, fb, sizeof(fb));
	test_vmflags(c, fc, sizeof(fc));
	if (!strstr(fa, " lo") || !strstr(fb, " lo") || !strstr(fc, " lf"))
		fail("locks not shown before: '%s' '%s' '%s'", fa, fb, fc);
	long lck = vmlck();

	test_ready();
	test_wait();

	test_vmflags(a, ga, sizeof(ga));
	test_vmflags(b, gb, sizeof(gb));
	test_vmflags(c, gc, sizeof(gc));
	expect(!strcmp(fa, ga), "mlock'ed area: '%s', was '%s'", ga, fa);
	expect(!strcmp(fb, gb), "MAP_LOCKED area: '%s', was '%s'", gb, fb);
	expect(!strcmp(fc, gc), "MLOCK_ONFAULT area: '%s', was '%s'", gc, fc);
	expect(vmlck() == lck, "VmLck %ld kB, was %ld kB", vmlck(), lck);
	expect(test_hash(a, LEN, 0) == ha && test_hash(b, LEN, 0) == hb &&
	       test_hash(c, LEN, 0) == hc, "contents differ");
	pass();
}
