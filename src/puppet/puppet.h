/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The puppet engine: drive a stopped task from outside, like a debugger.
 *
 * A struct puppet is one ptrace-stopped task. While it is held:
 * - regs0 are the registers it had when it stopped; every injected system
 *   call starts from them and puppet_release() puts them back exactly, so
 *   a task stopped inside a syscall (rax = -ERESTART..., orig_rax = nr)
 *   restarts it as the kernel would after a signal.
 * - Injection is: set registers (rax = nr, args, rip = a `syscall`
 *   instruction the task already has mapped, orig_rax = -1 so the kernel
 *   does no restart fix-up), single-step over the instruction, read rax.
 *   Single-stepping, not PTRACE_SYSCALL: the latter leaves the task in a
 *   syscall-exit stop, and a task released from there returns to user
 *   space with no restart fix-up (-ERESTART_RESTARTBLOCK leaked into a
 *   program interrupted in nanosleep). Except for a task that ignores
 *   SIGTRAP (trap_ignored): there PTRACE_SYSCALL, and the release goes
 *   through a PTRACE_INTERRUPT stop in the signal path first.
 * - All signals but SIGKILL and SIGSTOP are blocked with PTRACE_SETSIGMASK
 *   for the time it is held, so no handler runs between injections; the
 *   original mask (sigmask0) is put back on release.
 * - scratch, when mapped, is a private anonymous area in the task for
 *   syscall arguments; it is the caller's job to keep it out of images.
 *
 * This layer knows nothing of kinds or images and never logs: it returns
 * -errno (an injected syscall returns the remote result, -errno included).
 */
#ifndef CKPT_PUPPET_H
#define CKPT_PUPPET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <signal.h>
#include <sys/user.h>

#include "util/fault.h"

struct puppet_guard;

struct puppet {
	pid_t pid;              /* tid of the task */
	int memfd;              /* /proc/pid/mem, read-write */
	struct user_regs_struct regs0;
	uint64_t sigmask0;      /* blocked signals when seized */
	/* signals its process has no handler for (default or ignored), as the
	 * signals kind read or restored them; 0 until then: every signal may
	 * have one (see puppet_asleep_add) */
	uint64_t no_handler;
	uint8_t group_stopped;  /* the signal of the job-control stop it was in when seized, or 0 */
	bool held;              /* attached and stopped */
	bool bare;              /* puppet_spawn()'s, exec'd rather than a fork of ckpt */
	bool faulted;		/* an injected instruction faulted (a bug): its release fails */
	uint64_t fault_ip;	/* ckpt-fault's test: the next injection runs at this bad address */
	uint64_t syscall_ip;    /* address of a `syscall` instruction */
	uint64_t scratch;       /* remote scratch area, 0 if none */
	size_t scratch_len;
	/* with puppet_scratch_map_stub(): mapped after the scratch area, a
	 * table for batches and an executable page with the batch stub at
	 * stub_ip (0: none, one injection per call); scratch_extra bytes */
	uint64_t stub_ip;
	size_t scratch_extra;
	unsigned long event_msg; /* of the last fork/clone event in an injection */
	/* the program's own pending SIGTRAPs, taken by the stops of an
	 * injection (the thread's first, then the process's) and given back,
	 * pending with the same siginfo, on release */
	int ntraps;
	siginfo_t trap_info[2];
	/* SIGTRAP is ignored by the task (SIG_IGN): the kernel resets an
	 * ignored signal it forces to SIG_DFL, so injections do not
	 * single-step (nor run the stub, which ends on int3) but stop at the
	 * syscall's entry and exit (PTRACE_SYSCALL); in_sysstop: the task is
	 * in such a stop, which puppet_release() leaves for a signal-path stop
	 * first, so a syscall the task was in is restarted as it should be */
	bool trap_ignored;
	bool in_sysstop;
	/* the wait for a seize's stop gives up after this (0: waits for
	 * ever); the guardian's, whose SIGALRM interrupts waitpid */
	unsigned stop_timeout_ms;
	/* what taking the task's first stop may skip (PUPPET_TAKE_*): opening
	 * its memory (the guardian's puppets, whose memory ckpt reads; memfd
	 * given), reading its SIGTRAP disposition (trap_ignored given),
	 * reading its mask (sigmask0 given) */
	uint8_t take_skip;
	/* the guardian that is the tracer (src/puppet/guard.h), NULL: ptrace
	 * from this process */
	struct puppet_guard *guard;
	/* read by the guardian with the seize (no request of their own): the
	 * xstate (malloc'd, freed by puppet_forget) and the rseq
	 * configuration, valid while have_seized_state */
	bool have_seized_state;
	void *xstate;
	size_t xstate_len;
	long rseq_ret;
	uint8_t rseq[32];
	/* and the syscall user dispatch config (puppet_sud_config) */
	long sud_ret;
	uint8_t sud[32];
	/* the process's pending signals (peek_shared_n siginfos), read by the
	 * guardian with the thread's (puppet_peek_siginfo), until the next
	 * request */
	void *peek_shared;
	long peek_shared_n;
};

