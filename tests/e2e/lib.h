/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The end-to-end test library, shaped like CRIU's zdtm.
 *
 * A test program is started by tests/e2e/runner.py with cwd = a fresh
 * directory, stdin = /dev/null, stdout and stderr = one file "out.log" in
 * that directory, and CKPT_TEST_DIR set to it. It
 *
 *   1. sets up the state it is about,
 *   2. calls test_ready(): the SIGUSR1 handler is installed, the common
 *      "before" values are recorded and the file "ready" is created in
 *      $CKPT_TEST_DIR (the cwd if unset),
 *   3. waits for SIGUSR1, normally by test_wait() (a pause() loop); the
 *      runner checkpoints, kills and restarts it meanwhile,
 *   4. verifies its state from inside and ends with pass() or fail().
 *
 * Output protocol (out.log): "PASS\n", or one or more "FAIL: reason\n"
 * lines, or "SKIP: reason\n" printed before test_ready() (exit 0 without
 * ever becoming ready: the runner counts the test as skipped).
 *
 * Invariants:
 * - Nothing is written to stdout/stderr between test_ready() and the wake
 *   up: test_check_common() verifies that the offset of fd 1 is the one
 *   saved at test_ready() time (the restored fd must be at the same offset).
 * - Every output goes straight to fd 1 with write(2): no stdio buffers.
 * - test_check_common() also verifies that the pid and the tracer
 *   (TracerPid) are what they were at test_ready() time.
 * - test_woken is set only by the SIGUSR1 handler, which is installed
 *   without SA_RESTART so that a blocking call returns EINTR.
 */
#ifndef CKPT_E2E_LIB_H
#define CKPT_E2E_LIB_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern volatile sig_atomic_t test_woken;

/* Installs the SIGUSR1 handler (idempotent); test_ready() calls it too. */
void test_setup_wake(void);
/* Records the common "before" values, creates "ready". */
void test_ready(void);
/* Loops on pause() until SIGUSR1 came, then runs test_check_common(). */
void test_wait(void);
/* pid, tracer and fd 1 offset are as they were at test_ready(). */
void test_check_common(void);

/* Output. All of them write(2) to fd 1. */
void test_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "FAIL: ..." and exits 1. */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Prints "SKIP: ..." and exits 0; only before test_ready(). */
void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Prints "FAIL: ..." and goes on; pass() then exits 1. */
void test_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define expect(cond, ...)                    \
	do {                                 \
		if (!(cond))                 \
			test_failf(__VA_ARGS__); \
	} while (0)
/* Prints "PASS" and exits 0, or exits 1 if an expect() failed. */
void pass(void) __attribute__((noreturn));
int test_failures(void);

/* Checksums and data. */
uint64_t test_hash(const void *buf, size_t len, uint64_t seed);
void test_fill_random(void *buf, size_t len, uint64_t seed);
uint64_t test_splitmix(uint64_t *state);

/* Clocks, in nanoseconds. */
int64_t test_now_ns(int clockid);

/*
 * /proc helpers. test_read_file reads the whole file (at most size - 1
 * bytes), NUL-terminates and returns the length, or -1 with errno.
 */
ssize_t test_read_file(const char *path, char *buf, size_t size);
/*
 * The block of /proc/self/smaps of the vma that starts at addr, ended after
 * its VmFlags line, in a buffer of its own (valid until the next call), or
 * NULL if there is no such vma; fails the test if smaps cannot be read.
 */
char *test_smaps_vma(const void *addr);
/*
 * Raises vm.nr_hugepages by more 2 MiB pages for the test, the old value
 * written to "hugepages.old" first (the runner writes it back at the end);
 * returns how many more there are (fewer when memory is short), or -1
 * with errno.
 */
long test_hugepages_raise(long more);
/* The value of "Name:" in /proc/self/status, whitespace trimmed; 0 or -1. */
int test_status_field(const char *name, char *out, size_t size);
long test_tracer_pid(void);

struct test_map {
	uintptr_t start, end;
	char perms[8];
	unsigned long long offset;
	unsigned long inode;
	char path[512];
};
/* The /proc/self/maps entry containing addr; 0, or -1 if none. */
int test_find_map(uintptr_t addr, struct test_map *ret);
/* The first /proc/self/maps entry whose path is exactly name; 0 or -1. */
int test_find_map_named(const char *name, struct test_map *ret);
/* Socket options: an int option's value (-1 if it cannot be read); set
 * one (fails the test if it cannot); a TCP socket's state (TCP_INFO). */
int test_getopt(int s, int level, int name);
void test_setopt(int s, int level, int name, int v);
int test_tcp_state(int s);

/* The "VmFlags: ..." line of the /proc/self/smaps vma that holds addr
 * (fails the test if none does). */
void test_vmflags(const void *addr, char *out, size_t size);

/* Field n (1-based, as in proc(5); not 2, comm) of /proc/self/stat as a number. */
unsigned long long test_stat_field(int n);

/* Reads fd until want bytes are in buf (at most size) or nothing more comes
 * within timeout_ms; the bytes read. A pty master may get a line in pieces
 * (the line discipline passes "\r\n" of ONLCR apart). */
ssize_t test_read_upto(int fd, char *buf, size_t size, size_t want, int timeout_ms);

/* Moves fd to number target (which must be free) and returns target. */
int test_move_fd(int fd, int target);

/* The lines of /proc/self/fdinfo/FD that start with prefix, into buf. */
void test_fdinfo_lines(int fd, const char *prefix, char *buf, size_t size);

/* sendmsg of data with n fds as SCM_RIGHTS (n <= 8); fails the test on error. */
void test_send_fds(int s, const char *data, const int *fds, int n);

/* A child in a network namespace of its own, where it ran the shell
 * command setup (NULL: none) before this returns (fails the test else). */
pid_t test_netns_child(const char *setup);
/* An fd (at number target) of child's network namespace; child is killed
 * and reaped: the fd is all that holds the namespace. */
int test_hold_netns(pid_t child, int target);
/* The output of sh -c cmd run in the network namespace of fd (-1: the
 * caller's), in out (len bytes, NUL-terminated); fails the test if cmd does. */
void test_netns_run(int fd, const char *cmd, char *out, size_t len);
/* Is socket s of the caller's network namespace (by their SO_NETNS_COOKIE)? */
bool test_netns_here(int s);
/* The inode of pid's network namespace (fails the test if it cannot be read). */
ino_t test_netns_of(pid_t pid);
/* The cookie of socket s's network namespace (SO_NETNS_COOKIE: a restored
 * namespace has another); fails the test without one. */
uint64_t test_netns_cookie(int s);

/* Allocation that fails the test on error. */
void *test_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

#endif
