/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Batched getsockopt through io_uring (sockopts.h). */
#include "util/sockopts.h"

#include <errno.h>
#include <linux/io_uring.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#define SYS_io_uring_enter 426
#endif
#define SO_URING_GETSOCKOPT 2 /* SOCKET_URING_OP_GETSOCKOPT */

/* The submission entry as a socket command reads it (linux/io_uring.h of
 * 6.7; older headers name the fields otherwise). */
struct so_sqe {
	uint8_t opcode, flags;
	uint16_t ioprio;
	int32_t fd;
	uint32_t cmd_op, pad1;
	uint32_t level, optname;
	uint32_t len, rw_flags;
	uint64_t user_data;
	uint16_t buf_index, personality;
	uint32_t optlen;
	uint64_t optval, pad2;
};
_Static_assert(sizeof(struct so_sqe) == 64, "an io_uring sqe is 64 bytes");

struct sockopts {
	int fd;
	unsigned entries;
	void *sq, *cq;
	size_t sq_len, cq_len;
	struct so_sqe *sqes;
	size_t sqes_len;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	uint32_t gen;  /* of the last batch, in its user_data */
	bool broken;   /* did not answer as it should: not used again */
};

void sockopts_free(struct sockopts *so)
{
	if (!so)
		return;
	if (so->sqes)
		munmap(so->sqes, so->sqes_len);
	if (so->cq && so->cq != so->sq)
		munmap(so->cq, so->cq_len);
	if (so->sq)
		munmap(so->sq, so->sq_len);
	if (so->fd >= 0)
		close(so->fd);
	free(so);
}

int sockopts_new(unsigned entries, struct sockopts **ret)
{
	struct io_uring_params p;
	*ret = NULL;
	struct sockopts *so = calloc(1, sizeof(*so));
	if (!so)
		return -ENOMEM;
	memset(&p, 0, sizeof(p));
	so->fd = (int)syscall(SYS_io_uring_setup, entries, &p);
	if (so->fd < 0) {
		int e = -errno;
		free(so);
		return e;
	}
	so->entries = p.sq_entries;
	so->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	so->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if ((p.features & IORING_FEAT_SINGLE_MMAP) && so->cq_len > so->sq_len)
		so->sq_len = so->cq_len;
	so->sq = mmap(NULL, so->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, so->fd,
		      IORING_OFF_SQ_RING);
	if (so->sq == MAP_FAILED) {
		so->sq = NULL;
		goto fail;
	}
	if (p.features & IORING_FEAT_SINGLE_MMAP)
		so->cq = so->sq;
	else {
		so->cq = mmap(NULL, so->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			      so->fd, IORING_OFF_CQ_RING);
		if (so->cq == MAP_FAILED) {
			so->cq = NULL;
			goto fail;
		}
	}
	so->sqes_len = p.sq_entries * sizeof(struct so_sqe);
	so->sqes = mmap(NULL, so->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			so->fd, IORING_OFF_SQES);
	if (so->sqes == MAP_FAILED) {
		so->sqes = NULL;
		goto fail;
	}
	char *sq = so->sq, *cq = so->cq;
	so->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	so->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	so->sq_array = (unsigned *)(sq + p.sq_off.array);
	so->cq_head = (unsigned *)(cq + p.cq_off.head);
	so->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	so->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	so->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	*ret = so;
	return 0;
fail:;
	int e = -errno;
	sockopts_free(so);
	return e;
}

static void one(struct sockopt_req *r)
{
	r->res = getsockopt(r->fd, r->level, r->name, r->val, &r->len) < 0 ? -errno : 0;
}

/* Up to so->entries SOL_SOCKET requests (indexes idx[n]) through the ring;
 * those that fail there are asked again by getsockopt. A ring that does
 * not answer as it should is not used again. */
static size_t ring_batch(struct sockopts *so, struct sockopt_req *reqs, const size_t *idx,
			 size_t n)
{
	if (so->broken) {
		for (size_t i = 0; i < n; i++)
			one(&reqs[idx[i]]);
		return 0;
	}
	unsigned tail = *so->sq_tail, mask = *so->sq_mask;
	uint64_t gen = (uint64_t)++so->gen << 32;
	for (size_t i = 0; i < n; i++) {
		struct sockopt_req *r = &reqs[idx[i]];
		unsigned slot = (tail + (unsigned)i) & mask;
		struct so_sqe *e = &so->sqes[slot];
		memset(e, 0, sizeof(*e));
		e->opcode = IORING_OP_URING_CMD;
		e->fd = r->fd;
		e->cmd_op = SO_URING_GETSOCKOPT;
		e->level = (uint32_t)r->level;
		e->optname = (uint32_t)r->name;
		e->optlen = r->len;
		e->optval = (uint64_t)(uintptr_t)r->val;
		e->user_data = gen | i;
		so->sq_array[slot] = slot;
		r->res = 1; /* not completed yet */
	}
	__atomic_store_n(so->sq_tail, tail + (unsigned)n, __ATOMIC_RELEASE);
	size_t seen = 0, done = 0;
	unsigned submit = (unsigned)n;
	while (seen < n) {
		long k = syscall(SYS_io_uring_enter, so->fd, submit, (unsigned)(n - seen),
				 IORING_ENTER_GETEVENTS, NULL, 0);
		if (k < 0 && errno != EINTR) {
			so->broken = true;
			break;
		}
		if (k > 0)
			submit -= (unsigned)k < submit ? (unsigned)k : submit;
		unsigned head = *so->cq_head;
		unsigned ctail = __atomic_load_n(so->cq_tail, __ATOMIC_ACQUIRE);
		for (; head != ctail; head++) {
			const struct io_uring_cqe *c = &so->cqes[head & *so->cq_mask];
			uint64_t i = c->user_data & 0xffffffffu;
			if ((c->user_data & ~0xffffffffull) != gen || i >= n)
				continue;
			seen++;
			struct sockopt_req *r = &reqs[idx[i]];
			if (c->res >= 0) {
				r->len = (socklen_t)c->res;
				r->res = 0;
				done++;
			} else
				r->res = c->res;
		}
		__atomic_store_n(so->cq_head, head, __ATOMIC_RELEASE);
	}
	/* failed there (an older kernel: no socket commands): asked again; a
	 * ring that served none is not tried again */
	if (!done)
		so->broken = true;
	for (size_t i = 0; i < n; i++)
		if (reqs[idx[i]].res != 0)
			one(&reqs[idx[i]]);
	return done;
}

size_t sockopts_get(struct sockopts *so, struct sockopt_req *reqs, size_t n)
{
	size_t idx[64], m = 0, done = 0;
	for (size_t i = 0; i < n; i++) {
		if (!so || so->broken || reqs[i].level != SOL_SOCKET) {
			one(&reqs[i]);
			continue;
		}
		idx[m++] = i;
		if (m == so->entries || m == sizeof(idx) / sizeof(idx[0])) {
			done += ring_batch(so, reqs, idx, m);
			m = 0;
		}
	}
	if (m)
		done += ring_batch(so, reqs, idx, m);
	return done;
}
