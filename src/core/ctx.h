/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The checkpoint and restart contexts: everything one operation carries
 * (options, log, image, tasks, object hash). No state lives anywhere else.
 *
 * A struct task (checkpoint) is one process of the tree being saved: its
 * puppet is held from collect until the end; the /proc snapshot in it was
 * read after the task stopped and before ckpt mapped anything in it.
 * A struct rst_task (restart) is one process to be built: its kstate holds
 * what each kind loaded from the image, its puppet exists from creation
 * until release.
 */
#ifndef CKPT_CTX_H
#define CKPT_CTX_H

#include <protobuf-c/protobuf-c.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#include "ckpt.h"
#include "core.pb-c.h"
#include "core/netlock.h"
#include "core/objhash.h"
#include "core/progress.h"
#include "img/img.h"
#include "img/pages.h"
#include "img/seal.h"
#include "kinds/kinds.h"
#include "puppet/guard.h"
#include "puppet/puppet.h"
#include "util/arena.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/rtprio.h"

struct netlock; /* net/lock.h */
struct fdobj_index; /* kinds/fdobj.h */

struct task {
	pid_t pid;              /* the tid, for a thread */
	struct task *leader;    /* a thread: its process; NULL for a process */
	struct task *threads;   /* a process: its other threads */
	size_t nthreads;
	bool zombie;            /* not seized: only its tree entry is saved */
	pid_t files_with;       /* shares its fd table (CLONE_FILES) with this parent */
	pid_t fs_with;          /* shares cwd/root/umask (CLONE_FS) with this parent */
	/* the ids the image holds: inside the container's pid namespace (the
	 * same as pid, ppid, pgrp, session for a subtree) */
	pid_t vpid, vppid, vpgid, vsid;
	struct puppet pup;
	struct proc_status status;
	char *status_text;      /* what status was parsed from, until its kind task takes it */
	struct proc_stat stat;
	struct proc_vmas vmas;  /* smaps, before any scratch mapping */
	void *kstate[KIND_MAX];
	struct probe_batch *probes; /* from step "probe" until its dump (probe.c) */
	/* the same number for the tasks that share their memory, fd table, fs
	 * (kcmp KCMP_VM, KCMP_FILES, KCMP_FS), from step "seize"; -1 unknown */
	int share_class[3];
	/* step "collect": ckpt's part done already, with an earlier process's
	 * (checkpoint.c, collect_ahead), and its result */
	bool ahead;
	int ahead_r;
	/* /proc/PID/numa_maps, read ahead with its status (collect_ahead)
	 * until task's collect takes it; NULL: task asks each vma's policy
	 * in its probes (a large process, whose numa_maps walks all its
	 * pages), or reads it */
	char *numa_text;
};

/*
 * A task's probes (probe.c): the injected calls its kinds ask at step
 * "probe", run as one batch by ckpt at the start of step "collect", where
 * the kinds' collect ops read their results.
 */
struct probe_batch {
	struct puppet_call *c;
	size_t n, cap;
	size_t used; /* bytes of the scratch area given to the calls' outputs */
	void *out;   /* after the run: those bytes, NULL if they could not be read */
	bool ran;
	/* where its areas start in the scratch area (a thread's probes, run
	 * side by side with its siblings', each in a slice of the leader's
	 * scratch area: probe.c), and the end of that slice */
	size_t base, limit;
	/* a thread's, run with its siblings': the area task_probe_zero asked
	 * cleared, cleared with theirs by one write before they run */
	bool with_siblings;
	uint64_t zero_at;
	size_t zero_len;
};

/* Step "probe": adds a call; its index for task_probe_ret, or -ENOMEM. */
int task_probe_call(struct task *t, struct puppet_call c) __attribute__((warn_unused_result));
/* Step "probe": len bytes of the scratch area for a call's output; their
 * address in the task, 0 if there is no room. */
uint64_t task_probe_area(struct task *t, size_t len);
/* Step "probe": an area of task_probe_area cleared before the calls run (a
 * call that writes less than its field leaves the rest as it was): at
 * once, or for a thread whose probes run with its siblings' (probe.c)
 * with theirs, by one write for all (a write each was one system call a
 * thread more). 0 or -errno. */
int task_probe_zero(struct task *t, uint64_t area, size_t len)
	__attribute__((warn_unused_result));
/* Step "collect": call i's result (i < 0, the error task_probe_call gave;
 * -ENOENT if never run). */
long task_probe_ret(const struct task *t, int i);
/* Step "collect": what the calls wrote at addr (an area of task_probe_area),
 * len bytes; NULL if it could not be read. */
