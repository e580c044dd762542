/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The queues of a pseudo-terminal, taken out and put back: see tty-io.h. */
#include "kinds/tty-io.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void ttyio_queues_free(struct tty_queues *q)
{
	free(q->out);
	for (size_t i = 0; i < q->nlines; i++)
		free(q->lines[i].data);
	free(q->lines);
	free(q->rest);
	*q = (struct tty_queues){0};
}

bool ttyio_canonical(const struct termios2 *t)
{
	return (t->c_lflag & ICANON) && !(t->c_lflag & EXTPROC);
}

static int set_termios(int s, const struct termios2 *t)
{
	return ioctl(s, TCSETS2, t) < 0 ? -errno : 0;
}

static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	/* the tty's poll also waits for input still in its flip buffers */
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static int append(uint8_t **buf, size_t *len, const uint8_t *data, size_t n)
{
	if (*len + n > TTY_MAX_QUEUE)
		return -EFBIG;
	uint8_t *nb = realloc(*buf, *len + n + 1);
	if (!nb)
		return -ENOMEM;
	memcpy(nb + *len, data, n);
	*buf = nb;
	*len += n;
	return 0;
}

/* Everything fd gives until it has nothing more (EAGAIN, 0, EIO). */
static int read_all(int fd, uint8_t **buf, size_t *len)
{
	uint8_t tmp[4096];
	for (;;) {
		ssize_t n = read(fd, tmp, sizeof(tmp));
		if (n < 0 && (errno == EAGAIN || errno == EIO))
			return 0;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		int r = append(buf, len, tmp, (size_t)n);
		if (r < 0)
			return r;
		if (!readable(fd))
			return 0;
	}
}

int ttyio_take_master(int m, struct tty_queues *q)
{
	return readable(m) ? read_all(m, &q->out, &q->out_len) : 0;
}

static bool terminator(const struct termios2 *t, uint8_t c)
{
	return c == '\n' || (t->c_cc[VEOL] && c == t->c_cc[VEOL]) ||
	       ((t->c_lflag & IEXTEN) && t->c_cc[VEOL2] && c == t->c_cc[VEOL2]);
}

/* Canonical mode: one read(2) is one line (an empty one: a lone VEOF). */
static int take_lines(int s, const struct termios2 *t, struct tty_queues *q)
{
	uint8_t buf[8192];
	while (readable(s)) {
		ssize_t n = read(s, buf, sizeof(buf));
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return -errno;
		if (q->nlines == TTY_MAX_LINES)
			return -EFBIG;
		struct tty_line *nl = realloc(q->lines, (q->nlines + 1) * sizeof(*nl));
		if (!nl)
			return -ENOMEM;
		q->lines = nl;
		struct tty_line *l = &q->lines[q->nlines];
		*l = (struct tty_line){.data = malloc((size_t)n + 1), .len = (size_t)n};
		if (!l->data)
			return -ENOMEM;
		memcpy(l->data, buf, (size_t)n);
		l->eof = n == 0 || !terminator(t, buf[n - 1]);
		q->nlines++;
	}
	return 0;
}

int ttyio_take_slave(int s, const struct termios2 *t, struct tty_queues *q)
{
	if (t->c_lflag & EXTPROC) {
		int n = 0;
		(void)readable(s);
		if (ioctl(s, FIONREAD, &n) < 0)
			return -errno;
		return n ? -EOPNOTSUPP : 0;
	}
	if (!ttyio_canonical(t))
		return readable(s) ? read_all(s, &q->rest, &q->rest_len) : 0;
	int r = take_lines(s, t, q);
	if (r < 0)
		return r;
	/* the line being typed: readable with ICANON off for a moment */
	struct termios2 raw = *t;
	raw.c_lflag &= ~ICANON;
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	if ((r = set_termios(s, &raw)) < 0)
		return r;
	r = readable(s) ? read_all(s, &q->rest, &q->rest_len) : 0;
	int e = set_termios(s, t);
	return r < 0 ? r : e;
}

static int sti(int s, uint8_t c)
{
	return ioctl(s, TIOCSTI, &c) < 0 ? -errno : 0;
}

