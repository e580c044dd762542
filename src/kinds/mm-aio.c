/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * AIO contexts (io_setup), a part of mm. A context is known to its
 * process by its ring, mapped "/[aio] (deleted)": the context id
 * (aio_context_t) is the ring's address. The ring's header (struct
 * aio_ring: id, nr, head, tail, magic...) is followed by nr io_events, of
 * which those from head to tail are completed and not yet reaped.
 *
 * Checkpoint: whether the ring has a context is asked by a probe,
 * io_getevents(ring, 0, 0), which reads nothing: a child forked after
 * io_setup has its parent's ring mapped but no context (EINVAL), and that
 * vma is kept as plain shared memory (mm.c). A ring with its context is a
 * VMA_AIO whose AioRing keeps nr, head, tail and the unreaped events.
 * Requests still in flight cannot be seen from user space (the kernel
 * counts them in the context, shown nowhere): ckpt waits for the ring's
 * tail to stay still a moment (AIO_SETTLE), so that I/O
 * that completes by itself (O_DIRECT reads and writes, what fio's libaio
 * engine does) lands in the ring before it is read. A request that stays
 * in flight longer (IOCB_CMD_POLL on an fd never ready) is lost: after
 * restart the program waits for it forever. Buffered I/O completes inside
 * io_submit, so it is never in flight. A ring whose tail still moves when
 * AIO_WAIT_MS is over is refused (completions were still coming).
 *
 * Why a request that stays in flight cannot be detected: the kernel counts
 * them only inside the kioctx (reqs_available, split into per-CPU caches
 * of up to 2 * req_batch slots each, and a percpu_ref), which no /proc
 * file, fdinfo (a context has no fd) or ring field shows; fs.aio-nr sums
 * the contexts' reserved slots, not requests. io_cancel finds a request
 * only by the user address of its iocb, and cancels it when it does (its
 * event then lands in the ring: not a probe). A probe io_submit of
 * requests of ckpt's own until EAGAIN cannot count one missing slot
 * (slots move in per-CPU batches) and its requests would post events into
 * the program's ring. Reading the kioctx needs code in the kernel (a BPF
 * program over the ring file's mapping): not done.
 *
 * Restart: io_setup((nr - 2) / 2) makes a ring of the same nr (the kernel
 * doubles the count and adds 2; checked), which is moved by mremap to the
 * saved address (the kernel follows a moved ring: the context's id becomes
 * the new address, the old id again). The kernel keeps its own tail, where
 * the next completion goes: k unreaped events are restored by having k
 * reads of /dev/null complete and reaping them (the kernel's tail is then
 * k), then writing the saved events at 0..k-1 and head 0. The program
 * reaps them as before, in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/mm.h"
#include "mm.pb-c.h"

struct aio_ring_hdr {
	uint32_t id, nr, head, tail, magic, compat_features, incompat_features, header_length;
};
#define AIO_RING_MAGIC 0xa10a10a1
#define AIO_SETTLE_MS  20 /* the tail still for this long: nothing more is coming */
#define AIO_WAIT_MS    2000
#define AIO_BATCH      64

