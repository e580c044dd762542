/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t test_woken;

static int failures;
static bool wake_installed;
static pid_t ready_pid;
static long ready_tracer;
static off_t ready_out_off;

static void out_write(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(1, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void out_vprintf(const char *prefix, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s", prefix);
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	if (len == 0 || buf[len - 1] != '\n')
		buf[len++] = '\n';
	out_write(buf, len);
}

void test_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	out_vprintf("", fmt, ap);
	va_end(ap);
}

void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	out_vprintf("FAIL: ", fmt, ap);
	va_end(ap);
	_exit(1);
}

void skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	out_vprintf("SKIP: ", fmt, ap);
	va_end(ap);
	_exit(0);
}

void test_failf(const char *fmt, ...)
{
	va_list ap;
	failures++;
	va_start(ap, fmt);
	out_vprintf("FAIL: ", fmt, ap);
	va_end(ap);
}

int test_failures(void)
{
	return failures;
}

void pass(void)
{
	if (failures)
		_exit(1);
	out_write("PASS\n", 5);
	_exit(0);
}

static void on_sigusr1(int sig)
{
	(void)sig;
	test_woken = 1;
}

void test_setup_wake(void)
{
	if (wake_installed)
		return;
	struct sigaction sa = {.sa_handler = on_sigusr1}; /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL))
		fail("sigaction(SIGUSR1): %m");
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	if (sigprocmask(SIG_UNBLOCK, &set, NULL))
		fail("sigprocmask: %m");
	wake_installed = true;
}

void test_ready(void)
{
	test_setup_wake();
	ready_pid = getpid();
	ready_tracer = test_tracer_pid();
	ready_out_off = lseek(1, 0, SEEK_CUR);

	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)ready_pid);
	/* in the test directory, wherever the cwd is by now */
	char path[4096];
	const char *dir = getenv("CKPT_TEST_DIR");
	snprintf(path, sizeof(path), "%s/ready", dir ? dir : ".");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("create ready: %m");
	if (write(fd, buf, (size_t)n) != n)
		fail("write ready: %m");
	if (close(fd))
		fail("close ready: %m");
}

void test_check_common(void)
{
	pid_t pid = getpid();
	expect(pid == ready_pid, "pid changed: %d, was %d", (int)pid, (int)ready_pid);
	long tracer = test_tracer_pid();
	expect(tracer == ready_tracer, "TracerPid is %ld, was %ld (left traced?)", tracer,
	       ready_tracer);
	off_t off = lseek(1, 0, SEEK_CUR);
	expect(off == ready_out_off, "stdout offset is %lld, was %lld", (long long)off,
	       (long long)ready_out_off);
}

void test_wait(void)
{
	while (!test_woken)
		pause();
	test_check_common();
}

/* --- data ----------------------------------------------------------- */

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

/* An xxh64-shaped hash: four independent lanes, so it runs at memory speed. */
uint64_t test_hash(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *b = buf;
	uint64_t v[4] = {seed + P1 + P2, seed + P2, seed, seed - P1};
	size_t i = 0;
	for (; i + 32 <= len; i += 32) {
		for (int k = 0; k < 4; k++) {
			uint64_t w;
			memcpy(&w, b + i + 8 * k, 8);
			v[k] = rotl64(v[k] + w * P2, 31) * P1;
		}
	}
	uint64_t h = rotl64(v[0], 1) + rotl64(v[1], 7) + rotl64(v[2], 12) + rotl64(v[3], 18);
	h += (uint64_t)len;
	for (; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P1;
	h ^= h >> 32;
	return h;
}

uint64_t test_splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void test_fill_random(void *buf, size_t len, uint64_t seed)
{
	unsigned char *b = buf;
	uint64_t st = seed;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t r = test_splitmix(&st);
		memcpy(b + i, &r, 8);
	}
	if (i < len) {
		uint64_t r = test_splitmix(&st);
		memcpy(b + i, &r, len - i);
	}
}

int64_t test_now_ns(int clockid)
{
	struct timespec ts;
	if (clock_gettime(clockid, &ts))
		fail("clock_gettime(%d): %m", clockid);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- /proc ---------------------------------------------------------- */

ssize_t test_read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = 0;
	return (ssize_t)len;
}

