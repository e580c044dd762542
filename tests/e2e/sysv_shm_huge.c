/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A hugetlb SysV segment (SHM_HUGETLB, 2 MiB pages) in the host's ipc
 * namespace: IPC_PRIVATE, two huge pages and 100 bytes (so three huge
 * pages), the first filled, the second never touched, a byte written at
 * the segment's last one; the root and its child have it attached since
 * fork, and it is IPC_RMID'd (its id is free again once the tree is
 * killed). Huge pages are had by raising vm.nr_hugepages (the old value
 * in "hugepages.old": the runner writes it back); without them the test is
 * skipped. After restart, from inside: same id, size, still removed and
 * attached twice, the attachment still hugetlb (VmFlags "ht"), the
 * contents, the untouched page reads zeros, and the child's write through
 * its attachment is seen by the root.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#define HUGE (2ul << 20)
#define SIZE (2 * HUGE + 100)

int main(void)
{
	long more = test_hugepages_raise(4);
	if (more < 0)
		skip("cannot raise vm.nr_hugepages: %m");
	if (more < 3)
		skip("no huge pages to be had (%ld more)", more);
	int go[2];
	if (pipe(go))
		fail("pipe: %m");
	int id = shmget(IPC_PRIVATE, SIZE, IPC_CREAT | SHM_HUGETLB | 0600);
	if (id < 0)
		skip("shmget(SHM_HUGETLB): %m");
	uint8_t *a = shmat(id, NULL, 0);
	if (a == (void *)-1)
		fail("shmat: %m");
	test_fill_random(a, HUGE, 7);
	a[SIZE - 1] = 'z';
	const uint64_t h = test_hash(a, HUGE, 0);
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		char b;
		while (read(go[0], &b, 1) < 0 && errno == EINTR)
			;
		if (test_hash(a, HUGE, 0) != h || a[SIZE - 1] != 'z')
			_exit(2);
		a[HUGE + 100] = 'c'; /* into the page never touched */
		_exit(0);
	}
	if (shmctl(id, IPC_RMID, NULL) < 0)
		fail("IPC_RMID: %m");

	test_ready();
	test_wait();

	struct shmid_ds ds;
	expect(shmctl(id, IPC_STAT, &ds) == 0, "shm id %d: IPC_STAT: %m", id);
	expect((ds.shm_perm.mode & SHM_DEST) && ds.shm_nattch == 2 && ds.shm_segsz == SIZE,
	       "mode %o, nattch %lu, size %zu", ds.shm_perm.mode, (unsigned long)ds.shm_nattch,
	       ds.shm_segsz);
	char fl[256];
	test_vmflags(a, fl, sizeof(fl));
	expect(strstr(fl, " ht") != NULL, "the attachment is not hugetlb: %s", fl);
	struct test_map m;
	expect(test_find_map((uintptr_t)a, &m) == 0 && m.end - m.start == 3 * HUGE &&
		   m.inode == (unsigned long)id,
	       "the attachment: %zu bytes, inode %lu", (size_t)(m.end - m.start), m.inode);
	expect(test_hash(a, HUGE, 0) == h, "the first huge page's contents differ");
	expect(a[SIZE - 1] == 'z', "the last huge page's byte is lost");
	for (size_t i = HUGE; i < 2 * HUGE; i += 4096)
		if (a[i]) {
			expect(0, "the untouched huge page reads %d at %zu", a[i], i);
			break;
		}
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (2: its view of the data differs)", st);
	expect(a[HUGE + 100] == 'c', "the child's write is not seen");
	pass();
}