const void *task_probe_out(const struct task *t, uint64_t addr, size_t len);
void task_probes_free(struct task *t);

/*
 * What the caller of a checkpoint could do at restart, on this machine
 * (precheck.c): its ids, groups and capabilities, and whether a restart of
 * this image by it goes through a user namespace of its own, where only its
 * own uid and gid are mapped (a subtree with --pidns, or a container with a
 * user namespace, restarted without privilege).
 */
struct restart_caller {
	uint32_t uid[3], gid[3]; /* real, effective, saved */
	uint32_t ngroups;
	uint32_t groups[256];
	uint64_t cap_eff, cap_prm, cap_bnd;
	uint32_t securebits;
	bool userns;
	uint32_t map_uid, map_gid; /* userns: the one uid and gid mapped there */
};

/* Is cap in the caller's effective set? */
static inline bool caller_can(const struct restart_caller *c, int cap)
{
	return c->cap_eff & (1ull << cap);
}

/* Is gid the caller's effective group or one of its groups? */
static inline bool caller_in_group(const struct restart_caller *c, uint32_t gid)
{
	for (uint32_t i = 0; i < c->ngroups && i < 256; i++)
		if (c->groups[i] == gid)
			return true;
	return c->gid[1] == gid;
}

struct ckpt_ctx {
	unsigned long flags;
	const struct ckpt_opts *opts; /* the caller's */
	pid_t pid;              /* the root asked for */
	int image_fd;           /* where the image goes */
	int failed;             /* the first failure of the sequence, 0 so far */
	/* set while check_restore runs; a kind may narrow what the restart
	 * will be (ns.c: a user namespace of the caller's own) */
	struct restart_caller *caller;
	bool container;         /* the root is a pid namespace's init: ids inside it */
	struct ckpt_log log;
	struct img_writer w;
	struct objhash objs;
	struct task *tasks;
	size_t ntasks;
	void *buf;              /* page-copy buffer, bufsize bytes */
	void *buf2;             /* the second one, right after buf (pages_writer_async);
				 * NULL when ckpt may run on one CPU only */
	size_t bufsize;
	const uint8_t *key;     /* the caller's, IMG_KEY_BYTES: seal the image; or NULL */
	struct img_seal *seal;  /* what the writer writes through, with a key */
	struct pages_z *pz;     /* CKPT_COMPRESS: the page store's compressor */
	struct puppet_guard *guard; /* the tracer of the tasks (guard.h) */
	struct netlock *netlock; /* the tree's TCP connections locked (core/netlock.h) */
	struct netlock *netlock_hold; /* new clients held out until the seize (netdrain.c) */
	struct netlock *netlock_host; /* the same in ckpt's namespace, when the tree
				       * has its own and CKPT_KILL (netlock.c) */
	/* the same in each other network namespace of the tree's tasks that
	 * has connections or ports (netlock.c), at most CKPT_NETLOCK_NS */
	struct netlock *netlock_ns[CKPT_NETLOCK_NS];
	size_t n_netlock_ns;
	/* the tree's TCP sockets in the root's namespace, when it is ckpt's:
	 * what the lock's sock_diag dump said of them, by inode (netlock.h) */
	struct tcp_seen *tcp_seen;
	size_t n_tcp_seen;
	/* the connections of other namespaces than the root's whose peer is
	 * outside the tree: where the lock found it, by inode (netlock.h) */
	struct netns_peer *netns_peers;
	size_t n_netns_peers;
	uint64_t mem_bytes;     /* page contents written (mm.c) */
	struct progress progress; /* the image's bytes written (progress.h) */
	uint8_t image_id[16];   /* the header's, random (mm-dirty.c names it) */
	struct mm_pre *mm_pre;  /* step "pre-copy"'s copies (mm-dirty.c) */
	/* fdobj.c: the open files of each key, sorted by kcmp (fdobj_find) */
	struct fdobj_index *fdobj_index;
	/* can ckpt's puppets run with their seccomp filters suspended
	 * (checkpoint.c)? 1 yes, -1 no, 0 not asked yet */
	int8_t seccomp_suspend;
	/* landlock.c: the reference processes its probes compare with */
	struct landlock_refs *landlock_refs;
	/* keyring.c: ckpt's own session keyring's serial, 0 until read */
	int32_t session_keyring;
	/* lsm.c: does a module label tasks? -1 no (ckpt's own label cannot be
	 * read: EINVAL), 1 yes or cannot tell, 0 not asked yet */
	int8_t lsm_labels;
	/* cgroup.c: what it reads of ckpt itself, once a checkpoint (freed at its end) */
	struct cg_self *cg_self;
	/* locks.c: /proc/locks read on a thread of its own during collect */
	struct locks_ahead *locks_ahead;
	/* the thread faulting buf in while the tree is seized (checkpoint.c) */
	pthread_t buf_filler;
	bool buf_filling;
};

