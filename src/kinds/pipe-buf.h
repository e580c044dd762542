/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The buffer of a pipe or a FIFO, shared by pipe.c and fifo.c. Functions
 * return 0 or -errno and log nothing.
 *
 * pipe_buf_peek(rfd, &buf)   checkpoint: the pipe's size and the bytes it
 *                 holds, read through the read end rfd without taking them
 *                 out (tee() into a pipe of ckpt's own of the same size);
 *                 buf.data is malloc'ed (NULL when it holds nothing).
 * pipe_buf_fill(wfd, size, data, len)   restart: sizes the pipe (size 0:
 *                 left as it is) and writes the bytes back through wfd.
 * pipe_buf_open_end(fd, acc, nonblock, &end)   restart: a new open file of
 *                 the pipe or FIFO behind ckpt's fd, opened through
 *                 /proc/self/fd with access mode acc and O_NONBLOCK (so
 *                 that it never blocks), which is then cleared unless
 *                 nonblock.
 */
#ifndef CKPT_PIPE_BUF_H
#define CKPT_PIPE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pipe_buf {
	uint32_t size;
	uint8_t *data;
	size_t len;
};

int pipe_buf_peek(int rfd, struct pipe_buf *ret) __attribute__((warn_unused_result));
int pipe_buf_fill(int wfd, uint32_t size, const uint8_t *data, size_t len)
	__attribute__((warn_unused_result));
int pipe_buf_open_end(int fd, int acc, bool nonblock, int *ret_fd)
	__attribute__((warn_unused_result));

#endif
