/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The victim of the fault-injection walk (runner flow "fault"): a process
 * with a thread and a child, all of them computing a checksum loop in
 * registers. ckpt (ckpt-fault) is killed at every point of a checkpoint of
 * it in turn; after each, the runner sends SIGUSR2 and every process
 * checks itself from inside and writes "N ok" (or "N FAIL: why") to
 * check-PID in the test directory: not traced (its threads neither), its
 * signal mask and SIGTRAP handler as it set them, /proc/self/maps and
 * /proc/self/fd as before, its thread still running with its own mask, the
 * checksums right. At the end it is checkpointed and restarted for real
 * and verifies the same once more (SIGUSR1), then passes. With a second
 * argument "trapign" it ignores SIGTRAP instead (injected calls then stop
 * at syscall entry and exit, and a task is released through an interrupt
 * stop): SIG_IGN must be what it finds. A third argument N gives it N
 * threads rather than one (more than one request of the guardian's for
 * each step of the threads: fault_walk_threads); every one is checked.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib.h"

static volatile sig_atomic_t check_req, rebase_req;
#define THREADS_MAX 64
static volatile uint64_t thread_progress[THREADS_MAX];
static volatile int thread_bad[THREADS_MAX], loop_bad;
static volatile pid_t thread_tid[THREADS_MAX];
static int nthreads = 1;
static sigset_t want;
static char maps0[65536], fds0[8192];
static unsigned checks;

static void on_check(int sig)
{
	(void)sig;
	check_req++;
}

/* after a restart: mappings are rebuilt (merged) and may differ; the new
 * ones are the reference from now on */
static void on_rebase(int sig)
{
	(void)sig;
	rebase_req++;
	check_req++;
}

static void on_trap(int sig);
static void (*trap_want)(int) = on_trap;

static void on_trap(int sig)
{
	(void)sig;
}

static uint64_t spin(uint64_t x, int n)
{
	for (int i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		x ^= x >> 29;
	}
	return x;
}

/* /proc/self/maps without the stack (which may grow) */
static void read_maps(char *out, size_t size)
{
	static char buf[65536];
	size_t o = 0;
	if (test_read_file("/proc/self/maps", buf, sizeof(buf)) < 0)
		fail("read maps: %m");
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (!strstr(l, "[stack]") && o + strlen(l) + 2 < size)
			o += (size_t)snprintf(out + o, size - o, "%s\n", l);
	out[o] = '\0';
}

static void read_fds(char *out, size_t size)
{
	size_t o = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		fail("opendir fd: %m");
	for (struct dirent *de; (de = readdir(d));) {
		char path[300], target[256] = "";
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		if (strstr(target, "/proc/") && strstr(target, "/fd"))
			continue; /* the directory being read */
		if (o + 300 < size)
			o += (size_t)snprintf(out + o, size - o, "%s %s\n", de->d_name, target);
	}
	closedir(d);
	out[o] = '\0';
}

static long tracer_of(pid_t tid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	if (test_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	char *t = strstr(buf, "TracerPid:");
	return t ? atol(t + 10) : -1;
}

/*
 * A raw thread (clone without CLONE_SYSVSEM, so no semaphore undo list to
 * refuse the checkpoint on a host with SysV semaphores): system calls only.
 */
static int thread_main(void *arg)
{
	int i = (int)(intptr_t)arg;
	uint64_t ref = spin(7, 20000);
	thread_tid[i] = (pid_t)syscall(SYS_gettid);
	for (;;) {
		if (spin(7, 20000) != ref)
			thread_bad[i] = 1;
		uint64_t cur = 0;
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, NULL, &cur, 8);
		if (memcmp(&cur, &want, 8))
			thread_bad[i] = 2;
		thread_progress[i]++;
		/* the others mostly asleep (in a system call when seized):
		 * forty threads spinning would starve the machine */
		if (i > 0)
			usleep(2000);
	}
	return 0;
}

