/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An AIO context (io_setup) across checkpoint and restart, by raw system
 * calls: one write reaped before (so the ring's head is not 0), two reads
 * completed but not reaped at the checkpoint (their events are in the
 * ring). After restart: the context is the same id, its ring still at
 * that address; io_getevents returns the two events (data, results, the
 * bytes read); new requests are submitted and reaped; io_destroy works.
 * A child forked after io_setup has the ring mapped but no context: it
 * comes back with the memory (its header) and still no context (EINVAL).
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static long submit(aio_context_t ctx, int fd, int op, void *buf, size_t len, off_t off,
		   uint64_t data)
{
	struct iocb cb = {.aio_data = data,
			  .aio_lio_opcode = (uint16_t)op,
			  .aio_fildes = (uint32_t)fd,
			  .aio_buf = (uint64_t)(uintptr_t)buf,
			  .aio_nbytes = len,
			  .aio_offset = off};
	struct iocb *p = &cb;
	return syscall(SYS_io_submit, ctx, 1, &p);
}

static long getevents(aio_context_t ctx, long min, long max, struct io_event *ev)
{
	struct timespec ts = {10, 0};
	return syscall(SYS_io_getevents, ctx, min, max, ev, &ts);
}

int main(void)
{
	aio_context_t ctx = 0;
	if (syscall(SYS_io_setup, 8, &ctx) < 0)
		skip("io_setup: %m");
	int go[2];
	if (pipe(go) < 0)
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) { /* the ring without its context, after the restart */
		char x;
		close(go[1]);
		if (read(go[0], &x, 1) != 1)
			_exit(2);
		if (((const unsigned *)(uintptr_t)ctx)[4] != 0xa10a10a1)
			_exit(3); /* the ring's magic */
		if (syscall(SYS_io_getevents, ctx, 0, 0, NULL, NULL) != -1 || errno != EINVAL)
			_exit(4);
		_exit(0);
	}
	close(go[0]);
	int fd = open("aio.data", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("open: %m");
	static char hello[] = "hello, aio";
	struct io_event ev[4];
	if (submit(ctx, fd, IOCB_CMD_PWRITE, hello, sizeof(hello), 0, 100) != 1)
		fail("io_submit of the write: %m");
	if (getevents(ctx, 1, 1, ev) != 1 || ev[0].data != 100 || ev[0].res != sizeof(hello))
		fail("io_getevents of the write: %m");
	static char b1[16], b2[16];
	if (submit(ctx, fd, IOCB_CMD_PREAD, b1, sizeof(hello), 0, 101) != 1 ||
	    submit(ctx, fd, IOCB_CMD_PREAD, b2, 3, 7, 102) != 1)
		fail("io_submit of the reads: %m");
	/* buffered reads complete in io_submit: their events are in the ring */
	const unsigned *ring = (const unsigned *)(uintptr_t)ctx;
	if (ring[3] - ring[2] != 2)
		skip("the reads did not complete in io_submit (head %u tail %u)", ring[2], ring[3]);

	test_ready();
	test_wait();

	char maps[1 << 16], at[32];
	snprintf(at, sizeof(at), "%lx-", (unsigned long)ctx);
	expect(test_read_file("/proc/self/maps", maps, sizeof(maps)) > 0 && strstr(maps, at) &&
		   strstr(strstr(maps, at), "[aio]"),
	       "no AIO ring at %s", at);
	long n = getevents(ctx, 2, 4, ev);
	expect(n == 2, "io_getevents after restart: %ld (%s)", n, n < 0 ? strerror(errno) : "");
	if (n == 2) {
		expect(ev[0].data == 101 && ev[0].res == sizeof(hello) &&
			   !memcmp(b1, hello, sizeof(hello)),
		       "first event: data %llu res %lld '%s'", (unsigned long long)ev[0].data,
		       (long long)ev[0].res, b1);
		expect(ev[1].data == 102 && ev[1].res == 3 && !memcmp(b2, "aio", 3),
		       "second event: data %llu res %lld", (unsigned long long)ev[1].data,
		       (long long)ev[1].res);
	}
	/* the context goes on working: the ring wraps around (8 requested: more slots) */
	for (int i = 0; i < 40; i++) {
		char b[16] = {0};
		if (submit(ctx, fd, IOCB_CMD_PREAD, b, 5, 0, 200 + i) != 1) {
			expect(0, "io_submit %d after restart: %m", i);
			break;
		}
		n = getevents(ctx, 1, 1, ev);
		if (n != 1 || ev[0].data != (uint64_t)(200 + i) || ev[0].res != 5 ||
		    memcmp(b, "hello", 5)) {
			expect(0, "request %d after restart: %ld events, data %llu res %lld", i, n,
			       (unsigned long long)ev[0].data, (long long)ev[0].res);
			break;
		}
	}
	expect(syscall(SYS_io_destroy, ctx) == 0, "io_destroy: %m");
	int st = 0;
	expect(write(go[1], "x", 1) == 1 && waitpid(c, &st, 0) == c && WIFEXITED(st) &&
		   WEXITSTATUS(st) == 0,
	       "the child with the ring but no context: status %#x", st);
	pass();
}