bool mm_aio_claim(const struct proc_vma *pv)
{
	return pv->deleted && !strcmp(pv->path, "/[aio]");
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int mm_aio_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, VmaEntry *v)
{
	struct aio_ring_hdr h;
	uint64_t len = pv->end - pv->start;
	int r = puppet_read(&t->pup, pv->start, &h, sizeof(h));
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d vma %llx: cannot read its AIO ring: %s",
				t->pid, (unsigned long long)pv->start, strerror(-r));
	/* in flight: wait for the tail to settle */
	uint64_t start = now_ms(), still = start;
	bool settled = false;
	for (uint32_t tail = h.tail; now_ms() - start < AIO_WAIT_MS;) {
		if ((settled = now_ms() - still >= AIO_SETTLE_MS))
			break;
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
		if ((r = puppet_read(&t->pup, pv->start, &h, sizeof(h))) < 0)
			return r;
		if (h.tail != tail) {
			tail = h.tail;
			still = now_ms();
		}
	}
	if (h.magic != AIO_RING_MAGIC || h.header_length != sizeof(h) || h.nr < 2 ||
	    sizeof(h) + (uint64_t)h.nr * sizeof(struct io_event) > len || h.tail >= h.nr)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d vma %llx-%llx: an AIO ring (io_setup) whose header is not "
				"one ckpt knows (magic %#x, nr %u, tail %u)",
				t->pid, (unsigned long long)pv->start, (unsigned long long)pv->end,
				h.magic, h.nr, h.tail);
	if (!settled) /* completions still coming: more would be after the read */
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d vma %llx-%llx: AIO context (io_setup): its ring was still "
				"receiving completions %d ms after the tree stopped; requests in "
				"flight would be lost; checkpoint when its I/O is idle",
				t->pid, (unsigned long long)pv->start, (unsigned long long)pv->end,
				AIO_WAIT_MS);
	uint32_t head = h.head % h.nr, k = (h.tail + h.nr - head) % h.nr;
	AioRing *a = calloc(1, sizeof(*a));
	uint8_t *ev = malloc(k ? k * sizeof(struct io_event) : 1);
	if (!a || !ev) {
		free(a);
		free(ev);
		return -ENOMEM;
	}
	aio_ring__init(a);
	for (uint32_t i = 0; i < k && r >= 0; i++)
		r = puppet_read(
		    &t->pup, pv->start + sizeof(h) + ((head + i) % h.nr) * sizeof(struct io_event),
		    ev + i * sizeof(struct io_event), sizeof(struct io_event));
	if (r < 0) {
		free(a);
		free(ev);
		return log_fail(&ctx->log, r, "pid %d vma %llx: cannot read its AIO events: %s",
				t->pid, (unsigned long long)pv->start, strerror(-r));
	}
	a->nr = h.nr;
	a->head = head;
	a->tail = h.tail;
	a->has_events = true;
	a->events.data = ev;
	a->events.len = k * sizeof(struct io_event);
	v->kind = VMA_KIND__VMA_AIO;
	v->aio_ring = a;
	if (k)
		log_info(&ctx->log, "pid %d: AIO context %llx: %u completed events not reaped yet",
			 t->pid, (unsigned long long)pv->start, k);
	return 0;
}

void mm_aio_free(VmaEntry *v)
{
	if (v->aio_ring) {
		free(v->aio_ring->events.data);
		free(v->aio_ring);
		v->aio_ring = NULL;
	}
}

int mm_aio_valid(const VmaEntry *v)
{
	const AioRing *a = v->aio_ring;
	if ((v->kind == VMA_KIND__VMA_AIO) != (a != NULL))
		return -EINVAL;
	if (!a)
		return 0;
	uint64_t len = v->end - v->start;
	if (a->nr < 2 || a->nr > (1u << 24) || a->tail >= a->nr || a->head >= a->nr ||
	    sizeof(struct aio_ring_hdr) + (uint64_t)a->nr * sizeof(struct io_event) > len ||
	    (a->has_events &&
	     a->events.len != ((a->tail + a->nr - a->head) % a->nr) * sizeof(struct io_event)) ||
	    v->shared == false)
		return -EINVAL;
	return 0;
}

