/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mq_notify registrations. Queue A (empty) has a SIGEV_SIGNAL
 * notification (SIGUSR2, sigev_value 0x1234abcd), queue B (holding a
 * message) one with SIGRTMIN+1 and value 77, queue C a SIGEV_NONE one.
 * After restart each queue's status names this process as the registrant,
 * another mq_notify gives EBUSY on each, no notification signal is
 * pending, and: a message sent to A brings SIGUSR2 with SI_MESGQ and its
 * value; B's message is still there, and once taken, a new one brings
 * SIGRTMIN+1 with 77; a message sent to C unregisters it (mq_notify then
 * works again).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char names[3][64];

static mqd_t make(int i)
{
	struct mq_attr a = {.mq_maxmsg = 4, .mq_msgsize = 16};
	snprintf(names[i], sizeof(names[i]), "/ckpt-e2e-mqn%d-%d", i, getpid());
	mq_unlink(names[i]);
	mqd_t q = mq_open(names[i], O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK, 0600, &a);
	if (q < 0) {
		if (errno == ENOSYS)
			skip("no POSIX message queues");
		fail("mq_open: %m");
	}
	return q;
}

static void reg(mqd_t q, int notify, int signo, long value)
{
	struct sigevent ev = {.sigev_notify = notify, .sigev_signo = signo};
	ev.sigev_value.sival_ptr = (void *)value;
	if (mq_notify(q, &ev) < 0)
		fail("mq_notify: %m");
}

/* the registrant's pid from the queue's status */
static long owner(mqd_t q)
{
	char buf[256];
	ssize_t n = pread(q, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	char *p = strstr(buf, "NOTIFY_PID:");
	return p ? strtol(p + 11, NULL, 10) : -1;
}

static bool busy(mqd_t q)
{
	struct sigevent ev = {.sigev_notify = SIGEV_NONE};
	return mq_notify(q, &ev) < 0 && errno == EBUSY;
}

/* the signal, within 5 s: its si_value, or -1 */
static long take(int sig)
{
	sigset_t set;
	siginfo_t si;
	struct timespec ts = {5, 0};
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (sigtimedwait(&set, &si, &ts) != sig || si.si_code != SI_MESGQ)
		return -1;
	return (long)si.si_value.sival_ptr;
}

int main(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGRTMIN + 1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	mqd_t a = make(0), b = make(1), c = make(2);
	if (mq_send(b, "held", 4, 1) < 0)
		fail("mq_send: %m");
	reg(a, SIGEV_SIGNAL, SIGUSR2, 0x1234abcd);
	reg(b, SIGEV_SIGNAL, SIGRTMIN + 1, 77);
	reg(c, SIGEV_NONE, 0, 0);

	test_ready();
	test_wait();
	for (int i = 0; i < 3; i++)
		mq_unlink(names[i]);

	expect(owner(a) == getpid() && owner(b) == getpid() && owner(c) == getpid(),
	       "registrants %ld %ld %ld, want %d", owner(a), owner(b), owner(c), getpid());
	expect(busy(a) && busy(b) && busy(c), "a notification is no longer registered");
	sigset_t pend;
	sigpending(&pend);
	expect(!sigismember(&pend, SIGUSR2) && !sigismember(&pend, SIGRTMIN + 1),
	       "a notification signal is pending already");
	char buf[16];
	unsigned int prio;
	expect(mq_send(a, "x", 1, 0) == 0 && take(SIGUSR2) == 0x1234abcd,
	       "queue A: no SIGUSR2 with the value");
	expect(mq_receive(b, buf, sizeof(buf), &prio) == 4 && !memcmp(buf, "held", 4),
	       "queue B lost its message");
	expect(mq_send(b, "y", 1, 0) == 0 && take(SIGRTMIN + 1) == 77,
	       "queue B: no SIGRTMIN+1 with 77");
	expect(mq_send(c, "z", 1, 0) == 0 && owner(c) == 0, "queue C: still registered");
	expect(!busy(c), "queue C: mq_notify after it fired");
	pass();
}