#define PUPPET_TAKE_NO_MEM 1
#define PUPPET_TAKE_NO_TRAP 2
#define PUPPET_TAKE_NO_MASK 4
/* its blocked mask is the held one already (a clone of a held puppet) */
#define PUPPET_TAKE_MASK_HELD 8

#define PUPPET_SCRATCH_SIZE (64 * 1024)

/* Seize and stop a task (any tracee: a process or thread we may ptrace). */
int puppet_seize(struct puppet *p, pid_t pid) __attribute__((warn_unused_result));
/*
 * The same, with guard (if not NULL) as the tracer: every later ptrace
 * operation on p is asked of it; memory is still read and written here.
 */
int puppet_seize_guarded(struct puppet *p, pid_t pid, struct puppet_guard *guard)
	__attribute__((warn_unused_result));

/*
 * Create a bare puppet: a child of the caller with pid `pid` (clone3
 * set_tid; 0 for any pid), in new namespaces if ns_flags has CLONE_NEW*
 * flags (with CLONE_NEWPID it is the new namespace's pid 1), holding only
 * ctl_fd, moved to fd number ctl_target; it dies with the caller
 * (PR_SET_PDEATHSIG) until told otherwise. Returns seized, like
 * puppet_seize(). Where an exec changes none of the caller's credentials
 * it runs a program of a few bytes (bare.S; p->bare) rather than a copy
 * of the caller; else, or if the exec is refused, it is a fork.
 */
int puppet_spawn(struct puppet *p, pid_t pid, uint64_t ns_flags, int ctl_fd, int ctl_target)
	__attribute__((warn_unused_result));

/*
 * A puppet that is pid 1 of a new pid namespace and, once released, its
 * init: it reads the pid (inside) of the task to wait for from ctl_target,
 * reaps everything, and exits with that task's status when nothing is left.
 * ns_flags: more namespaces for it (CLONE_NEWUSER), or 0.
 */
int puppet_spawn_init(struct puppet *p, uint64_t ns_flags, int ctl_fd, int ctl_target)
	__attribute__((warn_unused_result));

/*
 * Makes the held puppet `parent` fork: an injected clone3 with flags
 * (CLONE_FILES, CLONE_FS, CLONE_PARENT...), exit_signal and the chosen pid
 * (0: any). The child is attached from its first instant (PTRACE_O_TRACE*
 * on the parent) and comes back held in *child, sharing the parent's
 * syscall_ip and scratch area (its copy, at the same address).
 */
int puppet_clone(struct puppet *parent, struct puppet *child, pid_t pid, uint64_t flags,
		 int exit_signal) __attribute__((warn_unused_result));

/*
 * The same for n children (n <= PUPPET_CLONE_MAX): one stop of the parent
 * for the batch, by its stub, and one for every clone unless the
 * children's pids are ckpt's too (then clone3 with CLONE_PTRACE attaches
 * them); without a stub, a puppet_clone each. err[i] is children[i]'s
 * result, as puppet_clone.
 */
#define PUPPET_CLONE_MAX 64
void puppet_clone_many(struct puppet *parent, struct puppet *const *children, const pid_t *pids,
		       size_t n, uint64_t flags, int exit_signal, int *err);

/*
 * Lets the held puppet die on its own, detached, so that its parent sees
 * the wait status `status` (an exit code, or a signal, without the core
 * dump bit); returns once it is a zombie (or gone).
 */
int puppet_exit(struct puppet *p, int status);

