/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "puppet/puppet.h"
#include "puppet/guard.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/kernel.h"
#include "util/par.h"
#include "util/proc.h"
#include "util/userns.h"

static void requeue_shared(struct puppet *p);
static int leave_sysstop(struct puppet *p);

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif
#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
#ifndef PTRACE_SETSIGMASK
#define PTRACE_SETSIGMASK 0x420b
#define PTRACE_GETSIGMASK 0x420a
#endif

/*
 * Blocked while held: all but SIGKILL, SIGSTOP and SIGTRAP. A traced task
 * runs no handler anyway; SIGTRAP stays unblocked because the single-step
 * trap of every injection is forced, and forcing a blocked signal resets
 * its handler to SIG_DFL (the program's SIGTRAP handler was lost so).
 */
static const uint64_t held_mask =
	~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)) | (1ull << (SIGTRAP - 1)));

static int wait_task(pid_t pid, int *ret_status)
{
	for (;;) {
		pid_t r = waitpid(pid, ret_status, __WALL);
		if (r == pid)
			return 0;
		if (r < 0 && errno == EINTR)
			continue;
		return r < 0 ? -errno : -ECHILD;
	}
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static long elapsed_us(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0->tv_sec) * 1000000L + (now.tv_nsec - t0->tv_nsec) / 1000;
}

/*
 * The wait for a seize's stop, bounded when p->stop_timeout_ms is set (by
 * the guardian, whose SIGALRM has a handler that interrupts waitpid): a
 * task that never takes the stop (a vfork parent until its child execs, a
 * task in uninterruptible sleep) makes it -ETIMEDOUT, not a wait for ever.
 */
static int wait_stop_bounded(struct puppet *p, int *status)
{
	if (!p->stop_timeout_ms)
		return wait_task(p->pid, status);
	/* a stop there already (the many seized together) needs no alarm */
	pid_t w = waitpid(p->pid, status, __WALL | WNOHANG);
	if (w == p->pid)
		return 0;
	if (w < 0 && errno != EINTR)
		return -errno;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long left = p->stop_timeout_ms * 1000L - elapsed_us(&t0);
		if (left <= 0)
			return -ETIMEDOUT;
		/* woken by the alarm at most every 100 ms to look at the time */
		struct itimerval it = { .it_value = { 0, left < 100000 ? left : 100000 } };
		setitimer(ITIMER_REAL, &it, NULL);
		pid_t r = waitpid(p->pid, status, __WALL);
		int e = errno;
		setitimer(ITIMER_REAL, &(struct itimerval){ 0 }, NULL);
		if (r == p->pid)
			return 0;
		if (r >= 0 || e != EINTR)
			return r < 0 ? -e : -ECHILD;
	}
}

/*
 * Wait for the PTRACE_INTERRUPT stop. A signal may be reported first: it is
 * delivered (the task would have had it anyway) and we wait on.
 */
static int wait_interrupt_stop(struct puppet *p)
{
	for (;;) {
		int status, r = wait_stop_bounded(p, &status);
		if (r < 0)
			return r;
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return -ESRCH;
		if (!WIFSTOPPED(status))
			continue;
		if ((status >> 16) == PTRACE_EVENT_STOP) {
			p->group_stopped = is_stop_signal(WSTOPSIG(status)) ? WSTOPSIG(status) : 0;
			return 0;
		}
		/* a signal-delivery-stop: let the signal through, keep waiting */
		if (ptrace(PTRACE_CONT, p->pid, 0, WSTOPSIG(status)) < 0)
			return -errno;
	}
}

int puppet_sig_handled(pid_t pid, uint64_t ret[2])
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	const char *ign = strstr(buf, "\nSigIgn:"), *cgt = strstr(buf, "\nSigCgt:");
	if (!ign || !cgt)
		return -EIO;
	ret[0] = strtoull(ign + 9, NULL, 16);
	ret[1] = strtoull(cgt + 9, NULL, 16);
	return 0;
}

/* Does the task ignore SIGTRAP (SigIgn of its status)? */
static bool trap_ignored(pid_t pid)
{
	uint64_t set[2];
	return puppet_sig_handled(pid, set) == 0 && (set[0] & (1ull << (SIGTRAP - 1)));
}

static int puppet_take(struct puppet *p)
{
	char path[64];
	int r;

	r = wait_interrupt_stop(p);
	if (r < 0)
		return r;
	p->held = true;
	if (ptrace(PTRACE_GETREGS, p->pid, 0, &p->regs0) < 0)
		return -errno;
	/* in a call that set a mask for its time (sigsuspend, ppoll...),
	 * the task's own, kept aside: the kernel reads that one */
	if (!(p->take_skip & PUPPET_TAKE_NO_MASK) &&
	    ptrace(PTRACE_GETSIGMASK, p->pid, sizeof(uint64_t), &p->sigmask0) < 0)
		return -errno;
	if (!(p->take_skip & PUPPET_TAKE_MASK_HELD) &&
	    ptrace(PTRACE_SETSIGMASK, p->pid, sizeof(uint64_t), &held_mask) < 0)
		return -errno;
	if (!(p->take_skip & PUPPET_TAKE_NO_MEM)) {
		snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
		p->memfd = open(path, O_RDWR | O_CLOEXEC);
		if (p->memfd < 0)
			return -errno;
	}
	if (!(p->take_skip & PUPPET_TAKE_NO_TRAP))
		p->trap_ignored = trap_ignored(p->pid);
	return 0;
}

/* The task's memory, once the guardian holds it (ckpt reads it itself);
 * a copy of like if it is not -1 (the same memory: a thread's). */
static int open_mem(struct puppet *p, int like)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	p->memfd = like >= 0 ? fcntl(like, F_DUPFD_CLOEXEC, 0) : open(path, O_RDWR | O_CLOEXEC);
	if (p->memfd >= 0)
		return 0;
	int r = -errno;
	puppet_release(p, 0);
	return r;
}

static int seize_via_guard(struct puppet *p, pid_t pid, struct puppet_guard *g)
{
	struct guard_req req = { .op = GUARD_SEIZE };
	_cleanup_free_ void *xstate = malloc(GUARD_XSTATE_MAX);

	*p = (struct puppet){ .pid = pid, .memfd = -1, .guard = g };
	if (!xstate)
		return -ENOMEM;
	long r = guard_call(p, &req, xstate, GUARD_XSTATE_MAX);
	if (r == -EMSGSIZE) /* xstate larger than the room: held all the same */
		r = 0;
	else if (r == 0 && p->xstate_len) {
		void *x = realloc(xstate, p->xstate_len);
		if (x)
			p->xstate = x, xstate = NULL;
		else
			p->xstate_len = 0;
	}
	if (r < 0)
		return (int)r;
	p->have_seized_state = true;
	return open_mem(p, -1);
}

int puppet_seize_guarded(struct puppet *p, pid_t pid, struct puppet_guard *guard)
{
	return guard ? seize_via_guard(p, pid, guard) : puppet_seize(p, pid);
}

int puppet_seize_start(struct puppet *p, pid_t pid)
{
	*p = (struct puppet){ .pid = pid, .memfd = -1 };
	/* suspending seccomp needs CAP_SYS_ADMIN; without it, injections may
	 * be filtered, which the caller finds out when one fails */
	if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_SUSPEND_SECCOMP | PTRACE_O_TRACESYSGOOD) < 0 &&
	    (errno != EPERM || ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACESYSGOOD) < 0))
		return -errno;
	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0) {
		int r = -errno;
		ptrace(PTRACE_DETACH, pid, 0, 0);
		return r;
	}
	return 0;
}

int puppet_seize_finish(struct puppet *p)
{
	int r = puppet_take(p);
	if (r < 0) {
		if (p->held)
			puppet_release(p, 0);
		else
			ptrace(PTRACE_DETACH, p->pid, 0, 0);
		puppet_forget(p);
	}
	return r;
}

int puppet_seize(struct puppet *p, pid_t pid)
{
	CKPT_FAULT(CKPT_FAULT_REQUEST);
	int r = puppet_seize_start(p, pid);
	return r < 0 ? r : puppet_seize_finish(p);
}

/* One GUARD_MANY request for n <= PUPPET_MANY_MAX tasks sent (a seize of
 * tasks a GUARD_MANY_START started if started): 0 or -errno. */
static long many_send(const pid_t *pids, const int *sigs, size_t n, struct puppet_guard *g,
		      enum guard_many what, bool started, bool one_process)
{
	struct guard_many_req in[PUPPET_MANY_MAX];
	struct guard_req req = { .op = GUARD_MANY,
				 .a = { (int64_t)n, what, started, one_process } };
	struct puppet dummy = { .guard = g, .memfd = -1 };

	for (size_t i = 0; i < n; i++)
		in[i] = (struct guard_many_req){ pids[i], sigs ? sigs[i] : 0 };
	return guard_send(&dummy, &req, in, n * sizeof(in[0]));
}

/* Its reply (if sent is 0), into out (GUARD_DATA_MAX bytes), taken. */
static void many_recv(struct puppet *const *ps, const pid_t *pids, size_t n,
		      struct puppet_guard *g, enum guard_many what, bool one_process, long sent,
		      uint8_t *out, int *err)
{
	struct guard_req req = { .op = GUARD_MANY };
	struct puppet dummy = { .guard = g, .memfd = -1 };
	size_t room = GUARD_DATA_MAX;
	long r = sent < 0 ? sent : guard_recv(&dummy, &req, out, room);
	size_t off = 0;
	int memfd = -1; /* one process's threads: the first's is the others' memory too */
	for (size_t i = 0; i < n; i++) {
		struct puppet *p = ps[i];
		struct guard_many_rep m = { .ret = r < 0 ? r : -EIO };
		if (r >= 0 && off + sizeof(m) <= room)
			memcpy(&m, out + off, sizeof(m));
		off += sizeof(m);
		if (what == GUARD_MANY_SEIZE) {
			*p = (struct puppet){ .pid = pids[i], .memfd = -1, .guard = g };
			p->held = m.held;
			p->group_stopped = m.group_stopped;
			p->regs0 = m.regs0;
			p->sigmask0 = m.sigmask0;
			p->rseq_ret = m.rseq_ret;
			memcpy(p->rseq, m.rseq, sizeof(p->rseq));
			p->sud_ret = m.sud_ret;
			memcpy(p->sud, m.sud, sizeof(p->sud));
			p->have_seized_state = m.ret == 0;
			if (m.ret == 0 && m.xstate_len && off + m.xstate_len <= room &&
			    (p->xstate = malloc(m.xstate_len))) {
				memcpy(p->xstate, out + off, m.xstate_len);
				p->xstate_len = m.xstate_len;
			}
			off += (m.xstate_len + 7) & ~7u;
			err[i] = m.ret < 0 ? (int)m.ret : open_mem(p, memfd);
			if (err[i] == 0 && memfd < 0 && one_process)
				memfd = p->memfd;
			continue;
		}
		err[i] = (int)m.ret;
		if (what == GUARD_MANY_KILL_START)
			continue; /* held until its death is waited for */
		p->held = false;
		puppet_forget(p);
	}
}

/*
 * GUARD_MANY requests of PUPPET_MANY_MAX tasks each, two in flight: the
 * next is sent before the reply to one is read, so the guardian serves
 * it while ckpt takes that reply, rather than each waiting for the other
 * (63 requests for 1,000 threads, each a wakeup of either process).
 */
static void many_started(struct puppet *const *ps, const pid_t *pids, const int *sigs,
			 size_t n, struct puppet_guard *g, enum guard_many what, bool started,
			 bool one_process, int *err)
{
	for (size_t i = 0; !g && i < n; i++) {
		if (what == GUARD_MANY_SEIZE)
			err[i] = puppet_seize(ps[i], pids[i]);
		else if (what == GUARD_MANY_RELEASE)
			err[i] = puppet_release(ps[i], sigs[i]);
		else
			puppet_kill(ps[i]), err[i] = 0;
	}
	if (!g)
		return;
	_cleanup_free_ uint8_t *out = malloc(GUARD_DATA_MAX);
	size_t nreq = (n + PUPPET_MANY_MAX - 1) / PUPPET_MANY_MAX;
	long sent[2] = { 0, 0 };
	for (size_t k = 0; k <= nreq; k++) {
		size_t at = k * PUPPET_MANY_MAX, kn = n - at < PUPPET_MANY_MAX ? n - at : PUPPET_MANY_MAX;
		if (k < nreq)
			sent[k % 2] = out ? many_send(pids + at, sigs ? sigs + at : NULL, kn, g, what,
						      started, one_process)
					  : -ENOMEM;
		if (k == 0)
			continue;
		at -= PUPPET_MANY_MAX;
		kn = n - at < PUPPET_MANY_MAX ? n - at : PUPPET_MANY_MAX;
		many_recv(ps + at, pids + at, kn, g, what, one_process, sent[(k - 1) % 2], out,
			  err + at);
	}
}

