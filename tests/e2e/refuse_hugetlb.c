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

int main(void)
{
	if (test_hugepages_raise(2) < 0)
		skip("cannot raise vm.nr_hugepages: %m");
	char buf[32];
	int n, of;
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
