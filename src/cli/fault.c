/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fault-injection hook, linked only into the test binary ckpt-fault.
 * CKPT_FAULT=request:N kills ckpt (SIGKILL, itself) at its Nth ptrace
 * request, write:N at its Nth image record, commit right after a
 * checkpoint --kill's commit to the guardian; precopy:PATH, after each
 * process's pre-copy (a checkpoint with a parent, before the freeze),
 * creates PATH.pre and waits (60 s at most) until PATH exists, which the
 * test program makes once it wrote its pages again; seized:PATH does the same once the tree is
 * seized and looked at (a container: the test enters it then); lazytask kills the lazy server (a
 * process ckpt forked) as the first task's memory comes to it, before it takes it; badip:N gives
 * the Nth injection (a single system call or a batch) an unmapped address to run at (ckpt must
 * fail, not step the fault for ever); nobare makes the exec of a bare puppet fail (puppet_spawn
 * then forks one); running kills ckpt once a restarted tree runs, before the hand-over (a lazy
 * server's commit); CKPT_FAULT=count prints the counts on stderr at exit. This is test code: it
 * keeps its counts in static variables, which the normal binary does not have.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "util/fault.h"

static unsigned long counts[CKPT_FAULT_N], limit[CKPT_FAULT_N];
static const char *wait_path; /* precopy:PATH, seized:PATH */
static enum ckpt_fault wait_at;
static int mode; /* 0: off, 1: kill, 2: count, 3: wait, 4: badip, 5: lazytask, 6: nobare */
static pid_t ckpt_pid; /* not in the processes ckpt forks (the guardian) */

static void print_counts(void)
{
	fprintf(stderr, "ckpt-fault: %lu requests, %lu writes, %lu injections\n",
		counts[CKPT_FAULT_REQUEST], counts[CKPT_FAULT_WRITE], counts[CKPT_FAULT_BAD_IP]);
}

__attribute__((constructor)) static void setup(void)
{
	const char *env = getenv("CKPT_FAULT");
	ckpt_pid = getpid();
	if (!env)
		return;
	if (!strcmp(env, "count")) {
		mode = 2;
		atexit(print_counts);
	} else if (!strncmp(env, "request:", 8)) {
		mode = 1;
		limit[CKPT_FAULT_REQUEST] = strtoul(env + 8, NULL, 10);
	} else if (!strcmp(env, "commit")) {
		mode = 1;
		limit[CKPT_FAULT_COMMIT] = 1;
	} else if (!strcmp(env, "running")) {
		mode = 1;
		limit[CKPT_FAULT_RUNNING] = 1;
	} else if (!strncmp(env, "precopy:", 8)) {
		mode = 3;
		wait_at = CKPT_FAULT_PRECOPY;
		wait_path = env + 8;
	} else if (!strncmp(env, "seized:", 7)) {
		mode = 3;
		wait_at = CKPT_FAULT_SEIZED;
		wait_path = env + 7;
	} else if (!strcmp(env, "lazytask")) {
		mode = 5;
	} else if (!strcmp(env, "nobare")) {
		mode = 6;
	} else if (!strncmp(env, "badip:", 6)) {
		mode = 4;
		limit[CKPT_FAULT_BAD_IP] = strtoul(env + 6, NULL, 10);
	} else if (!strncmp(env, "write:", 6)) {
		mode = 1;
		limit[CKPT_FAULT_WRITE] = strtoul(env + 6, NULL, 10);
	}
}

void ckpt_fault_point(enum ckpt_fault what)
{
	if (mode == 5 && what == CKPT_FAULT_LAZY_TASK) /* in the server, not ckpt */
		kill(getpid(), SIGKILL);
	if (!mode || getpid() != ckpt_pid)
		return;
	counts[what]++;
	if (mode == 3 && what == wait_at) {
		char pre[4096];
		snprintf(pre, sizeof(pre), "%s.pre", wait_path);
		int fd = open(pre, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
		for (int i = 0; i < 60000 && access(wait_path, F_OK) != 0; i++)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	if (mode == 1 && counts[what] == limit[what])
		kill(getpid(), SIGKILL);
}

_Bool ckpt_fault_asked(enum ckpt_fault what)
{
	if (!mode || getpid() != ckpt_pid)
		return 0;
	if (what == CKPT_FAULT_BARE)
		return mode == 6;
	return ++counts[what] == limit[what] && mode == 4;
}