struct rst_task {
	pid_t pid, ppid, pgid, sid;
	struct rst_task *leader; /* a thread: its process; NULL for a process */
	struct rst_task *threads; /* a process: its other threads */
	size_t nthreads;
	int exit_signal;
	bool zombie;            /* created, then made to exit with exit_code */
	bool ghost;             /* a placeholder that holds a pid for a group or
				 * session whose leader is gone; exits, reaped */
	int exit_code;          /* a zombie's wait status */
	pid_t files_with, fs_with;
	int parent;             /* index in rst_ctx.tasks, -1 for the root */
	int creator;            /* the task that forks it: the parent, or (with
				 * CLONE_PARENT) one in the session it needs */
	struct puppet pup;
	bool created;
	bool begun;             /* its records have started */
	bool mm_done;           /* memory restored (early: before forking children
				 * that keep memory from the fork) */
	bool ctl_closed;        /* the control socket closed in it (its last
				 * batch at "task state"; else at "clean") */
	bool stopped;           /* released stopped (a job-control stop; set at load) */
	int stop_sig;           /* by this signal (SIGSTOP, or the SIGTSTP... it had) */
	void *kstate[KIND_MAX];
};

struct pid_index {
	pid_t pid;
	struct rst_task *t;
};

struct rst_ctx {
	unsigned long flags;
	const uint8_t *key;     /* the caller's, IMG_KEY_BYTES: only a sealed image; or NULL */
	struct ckpt_log log;
	struct img_reader r;
	struct objhash objs;
	struct rst_task *tasks;  /* parents first; ghosts after the image's tasks */
	size_t ntasks;
	size_t nimage;          /* tasks of the image; the rest are ghosts */
	struct pid_index *by_pid; /* the image's processes and threads, by pid */
	int image_fd;           /* what load reads */
	int max_fd;             /* the highest fd of any task (set at prepare), or -1 */
	/* the CLONE_NEW* flags the root is spawned with, set by a kind at load
	 * (ns.c); 0: a subtree, its pids chosen in ckpt's pid namespace */
	uint32_t root_clone;
	bool pidns;             /* RESTART_PIDNS: a subtree under init, below */
	struct puppet init;     /* pid 1 of that namespace, made by ckpt */
	/* kills the tree if ckpt dies while releasing it (guard.h) */
	struct puppet_guard *watch;
	struct netlock *netlock; /* restored connections locked (core/netlock.h) */
	/* those of the other network namespaces, each in its own (by its
	 * NetnsEntry.id), at most CKPT_NETLOCK_NS */
	struct netlock *netlock_ns[CKPT_NETLOCK_NS];
	uint32_t netlock_ns_id[CKPT_NETLOCK_NS];
	size_t n_netlock_ns;
	char netlock_left[64];  /* the lock a checkpoint --kill left, from the image */
	size_t npids;
	int ctl_remote;         /* the control socket's fd number in every puppet */
	int ctl[2];             /* [0] ckpt's end, [1] the puppets' */
	uint64_t scratch_addr;  /* free in every image address space */
	uint64_t mem_bytes;     /* page contents of the image (mm.c) */
	uint64_t data_bytes;    /* contents of files and shm segments in the page
				 * store (memfd.c, sysv-shm.c) */
	/* every page store byte written (mm, memfd and deleted files, shm):
	 * total, mem_bytes + data_bytes, known once the image is loaded */
	struct progress progress;
	/* the caller's fds for the image's external fds (ckpt_opts.inherit_fds) */
	const struct ckpt_inherit_fd *inherit;
	size_t ninherit;
	/* RESTART_LAZY: the lazy server, once started (mm-lazy.c) */
	struct mm_lazy *lazy;
	/* RESTART_PLAIN_PARENTS: where parents named by their id are
	 * (ckpt_opts.parent), plain (mm-chain.c) */
	const char *parents_dir;
	/* the threads restored together, their calls queued (core/calls.c) */
	struct rst_calls_group *calls;
	/* ckpt's CPU affinity from before it pinned its thread to one CPU
	 * while it makes the tree (restart.c), which the sched kind gives
	 * each task in its stead; NULL: not pinned */
	cpu_set_t *affinity;
	/* what every puppet has from ckpt until its sched restore (sched.c) */
	struct sched_start *sched_start;
	/* ckpt's limits, every puppet's until its rlimits restore (rlimits.c) */
	struct proc_limits *limits_start;
	/* ckpt's scheduling from before it raised its thread and the
	 * puppets to real time once the tree is made (sched.c, rtprio.h);
	 * at step "end" the puppets get the image's, ckpt this back (here
	 * too on a failure: free_ctx) */
	struct rtprio_was prio;
	/* the signals whose action ckpt's own process has is not the plain
	 * default (a handler, ignored, or flags or a mask with SIG_DFL),
	 * which every puppet has from it until its signals restore
	 * (signals.c); sig_own_read: read */
	uint64_t sig_own_set;
	bool sig_own_read;
	/* per task of tasks: the signals it had caught or ignored (SigCgt,
	 * SigIgn) before its signals restore, which the tasks it forked
	 * have too (signals.c); NULL until the first is read */
	struct sig_had *sig_had;
	/* per task of tasks: its cgroup v2 path before its cgroup restore,
	 * which the tasks it forked are in too (cgroup.c); NULL until used */
	char **cg_before;
	/* the xstate size ptrace gives on this machine and the CPU's
	 * features (xcr0), once read (regs.c); 0: not yet */
	size_t xstate_len;
	uint64_t xstate_have;
	/* the messages of rctx_load_one (a kind's one record per task) and
	 * the processes' thread arrays, freed with the context: thousands for a process of 1,000 threads, each a
	 * malloc and a free (which faulted, pages shared copy-on-write with
	 * the puppets forked meanwhile); left out of those forks (dontfork),
	 * but with RESTART_LAZY (the server is forked from ckpt) */
	struct arena msgs;
};