/* What is wrong, or "" */
static void self_check(char *why, size_t size, bool has_thread)
{
	static char maps[65536], fds[8192];
	struct sigaction sa;
	sigset_t cur;

	why[0] = '\0';
	read_fds(fds, sizeof(fds));
	read_maps(maps, sizeof(maps));
	sigprocmask(SIG_SETMASK, NULL, &cur);
	sigaction(SIGTRAP, NULL, &sa);
	int th = -1; /* a thread traced */
	for (int i = 0; has_thread && th < 0 && i < nthreads; i++)
		if (tracer_of(thread_tid[i]) != 0)
			th = i;
	int bad = -1; /* a thread gone wrong */
	for (int i = 0; has_thread && bad < 0 && i < nthreads; i++)
		if (thread_bad[i])
			bad = i;
	if (test_tracer_pid() != 0)
		snprintf(why, size, "traced by %ld", test_tracer_pid());
	else if (th >= 0)
		snprintf(why, size, "thread %d traced by %ld", thread_tid[th],
			 tracer_of(thread_tid[th]));
	else if (memcmp(&cur, &want, 8))
		snprintf(why, size, "signal mask %#llx, set %#llx", *(unsigned long long *)&cur,
			 *(unsigned long long *)&want);
	else if (sa.sa_handler != trap_want)
		snprintf(why, size, "SIGTRAP disposition lost (%p)", (void *)sa.sa_handler);
	else if (strcmp(fds, fds0))
		snprintf(why, size, "fds changed: now\n%s\nwas\n%s", fds, fds0);
	else if (strcmp(maps, maps0))
		snprintf(why, size, "mappings changed: now\n%s\nwas\n%s", maps, maps0);
	else if (loop_bad)
		snprintf(why, size, "checksum loop went wrong");
	else if (bad >= 0)
		snprintf(why, size, "thread %d: %s", thread_tid[bad],
			 thread_bad[bad] == 1 ? "checksum wrong" : "mask changed");
	if (why[0] || !has_thread)
		return;
	uint64_t before[THREADS_MAX];
	for (int i = 0; i < nthreads; i++)
		before[i] = thread_progress[i];
	int still = 0; /* the first thread not seen running since */
	for (int k = 0; k < 2000 && still < nthreads; k++) {
		while (still < nthreads && thread_progress[still] != before[still])
			still++;
		if (still < nthreads)
			usleep(1000);
	}
	if (still < nthreads)
		snprintf(why, size, "thread %d does not run", thread_tid[still]);
}

static void answer(bool has_thread)
{
	static char why[150000];
	char path[4096], tmp[4200], line[64];
	const char *dir = getenv("CKPT_TEST_DIR");
	self_check(why, sizeof(why), has_thread);
	checks++;
	snprintf(path, sizeof(path), "%s/check-%d", dir ? dir : ".", getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	int n = snprintf(line, sizeof(line), "%u %s", checks, why[0] ? "FAIL: " : "ok\n");
	if (write(fd, line, (size_t)n) < 0 || (why[0] && write(fd, why, strlen(why)) < 0))
		test_failf("write %s: %m", tmp);
	close(fd);
	rename(tmp, path);
}

static void loop(bool has_thread)
{
	uint64_t ref = spin(3, 50000);
	sig_atomic_t handled = 0, rebased = 0;
	while (!test_woken) {
		if (spin(3, 50000) != ref)
			loop_bad = 1;
		if (check_req != handled) {
			handled = check_req;
			if (rebased != rebase_req) {
				rebased = rebase_req;
				read_fds(fds0, sizeof(fds0));
				read_maps(maps0, sizeof(maps0));
			}
			answer(has_thread);
		}
	}
}

int main(int argc, char **argv)
{
	/* a larger victim: MiB of touched random memory */
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
	if (mib) {
		uint64_t *m = test_mmap(NULL, mib << 20, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		for (size_t i = 0; i < (mib << 20) / 8; i += 512) /* one word a page */
			m[i] = i * 0x9e3779b97f4a7c15ull + 1;
	}
	struct sigaction sa = { .sa_handler = on_check };
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_handler = on_rebase;
	sigaction(SIGPROF, &sa, NULL);
	if (argc > 2 && !strcmp(argv[2], "trapign"))
		trap_want = SIG_IGN;
	if (argc > 3)
		nthreads = atoi(argv[3]);
	if (nthreads < 1 || nthreads > THREADS_MAX)
		fail("%d threads: 1 to %d", nthreads, THREADS_MAX);
	sa.sa_handler = trap_want;
	sigaction(SIGTRAP, &sa, NULL);
	sigemptyset(&want);
	sigaddset(&want, SIGWINCH);
	sigaddset(&want, SIGURG);
	sigaddset(&want, SIGRTMIN + 2);
	sigprocmask(SIG_SETMASK, &want, NULL);
	test_setup_wake();

	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		read_fds(fds0, sizeof(fds0)); /* first: opendir makes the heap */
		read_maps(maps0, sizeof(maps0));
		loop(false);
		_exit(0);
	}
	for (int i = 0; i < nthreads; i++) {
		char *stack = test_mmap(NULL, 256 << 10, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (clone(thread_main, stack + (256 << 10),
			  CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD,
			  (void *)(intptr_t)i) < 0)
			fail("clone: %m");
	}
	for (int i = 0; i < nthreads; i++)
		while (!thread_progress[i])
			usleep(1000);
	char path[4096], buf[16 * (THREADS_MAX + 2)];
	const char *dir = getenv("CKPT_TEST_DIR");
	snprintf(path, sizeof(path), "%s/child", dir ? dir : ".");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int n = snprintf(buf, sizeof(buf), "%d", child);
	for (int i = 0; i < nthreads; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %d", thread_tid[i]);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\n");
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd))
		fail("write %s: %m", path);
	read_fds(fds0, sizeof(fds0));
	read_maps(maps0, sizeof(maps0));
	test_ready();
	loop(true);
	test_check_common();
	static char why[150000];
	self_check(why, sizeof(why), true);
	expect(!why[0], "after restart: %.2000s", why);
	kill(child, SIGUSR1);
	int st;
	expect(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "child %d ended with status %#x", child, st);
	pass();
}
