/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A session on a pty, with job control. The test process holds the master;
 * its child S is a session leader whose controlling terminal is the slave
 * (it opened it without O_NOCTTY), with two jobs: J, a background group
 * stopped by SIGTTIN as it read the terminal, and F, the foreground group,
 * waiting for SIGWINCH.
 * After restart: the pty is S's controlling terminal (TIOCGSID), F's group
 * is the foreground one (TIOCGPGRP, tpgid), every task has it as tty_nr,
 * J is still stopped. A new window size sends F SIGWINCH: F, in the
 * foreground, writes to the terminal and exits; S then moves J to the
 * foreground and continues it; J's read gets the line the master writes.
 */
#include "lib.h"

#include <asm/termbits.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct shared {
	pid_t s, j, f;
	unsigned int dev;
};
static struct shared *sh;
static volatile sig_atomic_t winched;

static void on_winch(int sig)
{
	(void)sig;
	winched = 1;
}

/* F: the foreground job, until SIGWINCH. */
static int job_f(int tty)
{
	sigset_t none;
	sigemptyset(&none);
	while (!winched)
		sigsuspend(&none);
	pid_t fg = -1;
	if (ioctl(tty, TIOCGPGRP, &fg) < 0 || fg != getpgrp())
		return 2;
	return write(tty, "F-ok\n", 5) == 5 ? 0 : 3;
}

/* J: reads the terminal from the background: stopped by SIGTTIN, until continued. */
static int job_j(int tty)
{
	char buf[32];
	ssize_t n = read(tty, buf, sizeof(buf));
	return n == 6 && !memcmp(buf, "hello\n", 6) ? 0 : 4;
}

static pid_t job(int tty, int (*fn)(int))
{
	pid_t c = fork();
	if (c == 0) {
		setpgid(0, 0);
		alarm(120); /* never left behind by a failed run */
		signal(SIGTTOU, SIG_DFL);
		_exit(fn(tty));
	}
	if (c > 0)
		setpgid(c, c);
	return c;
}

static int session(const char *path)
{
	setsid();
	alarm(120);
	int tty = open(path, O_RDWR); /* becomes the controlling terminal */
	struct termios2 t;
	if (tty < 0 || ioctl(tty, TCGETS2, &t) < 0)
		return 10;
	t.c_lflag &= ~(ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE);
	t.c_lflag |= TOSTOP;
	ioctl(tty, TCSETS2, &t);
	signal(SIGTTOU, SIG_IGN);
	signal(SIGWINCH, on_winch); /* inherited by F */
	sh->j = job(tty, job_j);
	sh->f = job(tty, job_f);
	if (ioctl(tty, TIOCSPGRP, &sh->f) < 0)
		return 11;
	int st, bad = 0;
	if (waitpid(sh->f, &st, 0) != sh->f || !WIFEXITED(st) || WEXITSTATUS(st))
		bad |= 1;
	if (ioctl(tty, TIOCSPGRP, &sh->j) < 0 || kill(sh->j, SIGCONT) < 0)
		bad |= 2;
	while (waitpid(sh->j, &st, WUNTRACED) == sh->j && WIFSTOPPED(st))
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		bad |= 4;
	return bad;
}

static char proc_state(pid_t pid, int *tty_nr, int *tpgid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return '?';
	char *p = strrchr(buf, ')'), state = 0;
	int ppid, pgrp, sid;
	if (!p ||
	    sscanf(p + 2, "%c %d %d %d %d %d", &state, &ppid, &pgrp, &sid, tty_nr, tpgid) != 6)
		return '?';
	return state;
}

int main(void)
{
	sh = test_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY), zero = 0, n = -1;
	if (m < 0 || ioctl(m, TIOCSPTLCK, &zero) < 0 || ioctl(m, TIOCGPTN, &n) < 0)
		fail("ptmx: %m");
	m = test_move_fd(m, 10);
	char path[32];
	snprintf(path, sizeof(path), "/dev/pts/%d", n);
	sh->dev = (136u << 8) | (n & 0xff) | ((n & ~0xff) << 12);
	pid_t s = fork();
	if (s == 0) {
		close(m);
		_exit(session(path));
	}
	sh->s = s;
	/* ready once J is stopped and F is the foreground group */
	int nr, tpgid;
	for (int i = 0; i < 500; i++) {
		pid_t fg = 0;
		if (sh->j && sh->f && proc_state(sh->j, &nr, &tpgid) == 'T' &&
		    ioctl(m, TIOCGPGRP, &fg) == 0 && fg == sh->f)
			break;
		usleep(10000);
	}
	test_ready();
	test_wait();

	pid_t sid = 0, fg = 0;
	expect(ioctl(m, TIOCGSID, &sid) == 0 && sid == sh->s, "TIOCGSID: %d, want %d", sid, sh->s);
	expect(ioctl(m, TIOCGPGRP, &fg) == 0 && fg == sh->f, "TIOCGPGRP: %d, want %d", fg, sh->f);
	pid_t who[3] = {sh->s, sh->j, sh->f};
	for (int i = 0; i < 3; i++) {
		char st = proc_state(who[i], &nr, &tpgid);
		expect((unsigned)nr == sh->dev && tpgid == sh->f,
		       "pid %d: tty_nr %#x, tpgid %d; want %#x, %d", who[i], nr, tpgid, sh->dev,
		       sh->f);
		expect(i != 1 || st == 'T', "the background job is not stopped (%c)", st);
	}
	struct winsize ws = {.ws_row = 40, .ws_col = 120};
	if (ioctl(m, TIOCSWINSZ, &ws) < 0)
		fail("TIOCSWINSZ: %m");
	char buf[64];
	ssize_t got = test_read_upto(m, buf, sizeof(buf), 6, 5000);
	expect(got == 6 && !memcmp(buf, "F-ok\r\n", 6), "the foreground job wrote %zd bytes", got);
	/* S moves J to the foreground and continues it */
	for (int i = 0; i < 500 && proc_state(sh->j, &nr, &tpgid) == 'T'; i++)
		usleep(10000);
	if (write(m, "hello\n", 6) != 6)
		fail("write: %m");
	int st;
	if (waitpid(sh->s, &st, 0) != sh->s)
		fail("waitpid: %m");
	expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the session leader exited %#x", st);
	pass();
}