/* tree.c: restart's process tree (its steps: sequence.h) */
/* Decodes and checks the tree record into ctx->tasks. */
int tree_load(struct rst_ctx *ctx, const struct img_record *rec)
	__attribute__((warn_unused_result));
/* RESTART_PIDNS: starts ckpt's init once the tree is released. */
int tree_release_init(struct rst_ctx *ctx) __attribute__((warn_unused_result));


/* A page store writer (img/pages.h) into the image through the page-copy
 * buffer, compressing where CKPT_COMPRESS asks it; release it with
 * pages_writer_release(). */
int ctx_pages_writer(struct ckpt_ctx *ctx, struct pages_writer *pw, uint32_t type, uint64_t tag,
		     pages_read_fn read, void *arg) __attribute__((warn_unused_result));
/* Packs msg and writes it as one record. */
int ctx_write_msg(struct ckpt_ctx *ctx, uint32_t type, const ProtobufCMessage *msg)
	__attribute__((warn_unused_result));
/* Unpacks a record, logging which one failed; free with protobuf_c_message_free_unpacked. */
void *rctx_unpack(struct rst_ctx *ctx, const struct img_record *rec,
		  const ProtobufCMessageDescriptor *desc);

/*
 * For a kind with one record per task: checks that rec is that record and
 * the task's first, unpacks it into t->kstate[k] and returns it; NULL
 * (logged) if not. The caller validates the fields. The message is the
 * context's (ctx->msgs, freed with it): the kind never frees it (no
 * free_rstate for it).
 */
void *rctx_load_one(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec,
		    enum kind k, uint32_t type, const ProtobufCMessageDescriptor *desc);

/* The end of a release: waits until those let go in a call are asleep in it
 * again (puppet_asleep_wait), and logs how many were not. Frees w's set. */
void ctx_wait_asleep(struct ckpt_log *log, struct puppet_asleep *w);
/* qsort/bsearch order of struct pid_index */
int ctx_cmp_pid(const void *a, const void *b);
/* The process or thread of the image with this pid, or NULL. */
struct rst_task *tree_find(struct rst_ctx *ctx, pid_t pid);
/* For a kind's loaded op: t must have a record of kind k (logged if not). */
int rst_require(struct rst_ctx *ctx, const struct rst_task *t, enum kind k)
	__attribute__((warn_unused_result));

/*
 * outside.c: for a refusal of an fd of the tree whose file (dev, ino) is
 * also held outside it: " by pid 4100 (bash) fd 251" (the outside fds of
 * access mode accmode, -1 for any; O_RDWR ones match either), and when one
 * holder is the root's parent, a hint that fd (the tree's) was inherited
 * and how to start the program without it (then true). "" if none is found.
 */
