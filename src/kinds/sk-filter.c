/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A socket's classic BPF filter (see sk-filter.h). */
#include "kinds/sk-filter.h"

#include <errno.h>
#include <linux/filter.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define INSNS_MAX 4096 /* BPF_MAXINSNS */

int sk_filter_read(int s, uint8_t **ret, size_t *ret_len, bool *ret_locked)
{
	socklen_t n = 0;
	*ret = NULL;
	*ret_len = 0;
	*ret_locked = false;
	/* with no room, the number of instructions (0: no filter) */
	if (getsockopt(s, SOL_SOCKET, SO_GET_FILTER, NULL, &n) < 0)
		return -errno;
	if (n == 0)
		return 0;
	if (n > INSNS_MAX)
		return -E2BIG;
	struct sock_filter *prog = calloc(n, sizeof(*prog));
	socklen_t got = n;
	if (!prog)
		return -ENOMEM;
	if (getsockopt(s, SOL_SOCKET, SO_GET_FILTER, prog, &got) < 0 || got != n) {
		int e = got != n ? -EAGAIN : -errno; /* changed meanwhile: the tree is frozen */
		free(prog);
		return e;
	}
	int locked = 0;
	socklen_t l = sizeof(locked);
	if (getsockopt(s, SOL_SOCKET, SO_LOCK_FILTER, &locked, &l) == 0)
		*ret_locked = locked != 0;
	*ret = (uint8_t *)prog;
	*ret_len = n * sizeof(*prog);
	return 0;
}

bool sk_filter_ok(size_t len)
{
	return len && len % sizeof(struct sock_filter) == 0 &&
	       len / sizeof(struct sock_filter) <= INSNS_MAX;
}

int sk_filter_apply(int s, const uint8_t *prog, size_t len, bool locked)
{
	if (!sk_filter_ok(len))
		return -EINVAL;
	struct sock_filter *insns = malloc(len); /* aligned, unlike the image's bytes */
	if (!insns)
		return -ENOMEM;
	memcpy(insns, prog, len);
	struct sock_fprog fp = { .len = (unsigned short)(len / sizeof(*insns)), .filter = insns };
	int r = setsockopt(s, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) < 0 ? -errno : 0;
	free(insns);
	int one = 1;
	if (r == 0 && locked && setsockopt(s, SOL_SOCKET, SO_LOCK_FILTER, &one, sizeof(one)) < 0)
		r = -errno;
	return r;
}
