/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A non-blocking signalfd (fd 5) for SIGUSR2 and SIGRTMIN+2, both blocked.
 * SIGUSR2 is sent before the checkpoint and stays pending. After restore
 * the fdinfo sigmask is what it was; the signalfd gives SIGUSR2, then
 * nothing (EAGAIN); SIGRTMIN+2 queued with value 42 after the restart is
 * read from it with its signo and value; SIGTERM (not in the mask) is not.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void sigmask_line(int fd, char *out, size_t size)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	out[0] = '\0';
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return;
	const char *p = strstr(buf, "sigmask:");
	if (p)
		snprintf(out, size, "%.*s", (int)strcspn(p, "\n"), p);
}

int main(void)
{
	sigset_t m;
	char before[128], after[128];
	struct signalfd_siginfo si;

	sigemptyset(&m);
	sigaddset(&m, SIGUSR2);
	sigaddset(&m, SIGRTMIN + 2);
	if (sigprocmask(SIG_BLOCK, &m, NULL) < 0)
		fail("sigprocmask: %m");
	int sfd = test_move_fd(signalfd(-1, &m, SFD_NONBLOCK), 5);
	sigmask_line(sfd, before, sizeof(before));
	if (!before[0])
		fail("no sigmask in fdinfo");
	if (kill(getpid(), SIGUSR2) < 0)
		fail("kill: %m");

	test_ready();
	test_wait();

	sigmask_line(sfd, after, sizeof(after));
	expect(!strcmp(before, after), "fdinfo '%s', was '%s'", after, before);
	expect(fcntl(sfd, F_GETFL) & O_NONBLOCK, "signalfd lost O_NONBLOCK");
	ssize_t n = read(sfd, &si, sizeof(si));
	expect(n == sizeof(si) && si.ssi_signo == SIGUSR2,
	       "pending SIGUSR2: read %zd (%m), signo %u", n, n > 0 ? si.ssi_signo : 0);
	n = read(sfd, &si, sizeof(si));
	expect(n < 0 && errno == EAGAIN, "a second signal was read (%zd, signo %u)", n,
	       n > 0 ? si.ssi_signo : 0);

	signal(SIGTERM, SIG_IGN);
	sigaddset(&m, SIGTERM);
	sigprocmask(SIG_BLOCK, &m, NULL);
	if (kill(getpid(), SIGTERM) < 0 ||
	    sigqueue(getpid(), SIGRTMIN + 2, (union sigval){.sival_int = 42}) < 0)
		fail("kill, sigqueue: %m");
	n = read(sfd, &si, sizeof(si));
	expect(n == sizeof(si) && (int)si.ssi_signo == SIGRTMIN + 2 && si.ssi_int == 42,
	       "SIGRTMIN+2 after restart: read %zd (%m), signo %u, value %d, want %d/42", n,
	       n > 0 ? si.ssi_signo : 0, n > 0 ? si.ssi_int : 0, SIGRTMIN + 2);
	n = read(sfd, &si, sizeof(si));
	expect(n < 0 && errno == EAGAIN, "read a signal not in the mask (signo %u)",
	       n > 0 ? si.ssi_signo : 0);
	pass();
}
