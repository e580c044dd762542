/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV shared memory in a container's ipc namespace (run by the runner
 * under `ckpt run`). Segment A (key KEY, 3 pages and a bit, mode 0640):
 * pages 0 and 3 hold data, page 1 was never touched, page 2 of the root's
 * attachment is mprotect'ed read-only; the root and its child have it
 * attached at the same address since fork, and the child has it a second
 * time, SHM_RDONLY. Segment B (IPC_PRIVATE) is attached by both and
 * IPC_RMID'd. After restart: same ids, key, size, mode, attachments
 * (addresses, the read-only ones still read-only), contents; B still
 * marked removed and attached twice; what the child writes into A and B is
 * seen by the root.
 */
#include "lib.h"

#include <errno.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY    0x5c5a0001
#define PG     4096
#define A_SIZE (3 * PG + 100)
#define B_SIZE (2 * PG)

static int go[2], back[2];

static void child(uint8_t *a, uint8_t *b, uint64_t ha)
{
	uint8_t *ro = shmat(shmget(KEY, 0, 0), NULL, SHM_RDONLY);
	if (ro == (void *)-1)
		_exit(10);
	if (write(back[1], &ro, sizeof(ro)) != sizeof(ro))
		_exit(11);
	char c;
	while (read(go[0], &c, 1) < 0 && errno == EINTR)
		;
	if (test_hash(a, PG, 0) != ha || a[3 * PG + 99] != 0x77 || ro[0] != a[0])
		_exit(2);
	if (mprotect(ro, PG, PROT_READ | PROT_WRITE) == 0 || errno != EACCES)
		_exit(3); /* SHM_RDONLY: no VM_MAYWRITE */
	a[PG + 5] = 'c';  /* the untouched page */
	b[B_SIZE - 1] = 'd';
	_exit(ro[PG + 5] == 'c' ? 0 : 4);
}

int main(void)
{
	int old = shmget(KEY, 0, 0);
	if (old >= 0)
		shmctl(old, IPC_RMID, NULL);
	int ida = shmget(KEY, A_SIZE, IPC_CREAT | IPC_EXCL | 0640);
	int idb = shmget(IPC_PRIVATE, B_SIZE, IPC_CREAT | 0600);
	if (ida < 0 || idb < 0)
		fail("shmget: %m");
	uint8_t *a = shmat(ida, NULL, 0), *b = shmat(idb, NULL, 0);
	if (a == (void *)-1 || b == (void *)-1)
		fail("shmat: %m");
	test_fill_random(a, PG, 5);
	a[3 * PG + 99] = 0x77;
	b[0] = 'b';
	if (mprotect(a + 2 * PG, PG, PROT_READ) < 0)
		fail("mprotect: %m");
	const uint64_t ha = test_hash(a, PG, 0);
	if (pipe(go) < 0 || pipe(back) < 0)
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0)
		child(a, b, ha);
	uint8_t *ro;
	if (read(back[0], &ro, sizeof(ro)) != sizeof(ro))
		fail("the child did not attach");
	if (shmctl(idb, IPC_RMID, NULL) < 0)
		fail("IPC_RMID: %m");
	struct shmid_ds ds;
	if (shmctl(ida, IPC_STAT, &ds) < 0)
		fail("IPC_STAT: %m");
	const unsigned long nattch = ds.shm_nattch;

	test_ready();
	test_wait();

	expect(shmget(KEY, 0, 0) == ida, "key %#x is shm id %d, was %d", KEY, shmget(KEY, 0, 0),
	       ida);
	expect(shmctl(ida, IPC_STAT, &ds) == 0, "IPC_STAT of A: %m");
	expect(ds.shm_segsz == A_SIZE && (ds.shm_perm.mode & 0777) == 0640 &&
		   ds.shm_perm.__key == KEY && ds.shm_nattch == nattch,
	       "A: size %zu, mode %o, key %#x, nattch %lu (was %lu)", ds.shm_segsz,
	       ds.shm_perm.mode, ds.shm_perm.__key, (unsigned long)ds.shm_nattch, nattch);
	expect(shmctl(idb, IPC_STAT, &ds) == 0, "IPC_STAT of B: %m");
	expect((ds.shm_perm.mode & SHM_DEST) && ds.shm_nattch == 2 && ds.shm_segsz == B_SIZE,
	       "B: mode %o, nattch %lu, size %zu", ds.shm_perm.mode, (unsigned long)ds.shm_nattch,
	       ds.shm_segsz);
	expect(test_hash(a, PG, 0) == ha && a[3 * PG + 99] == 0x77 && a[PG + 5] == 0 && b[0] == 'b',
	       "contents differ");
	struct test_map m;
	expect(test_find_map((uintptr_t)a, &m) == 0 && !strcmp(m.path, "/SYSV5c5a0001 (deleted)") &&
		   !strcmp(m.perms, "rw-s"),
	       "A's attachment: %s %s", m.perms, m.path);
	expect(test_find_map((uintptr_t)a + 2 * PG, &m) == 0 && !strcmp(m.perms, "r--s"),
	       "A's read-only page: %s", m.perms);
	expect(test_find_map((uintptr_t)a, &m) == 0 && m.inode == (unsigned long)ida,
	       "A's attachment has inode %lu, not its id %d", m.inode, ida);
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (2: data, 3: SHM_RDONLY lost, 4: its attachments differ)", st);
	expect(a[PG + 5] == 'c', "the child's write to A is not seen");
	expect(b[B_SIZE - 1] == 'd', "the child's write to the removed B is not seen");
	shmdt(a);
	shmdt(b);
	shmctl(ida, IPC_RMID, NULL);
	pass();
}
