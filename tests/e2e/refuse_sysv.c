/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A plain tree (in the host's ipc namespace) that has sent a message on a
 * SysV queue: a tree is saved with only its shm segments, so the
 * checkpoint must be refused naming the pid and the queue, and the process
 * must go on unharmed.
 */
#include "lib.h"

#include <sys/ipc.h>
#include <sys/msg.h>

int main(void)
{
	int q = msgget(IPC_PRIVATE, 0600);
	struct {
		long type;
		char text[4];
	} m = {1, "hi"};
	if (q < 0 || msgsnd(q, &m, 3, 0) < 0)
		fail("msg: %m");

	test_ready();
	test_wait();

	expect(msgrcv(q, &m, sizeof(m.text), 0, IPC_NOWAIT) == 3, "the message is gone: %m");
	msgctl(q, IPC_RMID, NULL);
	pass();
}
