/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One sock_diag dump of TCP sockets (see diag.h). */
#include "net/diag.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "util/cleanup.h"

#define DIAG_BUF (1u << 16) /* a 10,000-socket dump in few reads */

static int dump(int fd, int family, uint32_t states, uint8_t ext,
		int (*fn)(const struct inet_diag_msg *m, void *arg),
		int (*fn_ext)(const struct inet_diag_msg *m, const struct rtattr *a, size_t len,
			      void *arg),
		void *arg)
{
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req = {
		.h = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.r = { .sdiag_family = (uint8_t)family, .sdiag_protocol = IPPROTO_TCP,
		       .idiag_ext = ext, .idiag_states = states },
	};
	if (send(fd, &req, sizeof(req), 0) < 0)
		return -errno;
	_cleanup_free_ char *buf = malloc(DIAG_BUF);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t got = recv(fd, buf, DIAG_BUF, 0);
		if (got < 0)
			return errno == EINTR ? -EAGAIN : -errno;
		if (got == 0)
			return -EPROTO;
		int n = (int)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error ? e->error : -EPROTO;
			}
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
				continue;
			const struct inet_diag_msg *m = NLMSG_DATA(h);
			size_t al = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
			int r = fn ? fn(m, arg)
				   : fn_ext(m, (const struct rtattr *)(m + 1), al, arg);
			if (r < 0)
				return r;
		}
	}
}

int tcp_diag_dump(int fd, int family, uint32_t states,
		  int (*fn)(const struct inet_diag_msg *m, void *arg), void *arg)
{
	return dump(fd, family, states, 0, fn, NULL, arg);
}

int tcp_diag_dump_ext(int fd, int family, uint32_t states, uint8_t ext,
		      int (*fn)(const struct inet_diag_msg *m, const struct rtattr *a, size_t len,
				void *arg),
		      void *arg)
{
	return dump(fd, family, states, ext, NULL, fn, arg);
}
