/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt: checkpoint/restart of Linux process trees, from user space.
 *
 * The two entry points have the shape of the 2010 Linux Checkpoint-Restart
 * system calls:
 *
 *   ckpt_checkpoint(pid, fd, flags, logfd)  saves the tree rooted at pid to
 *                                           the image stream fd
 *   ckpt_restart(pid, fd, flags, logfd)     rebuilds a tree from the image
 *
 * fd need not be seekable: a file, a pipe or a socket. logfd receives a
 * human-readable account of what was done and why something failed; -1 for
 * none. Both return 0 (ckpt_restart: the pid of the restored root) or a
 * negative errno. Every function here is thread-compatible and keeps no
 * global state.
 */
#ifndef CKPT_H
#define CKPT_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_EXPORT __attribute__((visibility("default")))

/* checkpoint flags */
#define CKPT_SUBTREE 0x1ul       /* the root need not be a namespace init */
#define CKPT_KILL 0x2ul          /* kill the tree once the image is complete */
#define CKPT_LEAVE_FROZEN 0x4ul  /* leave the tree stopped (SIGSTOP) */
#define CKPT_SHELL_JOB 0x8ul     /* the tree's terminal may be outside it (a job of a shell) */
#define CKPT_EXT_UNIX 0x10ul     /* unix sockets whose peer is outside the tree: saved to be
				  * connected again by the peer's name at restart */
#define CKPT_VERIFY 0x20ul      /* with CKPT_KILL: a dry-run restart of the image
				  * (RESTART_GHOST | RESTART_VERIFY) before the kill */
#define CKPT_DROP_EVENTS 0x40ul  /* inotify/fanotify instances with unread events: saved
				  * without them (a warning says how many bytes) */
#define CKPT_DETACH_CLIENTS 0x100ul /* a server's clients outside the tree are detached:
				    * their connections come back closed by the peer,
				    * their terminals hung up */
#define CKPT_COMPRESS 0x200ul    /* page contents compressed with zstd where it pays
				  * (-EPROTONOSUPPORT from a build without zstd) */
#define CKPT_TRACK 0x400ul       /* leave dirty tracking in the tree (a userfaultfd in
				  * write-protect async mode, kept at a high fd) so
				  * that a later checkpoint with ckpt_opts.parent saves
				  * only the pages written since this one */
#define CKPT_SKIP_IN_FLIGHT 0x800ul /* TCP connections in a listener's accept queue
				     * are left out: with CKPT_KILL their peers
				     * get a reset */
#define CKPT_PRECOPY 0x1000ul     /* a pre-copy round of a live migration: only the
				   * memory of the tracked private anonymous vmas
				   * (with ckpt_opts.parent_id: what was written
				   * since that round), read while the tree runs
				   * again; implies CKPT_TRACK. The image serves only
				   * as a parent of the next round's or final image */
#define CKPT_FLAGS_ALL \
	(0x7ful | CKPT_DETACH_CLIENTS | CKPT_COMPRESS | CKPT_TRACK | CKPT_SKIP_IN_FLIGHT | \
	 CKPT_PRECOPY)

/* restart flags */
#define RESTART_TASKSELF 0x1ul   /* restore one task on top of the caller */
#define RESTART_FROZEN 0x2ul     /* leave the restored tree stopped */
#define RESTART_GHOST 0x4ul      /* build and validate, then tear down */
#define RESTART_KEEP_LSM 0x8ul   /* restore security labels */
#define RESTART_CONN_RESET 0x10ul /* restore TCP connections as reset */
#define RESTART_DETACH 0x20ul    /* do not wait for the restored tree */
#define RESTART_PIDNS 0x40ul     /* restore a subtree in a new pid namespace,
				  * under an init made by ckpt */
#define RESTART_SHELL_JOB 0x80ul /* attach a shell job to the caller's terminal */
#define RESTART_VERIFY 0x100ul   /* with RESTART_GHOST: the original still runs;
				  * what it holds (socket names, locks) is checked,
				  * not taken, so nothing of it is disturbed */
