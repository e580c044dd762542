/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hugetlb memory that is still refused, by name: a SysV segment made with
 * SHM_HUGETLB, attached (MAP_HUGETLB and MFD_HUGETLB memory is saved:
 * mem_hugetlb). Huge pages are had by raising vm.nr_hugepages (the old
 * value in "hugepages.old" for the runner); without them the test is
 * skipped. The checkpoint must name the segment, and the original go on.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
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
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", old);
	int of = open("hugepages.old", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (of < 0 || write(of, buf, (size_t)n) != n || close(of))
		fail("hugepages.old: %m");
	int id = shmget(IPC_PRIVATE, HUGE, IPC_CREAT | SHM_HUGETLB | 0600);
	if (id < 0)
		skip("no huge pages to be had: %m");
	n = snprintf(buf, sizeof(buf), "%d 0\n", id);
	of = open("shm.id", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (of < 0 || write(of, buf, (size_t)n) != n || close(of))
		fail("shm.id: %m");
	unsigned char *m = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	if (m == (void *)-1)
		fail("shmat: %m");
	memset(m, 7, 4096);
	test_ready();
	test_wait();

	expect(m[4095] == 7, "the huge page lost its contents");
	pass();
}
