/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pid: after restore getpid(), the raw getpid and gettid system calls,
 * /proc/self and the pid field of /proc/self/stat all give the pid of
 * before, and NSpid in /proc/self/status is that pid alone (the same pid
 * namespace).
 */
#include "lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	const pid_t pid = getpid();
	char nspid[64];
	if (test_status_field("NSpid", nspid, sizeof(nspid)))
		fail("no NSpid");

	test_ready();
	test_wait();

	expect(getpid() == pid, "getpid() is %d, was %d", (int)getpid(), (int)pid);
	long r = syscall(SYS_getpid), t = syscall(SYS_gettid);
	expect(r == pid && t == pid, "getpid/gettid syscalls give %ld/%ld, want %d", r, t,
	       (int)pid);
	char link[64] = "";
	ssize_t n = readlink("/proc/self", link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	expect(atoi(link) == pid, "/proc/self is %s, want %d", link, (int)pid);
	expect((pid_t)test_stat_field(1) == pid, "/proc/self/stat pid is %llu",
	       test_stat_field(1));
	char now[64] = "";
	test_status_field("NSpid", now, sizeof(now));
	expect(!strcmp(now, nspid), "NSpid is '%s', was '%s'", now, nspid);
	pass();
}