/*
 * Many tasks at once (threads of a process): with a guardian, one request
 * for up to PUPPET_MANY_MAX of them, and every task is interrupted before
 * any is waited for, so their stops overlap. err[i] is the result for ps[i]
 * (as puppet_seize_guarded, puppet_release). puppet_seize_many's tasks are
 * processes, or with one_process threads of one process: these share their
 * memory (one open of /proc/PID/mem) and signal dispositions (one read of
 * SigIgn). puppet_kill_many kills ps[i] unless group_killed is given and
 * group_killed[i] is set: then a task before it in ps is of its thread
 * group (its process), whose kill killed it too, and it is only waited
 * for (1,000 threads were 1,000 kills). More processes (none
 * group_killed) than one request takes are all killed before any death
 * is waited for.
 */
#define PUPPET_MANY_MAX 16
void puppet_seize_many(struct puppet *const *ps, const pid_t *pids, size_t n,
		       struct puppet_guard *guard, bool one_process, int *err);
void puppet_release_many(struct puppet *const *ps, const int *sigs, size_t n, int *err);
void puppet_kill_many(struct puppet *const *ps, const bool *group_killed, size_t n);
/* The first half of puppet_seize (PTRACE_SEIZE and PTRACE_INTERRUPT) and
 * the second (wait for the stop and take the task); for the guardian. */
int puppet_seize_start(struct puppet *p, pid_t pid) __attribute__((warn_unused_result));
int puppet_seize_finish(struct puppet *p) __attribute__((warn_unused_result));

/* Restore regs0 and sigmask0, then detach; sig is delivered on resume. */
int puppet_release(struct puppet *p, int sig);
/*
 * Was the task held in a call the kernel restarts when it is let go (regs0:
 * orig_rax the call, rax -ERESTARTSYS, -ERESTARTNOINTR or -ERESTARTNOHAND)?
 */
bool puppet_in_restartable_call(const struct puppet *p);

/* The signals task pid ignores (ret[0], SigIgn of its status) and catches
 * (ret[1], SigCgt): the others have the default action. */
int puppet_sig_handled(pid_t pid, uint64_t ret[2]) __attribute__((warn_unused_result));
/*
 * Such a task is back in its call only once it has run after the release,
 * and a signal sent to it before that can be lost: the kernel has moved it
 * back to its `syscall` instruction, so a handler that runs first finds no
 * call to interrupt (no EINTR) and the call is entered again after it (a
 * `while (!go) pause()` sleeps with go set); and a signal sent to its
 * process goes to another thread (the detach leaves the task marked as
 * having a signal to see to until it runs). On a loaded machine a task may
 * wait long for a CPU. So a checkpoint or restart notes each task it lets
 * go with no signal (puppet_asleep_add: kept if it was in such a call and
 * some signal its process has a handler for is not blocked in it) and
 * waits until each is asleep in a call again (its /proc/TID/syscall names
 * one, and its PC is not the `syscall` instruction it was let go at, which
 * it has yet to run: its call, or another it went on to; not "running",
 * not a page fault),
 * up to max_ms in all, so that a task whose call ended and which computes
 * is not waited for longer. puppet_asleep_wait returns how many were not,
 * and frees the set.
 */
struct puppet_asleep_task {
	pid_t tid;
	uint64_t call_ip; /* its `syscall` instruction */
};
struct puppet_asleep {
	struct puppet_asleep_task *tasks;
	size_t n, cap;
};
#define PUPPET_ASLEEP_MS 200
void puppet_asleep_add(struct puppet_asleep *w, const struct puppet *p);
size_t puppet_asleep_wait(struct puppet_asleep *w, int max_ms);
/* SIGKILL the task and reap or wait for it as far as we can. */
void puppet_kill(struct puppet *p);
/* Close what the struct holds without touching the task. */
void puppet_forget(struct puppet *p);

/* Finds a `syscall` instruction in the task's [vdso] (or, without one, in
 * another executable mapping outside the scratch area). */
int puppet_find_syscall(struct puppet *p) __attribute__((warn_unused_result));
/* The same among vmas, the task's maps as read already (not read again). */
struct proc_vmas;
int puppet_find_syscall_in(struct puppet *p, const struct proc_vmas *vmas)
	__attribute__((warn_unused_result));
/* Injected calls run from the syscall instruction of the scratch area's
 * stub (while the puppet has no vDSO); -ENOEXEC without a stub. */
int puppet_syscall_from_stub(struct puppet *p) __attribute__((warn_unused_result));

long puppet_syscall6(struct puppet *p, long nr, long a1, long a2, long a3, long a4, long a5,
		     long a6);
