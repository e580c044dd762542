/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A job of a shell (run by runner.py's shell_job flow): stdin is a terminal
 * outside the tree, the controlling terminal of a session that a "shell"
 * outside the tree leads, and this process's group is its foreground one.
 * It sets a termios of its own (no echo, VEOL '%') and counts SIGWINCH.
 * The runner checkpoints it with --shell-job and restarts it with
 * --shell-job from another terminal, of another size (50x150), then types
 * "typed" there. After restart: stdin is the new terminal, which is the
 * controlling one (tty_nr), the process's group is its foreground group,
 * the termios is the job's, SIGWINCH came and the typed line is read.
 * (With --no-ckpt the runner resizes and types on the first terminal.)
 */
#include "lib.h"

#include <asm/termbits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static volatile sig_atomic_t winched;

static void on_winch(int sig)
{
	(void)sig;
	winched++;
}

int main(void)
{
	struct termios2 t;
	if (ioctl(0, TCGETS2, &t) < 0)
		skip("stdin is not a terminal (the runner's shell_job flow gives it one)");
	t.c_lflag &= ~(ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE);
	t.c_cc[VEOL] = '%';
	if (ioctl(0, TCSETS2, &t) < 0)
		fail("TCSETS2: %m");
	signal(SIGWINCH, on_winch);

	test_ready();
	test_wait();

	pid_t fg = 0;
	expect(ioctl(0, TIOCGPGRP, &fg) == 0 && fg == getpgrp(),
	       "not the foreground job of its terminal (%d, its group %d)", fg, getpgrp());
	struct stat st;
	unsigned long long nr = test_stat_field(7);
	expect(fstat(0, &st) == 0 && nr == ((minor(st.st_rdev) & 0xff) | (major(st.st_rdev) << 8) |
					    ((minor(st.st_rdev) & ~0xffu) << 12)),
	       "its controlling terminal (%#llx) is not its stdin", nr);
	struct termios2 now;
	expect(ioctl(0, TCGETS2, &now) == 0 && now.c_lflag == t.c_lflag && now.c_cc[VEOL] == '%',
	       "the terminal does not have the job's termios (lflag %#x)", now.c_lflag);
	struct winsize ws;
	expect(ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row == 50 && ws.ws_col == 150,
	       "window %ux%u, want 50x150", ws.ws_row, ws.ws_col);
	expect(winched > 0, "no SIGWINCH");
	char buf[32];
	struct pollfd pf = {.fd = 0, .events = POLLIN};
	ssize_t n = poll(&pf, 1, 5000) == 1 ? read(0, buf, sizeof(buf)) : -1;
	expect(n == 6 && !memcmp(buf, "typed\n", 6), "read %zd bytes from the terminal", n);
	pass();
}
