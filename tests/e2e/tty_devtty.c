/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * /dev/tty and /dev/console opened by name. The test process holds a pty
 * master; its child S leads a session whose controlling terminal is the
 * slave and holds /dev/tty (fd 7) and, where it can be opened, /dev/console
 * (fd 8). After restart S checks that fd 7 is still /dev/tty (5:0) and is
 * its pty (TIOCGDEV), that fd 8 is /dev/console and the same terminal as
 * before, and writes a line to /dev/tty, which the master reads.
 */
#include "lib.h"

#include <asm/termbits.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static int linked(int fd, const char *want)
{
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	return !strcmp(link, want);
}

/* S: 0, or the bits of what is wrong. */
static int session(const char *path, int go, int has_console, unsigned int console_dev)
{
	setsid();
	int s = open(path, O_RDWR); /* the controlling terminal */
	struct termios2 t;
	if (s < 0 || ioctl(s, TCGETS2, &t) < 0)
		return 64;
	t.c_lflag &= ~(ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE);
	ioctl(s, TCSETS2, &t);
	int tty = open("/dev/tty", O_RDWR);
	if (tty < 0 || dup2(tty, 7) < 0)
		return 65;
	close(tty);
	close(s);
	if (write(go, "r", 1) != 1) /* ready */
		return 66;
	char c;
	if (read(go, &c, 1) != 1) /* woken */
		return 67;
	int bad = 0;
	struct stat st;
	unsigned int dev = 0;
	if (!linked(7, "/dev/tty") || fstat(7, &st) < 0 || st.st_rdev != makedev(5, 0))
		bad |= 1;
	struct stat pst;
	if (stat(path, &pst) < 0 || ioctl(7, TIOCGDEV, &dev) < 0 ||
	    dev != ((major(pst.st_rdev) << 8) | (minor(pst.st_rdev) & 0xff)))
		bad |= 2;
	if (has_console &&
	    (!linked(8, "/dev/console") || ioctl(8, TIOCGDEV, &dev) < 0 || dev != console_dev))
		bad |= 4;
	if (write(7, "via-tty\n", 8) != 8)
		bad |= 8;
	return bad;
}

int main(void)
{
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY), zero = 0, n = -1, go[2];
	if (m < 0 || ioctl(m, TIOCSPTLCK, &zero) < 0 || ioctl(m, TIOCGPTN, &n) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, go) < 0)
		fail("setup: %m");
	m = test_move_fd(m, 10);
	char path[32];
	snprintf(path, sizeof(path), "/dev/pts/%d", n);
	unsigned int console_dev = 0;
	int con = open("/dev/console", O_RDWR | O_NOCTTY | O_NONBLOCK);
	int has_console = con >= 0 && ioctl(con, TIOCGDEV, &console_dev) == 0;
	if (has_console)
		test_move_fd(con, 8);
	else if (con >= 0)
		close(con);
	pid_t s = fork();
	if (s == 0) {
		close(m);
		close(go[0]);
		alarm(120);
		_exit(session(path, go[1], has_console, console_dev));
	}
	close(go[1]);
	if (has_console)
		close(8);
	char c;
	if (read(go[0], &c, 1) != 1)
		fail("the session did not start");
	if (!has_console)
		test_log("(no /dev/console here: /dev/tty only)\n");

	test_ready();
	test_wait();

	if (write(go[0], "g", 1) != 1)
		fail("write: %m");
	char buf[32];
	ssize_t got = test_read_upto(m, buf, sizeof(buf), 9, 5000);
	expect(got == 9 && !memcmp(buf, "via-tty\r\n", 9), "the master read %zd bytes", got);
	int st;
	if (waitpid(s, &st, 0) != s)
		fail("waitpid: %m");
	expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "the session says %#x (1: /dev/tty, "
	       "2: its tty, 4: /dev/console, 8: write)",
	       WIFEXITED(st) ? WEXITSTATUS(st) : st);
	pass();
}