static void many(struct puppet *const *ps, const pid_t *pids, const int *sigs, size_t n,
		 struct puppet_guard *g, enum guard_many what, bool one_process, int *err)
{
	many_started(ps, pids, sigs, n, g, what, false, one_process, err);
}

/*
 * More tasks than one request takes: every one interrupted first, by
 * requests that wait for none (GUARD_MANY_START), then their stops taken
 * PUPPET_MANY_MAX a request; by then most have stopped, all of them side
 * by side, where each request waited for its own 16 in turn.
 */
void puppet_seize_many(struct puppet *const *ps, const pid_t *pids, size_t n,
		       struct puppet_guard *guard, bool one_process, int *err)
{
	bool two = guard && n > PUPPET_MANY_MAX;
	_cleanup_free_ size_t *idx = two ? malloc(n * sizeof(*idx)) : NULL;
	_cleanup_free_ struct puppet **sps = two ? malloc(n * sizeof(*sps)) : NULL;
	_cleanup_free_ pid_t *spids = two ? malloc(n * sizeof(*spids)) : NULL;
	_cleanup_free_ int *serr = two ? malloc(n * sizeof(*serr)) : NULL;
	if (!idx || !sps || !spids || !serr)
		return many(ps, pids, NULL, n, guard, GUARD_MANY_SEIZE, one_process, err);
	many(ps, pids, NULL, n, guard, GUARD_MANY_START, one_process, err);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (err[i] == 0) {
			sps[m] = ps[i];
			spids[m] = pids[i];
			idx[m++] = i;
		}
	many_started(sps, spids, NULL, m, guard, GUARD_MANY_SEIZE, true, one_process, serr);
	for (size_t j = 0; j < m; j++)
		err[idx[j]] = serr[j];
}

/* The tasks that are held, and their pids (all of one guardian, or none). */
static size_t held_of(struct puppet *const *ps, const int *sigs, size_t n, struct puppet **h,
		      pid_t *pids, int *hsigs)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (ps[i]->held) {
			h[k] = ps[i];
			pids[k] = ps[i]->pid;
			hsigs[k++] = sigs ? sigs[i] : 0;
		}
	return k;
}

void puppet_release_many(struct puppet *const *ps, const int *sigs, size_t n, int *err)
{
	_cleanup_free_ struct puppet **h = calloc(n ? n : 1, sizeof(*h));
	_cleanup_free_ pid_t *pids = calloc(n ? n : 1, sizeof(*pids));
	_cleanup_free_ int *hs = calloc(n ? n : 1, 2 * sizeof(*hs));
	for (size_t i = 0; i < n; i++)
		err[i] = 0;
	if (!h || !pids || !hs) { /* one by one */
		for (size_t i = 0; i < n; i++)
			err[i] = puppet_release(ps[i], sigs[i]);
		return;
	}
	size_t k = held_of(ps, sigs, n, h, pids, hs);
	many(h, pids, hs, k, k ? h[0]->guard : NULL, GUARD_MANY_RELEASE, false, hs + n);
	for (size_t i = 0, j = 0; i < n && j < k; i++)
		if (ps[i] == h[j])
			err[i] = hs[n + j++];
}

void puppet_kill_many(struct puppet *const *ps, const bool *group_killed, size_t n)
{
	_cleanup_free_ struct puppet **h = calloc(n ? n : 1, sizeof(*h));
	_cleanup_free_ pid_t *pids = calloc(n ? n : 1, sizeof(*pids));
	_cleanup_free_ int *hs = calloc(n ? n : 1, 2 * sizeof(*hs));
	if (!h || !pids || !hs) {
		for (size_t i = 0; i < n; i++)
			if (ps[i]->held)
				puppet_kill(ps[i]);
		return;
	}
	/* sigs: 1 for a task only waited for (in[i].sig of GUARD_MANY_KILL) */
	bool procs = true;
	for (size_t i = 0; i < n; i++) {
		hs[i] = group_killed && group_killed[i];
		procs = procs && !hs[i];
	}
	size_t k = held_of(ps, hs, n, h, pids, hs);
	struct puppet_guard *g = k ? h[0]->guard : NULL;
	if (!g || !procs || k <= PUPPET_MANY_MAX)
		return many(h, pids, hs, k, g, GUARD_MANY_KILL, false, hs + n);
	/*
	 * More processes than one request takes: every one killed first, by
	 * requests that wait for none, then their deaths waited for
	 * PUPPET_MANY_MAX a request (only waited for: sig 1). All of them
	 * die side by side, on every CPU, where each request's 16 died in
	 * turn, and the last few of each with one CPU left idle.
	 */
	many(h, pids, hs, k, g, GUARD_MANY_KILL_START, false, hs + n);
	for (size_t i = 0; i < k; i++)
		hs[i] = 1;
	many_started(h, pids, hs, k, g, GUARD_MANY_KILL, true, false, hs + n);
}

/*
 * The init of a pid namespace ckpt made for a subtree: once released it is
 * told the pid of the tree's root on the control socket, reaps every
 * child and orphan, and exits with the root's status when none is left
 * (a signal death becomes 128 + the signal: pid 1 cannot die of it).
 */
static __attribute__((noreturn)) void init_loop(int ctl)
{
	pid_t root = 0;
	int root_status = 0, st;
	while (read(ctl, &root, sizeof(root)) < 0 && errno == EINTR)
		;
	close(ctl);
	for (;;) {
		pid_t r = wait(&st);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (r == root)
			root_status = st;
	}
	_exit(WIFEXITED(root_status) ? WEXITSTATUS(root_status) : 128 + WTERMSIG(root_status));
}

static __attribute__((noreturn)) void puppet_child(int ctl_fd, int ctl_target, int ready, bool init,
						      int ckpt_pidfd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* ckpt may have died between clone3 and the line above, when no
	 * signal was asked for: its pidfd is readable once it has exited
	 * (getppid() cannot tell: it is 0 in a new pid namespace) */
	struct pollfd pfd = { .fd = ckpt_pidfd, .events = POLLIN };
	if (ckpt_pidfd >= 0 && poll(&pfd, 1, 0) > 0)
		_exit(127);
	if (ctl_fd != ctl_target && dup2(ctl_fd, ctl_target) < 0)
		_exit(127);
	if (ready == ctl_target) /* cannot happen: ready is above ctl_target */
		_exit(127);
	for (int fd = 0; fd < ctl_target; fd++)
		if (fd != ready)
			close(fd);
	for (int fd = ctl_target + 1; fd < ready; fd++)
		close(fd);
	syscall(SYS_close_range, ready + 1, ~0u, 0);
	/* done: closing the pipe tells the parent so */
	close(ready);
	if (init)
		init_loop(ctl_target);
	for (;;)
		pause();
}

/* The new child pid (ckpt's), seized and held; killed if it cannot be. */
static int seize_new(struct puppet *p, pid_t pid)
{
	p->pid = pid;
	/* suspending seccomp needs CAP_SYS_ADMIN: without it, not */
	if ((ptrace(PTRACE_SEIZE, p->pid, 0,
		    PTRACE_O_SUSPEND_SECCOMP | PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD) < 0 &&
	     (errno != EPERM ||
	      ptrace(PTRACE_SEIZE, p->pid, 0, PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD) < 0)) ||
	    ptrace(PTRACE_INTERRUPT, p->pid, 0, 0) < 0) {
		int e = -errno;
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, __WALL);
		return e;
	}
	int e = puppet_take(p);
	if (e < 0) {
		puppet_kill(p);
		return e;
	}
	return 0;
}

/*
 * A bare puppet exec'd from bare.S's program rather than forked from ckpt:
 * the clone shares ckpt's memory until the exec (CLONE_VM | CLONE_VFORK,
 * as posix_spawn does), so no copy of ckpt's address space is made, faulted
 * in on both sides and unmapped again by the puppet's mm restore. On these
 * virtual machines each of those faults costs 10 to 20 us (docs/DESIGN.md,
 * "Lazy restart").
 */
extern const unsigned char ckpt_bare_elf[];
extern const uint64_t ckpt_bare_elf_len;

#ifndef MFD_EXEC
#define MFD_EXEC 0x10u
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1u << 2)
#endif

/* A sealed memfd that holds the program; -errno if this kernel or its
 * policy (vm.memfd_noexec) refuses one that can be exec'd. */
static int bare_memfd(void)
{
	int fd = memfd_create("ckpt-puppet", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) /* before Linux 6.3: no MFD_EXEC */
		fd = memfd_create("ckpt-puppet", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (write(fd, ckpt_bare_elf, ckpt_bare_elf_len) != (ssize_t)ckpt_bare_elf_len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0) {
		int e = errno ? -errno : -EIO;
		close(fd);
		return e;
	}
	return fd;
}

struct bare_child {
	int ctl_fd, ctl_target, exe, ckpt_pidfd;
	int err; /* the child's -errno, left in the memory it shares */
};

/*
 * The child, on its own stack in ckpt's memory, with every signal blocked
 * (no handler of ckpt's can run here): what puppet_child does, then the
 * exec. Every fd but the control socket is closed by the exec.
 */
__attribute__((noreturn, no_sanitize("address", "undefined"))) static void
bare_child(void *arg)
{
	struct bare_child *c = arg;
	static const char *const argv[] = { "ckpt-puppet", NULL };
	static const char *const envp[] = { NULL };
	long r = syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	struct pollfd pfd = { .fd = c->ckpt_pidfd, .events = POLLIN };
	if (r == 0 && c->ckpt_pidfd >= 0 && syscall(SYS_poll, &pfd, 1, 0) > 0)
		r = -ESRCH; /* ckpt has died: see puppet_child */
	else if (r == 0)
		r = c->ctl_fd != c->ctl_target ? syscall(SYS_dup3, c->ctl_fd, c->ctl_target, 0)
						: syscall(SYS_fcntl, c->ctl_target, F_SETFD, 0);
	if (r >= 0 && c->ctl_target > 0)
		r = syscall(SYS_close_range, 0, c->ctl_target - 1, CLOSE_RANGE_CLOEXEC);
	if (r >= 0)
		r = syscall(SYS_close_range, c->ctl_target + 1, ~0u, CLOSE_RANGE_CLOEXEC);
	if (r >= 0)
		r = syscall(SYS_execveat, c->exe, "", argv, envp, AT_EMPTY_PATH);
	c->err = r == -ESRCH ? -ESRCH : -errno;
	syscall(SYS_exit_group, 127);
	__builtin_unreachable();
}

/*
 * clone3 with a stack of the child's own, where it calls fn(arg), which
 * must not return: glibc has no wrapper that takes set_tid and a function.
 */
static long clone3_call(struct clone_args *args, void (*fn)(void *), void *arg)
{
	register long rax __asm__("rax") = SYS_clone3;
	register struct clone_args *rdi __asm__("rdi") = args;
	register size_t rsi __asm__("rsi") = sizeof(*args);
	register void (*r12)(void *) __asm__("r12") = fn;
	register void *r13 __asm__("r13") = arg;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "ud2\n"
			 "1:"
			 : "+r"(rax)
			 : "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
			 : "rcx", "r11", "memory");
	return rax;
}

#define BARE_STACK (16u << 10)

/*
 * -ENOEXEC when this way is not open here (no executable memfd, a clone
 * flag that cannot go with CLONE_VM): spawn then forks as before.
 */
