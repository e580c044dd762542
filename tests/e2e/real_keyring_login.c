/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A login's session keyring, made by a real program: runuser -l nobody
 * (pam_keyinit "force revoke" in /etc/pam.d/runuser-l) starts python3 as
 * nobody in a new anonymous session keyring, owned by nobody and linking
 * nobody's user keyring; runuser itself (root) is in it too. Python prints
 * its session keyring (serial, description, what it links) at its start
 * and at each SIGUSR1, on a pipe to this process. After the restart the
 * keyring is a new one (another serial) with the same owner, permissions
 * and link, and runuser and python share it (runuser still waits for
 * python, which exits when told).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char code[] =
    "import ctypes,signal\n"
    "L=ctypes.CDLL(None,use_errno=True)\n"
    "def k(*a): return L.syscall(250,*[ctypes.c_long(x) for x in a])\n"
    "def d(i):\n"
    "    b=ctypes.create_string_buffer(512)\n"
    "    return b.value.decode() if k(6,i,ctypes.addressof(b),512,0)>0 else '?'\n"
    "def show(*_):\n"
    "    s=k(0,-3,0,0,0)\n"
    "    a=(ctypes.c_int32*64)()\n"
    "    n=k(11,s,ctypes.addressof(a),256,0)\n"
    "    print(s,d(s),'|',','.join(d(a[i]) for i in range(max(n,0)//4)),flush=True)\n"
    "signal.signal(signal.SIGUSR1,show)\n"
    "signal.signal(signal.SIGTERM,lambda *_: exit(0))\n"
    "show()\n"
    "while True: signal.pause()\n";

static const char want[] =
    "keyring;65534;65534;3f030000;_ses | keyring;65534;65534;1f3f0000;_uid.65534";

/* one line from fd into buf */
static void read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	while (n + 1 < size) {
		ssize_t r = read(fd, buf + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
}

int main(void)
{
	if (access("/usr/sbin/runuser", X_OK) < 0 || access("/usr/bin/python3", X_OK) < 0)
		skip("no runuser or python3");
	if (access("/etc/pam.d/runuser-l", R_OK) < 0)
		skip("no /etc/pam.d/runuser-l");
	int p[2];
	if (pipe(p) < 0)
		fail("pipe: %m");
	pid_t ru = fork();
	if (ru < 0)
		fail("fork: %m");
	if (ru == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(p[1], 1);
		dup2(null, 2);
		close(p[0]);
		execl("/usr/sbin/runuser", "runuser", "-l", "nobody", "-s", "/usr/bin/python3",
		      "-c", code, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char before[512], after[512];
	read_line(p[0], before, sizeof(before));
	if (!strstr(before, want))
		skip("no login keyring from pam_keyinit: %s", before);
	long serial0 = atol(before);
	/* python: runuser's child */
	char path[64], text[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", ru, ru);
	if (test_read_file(path, text, sizeof(text)) <= 0 || atoi(text) <= 0)
		fail("runuser has no child: %s", text);
	pid_t py = atoi(text);

	test_ready();
	test_wait();

	if (kill(py, SIGUSR1) < 0)
		fail("kill python: %m");
	read_line(p[0], after, sizeof(after));
	if (!strstr(after, want))
		test_failf("after the restart python's session keyring is: %s", after);
	if (atol(after) == serial0)
		test_failf("the session keyring kept its serial %ld: not made again?", serial0);
	if (kill(py, SIGTERM) < 0)
		fail("kill python: %m");
	/* the runner sends SIGUSR1 again after 5 s (no SA_RESTART): on a
	 * loaded machine python's exit and runuser's session close take that
	 * long, and waitpid then ends in EINTR, not in a wrong status */
	int st = 0;
	pid_t w;
	while ((w = waitpid(ru, &st, 0)) < 0 && errno == EINTR)
		;
	if (w != ru || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		test_failf("runuser did not end with python's status 0 (waitpid %d: %s, status %#x)",
			   (int)w, w < 0 ? strerror(errno) : "", st);
	pass();
}
