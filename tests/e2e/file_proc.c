/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * /proc files of processes of the image held open: the child's
 * /proc/PID/stat (fd 10), its own /proc/self/status read part way (fd 11,
 * the path is /proc/PID/status), and an O_PATH directory fd of the child's
 * /proc/PID (fd 12). After restart (also in a container, as ct_proc) they
 * are opened again once the processes exist: fd 10 reads the child's pid
 * and name, fd 11 is at the same offset and reads this process's status,
 * openat(fd 12, "comm") gives the child's name.
 */
#include "lib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void child_loop(void)
{
	prctl(PR_SET_NAME, "proc-child");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;)
		pause();
}

int main(void)
{
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0)
		child_loop();
	char path[64], buf[4096];
	/* the child has its name once its comm reads so */
	snprintf(path, sizeof(path), "/proc/%d/comm", child);
	for (int i = 0; i < 10000; i++) {
		if (test_read_file(path, buf, sizeof(buf)) > 0 && !strcmp(buf, "proc-child\n"))
			break;
		usleep(1000);
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", child);
	int a = open(path, O_RDONLY);
	int b = open("/proc/self/status", O_RDONLY);
	snprintf(path, sizeof(path), "/proc/%d", child);
	int c = open(path, O_PATH | O_DIRECTORY);
	if (a < 0 || b < 0 || c < 0)
		fail("open /proc files: %m");
	test_move_fd(a, 10);
	test_move_fd(b, 11);
	test_move_fd(c, 12);
	if (read(11, buf, 5) != 5) /* "Name:" */
		fail("read status: %m");
	off_t pos = lseek(11, 0, SEEK_CUR);

	test_ready();
	test_wait();

	char want[64];
	ssize_t n = pread(10, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), "%d (proc-child) ", child);
	expect(!strncmp(buf, want, strlen(want)), "fd 10 reads '%.40s', expected '%s'", buf, want);
	expect(lseek(11, 0, SEEK_CUR) == pos, "fd 11 at %lld, was %lld",
	       (long long)lseek(11, 0, SEEK_CUR), (long long)pos);
	n = pread(11, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), "\nPid:\t%d\n", getpid());
	expect(strstr(buf, want), "fd 11 is not this process's status: no '%s'", want + 1);
	int comm = openat(12, "comm", O_RDONLY);
	n = comm >= 0 ? read(comm, buf, sizeof(buf) - 1) : -1;
	buf[n > 0 ? n : 0] = '\0';
	expect(!strcmp(buf, "proc-child\n"), "openat(fd 12, comm) reads '%s'", buf);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	pass();
}
