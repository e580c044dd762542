/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench/ helper: the machine's own copy rate, with no checkpoint logic, for
 * bench/run --copy (issue 14 goal 1). Prints "SECONDS BYTES".
 *
 *   copyrate readv PID FILE    process_vm_readv of PID's private anonymous
 *                              mappings (rw-p, no path, [heap], [stack]) in
 *                              1 MiB iovecs into an 8 MiB buffer (ckpt's
 *                              copy buffer size), write() to FILE
 *   copyrate vmsplice MIB FILE fills MIB MiB of its own (not timed), then
 *                              vmsplice of it into a 1 MiB pipe and splice
 *                              to FILE (what a program can do with its own
 *                              pages: CRIU's parasite does this)
 *   copyrate fill FILE         the floor of a restart's copy of FILE (an
 *                              image, in the page cache) into fresh memory,
 *                              each way timed alone, one "WAY SECONDS BYTES"
 *                              line each: read (1 MiB read(2)s into one
 *                              buffer: bench's "read s"), 4k (read(2) into
 *                              fresh anonymous memory: a fault and a clear
 *                              per 4 KiB page), populate (MADV_POPULATE_WRITE
 *                              of it first, then read(2)), uffd (read(2) into
 *                              an 8 MiB buffer, UFFDIO_COPY into registered
 *                              fresh memory: ckpt's eager restart), thp
 *                              (read(2) into 2 MiB-aligned MADV_HUGEPAGE
 *                              memory)
 *
 *   copyrate touch MIB         the cost of fresh memory itself: MIB MiB
 *                              mapped and written a byte a page, "WAY ROUND
 *                              SECONDS BYTES" lines: 4k (MADV_NOHUGEPAGE)
 *                              and thp (2 MiB-aligned, MADV_HUGEPAGE), each
 *                              three rounds in this process (unmapped after
 *                              each): round 1 takes pages the guest may
 *                              have handed back to the host (a free page
 *                              report, a DAMON pageout), later rounds
 *                              mostly the pages round 1 freed; ckpt's copy
 *                              buffers and heap are huge pages
 *
 *   copyrate disk HOW MIB FILE fills MIB MiB of its own (random, not
 *                              timed), then writes it to FILE and fsyncs
 *                              it, 8 MiB at a time (ckpt's copy buffer):
 *       write      buffered write(), then fsync (what dd conv=fsync does)
 *       direct     O_DIRECT write() from the page-aligned memory, then
 *                  fsync (no copy into the page cache)
 *       vmsplice   vmsplice into a 1 MiB pipe, splice to FILE, fsync
 *       syncrange  buffered write(), and behind the writer every 8 MiB
 *                  written sync_file_range(SYNC_FILE_RANGE_WRITE) of what
 *                  came before (writeback started at once, not at the
 *                  fsync), then fsync
 *       syncwait   the same, and also waiting (WAIT_BEFORE) for the
 *                  writeback of the range 32 MiB behind: the page cache
 *                  holds at most that much dirty of the file
 *
 * The time is from the open of FILE to its close (disk: to the end of the
 * fsync); FILE is left in place (the caller removes it), so the page cache
 * keeps what was written, as after a checkpoint.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BUF (8u << 20)
#define IOV (1u << 20)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The ranges to read: private anonymous rw mappings of pid. */
static size_t ranges(pid_t pid, uint64_t (*r)[2], size_t max)
{
	char path[64], line[512];
	size_t n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long long a, b, ino;
		char perm[8], name[256] = "";
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu %255s", &a, &b, perm, &ino, name) < 4)
			continue;
		if (strcmp(perm, "rw-p") || ino ||
		    (name[0] && strcmp(name, "[heap]") && strcmp(name, "[stack]")))
			continue;
		r[n][0] = a;
		r[n][1] = b;
		n++;
	}
	fclose(f);
	return n;
}

static int do_readv(pid_t pid, const char *file)
{
	static uint64_t r[4096][2];
	size_t nr = ranges(pid, r, 4096);
	uint8_t *buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
			    MAP_POPULATE, -1, 0);
	if (!nr || buf == MAP_FAILED)
		return 2;
	uint64_t total = 0;
	double t0 = now();
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return 2;
	for (size_t i = 0; i < nr; i++) {
		for (uint64_t at = r[i][0]; at < r[i][1];) {
			struct iovec remote[BUF / IOV];
			size_t k = 0, len = 0;
			while (k < BUF / IOV && at < r[i][1]) {
				size_t l = r[i][1] - at < IOV ? r[i][1] - at : IOV;
				remote[k++] = (struct iovec){ (void *)(uintptr_t)at, l };
				at += l;
				len += l;
			}
			struct iovec local = { buf, len };
			ssize_t got = process_vm_readv(pid, &local, 1, remote, k, 0);
			if (got <= 0)
				continue; /* a guard page or the like: skip */
			if (write_all(fd, buf, (size_t)got) < 0)
				return 2;
			total += (uint64_t)got;
		}
	}
	close(fd);
	printf("%.6f %llu\n", now() - t0, (unsigned long long)total);
	return 0;
}

