/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hugetlb memory of 1 GiB pages, where the machine has them (skipped
 * otherwise: x86 needs the CPU flag pdpe1gb, and /sys/kernel/mm/hugepages
 * then has hugepages-1048576kB): a private MAP_HUGETLB|MAP_HUGE_1GB
 * mapping, a hugetlb memfd of 1 GiB pages mapped shared, and a SysV
 * segment made with SHM_HUGETLB|SHM_HUGE_1GB, attached; each partly
 * written. Three pages are reserved through the size's nr_hugepages (the
 * old value in "hugepages1g.old": the runner writes it back). After
 * restart, from inside: the contents, and each area still hugetlb of
 * 1 GiB pages (KernelPageSize 1048576 kB).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#define GIB	 (1ul << 30)
#define NR	 "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
#define HUGE_1GB (30 << 26) /* MAP_HUGE_1GB, MFD_HUGE_1GB, SHM_HUGE_1GB */

static long nr_get(void)
{
	char b[32];
	return test_read_file(NR, b, sizeof(b)) < 0 ? -1 : atol(b);
}

static long raise_1g(long more)
{
	long old = nr_get();
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", old);
	int fd =
	    old < 0 ? -1 : open("hugepages1g.old", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd))
		return -1;
	FILE *f = fopen(NR, "w");
	if (!f || fprintf(f, "%ld\n", old + more) < 0 || fclose(f))
		return -1;
	return nr_get() - old;
}

static void expect_1g(const void *addr, const char *what)
{
	static char text[1 << 20];
	char head[32];
	if (test_read_file("/proc/self/smaps", text, sizeof(text)) < 0)
		fail("smaps: %m");
	snprintf(head, sizeof(head), "\n%lx-", (unsigned long)addr);
	char *p = strstr(text, head);
	char *kps = p ? strstr(p, "\nKernelPageSize:") : NULL;
	expect(kps && atol(kps + 16) == 1048576, "%s: KernelPageSize is not 1048576 kB", what);
}

int main(void)
{
	if (access(NR, F_OK) < 0)
		skip("this machine has no 1 GiB huge pages (no %s)", NR);
	long more = raise_1g(3);
	if (more < 3)
		skip("cannot reserve three 1 GiB huge pages (%ld more)", more);
	uint8_t *priv = mmap(NULL, GIB, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | HUGE_1GB, -1, 0);
	int fd = memfd_create("huge1g", MFD_HUGETLB | HUGE_1GB | MFD_CLOEXEC);
	int id = shmget(IPC_PRIVATE, GIB, IPC_CREAT | SHM_HUGETLB | HUGE_1GB | 0600);
	if (priv == MAP_FAILED || fd < 0 || id < 0)
		fail("1 GiB hugetlb memory: %m");
	if (ftruncate(fd, GIB) < 0)
		fail("ftruncate: %m");
	uint8_t *mf = mmap(NULL, GIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint8_t *seg = shmat(id, NULL, 0);
	if (mf == MAP_FAILED || seg == (void *)-1)
		fail("map: %m");
	shmctl(id, IPC_RMID, NULL);
	test_fill_random(priv, 1 << 16, 1);
	test_fill_random(mf, 1 << 16, 2);
	test_fill_random(seg, 1 << 16, 3);
	priv[GIB - 1] = 'p';
	mf[GIB - 1] = 'm';
	seg[GIB - 1] = 's';
	const uint64_t hp = test_hash(priv, 1 << 16, 0), hm = test_hash(mf, 1 << 16, 0),
		       hs = test_hash(seg, 1 << 16, 0);

	test_ready();
	test_wait();

	expect(test_hash(priv, 1 << 16, 0) == hp && priv[GIB - 1] == 'p',
	       "private: contents differ");
	expect(test_hash(mf, 1 << 16, 0) == hm && mf[GIB - 1] == 'm', "memfd: contents differ");
	expect(test_hash(seg, 1 << 16, 0) == hs && seg[GIB - 1] == 's', "SysV: contents differ");
	expect_1g(priv, "private MAP_HUGETLB");
	expect_1g(mf, "hugetlb memfd");
	expect_1g(seg, "SysV SHM_HUGETLB");
	pass();
}