bool ctx_outside_holders(struct ckpt_ctx *ctx, uint64_t dev, uint64_t ino, int accmode, int fd,
			 char *buf, size_t len);

/*
 * outside.c: for a container (ctx->container), every process outside the
 * tree that is in one of its namespaces, or holds one open by an fd or a
 * mount, refused by pid (or path): the restart makes those namespaces
 * anew. At "seize", and again at "look again" just before a kill.
 */
int ctx_look_outside(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));

/* Checkpoint: the process of the tree with this pid, or NULL. */
struct task *ctx_find_task(struct ckpt_ctx *ctx, pid_t pid);

/* The task's state for a kind, allocated zeroed on first use (NULL: ENOMEM). */
void *task_state(struct task *t, enum kind k, size_t size);

/* An injected call that failed: log "pid P: what failed: strerror" and return r. */
long rst_check(struct rst_ctx *ctx, struct rst_task *t, long r, const char *what);

/*
 * core/calls.c: a thread's calls at step "task state", queued while it is
 * restored with others (sequence.c) and run with theirs, side by side.
 * rst_calls(): runs c[0..n) in t now, or queues them; either way a call
 * with what[i] that fails fails the restore, logged "pid P: what[i]
 * failed: strerror hint" (now: its error returned; queued: at
 * rst_calls_end). Nothing may read their results. rst_put(): buf into the
 * scratch area at off, or, for a queued thread, into its own slice; its
 * address in the task, 0 if it could not be written. rst_calls_flush():
 * t's queued calls run now (before a call of a kind's own that must come
 * after them).
 */
int rst_calls(struct rst_ctx *ctx, struct rst_task *t, struct puppet_call *c,
	      const char *const *what, const char *hint, size_t n)
	__attribute__((warn_unused_result));
uint64_t rst_put(struct rst_ctx *ctx, struct rst_task *t, size_t off, const void *buf, size_t len);
int rst_calls_flush(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));
/* Are t's calls queued now (rst_calls runs none at once)? */
bool rst_calls_queued(const struct rst_ctx *ctx, const struct rst_task *t);
/* The n threads ts (of one process) queue their calls from here (false:
 * they cannot, each runs its own); rst_calls_end() runs the queues if
 * run, checks them, and ends it. */
bool rst_calls_begin(struct rst_ctx *ctx, struct rst_task *const *ts, size_t n);
/* The same for n processes without threads (one or more), each queue in
 * its own memory: their queues run side by side at rst_calls_end. */
bool rst_calls_begin_procs(struct rst_ctx *ctx, struct rst_task *const *ts, size_t n);
int rst_calls_end(struct rst_ctx *ctx, bool run) __attribute__((warn_unused_result));

/*
 * The key of a struct ckpt_opts, or NULL: a caller built before the key
 * fields existed passes a smaller size, and has none. -EINVAL for a size
 * smaller than any version of the struct or a key of the wrong length;
 * -E2BIG for a bigger struct (a newer caller's) with a non-zero byte past
 * the one this ckpt knows, or a size above CKPT_OPTS_SIZE_MAX.
 */
static inline int opts_key(const struct ckpt_opts *o, const uint8_t **ret_key)
{
	if (!o || o->size < CKPT_OPTS_SIZE_V1)
		return -EINVAL;
	if (o->size > CKPT_OPTS_SIZE_MAX)
		return -E2BIG;
	for (size_t i = sizeof(*o); i < o->size; i++)
		if (((const unsigned char *)o)[i]) /* an option of a newer ckpt */
			return -E2BIG;
	*ret_key = NULL;
	if (o->size < offsetof(struct ckpt_opts, key_len) + sizeof(o->key_len) || !o->key)
		return 0;
	if (o->key_len != CKPT_KEY_BYTES)
		return -EINVAL;
	*ret_key = o->key;
	return 0;
}

/* restart.c, for the fuzzer: load and check an image, build nothing */
int rst_load_only(int fd, char *errbuf, size_t errbuf_len);
/* inspect.c: the protobuf message of a record type, NULL for none */
const ProtobufCMessageDescriptor *inspect_descriptor_of(uint32_t type);

/* CLOCK_MONOTONIC in microseconds, for struct ckpt_result's elapsed_us. */
static inline uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The caller's struct ckpt_result, or NULL when its size does not cover it. */
static inline struct ckpt_result *opts_result(struct ckpt_opts *o)
{
	return o && o->size >= offsetof(struct ckpt_opts, result) + sizeof(o->result) ? &o->result
										      : NULL;
}

#endif
