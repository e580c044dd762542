/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Many getsockopt calls in one system call: the SOL_SOCKET ones through an
 * io_uring (IORING_OP_URING_CMD, SOCKET_URING_OP_GETSOCKOPT, Linux 6.7;
 * the kernel serves no other level there), the others, and all of them
 * when the ring cannot be had (an older kernel, io_uring disabled), one
 * getsockopt each. The results are the same either way.
 */
#ifndef CKPT_SOCKOPTS_H
#define CKPT_SOCKOPTS_H

#include <stddef.h>
#include <sys/socket.h>

struct sockopts;

struct sockopt_req {
	int fd, level, name;
	void *val;
	socklen_t len; /* in: the room at val; out: the length read */
	int res;       /* out: 0 or -errno */
};

/* A ring for batches of up to `entries` requests (a power of two); NULL
 * (and -errno) when there is none: sockopts_get does without. */
int sockopts_new(unsigned entries, struct sockopts **ret) __attribute__((warn_unused_result));
void sockopts_free(struct sockopts *so);

/* Reads every request of reqs[n]; so may be NULL. Returns how many were
 * read through the ring (the others by getsockopt). */
size_t sockopts_get(struct sockopts *so, struct sockopt_req *reqs, size_t n);

#endif