char *test_smaps_vma(const void *addr)
{
	static char text[1 << 20];
	if (test_read_file("/proc/self/smaps", text, sizeof(text)) < 0)
		fail("smaps: %m");
	char head[32];
	snprintf(head, sizeof(head), "%lx-", (unsigned long)addr);
	char *p = strstr(text, head);
	while (p && p != text && p[-1] != '\n')
		p = strstr(p + 1, head);
	char *flags = p ? strstr(p, "\nVmFlags:") : NULL;
	char *eol = flags ? strchr(flags + 1, '\n') : NULL;
	if (eol)
		eol[1] = 0;
	return p;
}

int test_status_field(const char *name, char *out, size_t size)
{
	static char buf[16384];
	if (test_read_file("/proc/self/status", buf, sizeof(buf)) < 0)
		return -1;
	size_t nl = strlen(name);
	for (char *line = buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (!strncmp(line, name, nl) && line[nl] == ':') {
			char *v = line + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			snprintf(out, size, "%s", v);
			return 0;
		}
		line = next;
	}
	return -1;
}

long test_tracer_pid(void)
{
	char v[64];
	if (test_status_field("TracerPid", v, sizeof(v)))
		return -1;
	return strtol(v, NULL, 10);
}

static int parse_map_line(const char *line, struct test_map *m)
{
	unsigned long long start, end, off, inode;
	char perms[8];
	int pos = 0;
	if (sscanf(line, "%llx-%llx %7s %llx %*x:%*x %llu %n", &start, &end, perms, &off,
		   &inode, &pos) < 5)
		return -1;
	m->start = (uintptr_t)start;
	m->end = (uintptr_t)end;
	snprintf(m->perms, sizeof(m->perms), "%s", perms);
	m->offset = off;
	m->inode = (unsigned long)inode;
	snprintf(m->path, sizeof(m->path), "%s", pos > 0 ? line + pos : "");
	return 0;
}

static char maps_buf[1 << 20];

static int find_map(uintptr_t addr, const char *name, struct test_map *ret)
{
	if (test_read_file("/proc/self/maps", maps_buf, sizeof(maps_buf)) < 0)
		return -1;
	for (char *line = maps_buf; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		struct test_map m;
		if (!parse_map_line(line, &m)) {
			if (name ? !strcmp(m.path, name) : (addr >= m.start && addr < m.end)) {
				*ret = m;
				return 0;
			}
		}
		line = next;
	}
	return -1;
}

int test_find_map(uintptr_t addr, struct test_map *ret)
{
	return find_map(addr, NULL, ret);
}

int test_find_map_named(const char *name, struct test_map *ret)
{
	return find_map(0, name, ret);
}

unsigned long long test_stat_field(int n)
{
	char buf[4096];
	if (test_read_file("/proc/self/stat", buf, sizeof(buf)) < 0)
		fail("read /proc/self/stat: %m");
	if (n == 1)
		return strtoull(buf, NULL, 10);
	char *p = strrchr(buf, ')');
	if (!p)
		fail("bad /proc/self/stat");
	p++; /* now at " S ..." which is field 3 */
	int field = 2;
	while (*p) {
		while (*p == ' ')
			p++;
		field++;
		if (field == n)
			return strtoull(p, NULL, 10);
		while (*p && *p != ' ')
			p++;
	}
	fail("/proc/self/stat has no field %d", n);
}

void *test_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(addr, len, prot, flags, fd, off);
	if (p == MAP_FAILED)
		fail("mmap(%zu bytes): %m", len);
	return p;
}

ssize_t test_read_upto(int fd, char *buf, size_t size, size_t want, int timeout_ms)
{
	size_t got = 0;
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	while (got < want && got < size && poll(&pf, 1, timeout_ms) == 1) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int test_move_fd(int fd, int target)
{
	if (fd < 0)
		fail("test_move_fd: bad fd %d", fd);
	if (fd == target)
		return target;
	if (fcntl(target, F_GETFD) >= 0)
		fail("test_move_fd: fd %d is taken", target);
	if (dup2(fd, target) != target)
		fail("dup2(%d, %d): %m", fd, target);
	close(fd);
	return target;
}

void test_send_fds(int s, const char *data, const int *fds, int n)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)data, .iov_len = strlen(data)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n < 0 || n > 8)
		fail("test_send_fds: %d fds", n);
	if (n) {
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	if (sendmsg(s, &m, 0) != (ssize_t)strlen(data))
		fail("sendmsg \"%s\": %m", data);
}