#define RESTART_LAZY 0x200ul     /* private memory filled on first touch and in
				  * the background by a server (userfaultfd) */
#define RESTART_PLAIN_PARENTS 0x800ul /* parent images named by a plain name (the id
				       * a CKPT_PRECOPY chain records) are opened in
				       * the directory ckpt_opts.parent, unsealed
				       * (ckpt_unseal) even when the image is sealed,
				       * and trusted: checked when ckpt_unseal wrote
				       * them, their data checksums are not again */
#define RESTART_CHANGED_FILES 0x1000ul /* a file mapped private that changed since the
					* checkpoint (mtime) at the same size, too big
					* for its contents to have been kept to compare
					* (over 32 MiB), is accepted with a warning,
					* not refused */
#define RESTART_CALLER_EXITS 0x2000ul /* with RESTART_DETACH: the caller, the root's
				       * parent, exits once this returns (the ckpt
				       * command): the root's parent-death signal is
				       * not set again (it would kill it then), with a
				       * warning; without it the caller is the parent
				       * the signal watches */
#define RESTART_FORWARD_SIGNALS 0x4000ul /* without RESTART_DETACH: while the
					 * restart waits for the restored tree,
					 * SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1
					 * and SIGUSR2 sent to the caller go to the
					 * restored root (blocked in the calling
					 * thread meanwhile) */
#define RESTART_FLAGS_ALL \
	(0x3fful | RESTART_PLAIN_PARENTS | RESTART_CHANGED_FILES | RESTART_CALLER_EXITS | \
	 RESTART_FORWARD_SIGNALS)

/* verbosity for the log */
enum ckpt_log_level {
	CKPT_LOG_ERROR = 0,
	CKPT_LOG_WARN,
	CKPT_LOG_INFO,
	CKPT_LOG_DEBUG,
	CKPT_LOG_MAX,
};

/*
 * The options-struct variant. Zero-initialise, set what you need.
 * errbuf, when not NULL, receives the one-line reason of a failure
 * ("pid 4242 fd 7 (socket): sockets are not supported yet").
 */
/* What struct ckpt_opts' progress callback is given. */
enum ckpt_phase {
	CKPT_PHASE_CHECKPOINT = 1, /* the image is written */
	CKPT_PHASE_RESTART,        /* memory is filled from the image */
	CKPT_PHASE_END,            /* once, after the last of the calls above
				    * (a restart's, before the tree runs) */
};
struct ckpt_progress {
	int phase;                      /* enum ckpt_phase */
	unsigned long long done;        /* bytes so far */
	unsigned long long total;       /* bytes expected, 0 when unknown */
	unsigned long long elapsed_us;  /* since the call began */
};

