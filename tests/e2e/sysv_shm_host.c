/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A tree in the host's ipc namespace with a SysV shm segment (IPC_PRIVATE,
 * 1 MiB, data in a few pages) that the root and its child have attached
 * since fork and that is IPC_RMID'd: the one kind of segment that is gone
 * when the tree is killed, so its id is free again at restart. After
 * restart: the same id, still removed, attached twice, same contents; the
 * child's write is seen by the root.
 */
#include "lib.h"

#include <errno.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (1u << 20)

int main(void)
{
	int go[2];
	if (pipe(go))
		fail("pipe: %m");
	int id = shmget(IPC_PRIVATE, SIZE, IPC_CREAT | 0600);
	if (id < 0)
		fail("shmget: %m");
	uint8_t *a = shmat(id, NULL, 0);
	if (a == (void *)-1)
		fail("shmat: %m");
	test_fill_random(a + 8192, 3 * 4096, 3);
	a[SIZE - 1] = 'z';
	const uint64_t h = test_hash(a, SIZE, 0);
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		char b;
		while (read(go[0], &b, 1) < 0 && errno == EINTR)
			;
		if (test_hash(a, SIZE, 0) != h)
			_exit(2);
		a[100] = 'c';
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
	expect(test_hash(a, SIZE, 0) == h, "the segment's contents differ");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (2: its view of the data differs)", st);
	expect(a[100] == 'c', "the child's write is not seen");
	pass();
}
