/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt's thread at the lowest real-time priority (SCHED_FIFO 1) for the
 * time it holds a tree, and back to what it was after. Each step of a
 * checkpoint is a round trip between ckpt, its guardian and a stopped
 * task; under the fair scheduler, on a machine busy with many runnable
 * threads (the program's own among them), each wakeup of ckpt or of the
 * guardian could wait its turn for up to seconds, and the program stayed
 * frozen for a minute where it takes 0.1 s. Threads and processes made
 * meanwhile (the guardian, par_for's threads) inherit the priority. Without
 * the right to it (CAP_SYS_NICE or RLIMIT_RTPRIO), nothing changes.
 */
#ifndef CKPT_RTPRIO_H
#define CKPT_RTPRIO_H

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

struct rtprio_was {
	bool raised;
	int policy; /* with its flags, as sched_getscheduler gives it */
	struct sched_param param;
	/* its timer slack before (a real-time task's is 0) */
	unsigned long slack_ns;
};

/* true if raised; was: what to put back */
bool rtprio_raise(struct rtprio_was *was);
void rtprio_restore(const struct rtprio_was *was);
/* What was put back on a task or process that inherited the raise (pid);
 * 0 if nothing was raised, or -errno. */
int rtprio_give_back(const struct rtprio_was *was, pid_t pid);

#endif