/* MIB MiB of random bytes, faulted in, page-aligned */
static uint8_t *random_mem(size_t len)
{
	uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < len / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
	return (uint8_t *)p;
}

static int do_vmsplice(size_t mib, const char *file)
{
	size_t len = mib << 20;
	uint8_t *p = random_mem(len);
	int pfd[2];
	if (!p || pipe2(pfd, O_CLOEXEC) < 0)
		return 2;
	int psz = fcntl(pfd[1], F_SETPIPE_SZ, IOV);
	if (psz < 0)
		psz = 65536;
	double t0 = now();
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return 2;
	for (size_t at = 0; at < len;) {
		struct iovec v = { p + at, len - at < (size_t)psz ? len - at : (size_t)psz };
		ssize_t n = vmsplice(pfd[1], &v, 1, 0);
		if (n <= 0)
			return 2;
		for (ssize_t left = n; left;) {
			ssize_t m = splice(pfd[0], NULL, fd, NULL, (size_t)left, SPLICE_F_MOVE);
			if (m <= 0)
				return 2;
			left -= m;
		}
		at += (size_t)n;
	}
	close(fd);
	printf("%.6f %llu\n", now() - t0, (unsigned long long)len);
	return 0;
}

/* read(2) of fd from 0 into dst (advancing by len, or into the same
 * buffer when stay), then UFFDIO_COPY of each piece to to (uffd >= 0) */
static int read_into(int fd, uint8_t *dst, size_t len, int stay, int uffd, uint8_t *to)
{
	for (size_t off = 0; off < len;) {
		size_t n = len - off < BUF ? len - off : BUF;
		ssize_t k = pread(fd, stay ? dst : dst + off, n, (off_t)off);
		if (k <= 0)
			return -1;
		struct uffdio_copy c = { .dst = (uint64_t)(uintptr_t)(to + off),
					 .src = (uint64_t)(uintptr_t)dst, .len = (uint64_t)k };
		if (uffd >= 0 && ioctl(uffd, UFFDIO_COPY, &c) < 0)
			return -1;
		off += (size_t)k;
	}
	return 0;
}

static int do_fill(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t size = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
	if (size <= 0)
		return 1;
	size_t len = (size_t)size & ~(size_t)4095, huge = 2u << 20;
	uint8_t *buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || read_into(fd, buf, len, 1, -1, NULL) < 0) /* in the cache */
		return 1;
	static const char *ways[] = { "read", "4k", "populate", "uffd", "thp" };
	for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++) {
		uint8_t *m = mmap(NULL, len + huge, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return 1;
		uint8_t *a = w == 4 ? m + (huge - (uintptr_t)m % huge) % huge : m;
		int uffd = -1;
		if (w == 3) {
			struct uffdio_api api = { .api = UFFD_API };
			struct uffdio_register reg = { .range = { (uintptr_t)a, len },
						       .mode = UFFDIO_REGISTER_MODE_MISSING };
			uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
			if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0 ||
			    ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
				return 1;
		}
		if (w == 4 && madvise(a, len, MADV_HUGEPAGE) < 0)
			return 1;
		double t0 = now();
		if (w == 2 && madvise(a, len, MADV_POPULATE_WRITE) < 0)
			return 1;
		int r = w == 0 ? read_into(fd, buf, len, 1, -1, NULL)
			: w == 3 ? read_into(fd, buf, len, 1, uffd, a)
				 : read_into(fd, a, len, 0, -1, NULL);
		double t = now() - t0;
		if (r < 0)
			return 1;
		printf("%s %.6f %zu\n", ways[w], t, len);
		if (uffd >= 0)
			close(uffd);
		munmap(m, len + huge);
	}
	close(fd);
	return 0;
}

