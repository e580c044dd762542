/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Two pseudo-terminals held by the process, both ends.
 * Pty A (master in packet mode and O_NONBLOCK, slave exclusive, mode 0620,
 * a custom termios: canonical, no echo, VEOL '@', IEXTEN, a window size)
 * holds bytes in both directions: the slave wrote "out-1\n" (the master
 * has "out-1\r\n" to read, ONLCR done once), and the master wrote input
 * the slave has not read: the lines "line1\n", "line2@" (ended by VEOL),
 * "eofline" (ended by VEOF), "x\ny\n" (a newline escaped by LNEXT inside
 * the line) and the line being typed, "part" (typed "pa", two erases,
 * "part"). Pty B had its slave opened and closed, then was locked.
 * After restart: same pts indexes, termios, size, modes, the bytes and the
 * line boundaries, and "part" is still being edited: an erase and "T\n"
 * make it "parT\n". The slave is of the devpts on /dev/pts (in a `ckpt run`
 * container, its own instance: the same indexes though the host's are
 * taken).
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
#include <sys/stat.h>
#include <unistd.h>

static int index_of(int m)
{
	int n = -1;
	if (ioctl(m, TIOCGPTN, &n) < 0)
		fail("TIOCGPTN: %m");
	return n;
}

static int open_pty(int *ret_slave)
{
	int m = open("/dev/ptmx", O_RDWR | O_NOCTTY);
	int zero = 0;
	char path[32];
	if (m < 0 || ioctl(m, TIOCSPTLCK, &zero) < 0)
		fail("ptmx: %m");
	snprintf(path, sizeof(path), "/dev/pts/%d", index_of(m));
	*ret_slave = open(path, O_RDWR | O_NOCTTY);
	if (*ret_slave < 0)
		fail("open %s: %m", path);
	return m;
}

static void put(int fd, const char *s, size_t n)
{
	if (write(fd, s, n) != (ssize_t)n)
		fail("write: %m");
}

/* One read of the slave (canonical: one line), compared. */
static void expect_line(int s, const char *want, size_t n)
{
	char buf[256];
	struct pollfd pf = {.fd = s, .events = POLLIN};
	ssize_t got = poll(&pf, 1, 2000) == 1 ? read(s, buf, sizeof(buf)) : -1;
	expect(got == (ssize_t)n && !memcmp(buf, want, n),
	       "slave read %zd bytes '%.*s', want '%.*s'", got, (int)(got > 0 ? got : 0), buf,
	       (int)n, want);
}

int main(void)
{
	int sa, sb;
	int ma = open_pty(&sa), mb = open_pty(&sb);
	ma = test_move_fd(ma, 10);
	sa = test_move_fd(sa, 11);
	mb = test_move_fd(mb, 12);
	int ia = index_of(ma), ib = index_of(mb);

	struct termios2 t;
	if (ioctl(sa, TCGETS2, &t) < 0)
		fail("TCGETS2: %m");
	t.c_lflag = ICANON | IEXTEN | ECHOE | ECHOK;
	t.c_oflag = OPOST | ONLCR;
	t.c_iflag = ICRNL | IUTF8;
	t.c_cc[VEOL] = '@';
	t.c_cc[VERASE] = 0x08;
	t.c_cc[VMIN] = 3;
	if (ioctl(sa, TCSETS2, &t) < 0)
		fail("TCSETS2: %m");
	struct winsize ws = {.ws_row = 33, .ws_col = 101, .ws_xpixel = 7, .ws_ypixel = 9};
	int one = 1;
	if (ioctl(ma, TIOCSWINSZ, &ws) < 0 || ioctl(ma, TIOCPKT, &one) < 0 ||
	    ioctl(sa, TIOCEXCL) < 0 || fchmod(sa, 0620) < 0 || fcntl(ma, F_SETFL, O_NONBLOCK) < 0)
		fail("pty A modes: %m");
	put(sa, "out-1\n", 6);
	static const char input[] = "line1\nline2@eofline\004x\026\ny\npa\010\010part";
	put(ma, input, sizeof(input) - 1);
	/* B: its slave was opened and closed, then it was locked */
	close(sb);
	if (ioctl(mb, TIOCSPTLCK, &one) < 0)
		fail("TIOCSPTLCK: %m");
	usleep(100000); /* the tty's flip buffers are pushed asynchronously */

	test_ready();
	test_wait();

	expect(index_of(ma) == ia && index_of(mb) == ib, "pts indexes %d %d, want %d %d",
	       index_of(ma), index_of(mb), ia, ib);
	char link[64], want[64];
	ssize_t n = readlink("/proc/self/fd/11", link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof(want), "/dev/pts/%d", ia);
	expect(!strcmp(link, want), "slave fd is %s, want %s", link, want);
	struct termios2 now;
	if (ioctl(sa, TCGETS2, &now) < 0)
		fail("TCGETS2: %m");
	expect(!memcmp(&now, &t, sizeof(t)), "termios differs (lflag %#x, want %#x)", now.c_lflag,
	       t.c_lflag);
	struct winsize wn;
	ioctl(ma, TIOCGWINSZ, &wn);
	expect(!memcmp(&wn, &ws, sizeof(ws)), "window size %ux%u, want 33x101", wn.ws_row,
	       wn.ws_col);
	int pkt = 0, excl = 0, lck = 0;
	ioctl(ma, TIOCGPKT, &pkt);
	ioctl(sa, TIOCGEXCL, &excl);
	ioctl(mb, TIOCGPTLCK, &lck);
	expect(pkt && excl && lck, "packet %d, slave exclusive %d, B locked %d", pkt, excl, lck);
	expect(fcntl(ma, F_GETFL) & O_NONBLOCK, "the master lost O_NONBLOCK");
	struct stat st, pts;
	expect(fstat(sa, &st) == 0 && (st.st_mode & 07777) == 0620, "slave mode %o",
	       st.st_mode & 07777);
	expect(stat("/dev/pts", &pts) == 0 && pts.st_dev == st.st_dev,
	       "the slave is not of the devpts on /dev/pts");
	/* ckpt closes its own copy of the slave as it hands over: wait for it */
	struct pollfd pf = {.fd = mb, .events = POLLIN};
	poll(&pf, 1, 10000);
	expect(pf.revents & POLLHUP, "B's master does not see its slave closed (%#x)", pf.revents);

	/* the master's queue, behind packet mode's status byte */
	char buf[64];
	n = read(ma, buf, sizeof(buf));
	expect(n == 8 && !memcmp(buf, "\0out-1\r\n", 8), "master read %zd bytes '%.*s'", n,
	       (int)(n > 1 ? n - 1 : 0), buf + 1);
	expect_line(sa, "line1\n", 6);
	expect_line(sa, "line2@", 6);
	expect_line(sa, "eofline", 7);
	expect_line(sa, "x\ny\n", 4);
	put(ma, "\010T\n", 3);
	usleep(100000);
	expect_line(sa, "parT\n", 5);
	pass();
}
