/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: an io_uring instance at fd 5, its submission and completion
 * rings mapped, one NOP submitted and completed. The runner expects the
 * checkpoint to fail naming the pid and io_uring (by the fd or the ring
 * mapping); the process lives on and its ring still works (another NOP
 * completes). Skipped where io_uring_setup is not allowed.
 *
 * "sqpoll": the ring has a kernel thread polling its submissions
 * (IORING_SETUP_SQPOLL, "iou-sqp-N") and a read of an empty pipe is left
 * pending in an io-wq worker ("iou-wrk-N"), both threads of this process
 * that take no ptrace stop: the checkpoint must still end, by the refusal,
 * rather than wait for them to stop (it used to hang, the program held
 * stopped).
 */
#include "lib.h"

#include <dirent.h>
#include <linux/io_uring.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int ring;
static struct io_uring_params p;
static uint8_t *sq, *cq;
static struct io_uring_sqe *sqes;

static void nop(uint64_t tag)
{
	uint32_t *tail = (uint32_t *)(sq + p.sq_off.tail);
	uint32_t *array = (uint32_t *)(sq + p.sq_off.array);
	uint32_t idx = *tail & *(uint32_t *)(sq + p.sq_off.ring_mask);
	memset(&sqes[idx], 0, sizeof(sqes[idx]));
	sqes[idx].opcode = IORING_OP_NOP;
	sqes[idx].user_data = tag;
	array[idx] = idx;
	__atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
	/* with SQPOLL, a wake-up too: the thread may sleep (IORING_SQ_NEED_WAKEUP)
	 * and then never takes the entry (a hang seen once in 15 starts) */
	unsigned wake = (p.flags & IORING_SETUP_SQPOLL) ? IORING_ENTER_SQ_WAKEUP : 0;
	if (syscall(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS | wake, NULL, 0) != 1)
		fail("io_uring_enter: %m");
	uint32_t *head = (uint32_t *)(cq + p.cq_off.head);
	struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	uint32_t h = *head & *(uint32_t *)(cq + p.cq_off.ring_mask);
	if (cqes[h].user_data != tag || cqes[h].res != 0)
		fail("NOP %llu completed as %llu, res %d", (unsigned long long)tag,
		     (unsigned long long)cqes[h].user_data, cqes[h].res);
	__atomic_store_n(head, *head + 1, __ATOMIC_RELEASE);
}

/* The process's threads, its own and the kernel's. */
static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		fail("opendir /proc/self/task: %m");
	for (struct dirent *de; (de = readdir(d));)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A read of an empty pipe handed to an io-wq worker (IOSQE_ASYNC): it
 * stays pending, the worker blocked in it. */
static void pending_read(void)
{
	static char buf[8];
	int fds[2];
	if (pipe(fds) < 0)
		fail("pipe: %m");
	uint32_t *tail = (uint32_t *)(sq + p.sq_off.tail);
	uint32_t *array = (uint32_t *)(sq + p.sq_off.array);
	uint32_t idx = *tail & *(uint32_t *)(sq + p.sq_off.ring_mask);
	memset(&sqes[idx], 0, sizeof(sqes[idx]));
	sqes[idx].opcode = IORING_OP_READ;
	sqes[idx].flags = IOSQE_ASYNC;
	sqes[idx].fd = fds[0];
	sqes[idx].addr = (uint64_t)(uintptr_t)buf;
	sqes[idx].len = sizeof(buf);
	sqes[idx].user_data = 99;
	array[idx] = idx;
	__atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, ring, 1, 0, IORING_ENTER_SQ_WAKEUP, NULL, 0) < 0)
		fail("io_uring_enter: %m");
}

int main(int argc, char **argv)
{
	bool sqpoll = argc > 1 && !strcmp(argv[1], "sqpoll");
	if (sqpoll) {
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 60000; /* ms: the thread stays awake */
	}
	ring = (int)syscall(SYS_io_uring_setup, 4, &p);
	if (ring < 0)
		skip("io_uring_setup: %m");
	test_move_fd(ring, 5);
	ring = 5;
	sq = mmap(NULL, p.sq_off.array + p.sq_entries * 4, PROT_READ | PROT_WRITE, MAP_SHARED,
		  ring, IORING_OFF_SQ_RING);
	cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
		  PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_CQ_RING);
	sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		    MAP_SHARED, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
		fail("mmap rings: %m");
	nop(1);
	if (sqpoll) {
		pending_read();
		/* the leader, iou-sqp and iou-wrk */
		int64_t end = test_now_ns(CLOCK_MONOTONIC) + 15000000000ll;
		while (threads() < 3) {
			if (test_now_ns(CLOCK_MONOTONIC) > end)
				fail("no io_uring threads after 15 s: %d thread(s)", threads());
			usleep(1000);
		}
	}

	test_ready();
	test_wait();

	nop(2);
	pass();
}