static int do_touch(size_t mib)
{
	const size_t len = mib << 20, huge = 2u << 20;
	static const char *ways[] = { "4k", "thp" };
	if (!mib)
		return 1;
	for (int w = 0; w < 2; w++) {
		for (int round = 1; round <= 3; round++) {
			uint8_t *m = mmap(NULL, len + huge, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				return 1;
			uint8_t *a = m + (huge - (uintptr_t)m % huge) % huge;
			if (madvise(a, len, w ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) < 0)
				return 1;
			double t0 = now();
			for (size_t off = 0; off < len; off += 4096)
				a[off] = 1;
			printf("%s %d %.6f %zu\n", ways[w], round, now() - t0, len);
			munmap(m, len + huge);
		}
	}
	return 0;
}

#define KICK (8ull << 20)   /* syncrange: writeback started every KICK bytes */
#define BEHIND (32ull << 20) /* syncwait: dirty bytes of the file at most */

static int do_disk(const char *how, size_t mib, const char *file)
{
	size_t len = mib << 20;
	uint8_t *p = random_mem(len);
	bool direct = !strcmp(how, "direct"), splc = !strcmp(how, "vmsplice");
	bool kick = !strcmp(how, "syncrange") || !strcmp(how, "syncwait");
	bool wait = !strcmp(how, "syncwait");
	int pfd[2];
	if (!p || (!direct && !splc && !kick && strcmp(how, "write")))
		return 2;
	if (splc && (pipe2(pfd, O_CLOEXEC) < 0 || fcntl(pfd[1], F_SETPIPE_SZ, IOV) < 0))
		return 2;
	double t0 = now();
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
	if (fd < 0) {
		fprintf(stderr, "copyrate: %s: %s\n", file, strerror(errno));
		return 2;
	}
	uint64_t kicked = 0;
	for (size_t at = 0; at < len;) {
		size_t l = len - at < BUF ? len - at : BUF;
		if (splc) {
			for (size_t done = 0; done < l;) {
				struct iovec v = { p + at + done, l - done < IOV ? l - done : IOV };
				ssize_t n = vmsplice(pfd[1], &v, 1, 0);
				if (n <= 0)
					return 2;
				for (ssize_t left = n; left;) {
					ssize_t m = splice(pfd[0], NULL, fd, NULL, (size_t)left,
							   SPLICE_F_MOVE);
					if (m <= 0)
						return 2;
					left -= m;
				}
				done += (size_t)n;
			}
		} else if (write_all(fd, p + at, l) < 0) {
			fprintf(stderr, "copyrate: write: %s\n", strerror(errno));
			return 2;
		}
		at += l;
		if (kick && at - kicked >= KICK) {
			if (sync_file_range(fd, (off_t)kicked, (off_t)(at - kicked),
					    SYNC_FILE_RANGE_WRITE) < 0)
				return 2;
			kicked = at;
			if (wait && kicked > BEHIND &&
			    sync_file_range(fd, 0, (off_t)(kicked - BEHIND),
					    SYNC_FILE_RANGE_WAIT_BEFORE) < 0)
				return 2;
		}
	}
	if (fsync(fd) < 0)
		return 2;
	close(fd);
	printf("%.6f %llu\n", now() - t0, (unsigned long long)len);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "fill"))
		return do_fill(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "readv"))
		return do_readv((pid_t)atoi(argv[2]), argv[3]);
	if (argc == 4 && !strcmp(argv[1], "vmsplice"))
		return do_vmsplice(strtoull(argv[2], NULL, 10), argv[3]);
	if (argc == 3 && !strcmp(argv[1], "touch"))
		return do_touch(strtoull(argv[2], NULL, 10));
	if (argc == 5 && !strcmp(argv[1], "disk"))
		return do_disk(argv[2], strtoull(argv[3], NULL, 10), argv[4]);
	fprintf(stderr, "usage: copyrate readv PID FILE | copyrate vmsplice MIB FILE |\n"
			"       copyrate fill FILE | copyrate touch MIB |\n"
			"       copyrate disk write|direct|vmsplice|syncrange|syncwait MIB FILE\n");
	return 1;
}