struct ckpt_opts {
	size_t size;            /* sizeof(struct ckpt_opts), for growth */
	unsigned long flags;    /* CKPT_* or RESTART_* */
	int logfd;              /* -1 for none */
	int log_level;          /* enum ckpt_log_level; 0 means INFO */
	char *errbuf;           /* out: first error, may be NULL */
	size_t errbuf_len;
	const char *pidfile;    /* restart: write the root's pid here once it runs */
	int wait_status;        /* restart without RESTART_DETACH: out, the
				 * root's wait status */
	/*
	 * Sealed images. Checkpoint: encrypt and authenticate the image with
	 * this key. Restart, inspect: refuse any image not made with it (a
	 * plain one included) before a record is used. key_len must be
	 * CKPT_KEY_BYTES; NULL for none. ckpt keeps no copy once the call
	 * returns. A caller built before these fields existed passes a smaller
	 * size and is served as before, with no key.
	 */
	const void *key;
	size_t key_len;
	/*
	 * checkpoint: called once the image is complete and fsync'd (and, with
	 * CKPT_KILL, checked): with CKPT_KILL before the tree is killed,
	 * without it once the tree runs again (the fsync is not frozen time);
	 * the caller makes the image durable under its final name there. A
	 * negative errno fails the checkpoint, and the tree is then not
	 * killed. NULL for none; a smaller size (an older caller) has none.
	 */
	int (*image_done)(void *arg, char *why, size_t why_len);
	void *image_done_arg;
	/*
	 * Out, on success: what was saved (checkpoint) or restored (restart).
	 * Written only when size covers it: a caller built before it existed
	 * passes a smaller size and gets nothing written there.
	 */
	struct ckpt_result {
		unsigned long processes;  /* processes of the tree, zombies included */
		unsigned long threads;    /* every thread, each process's first one included */
		unsigned long long memory_bytes; /* memory contents saved or restored */
		unsigned long long image_bytes;  /* the image stream written or read */
		unsigned long warnings;   /* warnings logged (at any log level) */
		unsigned long long elapsed_us; /* from the call until the image was
						* complete and the tree let go (checkpoint),
						* or until the tree ran (restart) */
		pid_t root;               /* restart: the restored root as seen by the
					   * caller; checkpoint: the pid given */
	} result;
	/*
	 * Progress of long work, for a line a terminal updates in place: called
	 * at most once per progress_interval_ms (0: 100 ms) while the image is
	 * written (checkpoint: done counts the image's bytes so far, total the
	 * memory of the tree as the kernel counts it, resident anonymous and
	 * shared pages, an estimate) or while memory is filled (restart: done
	 * and total count every byte the image's page store fills in: the
	 * processes' memory, memfds' and deleted files' contents, SysV shm
	 * segments). total is 0
	 * when unknown. It may be called from a thread of the library, never
	 * from two at once; it must not call ckpt. NULL for none; a smaller
	 * size (an older caller) has none.
	 */
	void (*progress)(void *arg, const struct ckpt_progress *p);
	void *progress_arg;
	unsigned progress_interval_ms;
	/*
	 * checkpoint with CKPT_KILL: called with image_done_arg once the tree's
	 * death is decided -- image_done returned 0 and the guardian has been
	 * told to kill the tree should ckpt die -- just before the kill. A
	 * migration tells its target here that the copy may run. NULL for
	 * none; a smaller size (an older caller) has none.
	 */
	void (*committed)(void *arg);
	/*
	 * Fds of the root held outside the tree, treated like a shell job's
	 * terminal (an inherited pipe, say). Checkpoint: the root's fds listed
	 * in external_fds are saved as "external": only that the root had an
	 * fd there, nothing of the open file. Restart: each external fd of the
	 * image must be given in inherit_fds (the caller's fd `local` goes in
	 * at the restored root's fd `fd`), else the restart is refused before
	 * anything is built; one the image does not have is refused too.
	 * A smaller size (an older caller) has none.
	 */
	const int *external_fds;
	size_t n_external_fds;
	const struct ckpt_inherit_fd {
		int fd;     /* the root's fd number in the image */
		int local;  /* the caller's fd that goes there */
	} *inherit_fds;
	size_t n_inherit_fds;
	/*
	 * checkpoint: an incremental image. The path of the image of the
	 * tree's last checkpoint made with CKPT_TRACK (or with a parent): the
	 * pages of a tracked process not written since then are not saved,
	 * the image names its parent (this path, made absolute, and the
	 * parent's id) and restart takes them from there. A process tracked
	 * since another checkpoint is refused; one not tracked is saved
	 * whole. Tracking goes on (as with CKPT_TRACK). NULL for none; a
	 * smaller size (an older caller) has none.
	 */
	const char *parent;
	/*
	 * Restart with RESTART_FROZEN: out, the processes that were in a
	 * job-control stop in the image (pids as the caller sees them), which a
	 * caller that continues the tree (SIGCONT) leaves stopped. At most
	 * stopped_max pids are written to stopped; n_stopped counts them all.
	 * NULL for none; a smaller size (an older caller) has none.
	 */
	pid_t *stopped;
	size_t stopped_max;
	size_t n_stopped;
	/*
	 * checkpoint: the parent given by its id (16 bytes, the image_id of
	 * the tree's last checkpoint with CKPT_TRACK or CKPT_PRECOPY) instead
	 * of a path; the image records the id's 32 hex digits as the parent's
	 * name, for a restart with RESTART_PLAIN_PARENTS. NULL for none.
	 * image_id: out, the id of the image written. A smaller size (an
	 * older caller) has neither.
	 */
	const unsigned char *parent_id;
	unsigned char image_id[16];
	/*
	 * checkpoint with CKPT_KILL and a committed callback (a migration) of
	 * a tree in the caller's network namespace: the local addresses that
	 * move with it to the target host, which holds them by then (ckpt
	 * receive adds them). Any socket of the tree bound to another address
	 * that is not a wildcard or loopback is refused, and so is a loopback
	 * connection to a process outside the tree (it cannot follow). Once
	 * the tree is dead each address is deleted from its link on this host,
	 * and only then is the network lock removed: its peers never hear a
	 * reset from here. A tree with a network namespace of its own moves
	 * with its namespace: refused with these. Restart ignores them. NULL
	 * for none; a smaller size (an older caller) has none.
	 */
	const struct ckpt_addr {
		int family;             /* AF_INET, AF_INET6 */
		unsigned char addr[16]; /* network order; 4 bytes used for AF_INET */
		unsigned prefixlen;
		char ifname[16];        /* the link that holds it on this host */
	} *target_addrs;
	size_t n_target_addrs;
	/*
	 * checkpoint with CKPT_KILL and a committed callback: what committed
	 * tells another process, for when ckpt dies once the tree's death is
	 * decided but before committed has told it: the guardian, having
	 * killed the tree, sends commit_msg (commit_msg_len bytes, at most 512)
	 * on a copy of commit_fd. A migration's "commit" line to its target,
	 * so that the copy runs although the source died then (the target
	 * must take the message twice: it may come from both). commit_msg_len
	 * 0 for none; a smaller size (an older caller) has none.
	 */
	int commit_fd;
	const void *commit_msg;
	size_t commit_msg_len;
	/*
	 * restart: called with running_arg and the root's pid (as the caller
	 * sees it) once the tree runs and the pidfile is written, before ckpt
	 * lets go of what it made (its memory freed, the guardian's exit) and
	 * before the call returns: a caller of RESTART_DETACH names the pid
	 * there (`ckpt restart --detach` prints it), the teardown going on
	 * after. The restart has succeeded by then, and the tree no longer
	 * depends on the caller: it runs on if the caller dies there. The
	 * callback must not call ckpt. NULL for none; a smaller size (an older
	 * caller) has none.
	 */
	void (*running)(void *arg, pid_t root);
	void *running_arg;
};
#define CKPT_KEY_BYTES 32
/* The smallest size accepted: the struct before key was added. */
#define CKPT_OPTS_SIZE_V1 offsetof(struct ckpt_opts, key)
/* The struct before result was added. */
#define CKPT_OPTS_SIZE_V2 offsetof(struct ckpt_opts, result)
/* The struct before progress was added. */
#define CKPT_OPTS_SIZE_V3 offsetof(struct ckpt_opts, progress)
/* The struct before committed was added. */
#define CKPT_OPTS_SIZE_V4 offsetof(struct ckpt_opts, committed)
/* The struct before external_fds was added. A caller built against a newer
 * ckpt may pass a bigger size: accepted when every byte past the struct
 * this ckpt knows is zero (no option it does not have is set), refused
 * with -E2BIG otherwise, as is a size above 4096. */
