/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A tree in the host's ipc namespace with a SysV shm segment it never
 * removes, as PostgreSQL's interlock segment: made with a key of its own
 * (ftok of the test directory), 256 KiB, attached by the root and its
 * child. Killed by checkpoint --kill, the segment would outlive the tree
 * and keep its id and key from a restart on this host; ckpt removes it
 * once the image holds it and the tree is gone. After restart: the same
 * id and key, not removed, attached twice, the same contents; the child's
 * write is seen by the root. The test removes the segment at its end (its
 * id and key are in "shm.id" for the runner's cleanup if it fails).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (256u << 10)

int main(void)
{
	int go[2];
	const char *dir = getenv("CKPT_TEST_DIR");
	if (pipe(go))
		fail("pipe: %m");
	key_t key = ftok(dir ? dir : ".", 'k');
	if (key == -1)
		fail("ftok: %m");
	int id = shmget(key, SIZE, IPC_CREAT | IPC_EXCL | 0600);
	if (id < 0)
		fail("shmget of key %#x: %m", key);
	char buf[48];
	int n = snprintf(buf, sizeof(buf), "%d %d\n", id, (int)key);
	int fd = open("shm.id", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd))
		fail("shm.id: %m");
	uint8_t *a = shmat(id, NULL, 0);
	if (a == (void *)-1)
		fail("shmat: %m");
	test_fill_random(a + 4096, 5 * 4096, 11);
	a[SIZE - 1] = 'k';
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

	test_ready();
	test_wait();

	struct shmid_ds ds;
	expect(shmctl(id, IPC_STAT, &ds) == 0, "shm id %d: IPC_STAT: %m", id);
	expect(!(ds.shm_perm.mode & SHM_DEST) && ds.shm_nattch == 2 && ds.shm_segsz == SIZE &&
		   ds.shm_perm.__key == key,
	       "mode %o, nattch %lu, size %zu, key %#x (want %#x)", ds.shm_perm.mode,
	       (unsigned long)ds.shm_nattch, ds.shm_segsz, ds.shm_perm.__key, key);
	expect(shmget(key, 0, 0) == id, "key %#x finds id %d, not %d", key, shmget(key, 0, 0), id);
	expect(test_hash(a, SIZE, 0) == h, "the segment's contents differ");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (2: its view of the data differs)", st);
	expect(a[100] == 'c', "the child's write is not seen");
	expect(shmctl(id, IPC_RMID, NULL) == 0, "IPC_RMID: %m");
	pass();
}