void test_fdinfo_lines(int fd, const char *prefix, char *buf, size_t size)
{
	char path[64], text[8192], *save = NULL;
	size_t n = strlen(prefix);
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (test_read_file(path, text, sizeof(text)) < 0)
		fail("read %s: %m", path);
	buf[0] = '\0';
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (!strncmp(l, prefix, n))
			snprintf(buf + strlen(buf), size - strlen(buf), "%s\n", l);
}

void test_vmflags(const void *addr, char *out, size_t size)
{
	static char smaps[1 << 20];
	unsigned long x = (unsigned long)addr;
	out[0] = '\0';
	if (test_read_file("/proc/self/smaps", smaps, sizeof(smaps)) <= 0)
		fail("read smaps: %m");
	for (char *p = smaps; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long lo, hi;
		if (sscanf(p, "%lx-%lx ", &lo, &hi) != 2 || x < lo || x >= hi)
			continue;
		char *f = strstr(p, "VmFlags:");
		if (!f)
			break;
		snprintf(out, size, "%.*s", (int)strcspn(f, "\n"), f);
		return;
	}
	fail("no vma holds %p", addr);
}

int test_getopt(int s, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	return getsockopt(s, level, name, &v, &l) < 0 ? -1 : v;
}

void test_setopt(int s, int level, int name, int v)
{
	if (setsockopt(s, level, name, &v, sizeof(v)) < 0)
		fail("setsockopt %d/%d: %m", level, name);
}

int test_tcp_state(int s)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	memset(&ti, 0, sizeof(ti));
	getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &l);
	return ti.tcpi_state;
}

static long hugepages_get(void)
{
	char b[32];
	if (test_read_file("/proc/sys/vm/nr_hugepages", b, sizeof(b)) < 0)
		return -1;
	return atol(b);
}

static int hugepages_set(long n)
{
	FILE *f = fopen("/proc/sys/vm/nr_hugepages", "w");
	if (!f)
		return -1;
	int r = fprintf(f, "%ld\n", n) > 0 ? 0 : -1;
	return fclose(f) || r ? -1 : 0;
}

long test_hugepages_raise(long more)
{
	long old = hugepages_get();
	if (old < 0)
		return -1;
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", old);
	int fd = open("hugepages.old", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd) || hugepages_set(old + more) < 0)
		return -1;
	long now = hugepages_get();
	return now < 0 ? -1 : now - old;
}

pid_t test_netns_child(const char *setup)
{
	int p[2];
	char c;
	if (pipe(p))
		fail("pipe: %m");
	pid_t child = fork();
	if (child == 0) {
		if (unshare(CLONE_NEWNET) < 0 || (setup && system(setup) != 0) ||
		    write(p[1], "u", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	if (child < 0)
		fail("fork: %m");
	if (read(p[0], &c, 1) != 1)
		fail("no network namespace of its own (unshare or '%s' failed)", setup ? setup : "");
	close(p[0]);
	close(p[1]);
	return child;
}

ino_t test_netns_of(pid_t pid)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	if (stat(path, &st) < 0)
		fail("stat %s: %m", path);
	return st.st_ino;
}

bool test_netns_here(int s)
{
#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
	uint64_t a = 0, b = 0;
	socklen_t la = sizeof(a), lb = sizeof(b);
	int t = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (t < 0 || getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &a, &la) < 0 ||
	    getsockopt(t, SOL_SOCKET, SO_NETNS_COOKIE, &b, &lb) < 0)
		fail("SO_NETNS_COOKIE: %m");
	close(t);
	return a == b;
}

void test_netns_run(int fd, const char *cmd, char *out, size_t len)
{
	int p[2];
	if (pipe(p))
		fail("pipe: %m");
	pid_t c = fork();
	if (c < 0)
		fail("fork: %m");
	if (c == 0) {
		if ((fd >= 0 && setns(fd, CLONE_NEWNET) < 0) || dup2(p[1], 1) < 0)
			_exit(1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(1);
	}
	close(p[1]);
	size_t at = 0;
	ssize_t n;
	while (at < len - 1 && (n = read(p[0], out + at, len - 1 - at)) > 0)
		at += (size_t)n;
	out[at] = 0;
	close(p[0]);
	int st;
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("%s in fd %d's network namespace: %s", cmd, fd, out);
}

uint64_t test_netns_cookie(int s)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);
	if (getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &c, &len) < 0)
		fail("SO_NETNS_COOKIE: %m");
	return c;
}

int test_hold_netns(pid_t child, int target)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", child);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("open %s: %m", path);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return test_move_fd(fd, target);
}