#define CKPT_OPTS_SIZE_V5 offsetof(struct ckpt_opts, external_fds)
/* The struct before parent was added. */
#define CKPT_OPTS_SIZE_V6 offsetof(struct ckpt_opts, parent)
/* The struct before stopped was added. */
#define CKPT_OPTS_SIZE_V7 offsetof(struct ckpt_opts, stopped)
/* The struct before parent_id was added. */
#define CKPT_OPTS_SIZE_V8 offsetof(struct ckpt_opts, parent_id)
/* The struct before target_addrs was added. */
#define CKPT_OPTS_SIZE_V9 offsetof(struct ckpt_opts, target_addrs)
/* The struct before commit_fd was added. */
#define CKPT_OPTS_SIZE_V10 offsetof(struct ckpt_opts, commit_fd)
/* The struct before running was added. */
#define CKPT_OPTS_SIZE_V11 offsetof(struct ckpt_opts, running)
#define CKPT_OPTS_SIZE_MAX 4096

CKPT_EXPORT int ckpt_checkpoint(pid_t pid, int fd, unsigned long flags, int logfd);
CKPT_EXPORT int ckpt_restart(pid_t pid, int fd, unsigned long flags, int logfd);

CKPT_EXPORT int ckpt_checkpoint_opts(pid_t pid, int fd, struct ckpt_opts *opts);
CKPT_EXPORT int ckpt_restart_opts(pid_t pid, int fd, struct ckpt_opts *opts);

