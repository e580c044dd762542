/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hugetlb memory, refused by name: a private MAP_HUGETLB mapping (written)
 * and a hugetlb memfd (MFD_HUGETLB) held by an fd. Huge pages are had by
 * raising vm.nr_hugepages for the time of the mmap (the old value is
 * written back at once: pages in use stay as surplus); without them the
 * test is skipped. The checkpoint must name both, and the original go on.
 */
#include "lib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE (2ul << 20)

static long nr_get(void)
{
	char b[32];
	if (test_read_file("/proc/sys/vm/nr_hugepages", b, sizeof(b)) < 0)
		return -1;
	return atol(b);
}

static int nr_set(long n)
{
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "w");
	if (!f)
		return -1;
	int r = fprintf(f, "%ld\n", n) > 0 ? 0 : -1;
	return fclose(f) || r ? -1 : 0;
}

int main(void)
{
	long old = nr_get();
	if (old < 0 || nr_set(old + 2) < 0)
		skip("cannot raise vm.nr_hugepages: %m");
	void *m = mmap(NULL, HUGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	int fd = memfd_create("huge", MFD_HUGETLB);
	int err = errno;
	if (m != MAP_FAILED)
		memset(m, 7, 4096);
	if (fd >= 0 && ftruncate(fd, HUGE) < 0)
		err = errno, close(fd), fd = -1;
	if (nr_set(old) < 0)
		fail("cannot write vm.nr_hugepages back to %ld: %m", old);
	if (m == MAP_FAILED || fd < 0)
		skip("no huge pages to be had: %s", strerror(m == MAP_FAILED ? errno : err));
	test_ready();
	test_wait();

	expect(((unsigned char *)m)[4095] == 7, "the huge page lost its contents");
	pass();
}
