/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A time namespace. Without arguments: the process enters a time namespace
 * of its own (unshare, offsets of 1,000 days of CLOCK_MONOTONIC and 2,000
 * of CLOCK_BOOTTIME, setns of time_for_children) and reads its clocks.
 * After restart its clocks go on from where they were (more than before,
 * by less than a day: not the host's clocks), and a child forked now is in
 * the same time namespace and sees the same clocks. "mixed": the root
 * stays in ckpt's time namespace and its child enters one of its own: the
 * runner expects a refusal naming the child.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DAY 86400ll

static long long secs(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec;
}

static void enter_own(void)
{
	if (unshare(CLONE_NEWTIME) < 0)
		skip("unshare(CLONE_NEWTIME): %m");
	char buf[128];
	snprintf(buf, sizeof(buf), "monotonic %lld 0\nboottime %lld 0\n", 1000 * DAY, 2000 * DAY);
	int o = open("/proc/self/timens_offsets", O_WRONLY);
	if (o < 0 || write(o, buf, strlen(buf)) != (ssize_t)strlen(buf))
		fail("timens_offsets: %m");
	close(o);
	int fd = open("/proc/self/ns/time_for_children", O_RDONLY);
	if (fd < 0 || setns(fd, CLONE_NEWTIME) < 0)
		fail("setns time: %m");
	close(fd);
}

static ino_t ns_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "mixed")) {
		pid_t c = fork();
		if (c == 0) {
			enter_own();
			for (;;)
				pause();
		}
		test_ready();
		test_wait();
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
		pass();
	}
	enter_own();
	long long mono0 = secs(CLOCK_MONOTONIC), boot0 = secs(CLOCK_BOOTTIME);
	if (mono0 < 1000 * DAY || boot0 < 2000 * DAY)
		fail("offsets not in effect: %lld %lld", mono0, boot0);

	test_ready();
	test_wait();

	long long mono1 = secs(CLOCK_MONOTONIC), boot1 = secs(CLOCK_BOOTTIME);
	expect(mono1 >= mono0 && mono1 < mono0 + DAY, "CLOCK_MONOTONIC %lld after, %lld before",
	       mono1, mono0);
	expect(boot1 >= boot0 && boot1 < boot0 + DAY, "CLOCK_BOOTTIME %lld after, %lld before",
	       boot1, boot0);
	int p[2];
	if (pipe(p) < 0)
		fail("pipe: %m");
	pid_t c = fork();
	if (c == 0) {
		long long v[2] = { secs(CLOCK_MONOTONIC), (long long)ns_of("/proc/self/ns/time") };
		_exit(write(p[1], v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	long long v[2] = { 0, 0 };
	expect(read(p[0], v, sizeof(v)) == sizeof(v), "the child said nothing");
	waitpid(c, NULL, 0);
	expect(v[0] >= mono1 && v[0] < mono1 + DAY, "the child's CLOCK_MONOTONIC is %lld", v[0]);
	expect((ino_t)v[1] == ns_of("/proc/self/ns/time"), "the child is in another time namespace");
	pass();
}