static int spawn_bare(struct puppet *p, pid_t pid, uint64_t ns_flags, int ctl_fd, int ctl_target)
{
	*p = (struct puppet){ .memfd = -1 };
	_cleanup_close_ int exe = bare_memfd();
	if (exe < 0)
		return -ENOEXEC;
	if (CKPT_FAULT_ASKED(CKPT_FAULT_BARE)) { /* ckpt-fault's test: the exec fails */
		close(exe);
		exe = -1;
	}
	_cleanup_close_ int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	struct bare_child c = { ctl_fd, ctl_target, exe, self, 0 };
	_Alignas(16) char stack[BARE_STACK];
	pid_t want = pid;
	struct clone_args args = {
		.flags = ns_flags | CLONE_VM | CLONE_VFORK,
		.exit_signal = SIGCHLD,
		.stack = (uint64_t)(uintptr_t)stack,
		.stack_size = sizeof(stack),
	};
	if (pid > 0) {
		args.set_tid = (uint64_t)(uintptr_t)&want;
		args.set_tid_size = 1;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	long r = clone3_call(&args, bare_child, &c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r == -EINVAL)
		return -ENOEXEC;
	if (r < 0)
		return (int)r;
	/* CLONE_VFORK: the child has exec'd, or failed and exited */
	int err = *(volatile int *)&c.err;
	if (err) {
		while (waitpid((pid_t)r, NULL, __WALL) < 0 && errno == EINTR)
			;
		return err == -ESRCH ? err : -ENOEXEC;
	}
	p->bare = true;
	return seize_new(p, (pid_t)r);
}

static int spawn(struct puppet *p, pid_t pid, uint64_t ns_flags, int ctl_fd, int ctl_target,
		 bool init)
{
	struct clone_args args = {
		.flags = ns_flags,
		.exit_signal = SIGCHLD,
	};
	pid_t want = pid;
	long r;

	*p = (struct puppet){ .memfd = -1 };
	if (pid > 0) {
		args.set_tid = (uint64_t)(uintptr_t)&want;
		args.set_tid_size = 1;
	}
	/* the child closes the write end when it has shed ckpt's fds */
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	_cleanup_close_ int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	int ready = fcntl(pfd[1], F_DUPFD_CLOEXEC, ctl_target + 1);
	close(pfd[1]);
	if (ready < 0) {
		close(pfd[0]);
		return -errno;
	}
	r = syscall(SYS_clone3, &args, sizeof(args));
	if (r < 0) {
		int e = -errno;
		close(pfd[0]);
		close(ready);
		return e;
	}
	if (r == 0)
		puppet_child(ctl_fd, ctl_target, ready, init, self);
	close(ready);
	char c;
	while (read(pfd[0], &c, 1) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	return seize_new(p, (pid_t)r);
}

/*
 * Does an exec leave ckpt's credentials as they are? Root's exec of a file
 * without capabilities gives it the bounding set (unless SECBIT_NOROOT),
 * and a set that grows at exec also clears the parent-death signal: only a
 * root whose permitted and effective sets are the bounding set already.
 * Not into a new user namespace either, where the puppet, not yet mapped,
 * would lose its capabilities at the exec.
 */
static bool exec_keeps_creds(uint64_t ns_flags)
{
	uint64_t eff, prm;
	if ((ns_flags & CLONE_NEWUSER) || getuid() != 0 || geteuid() != 0 ||
	    (prctl(PR_GET_SECUREBITS) & (1 << 0 /* SECBIT_NOROOT */)) || userns_caps(&eff, &prm) < 0)
		return false;
	for (int cap = 0; cap < 64; cap++) {
		int in = prctl(PR_CAPBSET_READ, cap);
		if (in < 0) /* past the last capability of this kernel */
			break;
		if (in && !((prm & eff) >> cap & 1))
			return false;
	}
	return true;
}

int puppet_spawn(struct puppet *p, pid_t pid, uint64_t ns_flags, int ctl_fd, int ctl_target)
{
	if (exec_keeps_creds(ns_flags)) {
		int r = spawn_bare(p, pid, ns_flags, ctl_fd, ctl_target);
		if (r != -ENOEXEC)
			return r;
	}
	return spawn(p, pid, ns_flags, ctl_fd, ctl_target, false);
}

int puppet_spawn_init(struct puppet *p, uint64_t ns_flags, int ctl_fd, int ctl_target)
{
	return spawn(p, 0, CLONE_NEWPID | ns_flags, ctl_fd, ctl_target, true);
}

/* clone3's arguments for a child, at CLONE_ARGS_OFF of the scratch area
 * (the i-th of a batch at i times its size further) */
struct clone_arg {
	struct clone_args args;
	pid_t tid;
};
#define CLONE_ARGS_OFF 2048

static struct clone_arg clone_arg(const struct puppet *parent, size_t i, pid_t pid,
				  uint64_t flags, int exit_signal)
{
	struct clone_arg ca = { .args = { .flags = flags, .exit_signal = (uint64_t)exit_signal } };
	if (pid > 0) {
		ca.tid = pid;
		ca.args.set_tid = parent->scratch + CLONE_ARGS_OFF + i * sizeof(ca) +
				  offsetof(struct clone_arg, tid);
		ca.args.set_tid_size = 1;
	}
	return ca;
}

#define TRACE_CLONES (PTRACE_O_TRACEFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACEVFORK)

/* The parent's clones are followed: each child is attached from its start
 * (a stop of the parent for each, which tells the child's pid); without
 * events, no stop of the parent (the children of a clone with CLONE_PTRACE
 * are attached all the same). */
static int clone_options_ev(struct puppet *parent, bool events)
{
	const long opts = PTRACE_O_SUSPEND_SECCOMP | PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD |
			  (events ? TRACE_CLONES : 0);
	if (ptrace(PTRACE_SETOPTIONS, parent->pid, 0, opts) < 0 &&
	    ptrace(PTRACE_SETOPTIONS, parent->pid, 0, opts & ~PTRACE_O_SUSPEND_SECCOMP) < 0)
		return -errno;
	return 0;
}

static int clone_options(struct puppet *parent)
{
	return clone_options_ev(parent, true);
}

/* Are pid's children in ckpt's pid namespace (the pids they are given
 * with set_tid are the ones ckpt sees)? */
static bool same_pidns(pid_t pid)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid_for_children", pid);
	return stat("/proc/self/ns/pid", &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

/* The child (pid as ckpt sees it) held, with the parent's scratch area,
 * signal mask and SIGTRAP disposition, and its memory if it shares it
 * (CLONE_VM: the parent's /proc/PID/mem, copied). */
static int clone_take(const struct puppet *parent, struct puppet *child, pid_t pid, uint64_t flags)
{
	child->pid = pid;
	if (child->pid <= 0)
		return -ECHILD;
	/* the kernel copied the held parent's mask to the child */
	child->take_skip = PUPPET_TAKE_NO_MASK | PUPPET_TAKE_NO_TRAP | PUPPET_TAKE_MASK_HELD;
	child->trap_ignored = parent->trap_ignored;
	if ((flags & CLONE_VM) && parent->memfd >= 0 &&
	    (child->memfd = fcntl(parent->memfd, F_DUPFD_CLOEXEC, 0)) >= 0)
		child->take_skip |= PUPPET_TAKE_NO_MEM;
	int e = puppet_take(child);
	if (e < 0) {
		puppet_kill(child);
		return e;
	}
	child->syscall_ip = parent->syscall_ip;
	child->scratch = parent->scratch;
	child->scratch_len = parent->scratch_len;
	child->scratch_extra = parent->scratch_extra;
	child->stub_ip = parent->stub_ip; /* the copy's, at the same place */
	child->sigmask0 = parent->sigmask0;
	return 0;
}

int puppet_clone(struct puppet *parent, struct puppet *child, pid_t pid, uint64_t flags,
		 int exit_signal)
{
	*child = (struct puppet){ .memfd = -1 };
	if (!parent->held || !parent->scratch)
		return -ESRCH;
	struct clone_arg ca = clone_arg(parent, 0, pid, flags, exit_signal);
	uint64_t addr = puppet_scratch_put(parent, CLONE_ARGS_OFF, &ca, sizeof(ca));
	if (!addr)
		return -EFAULT;
	int e = clone_options(parent);
	if (e < 0)
		return e;
	parent->event_msg = 0;
	long r = puppet_syscall(parent, SYS_clone3, addr, sizeof(ca.args));
	if (r < 0)
		return (int)r;
	/* r is the pid in the parent's namespace; ptrace wants ckpt's */
	return clone_take(parent, child, (pid_t)parent->event_msg, flags);
}

static int run_stub(struct puppet *p, struct puppet_call *c, size_t n, unsigned long *ev,
		    size_t *nev);

void puppet_clone_many(struct puppet *parent, struct puppet *const *children, const pid_t *pids,
		       size_t n, uint64_t flags, int exit_signal, int *err)
{
	struct clone_arg ca[PUPPET_CLONE_MAX] = { 0 };
	struct puppet_call c[PUPPET_CLONE_MAX];
	unsigned long ev[PUPPET_CLONE_MAX];
	size_t nev = 0;

	if (n > PUPPET_CLONE_MAX || !parent->stub_ip || parent->guard || !parent->held ||
	    !parent->scratch || parent->trap_ignored) {
		for (size_t i = 0; i < n; i++)
			err[i] = puppet_clone(parent, children[i], pids[i], flags, exit_signal);
		return;
	}
	/* the children's pids known as ckpt sees them: CLONE_PTRACE attaches
	 * them, and the parent does not stop for each (its events off) */
	bool known = same_pidns(parent->pid);
	for (size_t i = 0; known && i < n; i++)
		known = pids[i] > 0;
	for (size_t i = 0; i < n; i++) {
		*children[i] = (struct puppet){ .memfd = -1 };
		ca[i] = clone_arg(parent, i, pids[i], flags | (known ? CLONE_PTRACE : 0), exit_signal);
		c[i] = PUPPET_CALL(SYS_clone3, parent->scratch + CLONE_ARGS_OFF + i * sizeof(ca[0]),
				   sizeof(ca[0].args));
	}
	int r = puppet_scratch_put(parent, CLONE_ARGS_OFF, ca, n * sizeof(ca[0])) ? 0 : -EFAULT;
	if (r == 0)
		r = clone_options_ev(parent, !known);
	if (r == 0)
		r = run_stub(parent, c, n, ev, &nev);
	if (known) {
		int e = clone_options(parent);
		r = r < 0 ? r : e;
		/* (after a failure, any of them may exist: each is looked
		 * for below, and only a tracee of ckpt's can be waited for) */
		for (size_t i = 0; i < n && nev < PUPPET_CLONE_MAX; i++)
			if (r < 0 || c[i].ret > 0)
				ev[nev++] = (unsigned long)pids[i];
	}
	/* each clone made stopped the parent once, in order, with the child's pid */
	for (size_t i = 0, j = 0; i < n; i++) {
		if (r < 0 || c[i].ret < 0)
			err[i] = r < 0 ? r : (int)c[i].ret;
		else
			err[i] = j < nev ? clone_take(parent, children[i], (pid_t)ev[j++], flags) : -ECHILD;
	}
	/* a batch that failed half-way: the children it made go */
	for (size_t j = 0; r < 0 && j < nev; j++) {
		struct puppet orphan = { .memfd = -1 };
		if (clone_take(parent, &orphan, (pid_t)ev[j], flags) == 0)
			puppet_kill(&orphan);
	}
}

int puppet_exit(struct puppet *p, int status)
{
	struct user_regs_struct regs = p->regs0;
	const uint64_t none = 0;

	if (!p->held)
		return -ESRCH;
	regs.orig_rax = -1;
	regs.rip = p->syscall_ip;
	if (WIFSIGNALED(status)) {
		/* killed by the signal, without a core dump; SIGKILL has no
		 * action to set and kills as it is */
		struct kernel_sigaction {
			uint64_t handler, flags, restorer, mask;
		} dfl = { 0 };
		int sig = WTERMSIG(status);
		if (sig != SIGKILL) {
			uint64_t act = puppet_scratch_put(p, 0, &dfl, sizeof(dfl));
			if (!act)
				return -EFAULT;
			long r = puppet_syscall(p, SYS_rt_sigaction, sig, act, 0, 8);
			if (r < 0)
				return (int)r;
		}
		puppet_syscall(p, SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
		/* its pid as it sees it (in a pid namespace, not ours) */
		long self = puppet_syscall(p, SYS_getpid);
		if (self < 0)
			return (int)self;
		if (ptrace(PTRACE_SETSIGMASK, p->pid, sizeof(uint64_t), &none) < 0)
			return -errno;
		regs.rax = SYS_kill;
		regs.rdi = (unsigned long)self;
		regs.rsi = (unsigned long)sig;
	} else {
		regs.rax = SYS_exit_group;
		regs.rdi = (unsigned long)WEXITSTATUS(status);
	}
	if (ptrace(PTRACE_SETREGS, p->pid, 0, &regs) < 0)
		return -errno;
	/* detached, so that its parent, not ckpt, is told of its death */
	if (ptrace(PTRACE_DETACH, p->pid, 0, 0) < 0)
		return -errno;
	p->held = false;
	puppet_forget(p);
	for (int waited = 0; waited < 5000; waited++) {
		struct proc_stat st;
		_cleanup_free_ char *text = NULL;
		if (proc_read(p->pid, "stat", &text, NULL) < 0 || proc_parse_stat(text, &st) < 0 ||
		    st.state == 'Z' || st.state == 'X')
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

bool puppet_in_restartable_call(const struct puppet *p)
{
	long ax = (long)p->regs0.rax;
	return (long)p->regs0.orig_rax >= 0 &&
	       (ax == -KERN_ERESTARTSYS || ax == -KERN_ERESTARTNOINTR ||
		ax == -KERN_ERESTARTNOHAND);
}

/*
 * Is the task asleep in a call? Its state first: asleep ('S', 'D'), not
 * running, nor being woken ('R'): a task the release woke keeps the regs
 * it was seized with, which name its call, until it has run on the CPU
 * woken for it (an IPI away), and its syscall file shows them as if it
 * slept in that call. Then its syscall file, read after: it names a call,
 * not "running", not "-1 SP PC" (asleep outside any call: a task let go at
 * its `syscall` instruction may sleep in the page fault of that
 * instruction's page, a folio another task of it locked), nor a PC at that
 * instruction (asleep on its way back to it, the call not entered again):
 * in any of these, a handler run meanwhile finds no call to interrupt. A
 * task that is gone (no file, a zombie) is not waited for.
 */
static bool task_in_call(const struct puppet_asleep_task *a)
{
	_cleanup_free_ char *stat = NULL, *text = NULL;
	struct proc_stat st;
	char name[48];
	/* the thread's own stat: /proc/TID/stat is its process's, whose
	 * times the kernel adds up over every thread (a thousand threads'
	 * files read so took 45 ms of CPU more, a thousand times a thousand) */
	snprintf(name, sizeof(name), "task/%d/stat", (int)a->tid);
	if (proc_read_one(a->tid, name, &stat) < 0 || proc_parse_stat(stat, &st) < 0 ||
	    st.state == 'Z' || st.state == 'X')
		return true;
	if (st.state != 'S' && st.state != 'D')
		return false;
	if (proc_read_one(a->tid, "syscall", &text) < 0)
		return true;
	char *end;
	long nr = strtol(text, &end, 10);
	if (end == text || nr < 0)
		return false;
	const char *pc = strrchr(text, ' ');
	return !pc || strtoull(pc + 1, NULL, 16) != a->call_ip;
}

void puppet_asleep_add(struct puppet_asleep *w, const struct puppet *p)
{
	if (!puppet_in_restartable_call(p))
		return;
	/* what the wait closes is a handler run before the call is entered
	 * again; a task that blocks every signal its process has a handler
	 * for (or whose process has none) runs none there: a signal sent
	 * meanwhile stays pending, for the call (sigsuspend's mask, say) to
	 * take, or acts by default as it would in the call */
	if (!(~p->sigmask0 & ~p->no_handler))
		return;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct puppet_asleep_task *t = realloc(w->tasks, cap * sizeof(*t));
		if (!t) /* not waited for: only the window stays */
			return;
		w->tasks = t, w->cap = cap;
	}
	/* seized after its `syscall` instruction (2 bytes), let go before it */
	w->tasks[w->n++] = (struct puppet_asleep_task){ .tid = p->pid,
							.call_ip = p->regs0.rip - 2 };
}

/* a task asleep: tid 0 (the list is compacted after) */
static void mark_asleep(void *arg, size_t i, unsigned slot)
{
	(void)slot;
	struct puppet_asleep_task *tasks = arg;
	if (task_in_call(&tasks[i]))
		tasks[i].tid = 0;
}

size_t puppet_asleep_wait(struct puppet_asleep *w, int max_ms)
{
	struct timespec t0;
	size_t n = w->n;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (n > 0) {
		/* a thousand threads' files are read in a few ms a core */
		par_for(n, n >= 256 ? par_cpus() : 1, mark_asleep, w->tasks);
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (w->tasks[i].tid)
				w->tasks[k++] = w->tasks[i];
		n = k;
		long us = elapsed_us(&t0);
		if (!n || us > max_ms * 1000L)
			break;
		/* the first millisecond looks again at once: a task let go on an
		 * idle CPU is asleep again in 0.1 to 0.5 ms here, and a sleep of
		 * 100 us took 200 (timer slack, the wakeup); then every 100 us */
		if (us < 1000)
			sched_yield();
		else
			usleep(100);
	}
	free(w->tasks);
	*w = (struct puppet_asleep){0};
	return n;
}

int puppet_release(struct puppet *p, int sig)
{
	int r = 0;

	if (!p->held)
		return 0;
	if (p->guard) {
		struct guard_req req = { .op = GUARD_RELEASE, .a = { sig } };
		r = (int)guard_call(p, &req, NULL, 0);
		p->held = false;
		puppet_forget(p);
		return r;
	}
	CKPT_FAULT(CKPT_FAULT_REQUEST);
	if (p->ntraps > 1)
		requeue_shared(p);
	r = leave_sysstop(p);
	if (ptrace(PTRACE_SETREGS, p->pid, 0, &p->regs0) < 0 && !r)
		r = -errno;
	if (ptrace(PTRACE_SETSIGMASK, p->pid, sizeof(uint64_t), &p->sigmask0) < 0 && !r)
		r = -errno;
	/* a stop is queued rather than passed at detach (which only a
	 * signal-delivery-stop takes): the task stops as soon as it runs, and
	 * a checkpoint that comes first sees it pending */
	if (is_stop_signal(sig) && kill(p->pid, sig) < 0 && !r)
		r = -errno;
	int detach_sig = is_stop_signal(sig) ? 0 : sig;
	/* the program's SIGTRAP an injection took: the task is in the
	 * signal-delivery-stop of an injection's trap, and a signal passed at
	 * detach that the (restored) mask blocks is queued again, with the
	 * siginfo set here */
	if (p->ntraps && !detach_sig &&
	    ptrace(PTRACE_SETSIGINFO, p->pid, 0, &p->trap_info[0]) == 0)
		detach_sig = SIGTRAP;
	if (ptrace(PTRACE_DETACH, p->pid, 0, detach_sig) < 0 && !r)
		r = -errno;
	if (p->faulted && !r)
		r = -EFAULT;
	p->held = false;
	p->ntraps = 0;
	puppet_forget(p);
	return r;
}

void puppet_kill(struct puppet *p)
{
	if (p->guard && p->held) {
		struct guard_req req = { .op = GUARD_KILL };
		guard_call(p, &req, NULL, 0);
	} else if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		/* as its tracer (and maybe parent) we see it die; reaping it
		 * is up to the parent if that is someone else */
		int status;
		while (waitpid(p->pid, &status, __WALL) < 0 && errno == EINTR)
			;
	}
	p->held = false;
	puppet_forget(p);
}

void puppet_forget(struct puppet *p)
{
	if (p->memfd >= 0)
		close(p->memfd);
	p->memfd = -1;
	free(p->xstate);
	p->xstate = NULL;
	free(p->peek_shared);
	p->peek_shared = NULL;
	p->xstate_len = 0;
	p->have_seized_state = false;
}

/* Is v where p's syscall may be looked for: the vDSO (first pass), or
 * another executable mapping, not ckpt's scratch nor [vsyscall] (second)? */
static bool syscall_candidate(const struct puppet *p, const struct proc_vma *v, int pass)
{
	if (pass == 0)
		return !strcmp(v->path, "[vdso]");
	if (!(v->prot & PROT_EXEC) || !(v->prot & PROT_READ) || !strcmp(v->path, "[vdso]") ||
	    !strcmp(v->path, "[vsyscall]"))
		return false;
	uint64_t s = p->scratch, e = p->scratch + p->scratch_len + p->scratch_extra;
	return !p->scratch || v->end <= s || v->start >= e;
}

/*
 * A syscall instruction: in the vDSO, or, for a process that unmapped it,
 * in any other executable mapping of its own (its program or libc).
 */
int puppet_find_syscall(struct puppet *p)
{
	_cleanup_free_ char *text = NULL;
	struct proc_vmas vmas = { 0 };
	int r;

	r = proc_read(p->pid, "maps", &text, NULL);
	if (r < 0)
		return r;
	r = proc_parse_smaps(text, &vmas);
	if (r < 0)
		return r;
	r = puppet_find_syscall_in(p, &vmas);
	proc_vmas_free(&vmas);
	return r;
}

int puppet_find_syscall_in(struct puppet *p, const struct proc_vmas *vmas)
{
	int r = -ENOENT;
	for (int pass = 0; pass < 2 && r == -ENOENT; pass++)
		for (size_t i = 0; i < vmas->n && r == -ENOENT; i++) {
			struct proc_vma *v = &vmas->v[i];
			if (!syscall_candidate(p, v, pass))
				continue;
			size_t len = v->end - v->start < (8u << 20) ? v->end - v->start : 8u << 20;
			_cleanup_free_ uint8_t *buf = malloc(len);
			if (!buf) {
				r = -ENOMEM;
				break;
			}
			if (puppet_read(p, v->start, buf, len) < 0)
				continue; /* not readable through ptrace: the next one */
			for (size_t off = 0; off + 1 < len; off++) {
				if (buf[off] == 0x0f && buf[off + 1] == 0x05) {
					p->syscall_ip = v->start + off;
					r = 0;
					break;
				}
			}
		}
	return r;
}

/*
 * A SIGTRAP stop in an injection: 0 if it is the single-step trap (sent by
 * the kernel: si_code > 0), 1 if it is the program's own pending SIGTRAP
 * (sent by a process), which is kept to be given back on release.
 */
static int own_trap(struct puppet *p)
{
	siginfo_t si;
	if (ptrace(PTRACE_GETSIGINFO, p->pid, 0, &si) < 0)
		return -errno;
	if (si.si_code > 0)
		return 0;
	/* legacy signals: one in each queue at most; the thread's comes first */
	if (p->ntraps < 2)
		p->trap_info[p->ntraps++] = si;
	return 1;
}

/*
 * The process's SIGTRAP an injection took goes back by an injected
 * rt_sigqueueinfo (the trap of that injection is the thread's own, taken
 * first, so it stays pending); its siginfo is written below the stack's
 * red zone, which nothing uses while the task is held.
 */
static void requeue_shared(struct puppet *p)
{
	char path[64];
	uint64_t at = ((p->regs0.rsp - 128 - sizeof(siginfo_t)) & ~15ull) - 64;
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
	long self = puppet_syscall(p, SYS_getpid);
	if (fd < 0 || self <= 0 ||
	    pwrite(fd, &p->trap_info[1], sizeof(siginfo_t), (off_t)at) != sizeof(siginfo_t))
		return;
	puppet_syscall(p, SYS_rt_sigqueueinfo, self, SIGTRAP, at);
}

/*
 * A stop of a task running injected code that is not its trap: a fork or
 * clone leaves the new task's pid, as ckpt sees it (a later stop overwrites
 * the message); a job-control stop or SIGSTOP arriving is not executed yet,
 * and is remembered for the release.
 */
static int note_stop(struct puppet *p, int status)
{
	int ev = status >> 16;
	if ((ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK || ev == PTRACE_EVENT_CLONE) &&
	    ptrace(PTRACE_GETEVENTMSG, p->pid, 0, &p->event_msg) < 0)
		return -errno;
	if (is_stop_signal(WSTOPSIG(status)))
		p->group_stopped = (uint8_t)WSTOPSIG(status);
	return 0;
}

/*
 * A signal-delivery stop that is neither a trap, a syscall stop nor a stop
 * signal: with every other signal blocked, only a fault of the injected
 * instruction itself (forced by the kernel) stops so. Run again, it would
 * fault again.
 */
static bool injected_fault(struct puppet *p, int status)
{
	int sig = WSTOPSIG(status);
	if ((status >> 16) != 0 || sig == SIGTRAP || sig == (SIGTRAP | 0x80) || is_stop_signal(sig))
		return false;
	/* the kernel forced the signal: a handler of the program's for it may
	 * be reset already, and a call whose result is not looked at did not
	 * run: the release fails (the scratch area still goes) */
	p->faulted = true;
	return true;
}

/* ckpt-fault's test (CKPT_FAULT=badip:N): the next injection runs below
 * mmap_min_addr, where nothing is ever mapped */
static void fault_asked(struct puppet *p)
{
	if (CKPT_FAULT_ASKED(CKPT_FAULT_BAD_IP))
		p->fault_ip = 8;
}

/* Where the next injection runs: ip, but for the test's fault */
static uint64_t take_ip(struct puppet *p, uint64_t ip)
{
	uint64_t at = p->fault_ip ? p->fault_ip : ip;
	p->fault_ip = 0;
	return at;
}

/*
 * rt_sigaction(SIGTRAP, act): 1 if act ignores it, 0 if not, -1 if act is
 * NULL (no change) or unreadable.
 */
static int new_trap_ignored(const struct puppet *p, long act)
{
	uint64_t h;
	if (!act || pread(p->memfd, &h, sizeof(h), (off_t)act) != sizeof(h))
		return -1;
	return h == (uint64_t)(uintptr_t)SIG_IGN;
}

/*
 * One injected call without a single-step (the task ignores SIGTRAP):
 * PTRACE_SYSCALL to the call's entry stop and on to its exit stop, where
 * rax is its result. The program's own SIGTRAP taken meanwhile is kept,
 * like a step's; a fork's event and a stop signal are noted.
 */
static long syscall_by_stops(struct puppet *p, struct user_regs_struct *regs)
{
	int status, r, stops = 0;
	if (ptrace(PTRACE_SETREGS, p->pid, 0, regs) < 0)
		return -errno;
	while (stops < 2) {
		if (ptrace(PTRACE_SYSCALL, p->pid, 0, 0) < 0)
			return -errno;
		if ((r = wait_task(p->pid, &status)) < 0)
			return r;
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			p->held = false;
			return -ESRCH;
		}
		if (!WIFSTOPPED(status))
			continue;
		if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
			stops++;
			continue;
		}
		if (WSTOPSIG(status) == SIGTRAP && (status >> 16) == 0) {
			if ((r = own_trap(p)) < 0)
				return r;
			continue;
		}
		if (injected_fault(p, status))
			return -EFAULT;
		if ((r = note_stop(p, status)) < 0)
			return r;
	}
	p->in_sysstop = true;
	if (ptrace(PTRACE_GETREGS, p->pid, 0, regs) < 0)
		return -errno;
	if (regs->rip != p->syscall_ip + 2)
		return -EFAULT;
	return (long)regs->rax;
}

/*
 * A task left in a syscall-exit stop is moved to a PTRACE_INTERRUPT stop,
 * in the signal path: released from there, the kernel restarts the call
 * regs0 say it was in (released from the exit stop, it would not).
 */
static int leave_sysstop(struct puppet *p)
{
	int status, r;
	if (!p->in_sysstop)
		return 0;
	p->in_sysstop = false;
	if (ptrace(PTRACE_SETREGS, p->pid, 0, &p->regs0) < 0 ||
	    ptrace(PTRACE_INTERRUPT, p->pid, 0, 0) < 0 || ptrace(PTRACE_CONT, p->pid, 0, 0) < 0)
		return -errno;
	for (;;) {
		if ((r = wait_task(p->pid, &status)) < 0)
			return r;
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return -ESRCH;
		if (!WIFSTOPPED(status))
			continue;
		if ((status >> 16) == PTRACE_EVENT_STOP)
			return 0;
		if (WSTOPSIG(status) == SIGTRAP && (status >> 16) == 0 && (r = own_trap(p)) < 0)
			return r;
		if (WSTOPSIG(status) != SIGTRAP && (r = note_stop(p, status)) < 0)
			return r;
		if (ptrace(PTRACE_CONT, p->pid, 0, 0) < 0)
			return -errno;
	}
}

/*
 * puppet_syscall6 without a guardian, its first half: the call (a: nr and
 * six arguments) set up at p's syscall_ip and its first step taken; 0, or
 * -errno. *done: it ran whole instead (p ignores SIGTRAP: by stops), and
 * the value returned is its result. Between the halves, other tasks' calls
 * are started: their steps overlap.
 */
static long syscall_start(struct puppet *p, const long a[7], int *ign, bool *done)
{
	struct user_regs_struct regs = p->regs0;

	*done = false;
	CKPT_FAULT(CKPT_FAULT_REQUEST);
	regs.rax = a[0];
	regs.orig_rax = -1;
	regs.rdi = a[1];
	regs.rsi = a[2];
	regs.rdx = a[3];
	regs.r10 = a[4];
	regs.r8 = a[5];
	regs.r9 = a[6];
	regs.rip = take_ip(p, p->syscall_ip);
	/* rt_sigaction(SIGTRAP, SIG_IGN) is itself run without a step */
	*ign = a[0] == SYS_rt_sigaction && a[1] == SIGTRAP ? new_trap_ignored(p, a[2]) : -1;
	if (p->trap_ignored || *ign == 1) {
		*done = true;
		long ret = syscall_by_stops(p, &regs);
		if (*ign >= 0 && ret == 0)
			p->trap_ignored = *ign;
		return ret;
	}
	if (ptrace(PTRACE_SETREGS, p->pid, 0, &regs) < 0 ||
	    ptrace(PTRACE_SINGLESTEP, p->pid, 0, 0) < 0)
		return -errno;
	return 0;
}

/* The second half: the call's step waited for (stepped again after another
 * stop), its result read */
static long syscall_finish(struct puppet *p, int ign)
{
	struct user_regs_struct regs;
	int status, r;

	for (bool again = false;; again = true) {
		if (again && ptrace(PTRACE_SINGLESTEP, p->pid, 0, 0) < 0)
			return -errno;
		r = wait_task(p->pid, &status);
		if (r < 0)
			return r;
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			p->held = false;
			return -ESRCH;
		}
		if (!WIFSTOPPED(status))
			continue;
		if (WSTOPSIG(status) == SIGTRAP && (status >> 16) == 0) {
			r = own_trap(p);
			if (r < 0)
				return r;
			if (r == 0)
				break;
			/* the program's own SIGTRAP, kept: taken before the
			 * syscall ran (step on) or after (its trap coalesced) */
			if (ptrace(PTRACE_GETREGS, p->pid, 0, &regs) < 0)
				return -errno;
			if (regs.rip != p->syscall_ip)
				break;
			continue;
		}
		if (injected_fault(p, status))
			return -EFAULT;
		/* a fork's new pid, or a stop signal arriving: step again */
		if ((r = note_stop(p, status)) < 0)
			return r;
	}
	p->in_sysstop = false;
	if (ptrace(PTRACE_GETREGS, p->pid, 0, &regs) < 0)
		return -errno;
	if (regs.rip != p->syscall_ip + 2)
		return -EFAULT;
	if (ign >= 0 && regs.rax == 0)
		p->trap_ignored = ign;
	return (long)regs.rax;
}

/* What puppet_syscall6 checks first: 0, or -errno */
static int syscall_can_start(struct puppet *p, long nr)
{
	if (!p->held)
		return -ESRCH;
	if (!p->syscall_ip)
		return -ENOEXEC;
	fault_asked(p);
	if (nr == SYS_rseq)
		p->have_seized_state = false;
	return 0;
}

long puppet_syscall6(struct puppet *p, long nr, long a1, long a2, long a3, long a4, long a5,
		     long a6)
{
	int r = syscall_can_start(p, nr);
	if (r < 0)
		return r;
	if (p->guard) {
		struct guard_req req = {.op = GUARD_SYSCALL,
					.syscall_ip = take_ip(p, p->syscall_ip),
					.a = {nr, a1, a2, a3, a4, a5, a6}};
		return guard_call(p, &req, NULL, 0);
	}
	const long a[7] = {nr, a1, a2, a3, a4, a5, a6};
	int ign;
	bool done;
	long ret = syscall_start(p, a, &ign, &done);
	return done || ret < 0 ? ret : syscall_finish(p, ign);
}

/*
 * The batch stub: rbx = the table (entries of 8 words: nr, six arguments,
 * result), r12 = the count; it runs each call, stores rax, and ends on int3.
 */
static const uint8_t stub_code[] = {
	0x48, 0x8b, 0x03,       /* mov (%rbx),%rax */
	0x48, 0x8b, 0x7b, 0x08, /* mov 0x8(%rbx),%rdi */
	0x48, 0x8b, 0x73, 0x10, /* mov 0x10(%rbx),%rsi */
	0x48, 0x8b, 0x53, 0x18, /* mov 0x18(%rbx),%rdx */
	0x4c, 0x8b, 0x53, 0x20, /* mov 0x20(%rbx),%r10 */
	0x4c, 0x8b, 0x43, 0x28, /* mov 0x28(%rbx),%r8 */
	0x4c, 0x8b, 0x4b, 0x30, /* mov 0x30(%rbx),%r9 */
	0x0f, 0x05,             /* syscall */
	0x48, 0x89, 0x43, 0x38, /* mov %rax,0x38(%rbx) */
	0x48, 0x83, 0xc3, 0x40, /* add $0x40,%rbx */
	0x49, 0xff, 0xcc,       /* dec %r12 */
	0x75, 0xd6,             /* jne 0 */
	0xcc,                   /* int3 */
};
#define STUB_TABLE_SIZE 8192 /* PUPPET_BATCH_MAX entries of 64 bytes */
#define STUB_SYSCALL_OFF 27     /* the syscall instruction in stub_code */

int puppet_syscall_from_stub(struct puppet *p)
{
	if (!p->stub_ip)
		return -ENOEXEC;
	p->syscall_ip = p->stub_ip + STUB_SYSCALL_OFF;
	return 0;
}
#define STUB_PAGE 4096

int puppet_scratch_map_stub(struct puppet *p, size_t len)
{
	return puppet_scratch_map_stub_at(p, 0, len);
}

/*
 * The scratch area, table and stub page as one mapping, writable and
 * executable, the stub written by process_vm_writev: one injected call.
 * Refused where memory-deny-write-execute (or a security module) forbids
 * such a mapping: then 1, and the caller makes them apart.
 */
/* The mmap's flags for a scratch area at addr (0: anywhere) */
#define SCRATCH_MAP_FLAGS(addr) (MAP_PRIVATE | MAP_ANONYMOUS | ((addr) ? MAP_FIXED_NOREPLACE : 0))
#define SCRATCH_PROT_RWX	(PROT_READ | PROT_WRITE | PROT_EXEC)

/* scratch_map_rwx's part after the mmap, m its result */
static int scratch_rwx_mapped(struct puppet *p, uint64_t addr, size_t len, long m)
{
	size_t total = len + STUB_TABLE_SIZE + STUB_PAGE;
	if (m < 0 && m > -4096)
		return m == -EACCES || m == -EPERM ? 1 : (int)m;
	if (addr && (uint64_t)m != addr) {
		puppet_syscall(p, SYS_munmap, m, total);
		return -EEXIST;
	}
	p->scratch = (uint64_t)m;
	p->scratch_len = len;
	p->scratch_extra = STUB_TABLE_SIZE + STUB_PAGE;
	uint64_t code = p->scratch + len + STUB_TABLE_SIZE;
	struct iovec l = { (void *)stub_code, sizeof(stub_code) };
	struct iovec rm = { (void *)(uintptr_t)code, sizeof(stub_code) };
	if (process_vm_writev(p->pid, &l, 1, &rm, 1, 0) == (ssize_t)sizeof(stub_code))
		p->stub_ip = code;
	return 0;
}

static int scratch_map_rwx(struct puppet *p, uint64_t addr, size_t len)
{
	size_t total = len + STUB_TABLE_SIZE + STUB_PAGE;
	long m = puppet_syscall(p, SYS_mmap, addr, total, SCRATCH_PROT_RWX, SCRATCH_MAP_FLAGS(addr),
				-1, 0);
	return scratch_rwx_mapped(p, addr, len, m);
}

/* The scratch area, table and stub page mapped apart (no mapping both
 * writable and executable); the stub written through /proc/PID/mem */
static int scratch_map_apart(struct puppet *p, uint64_t addr, size_t len)
{
	char path[64];
	int r = puppet_scratch_map(p, addr, len + STUB_TABLE_SIZE + STUB_PAGE);
	if (r < 0 || p->guard)
		return r;
	p->scratch_len = len;
	p->scratch_extra = STUB_TABLE_SIZE + STUB_PAGE;
	uint64_t code = p->scratch + len + STUB_TABLE_SIZE;
	/* the page made read-only and executable by a new mapping over it
	 * (memory-deny-write-execute refuses an mprotect that adds PROT_EXEC);
	 * its code written through /proc/PID/mem, which may */
	long m = puppet_syscall(p, SYS_mmap, code, STUB_PAGE, PROT_READ | PROT_EXEC,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if ((uint64_t)m != code)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && pwrite(fd, stub_code, sizeof(stub_code), (off_t)code) == sizeof(stub_code))
		p->stub_ip = code;
	return 0;
}

int puppet_scratch_map_stub_at(struct puppet *p, uint64_t addr, size_t len)
{
	int r = p->guard ? 1 : scratch_map_rwx(p, addr, len);
	return r <= 0 ? r : scratch_map_apart(p, addr, len);
}

/*
 * puppet_scratch_map_stub of n tasks held here (the guardian's
 * GUARD_SCRATCH_MANY), their mmaps' steps overlapping: each one's started,
 * then each one's waited for, where each was a step after the other's (a
 * task woken, and ckpt woken by its trap, 100 times in a row for a tree of
 * 100). start(arg, i), if not NULL, runs first for task i (its result
 * in err[i]: < 0, nothing is mapped in it). At most PUPPET_MANY_MAX tasks
 * (any more: -E2BIG).
 */
void puppet_scratch_map_stubs(struct puppet *const *ps, const size_t *lens, size_t n, int *err,
			      int (*start)(void *arg, size_t i), void *arg)
{
	enum { WHOLE, STARTED, RAN } how[PUPPET_MANY_MAX];
	long m[PUPPET_MANY_MAX];
	int ign[PUPPET_MANY_MAX];

	for (size_t i = PUPPET_MANY_MAX; i < n; i++)
		err[i] = -E2BIG;
	n = n < PUPPET_MANY_MAX ? n : PUPPET_MANY_MAX;
	for (size_t i = 0; i < n; i++) {
		struct puppet *p = ps[i];
		bool done;
		how[i] = WHOLE;
		if ((err[i] = start ? start(arg, i) : 0) < 0)
			continue;
		if (p->guard || syscall_can_start(p, SYS_mmap) < 0)
			continue; /* the whole map in the second loop, as alone */
		size_t total = lens[i] + STUB_TABLE_SIZE + STUB_PAGE;
		const long a[7] = {SYS_mmap, 0, (long)total, SCRATCH_PROT_RWX, SCRATCH_MAP_FLAGS(0),
				   -1, 0};
		m[i] = syscall_start(p, a, &ign[i], &done);
		how[i] = done || m[i] < 0 ? RAN : STARTED;
	}
	for (size_t i = 0; i < n; i++) {
		struct puppet *p = ps[i];
		if (err[i] < 0)
			continue;
		if (how[i] == WHOLE) {
			err[i] = puppet_scratch_map_stub(p, lens[i]);
			continue;
		}
		if (how[i] == STARTED)
			m[i] = syscall_finish(p, ign[i]);
		int r = scratch_rwx_mapped(p, 0, lens[i], m[i]);
		err[i] = r <= 0 ? r : scratch_map_apart(p, 0, lens[i]);
	}
}

static int stub_mem(struct puppet *p, uint64_t addr, void *buf, size_t len, bool write)
{
	struct iovec l = { buf, len }, rm = { (void *)(uintptr_t)addr, len };
	ssize_t n = write ? process_vm_writev(p->pid, &l, 1, &rm, 1, 0)
			  : process_vm_readv(p->pid, &l, 1, &rm, 1, 0);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* The first half of a batch by the stub: its table written at table (the
 * stub's own, or any other writable place in the task) and the task
 * started on it. */
/* A stub table of n calls into t (n entries of 8 words). */
static void stub_table(const struct puppet_call *c, size_t n, uint64_t (*t)[8])
{
	for (size_t i = 0; i < n; i++) {
		t[i][0] = (uint64_t)c[i].nr;
		for (int j = 0; j < 6; j++)
			t[i][1 + j] = (uint64_t)c[i].a[j];
		t[i][7] = (uint64_t)-ENOSYS;
	}
}

/* The task started on the table of n calls already written at table. */
static int stub_go(struct puppet *p, size_t n, uint64_t table)
{
	struct user_regs_struct regs = p->regs0;
	regs.rip = take_ip(p, p->stub_ip);
	regs.rbx = table;
	regs.r12 = n;
	regs.orig_rax = -1;
	if (ptrace(PTRACE_SETREGS, p->pid, 0, &regs) < 0)
		return -errno;
	if (ptrace(PTRACE_CONT, p->pid, 0, 0) < 0)
		return -errno;
	return 0;
}

static int stub_start(struct puppet *p, const struct puppet_call *c, size_t n, uint64_t table)
{
	uint64_t t[PUPPET_BATCH_MAX][8];
	stub_table(c, n, t);
	int r = stub_mem(p, table, t, n * sizeof(t[0]), true);
	return r < 0 ? r : stub_go(p, n, table);
}

/* The second: waits for the stub's trap (one stop for each fork or clone
 * on the way, whose new pids go to ev if not NULL) and takes the results. */
static int stub_wait(struct puppet *p, size_t n, unsigned long *ev, size_t *nev)
{
	struct user_regs_struct regs;
	int status, r;

	for (;;) {
		if ((r = wait_task(p->pid, &status)) < 0)
			return r;
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			p->held = false;
			return -ESRCH;
		}
		if (WIFSTOPPED(status)) {
			int sig = WSTOPSIG(status), event = status >> 16;
			if (sig == SIGTRAP && event == 0) {
				/* the stub's int3 (sent by the kernel), or the program's
				 * own SIGTRAP, kept for the release */
				if ((r = own_trap(p)) < 0)
					return r;
				if (r == 0)
					break;
			} else {
				if ((r = note_stop(p, status)) < 0)
					return r;
				if (ev && *nev < n &&
				    (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK ||
				     event == PTRACE_EVENT_CLONE))
					ev[(*nev)++] = p->event_msg;
				if (injected_fault(p, status))
					return -EFAULT; /* a fault in the stub: nothing more is run */
			}
		}
		if (ptrace(PTRACE_CONT, p->pid, 0, 0) < 0)
			return -errno;
	}
	if (ptrace(PTRACE_GETREGS, p->pid, 0, &regs) < 0)
		return -errno;
	if (regs.rip != p->stub_ip + sizeof(stub_code))
		return -EFAULT;
	return 0;
}

static int stub_finish(struct puppet *p, struct puppet_call *c, size_t n, uint64_t table,
		       unsigned long *ev, size_t *nev)
{
	uint64_t t[PUPPET_BATCH_MAX][8];
	int r = stub_wait(p, n, ev, nev);
	if (r == 0)
		r = stub_mem(p, table, t, n * sizeof(t[0]), false);
	for (size_t i = 0; r == 0 && i < n; i++)
		c[i].ret = (long)t[i][7];
	return r;
}

/* Runs a batch by the stub: one stop for all the calls (and one for each
 * fork or clone, whose new pids go to ev, if not NULL). */
static int run_stub(struct puppet *p, struct puppet_call *c, size_t n, unsigned long *ev,
		    size_t *nev)
{
	uint64_t table = p->stub_ip - STUB_TABLE_SIZE;
	int r = stub_start(p, c, n, table);
	return r < 0 ? r : stub_finish(p, c, n, table, ev, nev);
}

/*
 * Can the stub run this batch? (it knows nothing of arg_prev and stop) Not
 * one that makes the task ignore SIGTRAP (the stub's int3 would reset it),
 * or whose action for it ckpt cannot read; one that sets any other action
 * for it can (every signal's action in one batch at restart).
 */
static bool stub_can_run(const struct puppet *p, const struct puppet_call *c, size_t n)
{
	if (!p->stub_ip || !n || p->trap_ignored)
		return false;
	for (size_t i = 0; i < n; i++)
		if (c[i].arg_prev || c[i].stop ||
		    (c[i].nr == SYS_rt_sigaction && c[i].a[0] == SIGTRAP && c[i].a[1] &&
		     new_trap_ignored(p, c[i].a[1]) != 0))
			return false;
	return true;
}

int puppet_syscalls(struct puppet *p, struct puppet_call *c, size_t n)
{
	if (n > PUPPET_BATCH_MAX)
		return -E2BIG;
	int r = !p->held ? -ESRCH : !p->syscall_ip ? -ENOEXEC : 0;
	fault_asked(p);
	for (size_t i = 0; i < n; i++)
		if (c[i].nr == SYS_rseq)
			p->have_seized_state = false;
	if (r == 0 && p->guard && n) {
		struct guard_req req = {
		    .op = GUARD_BATCH,
		    .syscall_ip = p->syscall_ip,
		    .a = {(int64_t)n, (int64_t)p->stub_ip, (int64_t)take_ip(p, 0)}};
		int64_t rets[PUPPET_BATCH_MAX];
		long g = guard_call_in(p, &req, c, n * sizeof(*c), rets, n * sizeof(rets[0]));
		if (g < 0)
			r = (int)g;
		for (size_t i = 0; r == 0 && i < n; i++)
			c[i].ret = rets[i];
	} else if (r == 0 && stub_can_run(p, c, n)) {
		r = run_stub(p, c, n, NULL, NULL);
	} else if (r == 0) {
		bool stopped = false;
		for (size_t i = 0; i < n; i++) {
			long *a = c[i].a;
			if (c[i].arg_prev >= 1 && c[i].arg_prev <= 6 && i > 0)
				a[c[i].arg_prev - 1] = c[i - 1].ret;
			c[i].ret = stopped ? -ECANCELED
					   : puppet_syscall6(p, c[i].nr, a[0], a[1], a[2], a[3], a[4], a[5]);
			if (c[i].stop && c[i].ret < 0 && c[i].ret > -4096)
				stopped = true;
		}
	}
	for (size_t i = 0; r < 0 && i < n; i++)
		c[i].ret = r;
	return r;
}

/* Can batch i of puppet_syscalls_many run side by side with the others? */
static bool many_can_run(struct puppet *const *ps, struct puppet_call *const *calls,
			 const size_t *ns, const uint64_t *tables, size_t i)
{
	return ps[i]->held && ps[i]->syscall_ip && tables[i] && ns[i] <= PUPPET_BATCH_MAX &&
	       ps[i]->guard == ps[0]->guard && stub_can_run(ps[i], calls[i], ns[i]);
}

static void syscalls_many_guarded(struct puppet *const *ps, struct puppet_call *const *calls,
				  const size_t *ns, const uint64_t *tables, size_t np, bool one_mm,
				  int *err)
{
	size_t len = 0, outlen = 0;
	for (size_t i = 0; i < np; i++) {
		len += sizeof(struct guard_bm_hdr) + ns[i] * sizeof(struct puppet_call);
		outlen += sizeof(struct guard_bm_rep) + ns[i] * sizeof(int64_t);
	}
	_cleanup_free_ uint8_t *in = malloc(len), *out = malloc(outlen);
	long g = in && out ? 0 : -ENOMEM;
	if (g == 0 && len > GUARD_BM_MAX)
		g = -E2BIG;
	size_t at = 0;
	for (size_t i = 0; g == 0 && i < np; i++) {
		struct guard_bm_hdr h = { .pid = ps[i]->pid,
					  .n = (uint32_t)ns[i],
					  .table = tables[i],
					  .stub_ip = ps[i]->stub_ip,
					  .syscall_ip = ps[i]->syscall_ip };
		memcpy(in + at, &h, sizeof(h));
		at += sizeof(h);
		memcpy(in + at, calls[i], ns[i] * sizeof(struct puppet_call));
		at += ns[i] * sizeof(struct puppet_call);
	}
	int64_t fault_at = 0, fault_ip = 0; /* a test's (ckpt-fault): the task, from 1 */
	for (size_t i = 0; i < np && !fault_at; i++) {
		fault_asked(ps[i]);
		if (ps[i]->fault_ip) {
			fault_at = (int64_t)i + 1;
			fault_ip = (int64_t)take_ip(ps[i], 0);
		}
	}
	if (g == 0) {
		struct guard_req req = {
		    .op = GUARD_BATCH_MANY,
		    .syscall_ip = ps[0]->syscall_ip,
		    .a = {(int64_t)np, (int64_t)len, one_mm, fault_at, fault_ip}};
		g = guard_call_in(ps[0], &req, in, len, out, outlen);
	}
	at = 0;
	for (size_t i = 0; i < np; i++) {
		struct guard_bm_rep rep = { .ret = g < 0 ? g : 0, .held = ps[i]->held };
		if (g >= 0)
			memcpy(&rep, out + at, sizeof(rep));
		at += sizeof(rep);
		ps[i]->held = rep.held;
		ps[i]->faulted |= rep.faulted;
		err[i] = (int)rep.ret;
		for (size_t j = 0; j < ns[i]; j++) {
			int64_t ret = rep.ret;
			if (rep.ret == 0)
				memcpy(&ret, out + at + j * sizeof(int64_t), sizeof(ret));
			calls[i][j].ret = (long)ret;
		}
		at += ns[i] * sizeof(int64_t);
	}
}

/* one_mm: with a guardian, it runs them by puppet_syscalls_many_vm */
static void syscalls_many(struct puppet *const *ps, struct puppet_call *const *calls,
			  const size_t *ns, const uint64_t *tables, size_t np, bool one_mm,
			  int *err)
{
	bool together = np > 1 && np <= PUPPET_MANY_MAX;
	size_t len = 0;
	for (size_t i = 0; together && i < np; i++) {
		together = many_can_run(ps, calls, ns, tables, i);
		len += sizeof(struct guard_bm_hdr) + ns[i] * sizeof(struct puppet_call);
	}
	together = together && (!ps[0]->guard || len <= GUARD_BM_MAX);
	if (!together) {
		for (size_t i = 0; i < np; i++)
			err[i] = puppet_syscalls(ps[i], calls[i], ns[i]);
		return;
	}
	/* an rseq registration changes what the seize read */
	for (size_t i = 0; i < np; i++)
		for (size_t j = 0; j < ns[i]; j++)
			if (calls[i][j].nr == SYS_rseq)
				ps[i]->have_seized_state = false;
	if (ps[0]->guard) {
		syscalls_many_guarded(ps, calls, ns, tables, np, one_mm, err);
		return;
	}
	for (size_t i = 0; i < np; i++)
		err[i] = stub_start(ps[i], calls[i], ns[i], tables[i]);
	for (size_t i = 0; i < np; i++)
		if (err[i] == 0)
			err[i] = stub_finish(ps[i], calls[i], ns[i], tables[i], NULL, NULL);
	for (size_t i = 0; i < np; i++)
		for (size_t j = 0; err[i] < 0 && j < ns[i]; j++)
			calls[i][j].ret = err[i];
}

void puppet_syscalls_many(struct puppet *const *ps, struct puppet_call *const *calls,
			  const size_t *ns, const uint64_t *tables, size_t np, int *err)
{
	syscalls_many(ps, calls, ns, tables, np, false, err);
}

/*
 * puppet_syscalls_many for tasks of one memory: every table written by one
 * process_vm_writev, and read back by one process_vm_readv, where each
 * task's were one of each (a process of 1,000 threads: 2,000 calls less).
 * With a guardian, it does so (GUARD_BATCH_MANY a[2] = 1: checkpoint's
 * probes of a process's threads). The tables are on the stack (96 KiB):
 * the guardian allocates nothing but by mmap.
 */
void puppet_syscalls_many_vm(struct puppet *const *ps, struct puppet_call *const *calls,
			     const size_t *ns, const uint64_t *tables, size_t np, int *err)
{
	if (np && ps[0]->guard) {
		syscalls_many(ps, calls, ns, tables, np, true, err);
		return;
	}
	bool together = np > 1 && np <= PUPPET_MANY_MAX;
	for (size_t i = 0; together && i < np; i++)
		together = many_can_run(ps, calls, ns, tables, i);
	uint64_t room[PUPPET_MANY_MAX * PUPPET_BATCH_MAX][8];
	uint64_t(*t)[8] = together ? room : NULL;
	struct iovec l[PUPPET_MANY_MAX] = { 0 }, rm[PUPPET_MANY_MAX] = { 0 };
	size_t at = 0, len = 0;
	for (size_t i = 0; t && i < np; i++) {
		stub_table(calls[i], ns[i], t + at);
		l[i] = (struct iovec){ t + at, ns[i] * sizeof(*t) };
		rm[i] = (struct iovec){ (void *)(uintptr_t)tables[i], ns[i] * sizeof(*t) };
		at += ns[i];
		len += ns[i] * sizeof(*t);
	}
	/* any failure before a task is started: each on its own, as before */
	if (!t || process_vm_writev(ps[0]->pid, l, np, rm, np, 0) != (ssize_t)len) {
		puppet_syscalls_many(ps, calls, ns, tables, np, err);
		return;
	}
	for (size_t i = 0; i < np; i++)
		for (size_t j = 0; j < ns[i]; j++)
			if (calls[i][j].nr == SYS_rseq)
				ps[i]->have_seized_state = false;
	for (size_t i = 0; i < np; i++)
		err[i] = stub_go(ps[i], ns[i], tables[i]);
	size_t nok = 0;
	pid_t reader = 0;
	for (size_t i = 0; i < np; i++) {
		if (err[i] == 0)
			err[i] = stub_wait(ps[i], ns[i], NULL, NULL);
		if (err[i] == 0) {
			l[nok] = l[i];
			rm[nok++] = rm[i];
			reader = reader ? reader : ps[i]->pid;
		}
	}
	len = 0;
	for (size_t k = 0; k < nok; k++)
		len += l[k].iov_len;
	/* a short read: each table on its own */
	bool each = nok && process_vm_readv(reader, l, nok, rm, nok, 0) != (ssize_t)len;
	at = 0;
	for (size_t i = 0; i < np; i++) {
		if (each && err[i] == 0)
			err[i] = stub_mem(ps[i], tables[i], t + at, ns[i] * sizeof(*t), false);
		for (size_t j = 0; j < ns[i]; j++)
			calls[i][j].ret = err[i] < 0 ? err[i] : (long)t[at + j][7];
		at += ns[i];
	}
}

int puppet_scratch_map(struct puppet *p, uint64_t addr, size_t len)
{
	if (p->guard) {
		struct guard_req req = { .op = GUARD_SCRATCH_MAP,
					 .syscall_ip = p->syscall_ip,
					 .a = { (int64_t)addr, (int64_t)len } };
		return (int)guard_call(p, &req, NULL, 0);
	}
	long r = puppet_syscall(p, SYS_mmap, addr, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | (addr ? MAP_FIXED_NOREPLACE : 0), -1, 0);
	if (r < 0 && r > -4096)
		return (int)r;
	if (addr && (uint64_t)r != addr) {
		puppet_syscall(p, SYS_munmap, r, len);
		return -EEXIST;
	}
	p->scratch = (uint64_t)r;
	p->scratch_len = len;
	return 0;
}

void puppet_scratch_map_many(struct puppet *const *ps, const size_t *lens, size_t n, int *err)
{
	bool one = n > 1 && n <= PUPPET_MANY_MAX && ps[0]->guard;
	for (size_t i = 1; one && i < n; i++)
		one = ps[i]->guard == ps[0]->guard;
	if (!one) {
		for (size_t i = 0; i < n; i++)
			err[i] = puppet_scratch_map(ps[i], 0, lens[i]);
		return;
	}
	struct guard_sm_req in[PUPPET_MANY_MAX];
	struct guard_sm_rep out[PUPPET_MANY_MAX];
	for (size_t i = 0; i < n; i++)
		in[i] = (struct guard_sm_req){
		    .pid = ps[i]->pid, .syscall_ip = ps[i]->syscall_ip, .len = lens[i]};
	struct guard_req req = {.op = GUARD_SCRATCH_MANY, .a = {(int64_t)n}};
	struct puppet dummy = {.guard = ps[0]->guard, .memfd = -1};
	long r = guard_call_in(&dummy, &req, in, n * sizeof(in[0]), out, n * sizeof(out[0]));
	for (size_t i = 0; i < n; i++) {
		struct puppet *p = ps[i];
		if (r < 0) {
			err[i] = (int)r;
			continue;
		}
		p->held = out[i].held;
		p->faulted |= out[i].faulted;
		p->scratch = out[i].scratch;
		p->scratch_len = out[i].scratch_len;
		p->stub_ip = out[i].stub_ip;
		err[i] = (int)out[i].ret;
	}
}

int puppet_scratch_unmap(struct puppet *p)
{
	if (!p->scratch)
		return 0;
	if (p->guard) {
		struct guard_req req = { .op = GUARD_SCRATCH_UNMAP, .syscall_ip = p->syscall_ip };
		return (int)guard_call(p, &req, NULL, 0);
	}
	long r = puppet_syscall(p, SYS_munmap, p->scratch, p->scratch_len + p->scratch_extra);
	p->scratch = 0;
	p->scratch_len = 0;
	p->scratch_extra = 0;
	p->stub_ip = 0;
	return r < 0 ? (int)r : 0;
}

void puppet_scratch_unmap_many(struct puppet *const *ps, size_t n, int *err)
{
	enum { ALONE, STARTED, RAN } how[PUPPET_MANY_MAX];
	long m[PUPPET_MANY_MAX];
	int ign[PUPPET_MANY_MAX];

	for (size_t i = 0; i < n && i < PUPPET_MANY_MAX; i++) {
		struct puppet *p = ps[i];
		bool done;
		how[i] = ALONE;
		if (!p->scratch || p->guard || syscall_can_start(p, SYS_munmap) < 0)
			continue;
		const long a[7] = { SYS_munmap, (long)p->scratch,
				    (long)(p->scratch_len + p->scratch_extra), 0, 0, 0, 0 };
		m[i] = syscall_start(p, a, &ign[i], &done);
		how[i] = done || m[i] < 0 ? RAN : STARTED;
	}
	for (size_t i = 0; i < n; i++) {
		struct puppet *p = ps[i];
		if (i >= PUPPET_MANY_MAX || how[i] == ALONE) {
			err[i] = puppet_scratch_unmap(p);
			continue;
		}
		long r = how[i] == STARTED ? syscall_finish(p, ign[i]) : m[i];
		p->scratch = 0;
		p->scratch_len = 0;
		p->scratch_extra = 0;
		p->stub_ip = 0;
		err[i] = r < 0 ? (int)r : 0;
	}
}

int puppet_read(struct puppet *p, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(p->memfd, (char *)buf + done, len - done, (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += n;
	}
	return 0;
}

int puppet_write(struct puppet *p, uint64_t addr, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(p->memfd, (const char *)buf + done, len - done,
				   (off_t)(addr + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += n;
	}
	return 0;
}

uint64_t puppet_scratch_put(struct puppet *p, size_t off, const void *buf, size_t len)
{
	if (!p->scratch || off + len > p->scratch_len)
		return 0;
	if (puppet_write(p, p->scratch + off, buf, len) < 0)
		return 0;
	return p->scratch + off;
}

int puppet_get_regs(struct puppet *p, struct user_regs_struct *ret)
{
	*ret = p->regs0;
	return 0;
}

int puppet_set_regs(struct puppet *p, const struct user_regs_struct *regs)
{
	p->regs0 = *regs;
	return 0;
}

int puppet_get_xstate(struct puppet *p, void *buf, size_t *len)
{
	if (p->xstate && p->held && *len >= p->xstate_len) {
		memcpy(buf, p->xstate, p->xstate_len);
		*len = p->xstate_len;
		return 0;
	}
	if (p->guard) {
		struct guard_req req = { .op = GUARD_XSTATE, .a = { (int64_t)*len } };
		long r = guard_call(p, &req, buf, *len);
		if (r < 0)
			return (int)r;
		*len = (size_t)r;
		return 0;
	}
	struct iovec iov = { .iov_base = buf, .iov_len = *len };
	if (ptrace(PTRACE_GETREGSET, p->pid, NT_X86_XSTATE, &iov) < 0)
		return -errno;
	*len = iov.iov_len;
	return 0;
}

int puppet_set_xstate(struct puppet *p, const void *buf, size_t len)
{
	if (p->guard)
		return -EOPNOTSUPP;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	if (ptrace(PTRACE_SETREGSET, p->pid, NT_X86_XSTATE, &iov) < 0)
		return -errno;
	return 0;
}

/* scratch layout for recvmsg: msghdr, iovec, one byte, cmsg buffer */
int puppet_send_fd(struct puppet *p, int local_sock, int remote_sock, int fd)
{
	int rfd;
	int r = puppet_send_fds(p, local_sock, remote_sock, &fd, 1, &rfd);
	return r < 0 ? r : rfd;
}

int puppet_install_fd(struct puppet *p, int local_sock, int remote_sock, int fd, int target_fd,
		      bool cloexec)
{
	int tmp = puppet_send_fd(p, local_sock, remote_sock, fd);
	long r;

	if (tmp < 0)
		return tmp;
	if (tmp == target_fd) {
		r = puppet_syscall(p, SYS_fcntl, tmp, F_SETFD, cloexec ? FD_CLOEXEC : 0);
		return r < 0 ? (int)r : target_fd;
	}
	r = puppet_syscall(p, SYS_dup3, tmp, target_fd, cloexec ? O_CLOEXEC : 0);
	puppet_syscall(p, SYS_close, tmp);
	return r < 0 ? (int)r : target_fd;
}

/* The receiving side of puppet_send_fds, in the scratch area */
struct fds_msg {
	struct msghdr msg;
	struct iovec iov;
	char byte;
	char pad[7];
	union {
		char buf[CMSG_SPACE(sizeof(int) * PUPPET_FDS_MAX)];
		struct cmsghdr align;
	} cmsg;
};

int puppet_send_fds(struct puppet *p, int local_sock, int remote_sock, const int *fds, size_t n,
		    int *rfds)
{
	if (n == 0)
		return 0;
	if (n > PUPPET_FDS_MAX)
		return -E2BIG;
	union {
		char buf[CMSG_SPACE(sizeof(int) * PUPPET_FDS_MAX)];
		struct cmsghdr align;
	} u;
	char byte = 'F';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = CMSG_SPACE(sizeof(int) * n),
	};
	memset(u.buf, 0, sizeof(u.buf));
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	if (sendmsg(local_sock, &msg, MSG_NOSIGNAL) != 1)
		return -errno;

	const size_t off = 1024;
	uint64_t base = p->scratch + off;
	struct fds_msg fm = { 0 };
	if (!p->scratch || off + sizeof(fm) > p->scratch_len)
		return -ENOSPC;
	fm.iov.iov_base = (void *)(uintptr_t)(base + offsetof(struct fds_msg, byte));
	fm.iov.iov_len = 1;
	fm.msg.msg_iov = (void *)(uintptr_t)(base + offsetof(struct fds_msg, iov));
	fm.msg.msg_iovlen = 1;
	fm.msg.msg_control = (void *)(uintptr_t)(base + offsetof(struct fds_msg, cmsg));
	fm.msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
	if (!puppet_scratch_put(p, off, &fm, sizeof(fm)))
		return -EFAULT;
	long r = puppet_syscall(p, SYS_recvmsg, remote_sock, base, MSG_DONTWAIT);
	if (r < 0)
		return (int)r;
	struct fds_msg got;
	int e = puppet_read(p, base, &got, sizeof(got));
	if (e < 0)
		return e;
	struct msghdr lm = got.msg;
	lm.msg_control = got.cmsg.buf;
	struct cmsghdr *rc = CMSG_FIRSTHDR(&lm);
	if (r != 1 || !rc || rc->cmsg_type != SCM_RIGHTS ||
	    rc->cmsg_len != CMSG_LEN(sizeof(int) * n)) {
		/* what did arrive is closed again, so nothing is left behind */
		size_t got_n = rc && rc->cmsg_type == SCM_RIGHTS && rc->cmsg_len > CMSG_LEN(0)
				       ? (rc->cmsg_len - CMSG_LEN(0)) / sizeof(int)
				       : 0;
		struct puppet_call cl[PUPPET_FDS_MAX];
		for (size_t i = 0; i < got_n && i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(rc) + i * sizeof(int), sizeof(int));
			cl[i] = PUPPET_CALL(SYS_close, fd);
		}
		if (got_n && puppet_syscalls(p, cl, MIN(got_n, n)) < 0)
			return -EBADMSG;
		return -EBADMSG;
	}
	memcpy(rfds, CMSG_DATA(rc), sizeof(int) * n);
	return 0;
}

/* Is fd one of the targets but the i-th? */
static bool other_target(const int *targets, size_t n, size_t i, int fd)
{
	for (size_t j = 0; j < n; j++)
		if (j != i && targets[j] == fd)
			return true;
	return false;
}

int puppet_install_fds(struct puppet *p, int local_sock, int remote_sock, const int *fds,
		       const int *targets, const bool *cloexec, size_t n, int *err)
{
	int tmp[PUPPET_FDS_MAX];
	struct puppet_call c[2 * PUPPET_FDS_MAX];
	size_t nc = 0;
	bool clash = false;
	int hi = 0;

	if (n > PUPPET_FDS_MAX || 2 * n > PUPPET_BATCH_MAX)
		return -E2BIG;
	int r = puppet_send_fds(p, local_sock, remote_sock, fds, n, tmp);
	for (size_t i = 0; i < n; i++)
		err[i] = r;
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		clash |= tmp[i] != targets[i] && other_target(targets, n, i, tmp[i]);
		hi = MAX(hi, MAX(tmp[i], targets[i]) + 1);
	}
	/* a fd received at the number another is to get: all moved above
	 * every target first (their flags are set by the dup3 after) */
	if (clash) {
		for (size_t i = 0; i < n; i++) {
			c[nc++] = PUPPET_CALL(SYS_fcntl, tmp[i], F_DUPFD_CLOEXEC, hi);
			c[nc++] = PUPPET_CALL(SYS_close, tmp[i]);
		}
		r = puppet_syscalls(p, c, nc);
		for (size_t i = 0; i < n; i++) {
			int e = r < 0 ? r : (int)c[2 * i].ret;
			if (e < 0 && err[i] == 0)
				err[i] = e;
			tmp[i] = e < 0 ? -1 : e;
		}
		nc = 0;
	}
	size_t at[PUPPET_FDS_MAX];
	for (size_t i = 0; i < n; i++) {
		at[i] = nc;
		if (tmp[i] < 0)
			continue;
		if (tmp[i] == targets[i]) {
			/* received without FD_CLOEXEC (no MSG_CMSG_CLOEXEC): a
			 * fd that keeps it so needs no call */
			if (cloexec[i])
				c[nc++] = PUPPET_CALL(SYS_fcntl, tmp[i], F_SETFD, FD_CLOEXEC);
			else
				at[i] = SIZE_MAX;
			continue;
		}
		c[nc++] = PUPPET_CALL(SYS_dup3, tmp[i], targets[i], cloexec[i] ? O_CLOEXEC : 0);
		c[nc++] = PUPPET_CALL(SYS_close, tmp[i]);
	}
	r = nc ? puppet_syscalls(p, c, nc) : 0;
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		if (err[i] == 0 && tmp[i] >= 0 && at[i] != SIZE_MAX)
			err[i] = r < 0 ? r : c[at[i]].ret < 0 ? (int)c[at[i]].ret : 0;
		if (err[i] < 0 && first == 0)
			first = err[i];
	}
	return first;
}

