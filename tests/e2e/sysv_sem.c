/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV semaphore sets in a container's ipc namespace (run under `ckpt
 * run`). Set S (key KEY, 4 semaphores, mode 0604) holds 3, 0, 7, 32767;
 * set T (IPC_PRIVATE) one semaphore at 1. A child waits in semop for
 * semaphore 1 of S. After restart: the same ids, key, mode and values;
 * semop works (taking 3 of semaphore 0 leaves 0, taking more fails
 * EAGAIN), and raising semaphore 1 lets the child through.
 */
#include "lib.h"

#include <errno.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY 0x5c5a0003

static const unsigned short vals[4] = {3, 0, 7, 32767};

int main(void)
{
	int old = semget(KEY, 0, 0);
	if (old >= 0)
		semctl(old, 0, IPC_RMID);
	int s = semget(KEY, 4, IPC_CREAT | IPC_EXCL | 0604), t = semget(IPC_PRIVATE, 1, 0600);
	if (s < 0 || t < 0)
		fail("semget: %m");
	if (semctl(s, 0, SETALL, vals) < 0 || semctl(t, 0, SETVAL, 1) < 0)
		fail("SETALL: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		struct sembuf take = {1, -1, 0};
		int r;
		/* semop is not restarted after a stop: EINTR, try again */
		while ((r = semop(s, &take, 1)) < 0 && errno == EINTR)
			;
		_exit(r == 0 ? 0 : 2);
	}
	while (semctl(s, 1, GETNCNT) != 1)
		usleep(1000);

	test_ready();
	test_wait();

	unsigned short got[4] = {0};
	struct semid_ds ds;
	expect(semget(KEY, 0, 0) == s, "key %#x is sem id %d, was %d", KEY, semget(KEY, 0, 0), s);
	expect(semctl(s, 0, IPC_STAT, &ds) == 0 && ds.sem_nsems == 4 &&
		   (ds.sem_perm.mode & 0777) == 0604,
	       "set: %lu semaphores, mode %o", (unsigned long)ds.sem_nsems, ds.sem_perm.mode);
	expect(semctl(s, 0, GETALL, got) == 0 && got[0] == 3 && got[1] == 0 && got[2] == 7 &&
		   got[3] == 32767,
	       "values %u %u %u %u, want 3 0 7 32767", got[0], got[1], got[2], got[3]);
	expect(semctl(t, 0, GETVAL) == 1, "the private set's value is %d", semctl(t, 0, GETVAL));
	struct sembuf take3 = {0, -3, IPC_NOWAIT}, take1 = {0, -1, IPC_NOWAIT};
	expect(semop(s, &take3, 1) == 0 && semctl(s, 0, GETVAL) == 0, "taking 3: %m");
	expect(semop(s, &take1, 1) < 0 && errno == EAGAIN, "taking from 0 did not fail EAGAIN");
	struct sembuf give = {1, 1, 0};
	expect(semop(s, &give, 1) == 0, "semop +1: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "the waiting child: status %#x", st);
	expect(semctl(s, 1, GETVAL) == 0, "the child did not take semaphore 1");
	semctl(s, 0, IPC_RMID);
	semctl(t, 0, IPC_RMID);
	pass();
}
