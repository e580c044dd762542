/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The library API, used as a program would: fork a child holding 1 MiB of
 * known values, ckpt_checkpoint() it into a memfd with CKPT_SUBTREE |
 * CKPT_KILL, ckpt_restart() it detached (it comes back as the caller's
 * child), signal it, and reap it: it exits 42 only if its memory is
 * intact. Twice, the second time through ckpt_restart_opts(). Also the
 * refusals the API promises: no CKPT_SUBTREE for a plain process, unknown
 * flags, a pid that does not exist, RESTART_TASKSELF and RESTART_KEEP_LSM;
 * and the growth of struct ckpt_opts: the first (smallest) size is served,
 * a bigger struct is served when its unknown tail is zero and refused with
 * E2BIG when an option there is set. And ckpt's priority while it holds
 * the tree: real-time (SCHED_FIFO), its guardian too, seen from the
 * image_done callback; the caller's own policy back once it returns. And
 * the caller's own signal actions (a default with a flag) not given to a
 * restored child whose image has the plain default. And the running
 * callback: once, with the root, released, before the restart returns.
 */
#include <ckpt.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"

/* What the running callback of ckpt_opts was given, and the root's
 * tracer then (0: none, the tree released). */
struct running_seen {
	int calls;
	pid_t root;
	long tracer;
};

static void on_running(void *arg, pid_t root)
{
	struct running_seen *seen = arg;
	char path[64], buf[4096];
	seen->calls++;
	seen->root = root;
	seen->tracer = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)root);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "TracerPid: %ld", &seen->tracer) == 1)
			break;
	fclose(f);
}

static volatile sig_atomic_t go;
static void on_usr1(int s)
{
	(void)s;
	go = 1;
}

static int failures;
#define CHECK(cond, ...)                               \
	do {                                           \
		if (!(cond)) {                         \
			printf("FAIL: " __VA_ARGS__);  \
			printf("\n");                  \
			failures++;                    \
		}                                      \
	} while (0)

static pid_t start_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		api_child_quiet();
		uint64_t *v = malloc(1 << 20);
		for (int i = 0; i < (1 << 17); i++)
			v[i] = (uint64_t)i * 2654435761u;
		signal(SIGUSR1, on_usr1);
		kill(getppid(), SIGUSR2); /* ready */
		while (!go)
			pause();
		for (int i = 0; i < (1 << 17); i++)
			if (v[i] != (uint64_t)i * 2654435761u)
				_exit(3);
		/* SIGWINCH as the fork left it, not as the restarting caller has it */
		struct sigaction cur;
		if (sigaction(SIGWINCH, NULL, &cur) < 0 || cur.sa_handler != SIG_DFL ||
		    (cur.sa_flags & SA_RESTART))
			_exit(4);
		_exit(42);
	}
	return pid;
}

/* The policy of our child named ckpt-guard, or -1 if none */
static int guardian_policy(void)
{
	DIR *d = opendir("/proc");
	int policy = -1;
	for (struct dirent *de; d && policy < 0 && (de = readdir(d));) {
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		char *close = strrchr(buf, ')');
		int ppid = 0;
		if (strstr(buf, "(ckpt-guard)") && close &&
		    sscanf(close + 2, "%*c %d", &ppid) == 1 && ppid == getpid())
			policy = sched_getscheduler(atoi(de->d_name));
	}
	if (d)
		closedir(d);
	return policy;
}

struct seen {
	int self, guard;
};

static int note_policies(void *arg, char *why, size_t why_len)
{
	struct seen *s = arg;
	(void)why, (void)why_len;
	s->self = sched_getscheduler(0);
	s->guard = guardian_policy();
	return 0;
}

/* ckpt real-time while it holds the tree (where we may be: root), then the
 * caller's policy back: a checkpoint --kill of a child of its own (the
 * image is done while the tree is held and the guardian there) */
static void check_priority(int img)
{
	struct sched_param rt = {.sched_priority = 1}, none = {0};
	if (sched_setscheduler(0, SCHED_FIFO, &rt) < 0) {
		printf("note: no real-time priority here (%m): priority not checked\n");
		return;
	}
	sched_setscheduler(0, SCHED_OTHER, &none);
	sigset_t s2;
	int sig;
	sigemptyset(&s2);
	sigaddset(&s2, SIGUSR2);
	pid_t child = start_child();
	sigwait(&s2, &sig);
	CHECK(api_asleep_in_call(child, "34 ", 10000), "child %d not asleep in pause()", child);
	char err[256];
	struct seen seen = {-2, -2};
	struct ckpt_opts o = {.size = sizeof(o),
			      .flags = CKPT_SUBTREE | CKPT_KILL,
			      .logfd = -1,
			      .errbuf = err,
			      .errbuf_len = sizeof(err),
			      .image_done = note_policies,
			      .image_done_arg = &seen};
	int r = ckpt_checkpoint_opts(child, img, &o);
	CHECK(r == 0, "checkpoint --kill with image_done: %d '%s'", r, err);
	CHECK(seen.self == SCHED_FIFO, "ckpt's policy while it held the tree: %d, want SCHED_FIFO",
	      seen.self);
	CHECK(seen.guard == SCHED_FIFO, "the guardian's policy: %d, want SCHED_FIFO", seen.guard);
	CHECK(sched_getscheduler(0) == SCHED_OTHER,
	      "the caller's policy after: %d, want SCHED_OTHER", sched_getscheduler(0));
	if (r < 0)
		kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	if (ftruncate(img, 0) < 0)
		CHECK(0, "ftruncate: %m");
	lseek(img, 0, SEEK_SET);
}

