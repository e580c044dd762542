/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private file-backed pages shared copy-on-write since fork. The file
 * "data" (16 pages of known bytes) is mapped MAP_PRIVATE read-write by the
 * root, which writes pages 0-7 (anonymous copies now), then forks a child;
 * the child writes page 3 (a copy of its own). After restart, from inside:
 * pages 0-2 and 4-7 are still one physical page in root and child (their
 * PFNs in /proc/PID/pagemap, read by the root, are equal: root only), the
 * child's page 3 is not the root's; the contents are right in both, the
 * child's pages 8-15 are the file's; then the root writes page 0 and the
 * child still reads the old page 0 (copy-on-write, not shared), and a
 * pwrite to the file at page 12 shows in both (never written there); the
 * file is put back as it was.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG    4096
#define NPAGE 16

static uint64_t pfn(int pm, const uint8_t *addr)
{
	uint64_t e = 0;
	if (pread(pm, &e, 8, (off_t)((uintptr_t)addr / PG * 8)) != 8)
		fail("pagemap: %m");
	return (e >> 63) ? e & ((1ull << 55) - 1) : 0;
}

static int pagemap_of(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail("%s: %m", path);
	return fd;
}

int main(void)
{
	uint8_t buf[NPAGE * PG];
	test_fill_random(buf, sizeof(buf), 21);
	int fd = open("data", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		fail("data: %m");
	uint8_t *m = mmap(NULL, sizeof(buf), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap: %m");
	for (int p = 0; p < 8; p++)
		memset(m + p * PG, 'a' + p, PG);
	int go[2], back[2];
	if (pipe(go) || pipe(back))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		char x;
		memset(m + 3 * PG, 'C', PG);
		if (write(back[1], "r", 1) != 1)
			_exit(1);
		if (read(go[0], &x, 1) != 1) /* the root wrote page 0 and the file */
			_exit(2);
		for (int p = 0; p < 8; p++)
			if (m[p * PG + 5] != (p == 3 ? 'C' : 'a' + p))
				_exit(10 + p);
		if (memcmp(m + 8 * PG, buf + 8 * PG, 4 * PG) || m[12 * PG + 1] != 'F')
			_exit(3);
		_exit(0);
	}
	char x;
	if (read(back[0], &x, 1) != 1)
		fail("the child did not start");

	test_ready();
	test_wait();

	int pr = pagemap_of(getpid()), pc = pagemap_of(c);
	for (int p = 0; p < 8; p++) {
		uint64_t a = pfn(pr, m + p * PG), b = pfn(pc, m + p * PG);
		if (p == 3)
			expect(a && b && a != b, "page 3: the child's own copy shares %#llx",
			       (unsigned long long)a);
		else
			expect(a && a == b,
			       "page %d is not shared with the child (pfn %#llx, %#llx)", p,
			       (unsigned long long)a, (unsigned long long)b);
	}
	for (int p = 0; p < 8; p++)
		expect(m[p * PG + 100] == 'a' + p, "page %d reads %d", p, m[p * PG + 100]);
	expect(!memcmp(m + 8 * PG, buf + 8 * PG, 8 * PG), "the file's pages differ");
	m[0 + 5] = 'Z';
	if (pwrite(fd, "F", 1, 12 * PG + 1) != 1)
		fail("pwrite: %m");
	expect(m[12 * PG + 1] == 'F', "the root does not see the file's page 12");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (10+N: page N, 3: the file's pages)", st);
	/* the file as it was, for a restart of the same image again */
	if (pwrite(fd, buf + 12 * PG + 1, 1, 12 * PG + 1) != 1)
		fail("pwrite: %m");
	pass();
}
