/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private file mappings a child has from its fork, none of whose pages it
 * shares with its parent: the restart keeps them in the child (forked from
 * its restored parent, which it shares other memory with: the region
 * "shared", written before the fork) rather than mapping them again, and
 * must leave it what a new mapping would have. The file "data" (4 pages of
 * known bytes) is mapped MAP_PRIVATE read-write, and its last page once
 * more read-only, by the root before the fork; after the fork the root
 * writes page 0 (its own copy: the child must read the file there after
 * restart, not the root's page) and the child page 1 (its own). After
 * restart: each reads its own pages and the file's elsewhere, and a pwrite
 * to the file at page 2 (written by neither) shows in both mappings of
 * both; the file is put back as it was.
 *
 * In "shared" the child writes pages 3 and 5 whole and drops page 6
 * (MADV_DONTNEED) after the fork: page 3 is a run of its own pages that
 * the restart writes over the root's (no drop first), pages 5-6 a run only
 * partly its own, where page 6 must read zero, not the root's. And the
 * child's maps show the same protections after restart as before: a vma
 * it keeps from the fork untouched (libc's RELRO, shared with the root) is
 * not left writable.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096
#define NPAGE 4
#define NMAP  256

struct vm {
	unsigned long start, end;
	char perms[5];
};

/* The child's own vmas, from /proc/self/maps (no malloc: read into buf). */
static size_t read_maps(struct vm *v, char *buf, size_t len)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t got = 0, n = 0;
	ssize_t r;
	while (fd >= 0 && got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)r;
	if (fd >= 0)
		close(fd);
	buf[got] = '\0';
	for (char *l = buf; l && *l && n < NMAP; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (sscanf(l, "%lx-%lx %4s", &v[n].start, &v[n].end, v[n].perms) == 3)
			n++;
	return n;
}

/* Has every address that a vma of a started at the same perms in b? */
static bool same_prots(const struct vm *a, size_t na, const struct vm *b, size_t nb)
{
	for (size_t i = 0; i < na; i++) {
		size_t j = 0;
		while (j < nb && !(b[j].start <= a[i].start && a[i].start < b[j].end))
			j++;
		if (j == nb || strcmp(a[i].perms, b[j].perms))
			return false;
	}
	return true;
}

int main(void)
{
	uint8_t buf[NPAGE * PG];
	test_fill_random(buf, sizeof(buf), 37);
	int fd = open("data", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		fail("data: %m");
	uint8_t *m = mmap(NULL, sizeof(buf), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	uint8_t *ro = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, fd, 2 * PG);
	uint8_t *shared = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
	if (m == MAP_FAILED || ro == MAP_FAILED || shared == MAP_FAILED)
		fail("mmap: %m");
	memset(shared, 's', 8 * PG);
	int go[2], back[2];
	if (pipe(go) || pipe(back))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		static struct vm before[NMAP], after[NMAP];
		static char text[64 * 1024];
		char x;
		memset(m + PG, 'C', PG);
		memset(shared + 3 * PG, 'c', PG);
		memset(shared + 5 * PG, 'c', PG);
		if (madvise(shared + 6 * PG, PG, MADV_DONTNEED))
			_exit(1);
		size_t nb = read_maps(before, text, sizeof(text));
		if (write(back[1], "r", 1) != 1)
			_exit(1);
		if (read(go[0], &x, 1) != 1) /* restarted, the file written */
			_exit(2);
		if (memcmp(m, buf, PG))
			_exit(3); /* page 0: the root's */
		if (m[PG] != 'C' || m[2 * PG - 1] != 'C')
			_exit(4);
		if (m[2 * PG + 1] != 'F' || ro[1] != 'F')
			_exit(5); /* page 2 is not the file's */
		if (memcmp(m + 3 * PG, buf + 3 * PG, PG) || shared[PG] != 's')
			_exit(6);
		if (shared[3 * PG] != 'c' || shared[4 * PG - 1] != 'c' || shared[5 * PG] != 'c' ||
		    shared[6 * PG] != 0 || shared[7 * PG - 1] != 0 || shared[7 * PG] != 's')
			_exit(7);
		size_t na = read_maps(after, text, sizeof(text));
		if (!nb || !same_prots(before, nb, after, na))
			_exit(8);
		_exit(0);
	}
	char x;
	if (read(back[0], &x, 1) != 1)
		fail("the child did not start");
	memset(m, 'R', PG);
	test_ready();
	test_wait();
	expect(m[0] == 'R' && m[PG - 1] == 'R', "page 0 is not the root's own");
	expect(!memcmp(m + PG, buf + PG, PG), "page 1 is not the file's (the child's?)");
	expect(shared[3 * PG] == 's' && shared[5 * PG] == 's' && shared[6 * PG] == 's',
	       "the root's shared pages 3, 5, 6 are not its own");
	if (pwrite(fd, "F", 1, 2 * PG + 1) != 1)
		fail("pwrite: %m");
	expect(m[2 * PG + 1] == 'F' && ro[1] == 'F', "the root does not see the file's page 2");
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	expect(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child: status %#x (3: page 0, 4: its page 1, 5: the file's page 2, 6: the rest, "
	       "7: its shared pages 3, 5, 6, 8: a protection changed)",
	       st);
	/* the file as it was, for a restart of the same image again */
	if (pwrite(fd, buf + 2 * PG + 1, 1, 2 * PG + 1) != 1)
		fail("pwrite: %m");
	pass();
}
