/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pidfds: one of a live child (PIDFD_NONBLOCK), a dup of it, and one of a
 * child since reaped (it exited 7). After restart: the live pidfd's
 * fdinfo names the child, poll() says it is running, pidfd_send_signal
 * (SIGTERM) through it kills the child, poll() then says it exited, and
 * waitid(P_PIDFD) reaps it with that signal; the dup is the same open file
 * (one flags word). The dead pidfd says "Pid: -1", pidfd_send_signal
 * through it fails with ESRCH, and PIDFD_GET_INFO gives its exit status
 * when the kernel gave it before the checkpoint. A pidfd of a zombie
 * child (exited 5, not reaped) reaps it with waitid(P_PIDFD) and status 5.
 * A pidfd of a child killed by SIGKILL and reaped keeps that status.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

struct pidfd_info_k {
	uint64_t mask, cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define PIDFD_GET_INFO_K  _IOWR(0xFF, 11, struct pidfd_info_k)
#define PIDFD_INFO_EXIT_K (1ull << 3)

/* "Pid:" of the fd's fdinfo */
static long fdinfo_pid(int fd)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return -100;
	char *p = strstr(buf, "\nPid:");
	return p ? strtol(p + 5, NULL, 10) : -100;
}

/* the exit status PIDFD_GET_INFO gives, -1 if none */
static int info_exit(int fd)
{
	struct pidfd_info_k info = {.mask = PIDFD_INFO_EXIT_K};
	if (ioctl(fd, PIDFD_GET_INFO_K, &info) < 0 || !(info.mask & PIDFD_INFO_EXIT_K))
		return -1;
	return info.exit_code;
}

static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int main(void)
{
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		for (;;)
			pause();
	}
	int live = (int)syscall(SYS_pidfd_open, child, O_NONBLOCK);
	if (live < 0)
		fail("pidfd_open: %m");
	int dup_fd = dup(live);
	pid_t gone = fork();
	if (gone == 0)
		_exit(7);
	int dead = (int)syscall(SYS_pidfd_open, gone, 0);
	if (dead < 0 || waitpid(gone, NULL, 0) != gone)
		fail("pidfd_open of the second child: %m");
	int exit_before = info_exit(dead);
	pid_t killed = fork();
	if (killed == 0) {
		raise(SIGKILL);
		_exit(9);
	}
	int kfd = (int)syscall(SYS_pidfd_open, killed, 0);
	if (kfd < 0 || waitpid(killed, NULL, 0) != killed)
		fail("pidfd_open of the killed child: %m");
	int killed_before = info_exit(kfd);
	pid_t zombie = fork();
	if (zombie == 0)
		_exit(5);
	int zfd = (int)syscall(SYS_pidfd_open, zombie, 0);
	siginfo_t zi;
	if (zfd < 0 || waitid(P_PID, (id_t)zombie, &zi, WEXITED | WNOWAIT) < 0)
		fail("the zombie: %m");
	if (fdinfo_pid(live) != child || fdinfo_pid(dead) != -1)
		fail("fdinfo before the checkpoint: %ld, %ld", fdinfo_pid(live), fdinfo_pid(dead));

	test_ready();
	test_wait();

	expect(fdinfo_pid(live) == child, "live pidfd: fdinfo Pid %ld, want %d", fdinfo_pid(live),
	       child);
	expect(fcntl(live, F_GETFL) & O_NONBLOCK, "live pidfd lost PIDFD_NONBLOCK");
	expect(!(fcntl(dead, F_GETFL) & O_NONBLOCK), "dead pidfd became non-blocking");
	expect(!readable(live), "live pidfd: poll says the child exited already");
	if (fcntl(dup_fd, F_SETFL, 0) < 0 || (fcntl(live, F_GETFL) & O_NONBLOCK))
		test_failf("the dup of the live pidfd is not the same open file");
	expect(fdinfo_pid(dead) == -1, "dead pidfd: fdinfo Pid %ld, want -1", fdinfo_pid(dead));
	errno = 0;
	expect(syscall(SYS_pidfd_send_signal, dead, 0, NULL, 0) < 0 && errno == ESRCH,
	       "dead pidfd: pidfd_send_signal gave %m, want ESRCH");
	if (exit_before >= 0)
		expect(info_exit(dead) == exit_before, "dead pidfd: exit status %#x, want %#x",
		       info_exit(dead), exit_before);
	expect(fdinfo_pid(kfd) == -1, "killed pidfd: fdinfo Pid %ld, want -1", fdinfo_pid(kfd));
	if (killed_before >= 0)
		expect(info_exit(kfd) == killed_before, "killed pidfd: exit status %#x, want %#x",
		       info_exit(kfd), killed_before);
	expect(fdinfo_pid(zfd) == zombie, "zombie pidfd: fdinfo Pid %ld, want %d", fdinfo_pid(zfd),
	       zombie);
	siginfo_t z = {0};
	expect(waitid(P_PIDFD, (id_t)zfd, &z, WEXITED) == 0 && z.si_pid == zombie &&
		   z.si_code == CLD_EXITED && z.si_status == 5,
	       "waitid(P_PIDFD) of the zombie: pid %d code %d status %d (%m)", z.si_pid, z.si_code,
	       z.si_status);
	if (syscall(SYS_pidfd_send_signal, live, SIGTERM, NULL, 0) < 0)
		fail("pidfd_send_signal: %m");
	struct pollfd p = {.fd = live, .events = POLLIN};
	expect(poll(&p, 1, 10000) == 1, "live pidfd: poll does not see the child exit");
	siginfo_t si = {0};
	int r = waitid(P_PIDFD, (id_t)live, &si, WEXITED);
	expect(r == 0 && si.si_pid == child && si.si_code == CLD_KILLED && si.si_status == SIGTERM,
	       "waitid(P_PIDFD): %d (%m), pid %d code %d status %d", r, si.si_pid, si.si_code,
	       si.si_status);
	pass();
}
