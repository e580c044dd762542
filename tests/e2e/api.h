/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the programs that drive libckpt themselves (api_*.c) share. */
#ifndef CKPT_E2E_API_H
#define CKPT_E2E_API_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* In a child to be checkpointed: hold nothing ckpt cannot save (the
 * runner's stdout is a pipe): /dev/null at 0-2, no other fd. */
static inline void api_child_quiet(void)
{
	int null = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 3; fd++)
		dup2(null, fd);
	syscall(SYS_close_range, 3, ~0u, 0);
}

/* The parent's side of a child's "ready" (a SIGUSR2 to its parent):
 * blocked before the fork, then taken by sigwait(set). */
static inline void api_ready_block(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGUSR2);
	sigprocmask(SIG_BLOCK, set, NULL);
}

/* /proc/PID/NAME's text into buf (empty if it cannot be read) */
static inline const char *api_proc_text(pid_t pid, const char *name, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, size - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	return buf;
}

/*
 * Waits up to ms milliseconds until the child is asleep in the call
 * numbered nr ("34 ": pause, "130 ": rt_sigsuspend). Its SIGUSR2 wakes
 * the parent on its way out of kill(2), and a checkpoint then would take
 * it there, before its `while (!go)` test: the program's own window (a
 * signal between that test and pause() is lost), which a restart followed
 * at once by the signal opens wide (the restored child's first run faults
 * its pages in). False if it is not there in time.
 */
static inline bool api_asleep_in_call(pid_t pid, const char *nr, int ms)
{
	char buf[512];
	for (int i = 0; i < ms; i++) {
		const char *close = strrchr(api_proc_text(pid, "stat", buf, sizeof(buf)), ')');
		bool stat_s = close && close[1] == ' ' && close[2] == 'S';
		if (stat_s &&
		    !strncmp(api_proc_text(pid, "syscall", buf, sizeof(buf)), nr, strlen(nr)))
			return true;
		usleep(1000);
	}
	return false;
}

#endif