/* k reads of /dev/null complete: the kernel's tail moves on by k. */
static int aio_advance(struct rst_ctx *ctx, struct rst_task *t, uint64_t id, uint32_t k)
{
	struct puppet *p = &t->pup;
	uint64_t path = puppet_scratch_put(p, 0, "/dev/null", 10);
	long fd =
	    path ? puppet_syscall(p, SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC) : -EFAULT;
	if (fd < 0)
		return log_fail(&ctx->log, (int)fd,
				"pid %d: AIO context %llx: cannot open /dev/null "
				"to restore its ring: %s",
				t->pid, (unsigned long long)id, strerror((int)-fd));
	long r = 0;
	while (k && r >= 0) {
		uint32_t n = k < AIO_BATCH ? k : AIO_BATCH;
		struct iocb cb[AIO_BATCH];
		uint64_t ptrs[AIO_BATCH];
		uint64_t base = 256, cbs = base + sizeof(ptrs), evs = cbs + sizeof(cb);
		memset(cb, 0, sizeof(cb));
		for (uint32_t i = 0; i < n; i++) {
			cb[i].aio_lio_opcode = IOCB_CMD_PREAD;
			cb[i].aio_fildes = (uint32_t)fd;
			cb[i].aio_buf = p->scratch + evs; /* reads nothing */
			cb[i].aio_nbytes = 1;
			ptrs[i] = p->scratch + cbs + i * sizeof(struct iocb);
		}
		if (!puppet_scratch_put(p, base, ptrs, sizeof(ptrs)) ||
		    !puppet_scratch_put(p, cbs, cb, sizeof(cb))) {
			r = -EFAULT;
			break;
		}
		r = puppet_syscall(p, SYS_io_submit, id, n, p->scratch + base);
		if (r >= 0 && r != n)
			r = -EAGAIN;
		if (r >= 0)
			r = puppet_syscall(p, SYS_io_getevents, id, n, n, p->scratch + evs, 0);
		if (r >= 0 && r != n)
			r = -EAGAIN;
		k -= n;
	}
	puppet_syscall(p, SYS_close, fd);
	return r < 0 ? log_fail(&ctx->log, (int)r,
				"pid %d: AIO context %llx: cannot restore its "
				"ring's tail: %s",
				t->pid, (unsigned long long)id, strerror((int)-r))
		     : 0;
}

int mm_aio_map(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	struct puppet *p = &t->pup;
	const AioRing *a = v->aio_ring;
	uint64_t len = v->end - v->start, zero = 0;
	uint64_t at = puppet_scratch_put(p, 0, &zero, sizeof(zero));
	long r = at ? puppet_syscall(p, SYS_io_setup, (a->nr - 2) / 2, at) : -EFAULT;
	uint64_t id = 0;
	if (r >= 0)
		r = puppet_read(p, at, &id, sizeof(id));
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"pid %d: AIO context %llx: io_setup(%u) failed: %s", t->pid,
				(unsigned long long)v->start, (a->nr - 2) / 2, strerror((int)-r));
	struct aio_ring_hdr h;
	r = puppet_read(p, id, &h, sizeof(h));
	if (r >= 0 && h.nr != a->nr) {
		puppet_syscall(p, SYS_io_destroy, id);
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: AIO context %llx: the new ring holds %u events, the saved "
				"one %u (a machine with more CPUs?)",
				t->pid, (unsigned long long)v->start, h.nr, a->nr);
	}
	if (r >= 0 && id != v->start)
		r = puppet_syscall(p, SYS_mremap, id, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				   v->start);
	if (r < 0 && r > -4096)
		return log_fail(&ctx->log, (int)r,
				"pid %d: AIO context %llx: cannot move its ring "
				"there: %s",
				t->pid, (unsigned long long)v->start, strerror((int)-r));
	uint32_t k = (uint32_t)(a->events.len / sizeof(struct io_event));
	if (!k)
		return 0;
	int e = aio_advance(ctx, t, v->start, k);
	if (e < 0)
		return e;
	/* the saved events at 0..k-1, head 0: the kernel's tail is k */
	if ((e = puppet_read(p, v->start, &h, sizeof(h))) < 0 || h.tail != k)
		return log_fail(&ctx->log, e < 0 ? e : -EIO,
				"pid %d: AIO context %llx: its ring's "
				"tail is %u, not %u",
				t->pid, (unsigned long long)v->start, h.tail, k);
	uint32_t head = 0;
	e = puppet_write(p, v->start + sizeof(h), a->events.data, a->events.len);
	if (e >= 0)
		e = puppet_write(p, v->start + offsetof(struct aio_ring_hdr, head), &head,
				 sizeof(head));
	return e < 0 ? log_fail(&ctx->log, e,
				"pid %d: AIO context %llx: cannot write its "
				"events: %s",
				t->pid, (unsigned long long)v->start, strerror(-e))
		     : 0;
}