int puppet_getfd(struct puppet *p, int remote_fd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	if (pidfd < 0)
		return -errno;
	int fd = (int)syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0);
	int e = errno;
	close(pidfd);
	if (fd < 0)
		return -e;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

long puppet_peek_siginfo(struct puppet *p, uint64_t off, bool shared, int nr, void *buf)
{
	if (nr > 32)
		nr = 32;
	if (p->guard && shared && !off && p->peek_shared) {
		long n = p->peek_shared_n < nr ? p->peek_shared_n : nr;
		memcpy(buf, p->peek_shared, (size_t)n * 128);
		return n;
	}
	if (p->guard && (shared || off)) {
		struct guard_req req = { .op = GUARD_PEEKSIGINFO,
					 .a = { (int64_t)off, shared, nr } };
		return guard_call(p, &req, buf, (size_t)nr * 128);
	}
	if (p->guard) {
		/* the thread's queue, and the process's with it (asked next) */
		struct guard_req req = { .op = GUARD_PEEKSIGINFO, .a = { 0, 0, GUARD_PEEK_MAX } };
		_cleanup_free_ uint8_t *both = malloc(2 * GUARD_PEEK_MAX * 128);
		if (!both)
			return -ENOMEM;
		long n = guard_call(p, &req, both, 2 * GUARD_PEEK_MAX * 128);
		long sn = p->peek_shared_n;
		if (n < 0)
			return n;
		memcpy(buf, both, (size_t)(n < nr ? n : nr) * 128);
		if (sn >= 0 && (p->peek_shared = malloc(GUARD_PEEK_MAX * 128))) {
			memcpy(p->peek_shared, both + GUARD_PEEK_MAX * 128, (size_t)sn * 128);
			p->peek_shared_n = sn;
		}
		return n < nr ? n : nr;
	}
	struct {
		uint64_t off;
		uint32_t flags;
		int32_t nr;
	} arg = { off, shared ? PTRACE_PEEKSIGINFO_SHARED : 0, nr };
	long n = ptrace(PTRACE_PEEKSIGINFO, p->pid, &arg, buf);
	if (n < 0)
		return -errno;
	/* a SIGTRAP of this queue that an injection took is listed last, as
	 * if still pending (it is again once released) */
	int which = shared ? 1 : 0;
	if (n == nr || p->ntraps <= which)
		return n;
	if (n == 0 && off > 0) { /* at the end already, or past it? */
		siginfo_t prev[1];
		arg.off = off - 1;
		arg.nr = 1;
		if (ptrace(PTRACE_PEEKSIGINFO, p->pid, &arg, prev) != 1)
			return 0;
	}
	memcpy((char *)buf + n * 128, &p->trap_info[which], sizeof(siginfo_t));
	return n + 1;
}

