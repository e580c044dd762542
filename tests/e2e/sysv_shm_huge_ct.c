/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hugetlb SysV segments (SHM_HUGETLB, 2 MiB pages) in a container's ipc
 * namespace (run by the runner under `ckpt run`): K (key KEY, one huge
 * page and a bit, mode 0640) filled and detached, so attached by nobody
 * at the checkpoint; A (key KEY + 1, one huge page) attached and filled.
 * Huge pages are had by raising vm.nr_hugepages (the old value in
 * "hugepages.old": the runner writes it back); without them the test is
 * skipped. After restart, from inside: K is found by its key with its id,
 * size and mode, attaches as hugetlb (VmFlags "ht") and holds its
 * contents; A is still attached, hugetlb, with its contents.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>

#define KEY    0x5c5a0101
#define HUGE   (2ul << 20)
#define K_SIZE (HUGE + 4096)

static void expect_huge(const void *addr, const char *what)
{
	char fl[256];
	test_vmflags(addr, fl, sizeof(fl));
	expect(strstr(fl, " ht") != NULL, "%s: the attachment is not hugetlb: %s", what, fl);
}

int main(void)
{
	long more = test_hugepages_raise(6);
	if (more < 0)
		skip("cannot raise vm.nr_hugepages: %m");
	if (more < 3)
		skip("no huge pages to be had (%ld more)", more);
	for (int k = KEY; k <= KEY + 1; k++) {
		int old = shmget(k, 0, 0);
		if (old >= 0)
			shmctl(old, IPC_RMID, NULL);
	}
	int idk = shmget(KEY, K_SIZE, IPC_CREAT | IPC_EXCL | SHM_HUGETLB | 0640);
	int ida = shmget(KEY + 1, HUGE, IPC_CREAT | IPC_EXCL | SHM_HUGETLB | 0600);
	if (idk < 0 || ida < 0)
		skip("shmget(SHM_HUGETLB): %m");
	uint8_t *k = shmat(idk, NULL, 0), *a = shmat(ida, NULL, 0);
	if (k == (void *)-1 || a == (void *)-1)
		fail("shmat: %m");
	test_fill_random(k, 8192, 11);
	k[K_SIZE - 1] = 'k';
	test_fill_random(a, HUGE, 12);
	const uint64_t hk = test_hash(k, 8192, 0), ha = test_hash(a, HUGE, 0);
	if (shmdt(k) < 0)
		fail("shmdt: %m");

	test_ready();
	test_wait();

	expect(shmget(KEY, 0, 0) == idk, "key %#x is shm id %d, was %d", KEY, shmget(KEY, 0, 0),
	       idk);
	struct shmid_ds ds;
	expect(shmctl(idk, IPC_STAT, &ds) == 0, "IPC_STAT of K: %m");
	expect(ds.shm_segsz == K_SIZE && (ds.shm_perm.mode & 0777) == 0640 && ds.shm_nattch == 0,
	       "K: size %zu, mode %o, nattch %lu", ds.shm_segsz, ds.shm_perm.mode,
	       (unsigned long)ds.shm_nattch);
	k = shmat(idk, NULL, SHM_RDONLY);
	expect(k != (void *)-1, "shmat of K after restart: %m");
	if (k != (void *)-1) {
		expect_huge(k, "K");
		expect(test_hash(k, 8192, 0) == hk && k[K_SIZE - 1] == 'k', "K's contents differ");
		shmdt(k);
	}
	expect_huge(a, "A");
	expect(test_hash(a, HUGE, 0) == ha, "A's contents differ");
	shmdt(a);
	shmctl(idk, IPC_RMID, NULL);
	shmctl(ida, IPC_RMID, NULL);
	pass();
}
