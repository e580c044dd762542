/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fault-injection hook, linked only into the test binary ckpt-fault.
 * CKPT_FAULT=request:N kills ckpt (SIGKILL, itself) at its Nth ptrace
 * request, write:N at its Nth image record, commit right after a
 * checkpoint --kill's commit to the guardian; CKPT_FAULT=count prints the
 * counts on stderr at exit. This is test code: it keeps its counts in
 * static variables, which the normal binary does not have.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fault.h"

static unsigned long counts[3], limit[3];
static int mode; /* 0: off, 1: kill, 2: count */
static pid_t ckpt_pid; /* not in the processes ckpt forks (the guardian) */

static void print_counts(void)
{
	fprintf(stderr, "ckpt-fault: %lu requests, %lu writes\n", counts[CKPT_FAULT_REQUEST],
		counts[CKPT_FAULT_WRITE]);
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
	} else if (!strncmp(env, "write:", 6)) {
		mode = 1;
		limit[CKPT_FAULT_WRITE] = strtoul(env + 6, NULL, 10);
	}
}

void ckpt_fault_point(enum ckpt_fault what)
{
	if (!mode || getpid() != ckpt_pid)
		return;
	counts[what]++;
	if (mode == 1 && counts[what] == limit[what])
		kill(getpid(), SIGKILL);
}