/* Write a readable account of every record in the image to out_fd. */
CKPT_EXPORT int ckpt_inspect(int fd, int out_fd, int json, char *errbuf, size_t errbuf_len);
/* The same for a sealed image: key of key_len (CKPT_KEY_BYTES) bytes, or NULL. */
CKPT_EXPORT int ckpt_inspect_key(int fd, int out_fd, int json, const void *key, size_t key_len,
				 char *errbuf, size_t errbuf_len);
/* What the image holds, for people: its processes as a tree with their
 * commands and threads, its namespaces, and its bytes by kind. */
CKPT_EXPORT int ckpt_inspect_summary(int fd, int out_fd, const void *key, size_t key_len,
				     char *errbuf, size_t errbuf_len);
/* Compare two images (of one program): processes added, removed or changed,
 * and for each task and record type the records changed, added, removed.
 * Returns 0 if they hold the same records, 1 if they differ, or -errno. */
CKPT_EXPORT int ckpt_inspect_diff(int fd_a, int fd_b, int out_fd, const void *key,
				  size_t key_len, char *errbuf, size_t errbuf_len);

/* Remove the network lock that a checkpoint --kill of this image left in
 * the caller's network namespace (needed on the checkpoint's host when the
 * image was restarted on another one, where the restart cannot remove it).
 * name gets the lock's name, "" if the image names none. Returns 1 if it
 * was removed, 0 if the image names none or it is gone already, or -errno. */
CKPT_EXPORT int ckpt_unlock(int fd, const void *key, size_t key_len, char *name,
			    size_t name_len, char *errbuf, size_t errbuf_len);

/* Live migration. ckpt_untrack: the dirty tracking (CKPT_TRACK,
 * CKPT_PRECOPY) removed from every process of the tree of pid, which is
 * held only for that; 0, or -errno. ckpt_unseal: one image stream read
 * from fd (sealed with key, or plain with key NULL), checked, and written
 * plain to out_fd; id gets its image id; the bytes written, or -errno. */
CKPT_EXPORT int ckpt_untrack(pid_t pid, int logfd, char *errbuf, size_t errbuf_len);
CKPT_EXPORT long long ckpt_unseal(int fd, int out_fd, const void *key, size_t key_len,
				  unsigned char id[16], char *errbuf, size_t errbuf_len);

/*
 * Probe the kernel features ckpt needs; writes one line per feature to
 * out_fd ("present", "MISSING": the kernel lacks it, or "DENIED": this
 * caller may not use it, and why). Returns 0 if all required ones are
 * present, -ENOTSUP if the kernel lacks one, else -EPERM if the caller may
 * not use one (a privilege is missing).
 */
CKPT_EXPORT int ckpt_check(int out_fd);

#ifdef __cplusplus
}
#endif
#endif
