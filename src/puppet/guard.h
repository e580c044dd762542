/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The guardian: a small process that is the ptrace tracer of a checkpoint,
 * so that the tree survives the death of ckpt.
 *
 * ckpt forks it before the first seize (puppet_guard_start) and asks it
 * for every ptrace operation on a puppet seized through it
 * (puppet_seize_guarded): seize, injected system calls, the scratch area,
 * the ptrace reads (xstate, pending signals, rseq, seccomp), release and
 * kill. It runs them with the local puppet functions on its own table of
 * puppets, so it always knows each task's registers, mask, stop state and
 * scratch area. Memory, /proc and fds are still read by ckpt directly:
 * they need the right to ptrace, not being the tracer.
 *
 * When its channel reaches end of file without puppet_guard_end() (ckpt
 * died, however), it puts every held task back as it was: the fds that
 * appeared in it since its scratch area was mapped are closed, the scratch
 * area unmapped, registers, signal mask and stop state restored, and it is
 * detached. After puppet_guard_commit() (the image is complete) it kills
 * them instead. The channel is one request, one reply; a request may carry
 * a batch of calls (run by a stub in the task, one stop for all) or the
 * same operation on many tasks, so that few round trips are made.
 */
#ifndef CKPT_PUPPET_GUARD_H
#define CKPT_PUPPET_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "puppet/puppet.h"

struct puppet_guard {
	int fd;    /* ckpt's end of the channel */
	pid_t pid; /* the guardian */
};

/* Forks the guardian; *ret is freed by puppet_guard_end(). */
int puppet_guard_start(struct puppet_guard **ret) __attribute__((warn_unused_result));
/* The image is complete and safe: if ckpt dies now, kill the tree. */
int puppet_guard_commit(struct puppet_guard *g) __attribute__((warn_unused_result));
/*
 * Until puppet_guard_done(), if ckpt dies, pid (a task ckpt holds now, so
 * that its pid is its own) is killed, through a pidfd ckpt opens and
 * passes: for a restart, whose puppets would otherwise run on once
 * released. One way: no reply is waited for.
 */
int puppet_guard_watch(struct puppet_guard *g, pid_t pid) __attribute__((warn_unused_result));
/*
 * If ckpt dies before puppet_guard_end(), the guardian sends msg (len
 * bytes, at most GUARD_UNDO_MAX) as one datagram on a copy of fd that it
 * keeps, after it has put back or killed the tasks: a request built in
 * advance (the guardian allocates nothing). GUARD_UNCOMMITTED: only if
 * ckpt dies before puppet_guard_commit() (the tasks put back), such as
 * the netlink message that removes ckpt's network lock. GUARD_COMMITTED:
 * only if it dies after (the tasks killed), such as what a migration
 * does once its tree is dead. Sent in the order given; at most
 * GUARD_UNDO_SLOTS in all.
 */
enum guard_when { GUARD_UNCOMMITTED, GUARD_COMMITTED };
int puppet_guard_on_death(struct puppet_guard *g, enum guard_when when, int fd, const void *msg,
			  size_t len) __attribute__((warn_unused_result));
/*
 * Every puppet is released or killed: the guardian is told so and exits,
 * killing nothing (not waited for; -ENOMEM if a watch could not be kept).
 */
int puppet_guard_done(struct puppet_guard *g);
/* puppet_guard_done() if not done yet, then the guardian is waited for and
 * g freed. */
int puppet_guard_end(struct puppet_guard *g);

/* The channel (used by puppet.c) */
enum guard_op {
	GUARD_SEIZE = 1,
	GUARD_SYSCALL,
	GUARD_SCRATCH_MAP,
	GUARD_SCRATCH_UNMAP,
	GUARD_RELEASE,
	GUARD_KILL,
	GUARD_XSTATE,
	GUARD_PEEKSIGINFO,
	GUARD_RSEQ,
	GUARD_SECCOMP,
	GUARD_COMMIT,
	GUARD_DONE,
	GUARD_WATCH,
	GUARD_ON_DEATH, /* the message follows the request, the fd is passed */
	/* a[0] calls (struct puppet_call) follow the request; a[1] the stub
	 * (a thread's), a[2] a bad address to run them at (ckpt-fault's test) */
	GUARD_BATCH,
	/* a[0] tasks: their pids (int32) follow; a[1] says what to do */
	GUARD_MANY,
	GUARD_SUD, /* the syscall user dispatch config */
	/* a[0] tasks, a[1] bytes: for each, a struct guard_bm_hdr and its
	 * calls (puppet_syscalls_many); the reply, for each, a struct
	 * guard_bm_rep and its calls' results (int64); a[2] 1: tasks of one
	 * memory; a[3] a task (from 1) whose batch runs at the bad address
	 * a[4] (ckpt-fault's test), or 0 */
	GUARD_BATCH_MANY,
	/* a[0] tasks: for each, a struct guard_sm_req; each one's fds noted
	 * and its scratch area mapped (GUARD_SCRATCH_MAP with a[0] = 0), one
	 * after the other; the reply, for each, a struct guard_sm_rep */
	GUARD_SCRATCH_MANY,
	GUARD_SECCOMP_FLAGS, /* a[0] the filter: its flags */
};

