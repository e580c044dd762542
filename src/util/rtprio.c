/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <sys/prctl.h>
#include "util/rtprio.h"

bool rtprio_raise(struct rtprio_was *was)
{
	*was = (struct rtprio_was){.policy = sched_getscheduler(0),
				   .slack_ns = (unsigned long)prctl(PR_GET_TIMERSLACK)};
	if (was->policy < 0 || sched_getparam(0, &was->param) < 0)
		return false;
	/* a caller already real-time keeps its own */
	if ((was->policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER &&
	    (was->policy & ~SCHED_RESET_ON_FORK) != SCHED_BATCH)
		return false;
	struct sched_param p = { .sched_priority = 1 };
	was->raised = sched_setscheduler(0, SCHED_FIFO, &p) == 0;
	return was->raised;
}

void rtprio_restore(const struct rtprio_was *was)
{
	(void)rtprio_give_back(was, 0);
}

int rtprio_give_back(const struct rtprio_was *was, pid_t pid)
{
	if (!was->raised)
		return 0;
	return sched_setscheduler(pid, was->policy, &was->param) < 0 ? -errno : 0;
}