int main(void)
{
	char err[256];
	sigset_t s2;
	int sig;

	sigemptyset(&s2);
	sigaddset(&s2, SIGUSR2);
	sigprocmask(SIG_BLOCK, &s2, NULL);
	pid_t child = start_child();
	sigwait(&s2, &sig);
	CHECK(api_asleep_in_call(child, "34 ", 10000), "child %d not asleep in pause()", child);

	int img = memfd_create("image", MFD_CLOEXEC);
	struct ckpt_opts o = { .size = sizeof(o), .flags = CKPT_KILL, .logfd = -1,
			       .errbuf = err, .errbuf_len = sizeof(err) };
	int r = ckpt_checkpoint_opts(child, img, &o);
	CHECK(r == -EINVAL && strstr(err, "CKPT_SUBTREE"),
	      "no CKPT_SUBTREE on a plain process: %d '%s'", r, err);
	CHECK(kill(child, 0) == 0, "the child died of a refused checkpoint");
	CHECK(ckpt_checkpoint(child, img, 0x100, -1) == -EINVAL, "unknown checkpoint flag accepted");
	CHECK(ckpt_checkpoint(1 << 22, img, CKPT_SUBTREE, -1) == -ESRCH, "nonexistent pid");

	/* growth: a newer caller's bigger struct is served if what this ckpt
	 * does not know is zero, refused (E2BIG) if an unknown option is set */
	struct {
		struct ckpt_opts o;
		unsigned long newer[4];
	} big = { .o = { .size = sizeof(big), .flags = CKPT_SUBTREE, .logfd = -1,
			 .errbuf = err, .errbuf_len = sizeof(err) } };
	r = ckpt_checkpoint_opts(1 << 22, img, &big.o);
	CHECK(r == -ESRCH, "a bigger struct, zero tail: %d '%s', want -ESRCH", r, err);
	big.newer[2] = 1;
	r = ckpt_checkpoint_opts(child, img, &big.o);
	CHECK(r == -E2BIG && strstr(err, "newer"), "a bigger struct with an unknown option: "
	      "%d '%s', want -E2BIG", r, err);
	r = ckpt_restart_opts(0, img, &big.o);
	CHECK(r == -E2BIG, "restart, a bigger struct with an unknown option: %d", r);
	big.newer[2] = 0;
	big.o.size = 8192;
	r = ckpt_checkpoint_opts(child, img, &big.o);
	CHECK(r == -E2BIG, "a size of 8192: %d, want -E2BIG", r);
	CHECK(kill(child, 0) == 0, "the child died of a refused checkpoint");

	check_priority(img);

	/* the real thing, as a caller built against the first struct (a
	 * smaller size: no key, no result written); the child is ours, so
	 * reap it while ckpt waits */
	o.flags = CKPT_SUBTREE | CKPT_KILL;
	o.size = CKPT_OPTS_SIZE_V1;
	o.result.processes = 777;
	r = ckpt_checkpoint_opts(child, img, &o);
	CHECK(r == 0, "ckpt_checkpoint: %d '%s'", r, err);
	CHECK(o.result.processes == 777, "a caller of the first struct got a result written "
	      "past its size");
	int st = 0;
	waitpid(child, &st, WNOHANG);
	if (r < 0) {
		kill(child, SIGKILL);
		return 1;
	}

	/* the caller's own SIGWINCH default with a flag: the child's image has
	 * it plain, and the restored child must too (its puppet is a fork of
	 * this process) */
	struct sigaction winch = {.sa_handler = SIG_DFL, .sa_flags = SA_RESTART};
	sigaction(SIGWINCH, &winch, NULL);
	for (unsigned long bad = RESTART_TASKSELF; bad <= RESTART_KEEP_LSM; bad <<= 3) {
		lseek(img, 0, SEEK_SET);
		r = ckpt_restart(0, img, bad, -1);
		CHECK(r == -EOPNOTSUPP, "restart flag %#lx: %d, want -EOPNOTSUPP", bad, r);
	}
	/* detached, the restored child is still ours: signal and reap it */
	lseek(img, 0, SEEK_SET);
	pid_t got = ckpt_restart(0, img, RESTART_DETACH, -1);
	CHECK(got == child, "ckpt_restart returned %d, want pid %d", got, child);
	if (got > 0) {
		kill(got, SIGUSR1);
		CHECK(waitpid(got, &st, 0) == got && WIFEXITED(st) && WEXITSTATUS(st) == 42,
		      "restored child ended with status %#x, want exit 42", st);
	}
	/* and the same image once more, through the options struct, with
	 * the running callback: called once, with the root, before the call
	 * returns, the tree released (not traced by ckpt any more) */
	lseek(img, 0, SEEK_SET);
	struct running_seen seen = {.root = -1};
	struct ckpt_opts ro = {.size = sizeof(ro),
			       .flags = RESTART_DETACH,
			       .logfd = -1,
			       .errbuf = err,
			       .errbuf_len = sizeof(err),
			       .running = on_running,
			       .running_arg = &seen};
	got = ckpt_restart_opts(0, img, &ro);
	CHECK(got == child, "second restart: %d '%s'", got, err);
	CHECK(seen.calls == 1 && seen.root == child,
	      "the running callback: %d call(s), root %d, "
	      "want 1 call with %d",
	      seen.calls, seen.root, child);
	CHECK(seen.tracer == 0, "the running callback saw the root traced by %ld", seen.tracer);
	if (got > 0) {
		kill(got, SIGUSR1);
		CHECK(waitpid(got, &st, 0) == got && WIFEXITED(st) && WEXITSTATUS(st) == 42,
		      "second restored child ended with status %#x", st);
	}
	if (failures)
		return 1;
	printf("PASS\n");
	return 0;
}