struct guard_sm_req {
	int32_t pid;
	uint32_t pad;
	uint64_t syscall_ip, len;
};
struct guard_sm_rep {
	int64_t ret;
	uint64_t scratch, scratch_len, stub_ip;
	uint8_t held, faulted, pad[6];
};

struct guard_bm_hdr {
	int32_t pid;
	uint32_t n;
	uint64_t table, stub_ip, syscall_ip;
};
struct guard_bm_rep {
	int64_t ret;
	uint8_t held, faulted, pad[6];
};
/* the largest GUARD_BATCH_MANY request's data */
#define GUARD_BM_MAX (PUPPET_MANY_MAX * (sizeof(struct guard_bm_hdr) + 32 * sizeof(struct puppet_call)))

/*
 * GUARD_MANY_START: each task seized and interrupted, not waited for (the
 * reply: each one's ret); a GUARD_MANY_SEIZE with a[2] = 1 then waits for
 * the stops of tasks so started. A task started and never waited for is
 * detached by the kernel when the guardian exits: nothing of it changed.
 * GUARD_MANY_KILL_START: each held task (sig not 1) killed, not waited
 * for; it stays held until a GUARD_MANY_KILL (sig 1: only waited for; a[2]
 * = 1: processes only) reaps it, or the guardian's end does.
 */
enum guard_many {
	GUARD_MANY_SEIZE,
	GUARD_MANY_RELEASE,
	GUARD_MANY_KILL,
	GUARD_MANY_START,
	GUARD_MANY_KILL_START
};

/* GUARD_MANY: for each task, this (then, for a seize, its xstate) */
struct guard_many_rep {
	int64_t ret;
	struct user_regs_struct regs0;
	uint64_t sigmask0;
	int64_t rseq_ret;
	uint8_t rseq[32];
	int64_t sud_ret;
	uint8_t sud[32];
	uint32_t xstate_len; /* bytes of xstate after this, rounded up to 8 */
	uint8_t held, group_stopped;
};
struct guard_many_req {
	int32_t pid, sig;
};
#define GUARD_UNDO_MAX 512
#define GUARD_UNDO_SLOTS 48 /* CKPT_NETLOCK_NS network namespaces' locks and more */
/* A task seized for a checkpoint that takes no stop within this is not
 * held (the seize fails with -ETIMEDOUT): a vfork parent, a task in
 * uninterruptible sleep */
#define GUARD_STOP_TIMEOUT_MS 10000

struct guard_req {
	uint32_t op;
	int32_t pid;
	uint64_t syscall_ip;
	int64_t a[7];
};

struct guard_rep {
	int64_t ret;
	struct user_regs_struct regs0;
	uint64_t sigmask0, event_msg, scratch, scratch_len, stub_ip;
	uint8_t held, group_stopped, faulted;
	uint32_t len; /* of the data that follows */
	/* GUARD_SEIZE: the rseq configuration (PTRACE_GET_RSEQ_CONFIGURATION's
	 * result and data), the syscall user dispatch config, and the xstate,
	 * which is the data */
	int64_t rseq_ret;
	uint8_t rseq[32];
	/* and the syscall user dispatch config */
	int64_t sud_ret;
	uint8_t sud[32];
	/* GUARD_PEEKSIGINFO of the thread's queue from 0: the process's queue
	 * too (this many, after GUARD_PEEK_MAX of the thread's), which ckpt
	 * asks next */
	int64_t shared_n;
};
#define GUARD_PEEK_MAX 32

#define GUARD_DATA_MAX (64 * 1024)
#define GUARD_XSTATE_MAX (16 * 1024) /* read with the seize when it fits */

/*
 * Asks p's guardian for op on p: the state it returns (held, stop, ...) is
 * copied into p, the data (up to outlen bytes) into out; its result.
 */
long guard_call(struct puppet *p, struct guard_req *req, void *out, size_t outlen);
/* The same, with inlen bytes of in sent after the request. */
long guard_call_in(struct puppet *p, struct guard_req *req, const void *in, size_t inlen,
		   void *out, size_t outlen);
/*
 * guard_call_in in two halves, so that a second request can be sent
 * before the reply to the first is read (the guardian serves them in
 * order and never waits for ckpt to read a reply; a reply is read by
 * guard_recv with the request it answers). Two at most in flight: the
 * socket queues a few messages only.
 */
long guard_send(struct puppet *p, struct guard_req *req, const void *in, size_t inlen);
long guard_recv(struct puppet *p, const struct guard_req *req, void *out, size_t outlen);

#endif