long puppet_get_rseq(struct puppet *p, void *buf, size_t len)
{
	if (p->have_seized_state && p->held && len <= sizeof(p->rseq)) {
		memcpy(buf, p->rseq, len);
		return p->rseq_ret;
	}
	if (p->guard) {
		struct guard_req req = { .op = GUARD_RSEQ, .a = { (int64_t)len } };
		return guard_call(p, &req, buf, len);
	}
	long n = ptrace(PTRACE_GET_RSEQ_CONFIGURATION, p->pid, len, buf);
	return n < 0 ? -errno : n;
}

#ifndef PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG
#define PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG 0x4211
#endif

long puppet_sud_config(struct puppet *p, void *buf, size_t len)
{
	const size_t size = 4 * sizeof(uint64_t); /* struct ptrace_sud_config */
	if (len < size)
		return -EINVAL;
	if (p->have_seized_state && p->held) { /* read with the seize */
		if (p->sud_ret > 0)
			memcpy(buf, p->sud, size);
		return p->sud_ret;
	}
	if (p->guard) {
		struct guard_req req = { .op = GUARD_SUD };
		return guard_call(p, &req, buf, size);
	}
	if (ptrace(PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG, p->pid, size, buf) < 0)
		return -errno;
	return (long)size;
}

long puppet_seccomp_filter(struct puppet *p, int n, void *buf, size_t len)
{
	if (p->guard) {
		struct guard_req req = { .op = GUARD_SECCOMP, .a = { n, buf ? (int64_t)len : 0 } };
		return guard_call(p, &req, buf, buf ? len * 8 : 0);
	}
	/* the kernel fills as many instructions as the filter has: the
	 * caller gives room for len, which it learnt from a first call */
	long r = ptrace(PTRACE_SECCOMP_GET_FILTER, p->pid, n, buf);
	if (r < 0)
		return -errno;
	return buf && (size_t)r > len ? -EIO : r;
}

long puppet_seccomp_flags(struct puppet *p, int n)
{
	if (p->guard) {
		struct guard_req req = { .op = GUARD_SECCOMP_FLAGS, .a = { n } };
		return guard_call(p, &req, NULL, 0);
	}
	struct __ptrace_seccomp_metadata md = { .filter_off = (uint64_t)n };
	if (ptrace(PTRACE_SECCOMP_GET_METADATA, p->pid, sizeof(md), &md) < 0)
		return -errno;
	return (long)md.flags;
}
