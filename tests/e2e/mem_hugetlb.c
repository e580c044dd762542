/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hugetlb memory of 2 MiB pages: a private MAP_HUGETLB mapping of two
 * pages (the first written, the second never touched), a shared one
 * (MAP_SHARED|MAP_ANONYMOUS|MAP_HUGETLB) of two pages shared with a child
 * (the second written by the child only: in its page tables only), and a
 * hugetlb memfd (MFD_HUGETLB) held by an fd and mapped shared. Huge pages
 * are had by raising vm.nr_hugepages for the whole test (the old value is
 * in "hugepages.old": the runner writes it back at the end); without them
 * the test is skipped. After restart: the contents, each area still
 * hugetlb (VmFlags "ht", KernelPageSize 2048 kB), the memfd still on
 * hugetlbfs and shared with its mapping, the child's write through the
 * shared mapping seen by the parent.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define HUGE (2ul << 20)

/* The smaps block of the vma at addr is hugetlb of 2 MiB pages. */
static void expect_huge(void *addr, const char *what)
{
	char *p = test_smaps_vma(addr);
	if (!p) {
		expect(0, "%s: no vma at %p", what, addr);
		return;
	}
	char *next = strstr(p, "\nVmFlags:");
	char *kps = strstr(p, "\nKernelPageSize:");
	expect(kps && atol(kps + 16) == 2048, "%s: KernelPageSize is not 2048 kB", what);
	expect(next && strstr(next, " ht"), "%s: VmFlags without ht (%s)", what,
	       next ? next + 1 : "none");
}

int main(void)
{
	long more = test_hugepages_raise(6);
	if (more < 0)
		skip("cannot raise vm.nr_hugepages: %m");
	if (more < 5)
		skip("no huge pages to be had (%ld more)", more);

	uint8_t *priv = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	uint8_t *shared = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	int fd = memfd_create("huge", MFD_HUGETLB | MFD_CLOEXEC);
	if (priv == MAP_FAILED || shared == MAP_FAILED || fd < 0)
		skip("hugetlb memory: %m");
	if (ftruncate(fd, HUGE) < 0)
		fail("ftruncate of the hugetlb memfd: %m");
	uint8_t *mf = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mf == MAP_FAILED)
		fail("mmap of the hugetlb memfd: %m");
	test_fill_random(priv, HUGE, 1);
	test_fill_random(shared, HUGE, 2);
	test_fill_random(mf, HUGE, 3);
	const uint64_t hp = test_hash(priv, HUGE, 0), hs = test_hash(shared, HUGE, 0),
		       hm = test_hash(mf, HUGE, 0);

	int go[2], back[2];
	if (pipe(go) < 0 || pipe(back) < 0)
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) { /* fills the second shared page; after the restart
		       * writes to the first, exits */
		char x;
		close(go[1]);
		test_fill_random(shared + HUGE, HUGE, 4);
		uint64_t h = test_hash(shared + HUGE, HUGE, 0);
		if (write(back[1], &h, sizeof(h)) != sizeof(h))
			_exit(3);
		if (read(go[0], &x, 1) != 1)
			_exit(2);
		/* its copy-on-write view of the parent's private page */
		if (test_hash(priv, HUGE, 0) != hp)
			_exit(5);
		priv[0] ^= 1; /* its own copy now: the parent's stays */
		shared[HUGE - 1] = 'c';
		_exit(0);
	}
	close(go[0]);
	uint64_t hc;
	if (read(back[0], &hc, sizeof(hc)) != sizeof(hc))
		fail("the child's hash: %m");

	test_ready();
	test_wait();

	expect(test_hash(priv, HUGE, 0) == hp, "the private huge page lost its contents");
	expect(test_hash(shared, HUGE, 0) == hs, "the shared huge page lost its contents");
	expect(test_hash(shared + HUGE, HUGE, 0) == hc,
	       "the shared huge page the child wrote lost its contents");
	expect(test_hash(mf, HUGE, 0) == hm, "the hugetlb memfd's page lost its contents");
	for (size_t i = HUGE; i < 2 * HUGE; i += 4096)
		if (priv[i]) {
			expect(0, "the untouched huge page reads %d at %zu", priv[i], i);
			break;
		}
	expect_huge(priv, "private MAP_HUGETLB");
	expect_huge(shared, "shared MAP_HUGETLB");
	expect_huge(mf, "hugetlb memfd mapping");
	struct statfs sfs;
	expect(fstatfs(fd, &sfs) == 0 && sfs.f_type == HUGETLBFS_MAGIC && sfs.f_bsize == (long)HUGE,
	       "the memfd is not on hugetlbfs of 2 MiB pages");
	uint8_t b = 0;
	mf[5] = 'm';
	expect(pread(fd, &b, 1, 5) == 1 && b == 'm', "the memfd and its mapping are not one file");
	if (write(go[1], "x", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "the child ended with status %#x", st);
	expect(shared[HUGE - 1] == 'c', "the child's write to the shared huge page is not seen");
	expect(test_hash(priv, HUGE, 0) == hp, "the child's write to its private huge page is seen");
	pass();
}