/* Three bytes the input does not hold, for the special characters. */
static int free_bytes(const struct tty_queues *q, uint8_t ret[3])
{
	bool used[256] = {[0] = true, ['\n'] = true};
	for (size_t i = 0; i < q->nlines; i++)
		for (size_t j = 0; j < q->lines[i].len; j++)
			used[q->lines[i].data[j]] = true;
	for (size_t j = 0; j < q->rest_len; j++)
		used[q->rest[j]] = true;
	int n = 0;
	for (int c = 255; c > 0 && n < 3; c--)
		if (!used[c])
			ret[n++] = (uint8_t)c;
	return n == 3 ? 0 : -ENOSPC;
}

/* Bytes of a line's body: a newline inside it is escaped (LNEXT). */
static int put_bytes(int s, const uint8_t *d, size_t n, bool canon, uint8_t lnext)
{
	for (size_t i = 0; i < n; i++) {
		int r = 0;
		if (canon && d[i] == '\n')
			r = sti(s, lnext);
		if (r >= 0)
			r = sti(s, d[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int put_line(int s, struct termios2 *ti, const struct tty_line *l, const uint8_t fb[3])
{
	size_t body = l->eof || !l->len ? l->len : l->len - 1;
	int r = put_bytes(s, l->data, body, true, fb[2]);
	if (r < 0)
		return r;
	if (l->eof)
		return sti(s, fb[1]);
	uint8_t c = l->data[l->len - 1];
	if (c == '\n')
		return sti(s, c);
	/* ended by VEOL or VEOL2: that byte ends it for this one line */
	ti->c_cc[VEOL] = c;
	if ((r = set_termios(s, ti)) >= 0)
		r = sti(s, c);
	ti->c_cc[VEOL] = fb[0];
	int e = set_termios(s, ti);
	return r < 0 ? r : e;
}

static int put_input(int s, const struct termios2 *t, const struct tty_queues *q)
{
	bool canon = ttyio_canonical(t);
	struct termios2 ti = *t;
	uint8_t fb[3] = {0};
	int r;

	if (!q->nlines && !q->rest_len)
		return 0;
	ti.c_iflag &= ~(IGNBRK | BRKINT | IGNPAR | PARMRK | INPCK | ISTRIP | INLCR | IGNCR | ICRNL |
			IUCLC | IXON | IXANY | IXOFF | IMAXBEL);
	ti.c_lflag &= ~(ISIG | ECHO | ECHOE | ECHOK | ECHONL | ECHOCTL | ECHOPRT | ECHOKE | NOFLSH |
			TOSTOP | FLUSHO | PENDIN | XCASE | IEXTEN);
	if (canon) {
		if ((r = free_bytes(q, fb)) < 0)
			return r;
		ti.c_lflag |= IEXTEN; /* for LNEXT */
		ti.c_cc[VERASE] = ti.c_cc[VKILL] = ti.c_cc[VWERASE] = fb[0];
		ti.c_cc[VREPRINT] = ti.c_cc[VEOL] = ti.c_cc[VEOL2] = fb[0];
		ti.c_cc[VEOF] = fb[1];
		ti.c_cc[VLNEXT] = fb[2];
	}
	if ((r = set_termios(s, &ti)) < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < q->nlines; i++)
		r = put_line(s, &ti, &q->lines[i], fb);
	if (r >= 0)
		r = put_bytes(s, q->rest, q->rest_len, canon, fb[2]);
	int e = set_termios(s, t);
	return r < 0 ? r : e;
}

static int write_all(int s, const uint8_t *d, size_t n)
{
	for (size_t done = 0, tries = 0; done < n;) {
		ssize_t w = write(s, d + done, n - done);
		if (w < 0 && errno == EAGAIN && tries++ < 50) {
			struct pollfd p = {.fd = s, .events = POLLOUT};
			poll(&p, 1, 100);
			continue;
		}
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		done += (size_t)w;
	}
	return 0;
}

static int put_output(int s, const struct termios2 *t, const struct tty_queues *q)
{
	if (!q->out_len)
		return 0;
	struct termios2 to = *t;
	to.c_oflag &= ~OPOST; /* it was processed once already */
	int r = set_termios(s, &to);
	if (r >= 0)
		r = write_all(s, q->out, q->out_len);
	int e = set_termios(s, t);
	return r < 0 ? r : e;
}

int ttyio_put_back(int s, const struct termios2 *t, const struct tty_queues *q)
{
	int r = put_input(s, t, q);
	int e = put_output(s, t, q);
	return r < 0 ? r : e;
}
