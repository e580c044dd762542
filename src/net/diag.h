/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One sock_diag dump of a network namespace's TCP sockets (inet_diag),
 * message by message: what the network lock and the hold of new clients
 * (src/core/netlock.c, netdrain.c) read instead of /proc/net/tcp's text.
 */
#ifndef CKPT_NET_DIAG_H
#define CKPT_NET_DIAG_H

#include <linux/inet_diag.h>
#include <stddef.h>
#include <stdint.h>

/*
 * fn(m, arg) for each TCP socket of family (AF_INET or AF_INET6) in one of
 * states (a mask of 1 << TCP_*) that the NETLINK_SOCK_DIAG socket fd (of
 * the namespace to look at) dumps; a negative fn stops the dump with it.
 * -EAGAIN if a signal cut the wait, -errno of the request or the kernel.
 */
int tcp_diag_dump(int fd, int family, uint32_t states,
		  int (*fn)(const struct inet_diag_msg *m, void *arg), void *arg)
	__attribute__((warn_unused_result));
/* The same, asking the extensions of ext (1 << (INET_DIAG_x - 1)), each
 * message given with its attributes (a, len bytes: RTA_OK, RTA_NEXT). */
struct rtattr;
int tcp_diag_dump_ext(int fd, int family, uint32_t states, uint8_t ext,
		      int (*fn)(const struct inet_diag_msg *m, const struct rtattr *a, size_t len,
				void *arg),
		      void *arg) __attribute__((warn_unused_result));

#endif