#define PUPPET_ARGS6_(p, nr, a1, a2, a3, a4, a5, a6, ...) \
	puppet_syscall6(p, nr, (long)(a1), (long)(a2), (long)(a3), (long)(a4), (long)(a5), (long)(a6))
/* puppet_syscall(p, SYS_x, args...): up to six arguments, the rest are 0 */
#define puppet_syscall(p, ...) PUPPET_ARGS6_(p, __VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)

/*
 * A batch of injected calls, run one after another by one request (to the
 * guardian: one round trip for all of them). ret is each call's result;
 * calls not run get -ECANCELED.
 */
struct puppet_call {
	long nr;
	long a[6];
	int arg_prev; /* 1-6: that argument is the previous call's result */
	bool stop;    /* if this call fails, the rest are not run */
	long ret;
};
#define PUPPET_BATCH_MAX 96
/* Runs calls[0..n) (n <= PUPPET_BATCH_MAX); 0, or -errno if the batch could
 * not be run at all (every ret is then that error). */
int puppet_syscalls(struct puppet *p, struct puppet_call *calls, size_t n)
	__attribute__((warn_unused_result));
/*
 * Batches for np <= PUPPET_MANY_MAX tasks (threads of one process, say) at
 * once: every task is started on its batch before any is waited for, so
 * that they run side by side (with a guardian, all of them one request).
 * Batch i (ns[i] <= PUPPET_BATCH_MAX calls) runs in ps[i] by the stub with
 * its table at tables[i] (ns[i] * 64 writable bytes of the task, apart for
 * each task sharing memory with another of the list). A task without a
 * stub, or whose batch the stub cannot run, runs its batch alone by
 * puppet_syscalls. err[i] is as puppet_syscalls' result for ps[i].
 */
void puppet_syscalls_many(struct puppet *const *ps, struct puppet_call *const *calls,
			  const size_t *ns, const uint64_t *tables, size_t np, int *err);
/* The same for tasks that share one memory (threads of one process): the
 * tables written and read back by one call each. */
void puppet_syscalls_many_vm(struct puppet *const *ps, struct puppet_call *const *calls,
			     const size_t *ns, const uint64_t *tables, size_t np, int *err);
#define PUPPET_STUB_ENTRY 64 /* bytes of a stub table for each call */
/* A call for a batch: PUPPET_CALL(SYS_x, args...), up to six arguments */
#define PUPPET_CALL6_(nr_, a1, a2, a3, a4, a5, a6, ...)                                        \
	((struct puppet_call){ .nr = (nr_),                                                    \
			       .a = { (long)(a1), (long)(a2), (long)(a3), (long)(a4), (long)(a5), \
				      (long)(a6) } })
#define PUPPET_CALL(...) PUPPET_CALL6_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)

/* Maps a scratch area (at addr if not 0, which must then be free). */
int puppet_scratch_map(struct puppet *p, uint64_t addr, size_t len)
	__attribute__((warn_unused_result));
/* puppet_scratch_map(ps[i], 0, lens[i]) for each of n (up to
 * PUPPET_MANY_MAX) tasks, err[i] its result: with a guardian, one request
 * for all of them */
void puppet_scratch_map_many(struct puppet *const *ps, const size_t *lens, size_t n, int *err);
int puppet_scratch_unmap(struct puppet *p);
/* The scratch areas of n puppets unmapped side by side: each one's munmap
 * started (a step) before any is waited for; err[i] as puppet_scratch_unmap */
void puppet_scratch_unmap_many(struct puppet *const *ps, size_t n, int *err);
/*
 * A scratch area (anywhere) followed by a batch table and a page with a
 * stub that runs a batch's calls one after another and traps once: a batch
 * then costs one stop of the task instead of one per call. Without the
 * page (refused, e.g. memory-deny-write-execute), a plain scratch area.
 */
int puppet_scratch_map_stub(struct puppet *p, size_t len) __attribute__((warn_unused_result));
/* The same at addr (0: anywhere); len is the scratch area's part. */
int puppet_scratch_map_stub_at(struct puppet *p, uint64_t addr, size_t len)
	__attribute__((warn_unused_result));
/* puppet_scratch_map_stub of n tasks (lens: each one's size), with no
 * guardian (the guardian's own), their injected mmaps overlapping; each
 * one's start(arg, i) first, if not NULL (< 0: that task is left alone);
 * err[i]: task i's result */
