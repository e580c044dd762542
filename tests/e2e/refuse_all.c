/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Every refusal at once: the root holds io_uring instances at fds 5 and 6
 * and the rings of a third one mapped (its fd closed); its child holds one
 * at fd 7 and an area sealed with mseal (another kind of refusal, of
 * memory, by mm). The runner expects one checkpoint to name all five (both
 * fds, the mapping, the child's fd and its sealed area), not only the
 * first; the tree runs on. Skipped where io_uring_setup or mseal is not
 * allowed.
 */
#include "lib.h"

#include <linux/io_uring.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_mseal
#define SYS_mseal 462
#endif

static int uring_at(int fd)
{
	struct io_uring_params p = { 0 };
	int ring = (int)syscall(SYS_io_uring_setup, 4, &p);
	if (ring < 0)
		skip("io_uring_setup: %m");
	if (fd >= 0) {
		test_move_fd(ring, fd);
		return fd;
	}
	void *sq = mmap(NULL, p.sq_off.array + p.sq_entries * 4, PROT_READ | PROT_WRITE,
			MAP_SHARED, ring, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		fail("mmap ring: %m");
	close(ring);
	return -1;
}

int main(void)
{
	uring_at(5);
	uring_at(6);
	uring_at(-1);
	int ready[2];
	if (pipe(ready))
		fail("pipe: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		uring_at(7);
		close(5);
		close(6);
		char *a = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (a == MAP_FAILED || syscall(SYS_mseal, a, 4096, 0) < 0)
			_exit(2);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char c;
	if (read(ready[0], &c, 1) != 1) {
		int st;
		if (waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 2)
			skip("mseal: not allowed here");
		fail("the child did not start");
	}

	test_ready();
	test_wait();

	kill(child, SIGKILL);
	int st;
	expect(waitpid(child, &st, 0) == child && WIFSIGNALED(st), "the child: status %#x", st);
	pass();
}
