/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The buffer of a pipe or a FIFO (pipe-buf.h). */
#include "kinds/pipe-buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/cleanup.h"

int pipe_buf_peek(int rfd, struct pipe_buf *ret)
{
	int size = fcntl(rfd, F_GETPIPE_SZ), tmp[2];
	if (size < 0 || pipe2(tmp, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	_cleanup_close_ int rd = tmp[0], wr = tmp[1];
	if (fcntl(wr, F_SETPIPE_SZ, size) < 0)
		return -errno;
	ssize_t n = tee(rfd, wr, (size_t)size, SPLICE_F_NONBLOCK);
	if (n < 0 && errno != EAGAIN)
		return -errno;
	uint8_t *data = NULL;
	if (n > 0) {
		data = malloc((size_t)n);
		if (!data)
			return -ENOMEM;
		if (read(rd, data, (size_t)n) != n) {
			free(data);
			return -EIO;
		}
	}
	*ret = (struct pipe_buf){ .size = (uint32_t)size, .data = data, .len = n > 0 ? (size_t)n : 0 };
	return 0;
}

int pipe_buf_fill(int wfd, uint32_t size, const uint8_t *data, size_t len)
{
	if (size && fcntl(wfd, F_SETPIPE_SZ, size) < 0)
		return -errno;
	for (size_t done = 0; done < len;) {
		ssize_t n = write(wfd, data + done, len - done);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

int pipe_buf_open_end(int fd, int acc, bool nonblock, int *ret_fd)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	_cleanup_close_ int end = open(path, acc | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (end < 0)
		return -errno;
	if (!nonblock && fcntl(end, F_SETFL, fcntl(end, F_GETFL) & ~O_NONBLOCK) < 0)
		return -errno;
	*ret_fd = TAKE_FD(end);
	return 0;
}