void puppet_scratch_map_stubs(struct puppet *const *ps, const size_t *lens, size_t n, int *err,
			      int (*start)(void *arg, size_t i), void *arg);

/* Memory of the task: any protection, through /proc/pid/mem. */
int puppet_read(struct puppet *p, uint64_t addr, void *buf, size_t len)
	__attribute__((warn_unused_result));
int puppet_write(struct puppet *p, uint64_t addr, const void *buf, size_t len)
	__attribute__((warn_unused_result));
/* Copies buf to the scratch area at offset off; returns the remote address. */
uint64_t puppet_scratch_put(struct puppet *p, size_t off, const void *buf, size_t len);

int puppet_get_regs(struct puppet *p, struct user_regs_struct *ret)
	__attribute__((warn_unused_result));
int puppet_set_regs(struct puppet *p, const struct user_regs_struct *regs)
	__attribute__((warn_unused_result));
/* xstate (NT_X86_XSTATE): *len is the buffer size in, the state size out. */
int puppet_get_xstate(struct puppet *p, void *buf, size_t *len) __attribute__((warn_unused_result));
int puppet_set_xstate(struct puppet *p, const void *buf, size_t len)
	__attribute__((warn_unused_result));

/*
 * Sends local fd over local_sock (a unix socket whose peer the task holds
 * as remote_sock); the task receives it by an injected recvmsg. Returns the
 * fd number it got in the task.
 */
int puppet_send_fd(struct puppet *p, int local_sock, int remote_sock, int fd)
	__attribute__((warn_unused_result));
/*
 * The same for n fds (n <= PUPPET_FDS_MAX) at once: one sendmsg, one
 * injected recvmsg. rfds gets the numbers the task got, in order. 0 or
 * -errno (then the task holds none of them).
 */
#define PUPPET_FDS_MAX 32
int puppet_send_fds(struct puppet *p, int local_sock, int remote_sock, const int *fds, size_t n,
		    int *rfds) __attribute__((warn_unused_result));
/*
 * Puts fds[i] into the task as targets[i] (O_CLOEXEC if cloexec[i]), for
 * n <= PUPPET_FDS_MAX fds: one puppet_send_fds and one batch of dup3s and
 * closes (two batches when a received fd lands on another's target).
 * err[i] is fds[i]'s result (0 or -errno); returns the first error, or 0.
 * For any fd kind (files, sockets); targets must be distinct.
 */
int puppet_install_fds(struct puppet *p, int local_sock, int remote_sock, const int *fds,
		       const int *targets, const bool *cloexec, size_t n, int *err)
	__attribute__((warn_unused_result));
/* A copy of the task's remote_fd, in ckpt (pidfd_getfd). */
int puppet_getfd(struct puppet *p, int remote_fd) __attribute__((warn_unused_result));
/* Puts fd into the task as target_fd (O_CLOEXEC if cloexec). */
int puppet_install_fd(struct puppet *p, int local_sock, int remote_sock, int fd, int target_fd,
		      bool cloexec) __attribute__((warn_unused_result));

/* PTRACE_PEEKSIGINFO: up to nr siginfos (128 bytes each) from off of the
 * thread's queue, or the process's if shared; the count read */
long puppet_peek_siginfo(struct puppet *p, uint64_t off, bool shared, int nr, void *buf)
	__attribute__((warn_unused_result));
/* PTRACE_GET_RSEQ_CONFIGURATION into buf (len bytes); the size the kernel
 * gave, 0 if none */
long puppet_get_rseq(struct puppet *p, void *buf, size_t len) __attribute__((warn_unused_result));
/* PTRACE_SECCOMP_GET_FILTER: filter n's length in instructions; with buf
 * (room for len instructions), the instructions too */
/* The syscall user dispatch config (struct ptrace_sud_config: mode first,
 * 32 bytes) into buf: its size, or -errno. */
long puppet_sud_config(struct puppet *p, void *buf, size_t len) __attribute__((warn_unused_result));
long puppet_seccomp_filter(struct puppet *p, int n, void *buf, size_t len)
	__attribute__((warn_unused_result));
/* PTRACE_SECCOMP_GET_METADATA: filter n's flags (SECCOMP_FILTER_FLAG_LOG
 * is the one the kernel tells), or -errno */
long puppet_seccomp_flags(struct puppet *p, int n) __attribute__((warn_unused_result));

#endif
