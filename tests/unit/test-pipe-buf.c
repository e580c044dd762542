/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pipe-buf.c, the buffer code pipe.c and fifo.c share. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "kinds/pipe-buf.h"
#include "unit.h"

/* A peek leaves the data where it was; a fill puts it into another pipe. */
TEST(peek_fill)
{
	int a[2], b[2];
	char got[16] = { 0 };
	struct pipe_buf buf;

	CHECK_EQ(pipe2(a, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(b, O_CLOEXEC), 0);
	CHECK_EQ(fcntl(a[1], F_SETPIPE_SZ, 8192) >= 8192, 1);
	CHECK_EQ(write(a[1], "hello", 5), 5);
	CHECK_EQ(pipe_buf_peek(a[0], &buf), 0);
	CHECK_EQ(buf.len, 5);
	CHECK_EQ(buf.size, fcntl(a[0], F_GETPIPE_SZ));
	CHECK(buf.data && !memcmp(buf.data, "hello", 5));
	CHECK_EQ(read(a[0], got, sizeof(got)), 5); /* still there */
	CHECK_EQ(pipe_buf_fill(b[1], buf.size, buf.data, buf.len), 0);
	CHECK_EQ(fcntl(b[0], F_GETPIPE_SZ), buf.size);
	memset(got, 0, sizeof(got));
	CHECK_EQ(read(b[0], got, sizeof(got)), 5);
	CHECK_STR(got, "hello");
	free(buf.data);
	for (int i = 0; i < 2; i++)
		close(a[i]), close(b[i]);
}

/* An empty pipe: no data, and nothing blocks. */
TEST(empty)
{
	int a[2];
	struct pipe_buf buf;
	CHECK_EQ(pipe2(a, O_CLOEXEC), 0);
	CHECK_EQ(pipe_buf_peek(a[0], &buf), 0);
	CHECK_EQ(buf.len, 0);
	CHECK(buf.data == NULL);
	CHECK_EQ(pipe_buf_fill(a[1], 0, NULL, 0), 0);
	close(a[0]);
	close(a[1]);
}

/* An end opened again is another open file of the same pipe, blocking as
 * asked. */
TEST(open_end)
{
	int a[2], w = -1, r = -1;
	char c = 0;
	CHECK_EQ(pipe2(a, O_CLOEXEC), 0);
	CHECK_EQ(pipe_buf_open_end(a[1], O_WRONLY, false, &w), 0);
	CHECK_EQ(pipe_buf_open_end(a[0], O_RDONLY, true, &r), 0);
	CHECK_EQ(fcntl(w, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_WRONLY);
	CHECK_EQ(fcntl(r, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDONLY | O_NONBLOCK);
	CHECK_EQ(write(w, "x", 1), 1);
	CHECK_EQ(read(r, &c, 1), 1);
	CHECK_EQ(c, 'x');
	CHECK(pipe_buf_open_end(-1, O_RDONLY, false, &r) < 0);
	close(w);
	close(r);
	close(a[0]);
	close(a[1]);
}

int main(void)
{
	RUN(peek_fill);
	RUN(empty);
	RUN(open_end);
	return unit_done();
}
