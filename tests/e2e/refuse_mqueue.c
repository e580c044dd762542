/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a message queue at fd 5, holding two messages, is also open
 * in a process outside the tree (a grandchild orphaned to init). The
 * runner expects the checkpoint to fail naming the pid, fd 5, the queue
 * and the outsider; afterwards the queue holds its two messages in order.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	char name[64];
	struct mq_attr a = {.mq_maxmsg = 4, .mq_msgsize = 16};
	int ok[2];

	snprintf(name, sizeof(name), "/ckpt-e2e-mqr-%d", getpid());
	mq_unlink(name);
	mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK, 0600, &a);
	if (q < 0) {
		if (errno == ENOSYS)
			skip("no POSIX message queues");
		fail("mq_open: %m");
	}
	if (mq_send(q, "one", 3, 1) < 0 || mq_send(q, "two", 3, 1) < 0 || pipe(ok))
		fail("setup: %m");
	pid_t test = getpid(), child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		if (fork() != 0)
			_exit(0);
		/* the outsider: holds the queue open until the test is gone */
		close(q);
		if (mq_open(name, O_RDONLY) < 0 ||
		    write(ok[1], &(pid_t){getpid()}, sizeof(pid_t)) != sizeof(pid_t))
			_exit(1);
		while (kill(test, 0) == 0) /* until the test is gone */
			usleep(20000);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	close(ok[1]);
	pid_t outsider;
	if (read(ok[0], &outsider, sizeof(outsider)) != sizeof(outsider))
		fail("the outsider did not open the queue");
	mq_unlink(name);
	close(ok[0]);
	test_move_fd(q, 5);

	test_ready();
	test_wait();

	char buf[16];
	unsigned int prio;
	expect(mq_receive(5, buf, sizeof(buf), &prio) == 3 && !memcmp(buf, "one", 3),
	       "the first message is not there");
	expect(mq_receive(5, buf, sizeof(buf), &prio) == 3 && !memcmp(buf, "two", 3),
	       "the second message is not there");
	kill(outsider, SIGKILL);
	pass();
}
