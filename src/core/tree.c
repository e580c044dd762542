/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Restart's process tree: every process with its pid, its parent, its
 * session and its process group, before any of them gets its own state.
 *
 * All processes start as bare puppets: the root is spawned by ckpt, every
 * other one is forked by an injected clone3 (set_tid) in the puppet that
 * must be its parent, so getppid(), wait() and SIGCHLD are as they were.
 * Sessions and groups are inherited at fork, so the order of the forks and
 * of setsid()/setpgid() rebuilds them:
 * - a session leader calls setsid() as soon as it exists;
 * - a task whose session is not its parent's is forked with CLONE_PARENT
 *   by a task of that session which is its parent's child: the session
 *   leader, or, if the leader is gone, a ghost (a placeholder with the
 *   leader's pid that calls setsid(), forks and exits);
 * - once all exist, group leaders call setpgid(0, 0) and the members join;
 *   a group whose leader is gone gets a ghost with that pid, forked by a
 *   member, which leads it until the members have joined, then exits.
 * Ghosts are reaped by their parent (an injected wait4) before anything
 * else runs; zombies are made to exit with their status and stay zombies
 * for their parent to reap.
 *
 * An "outside" session or group is the root's when the root does not lead
 * it: the root joins ckpt's, and so do its descendants that shared it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "core/sequence.h"
#include "util/cleanup.h"
#include "util/kernel.h"
#include "util/userns.h"

#define PID_MAX_LIMIT 4194304
#define TREE_MAX_TASKS 32768

/* The process (not thread) of the image with this pid, or NULL. */
static struct rst_task *find_proc(struct rst_ctx *ctx, pid_t pid)
{
	struct rst_task *t = tree_find(ctx, pid);
	return t && !t->leader ? t : NULL;
}

static int load_threads(struct rst_ctx *ctx, const struct img_record *rec, struct rst_task *t,
			const TreeTask *tt)
{
	if ((tt->has_nthreads ? tt->nthreads : 1) != tt->n_tids + 1 || (t->zombie && tt->n_tids))
		return log_fail(&ctx->log, -EINVAL, "record %u: pid %d: %zu thread ids for %u threads",
				rec->index, t->pid, tt->n_tids, tt->has_nthreads ? tt->nthreads : 1);
	if (!tt->n_tids)
		return 0;
	if (tt->n_tids >= PID_MAX_LIMIT)
		return log_fail(&ctx->log, -EINVAL, "record %u: pid %d: %zu thread ids", rec->index,
				t->pid, tt->n_tids);
	/* the context's (ctx->msgs): left out of the puppets' forks, so that
	 * writing the threads' puppets costs no copy-on-write fault */
	t->threads = arena_alloc(&ctx->msgs, tt->n_tids * sizeof(*t->threads));
	if (!t->threads)
		return -ENOMEM;
	memset(t->threads, 0, tt->n_tids * sizeof(*t->threads));
	for (size_t i = 0; i < tt->n_tids; i++) {
		if (!tt->tids[i] || tt->tids[i] >= PID_MAX_LIMIT)
			return log_fail(&ctx->log, -EINVAL, "record %u: pid %d: thread id %u",
					rec->index, t->pid, tt->tids[i]);
		/* counted once made: free_ctx() frees (and closes the memfd of) nthreads */
		t->threads[i] = (struct rst_task){ .pid = (pid_t)tt->tids[i],
						   .leader = t,
						   .parent = -1,
						   .creator = -1,
						   .pup = { .memfd = -1 } };
		t->nthreads = i + 1;
		ctx->by_pid[ctx->npids++] = (struct pid_index){ t->threads[i].pid, &t->threads[i] };
	}
	return 0;
}

static int load_entry(struct rst_ctx *ctx, const struct img_record *rec, size_t i,
		      const TreeTask *tt)
{
	struct rst_task *t = &ctx->tasks[i];
	int r;

	/* counted in ntasks already: free_ctx() must find no fd 0 to close */
	*t = (struct rst_task){ .parent = -1, .creator = -1, .pup = { .memfd = -1 } };
	if (!tt->pid || tt->pid >= PID_MAX_LIMIT || tt->pgid >= PID_MAX_LIMIT ||
	    tt->sid >= PID_MAX_LIMIT || (tt->has_exit_signal && tt->exit_signal > 64))
		return log_fail(&ctx->log, -EINVAL, "record %u: task %zu (pid %u) is not valid",
				rec->index, i, tt->pid);
	*t = (struct rst_task){
		.pid = tt->pid,
		.ppid = tt->ppid,
		.pgid = tt->pgid,
		.sid = tt->sid,
		.exit_signal = tt->has_exit_signal ? (int)tt->exit_signal : SIGCHLD,
		.zombie = tt->has_zombie && tt->zombie,
		.exit_code = (int)tt->exit_code,
		.files_with = (pid_t)tt->files_with,
		.fs_with = (pid_t)tt->fs_with,
		.parent = -1,
		.creator = -1,
		.pup = { .memfd = -1 },
	};
	ctx->by_pid[ctx->npids++] = (struct pid_index){ t->pid, t };
	if ((r = load_threads(ctx, rec, t, tt)) < 0)
		return r;
	if (t->sid == t->pid && t->pgid != t->pid)
		return log_fail(&ctx->log, -EINVAL,
				"record %u: pid %d leads session %d but not its group", rec->index,
				t->pid, t->sid);
	if (t->zombie && (i == 0 || t->files_with || t->fs_with || (t->exit_code & ~0xffff)))
		return log_fail(&ctx->log, -EINVAL, "record %u: zombie pid %d is not valid",
				rec->index, t->pid);
	return 0;
}

/* The sibling t shares its fd table or fs with (CLONE_PARENT), or NULL. */
static struct rst_task *share_sibling(struct rst_ctx *ctx, const struct rst_task *t)
{
	pid_t ppid = ctx->tasks[t->parent].pid;
	pid_t with = t->files_with && t->files_with != ppid ? t->files_with
		     : t->fs_with && t->fs_with != ppid    ? t->fs_with
							   : 0;
	return with ? find_proc(ctx, with) : NULL;
}

/* t shares only with its parent, or only with one live sibling made before it. */
static bool share_ok(struct rst_ctx *ctx, const struct rst_task *t)
{
	pid_t ppid = ctx->tasks[t->parent].pid;
	if (!(t->files_with && t->files_with != ppid) && !(t->fs_with && t->fs_with != ppid))
		return true;
	const struct rst_task *s = share_sibling(ctx, t);
	return s && s < t && !s->zombie && s->ppid == t->ppid &&
	       (!t->files_with || t->files_with == s->pid) && (!t->fs_with || t->fs_with == s->pid);
}

/* Parents before children, each pid once, sharing only with the parent or
 * a sibling. */
static int link_parents(struct rst_ctx *ctx, const struct img_record *rec)
{
	for (size_t i = 1; i < ctx->npids; i++)
		if (ctx->by_pid[i].pid == ctx->by_pid[i - 1].pid)
			return log_fail(&ctx->log, -EINVAL, "record %u: pid %d appears twice",
					rec->index, ctx->by_pid[i].pid);
	for (size_t i = 0; i < ctx->nimage; i++) {
		struct rst_task *t = &ctx->tasks[i];
		if (i == 0) {
			if (t->files_with || t->fs_with)
				return log_fail(&ctx->log, -EINVAL,
						"record %u: the root shares with a parent", rec->index);
			continue;
		}
		struct rst_task *p = find_proc(ctx, t->ppid);
		if (!p || p >= t || p->zombie)
			return log_fail(&ctx->log, -EINVAL,
					"record %u: pid %d has parent %d, which is not a live task "
					"before it in the tree",
					rec->index, t->pid, t->ppid);
		t->parent = (int)(p - ctx->tasks);
		if (!share_ok(ctx, t))
			return log_fail(&ctx->log, -EINVAL,
					"record %u: pid %d shares with a task that is neither its "
					"parent nor one sibling before it",
					rec->index, t->pid);
	}
	return 0;
}

int tree_load(struct rst_ctx *ctx, const struct img_record *rec)
{
	if (ctx->tasks)
		return log_fail(&ctx->log, -EINVAL, "record %u: a second tree", rec->index);
	TreeEntry *tree = rctx_unpack(ctx, rec, &tree_entry__descriptor);
	if (!tree)
		return -EINVAL;
	int r = 0;
	size_t n = tree->n_tasks;
	if (!n || n > TREE_MAX_TASKS) {
		r = log_fail(&ctx->log, -EINVAL, "record %u: a tree of %zu processes", rec->index,
			     n);
		goto out;
	}
	size_t ntids = 0;
	for (size_t i = 0; i < n; i++)
		ntids += tree->tasks[i]->n_tids;
	if (ntids > TREE_MAX_TASKS) {
		r = log_fail(&ctx->log, -EINVAL, "record %u: %zu threads", rec->index, ntids);
		goto out;
	}
	/* room for a ghost per task at most */
	ctx->tasks = calloc(2 * n, sizeof(*ctx->tasks));
	ctx->by_pid = calloc(n + ntids, sizeof(*ctx->by_pid));
	if (!ctx->tasks || !ctx->by_pid) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; r >= 0 && i < n; i++) {
		ctx->ntasks = ctx->nimage = i + 1;
		r = load_entry(ctx, rec, i, tree->tasks[i]);
	}
	if (r >= 0 && ctx->tasks[0].zombie)
		r = log_fail(&ctx->log, -EINVAL, "record %u: the root is a zombie", rec->index);
	/* a container's namespaces are its root's own record (ns.c) */
	if (r >= 0 && tree->ns)
		r = log_fail(&ctx->log, -EINVAL, "record %u: namespaces in the tree (an image of an "
			     "older ckpt)", rec->index);
	/* checkpoint --kill's network lock: removed once the tree runs. Only a
	 * name of ckpt's: a forged image must not have another table removed */
	if (r >= 0 && tree->netlock &&
	    (strncmp(tree->netlock, "ckpt_lock_", 10) ||
	     strspn(tree->netlock + 10, "0123456789abcdef_") != strlen(tree->netlock + 10) ||
	     snprintf(ctx->netlock_left, sizeof(ctx->netlock_left), "%s", tree->netlock) >=
		     (int)sizeof(ctx->netlock_left)))
		r = log_fail(&ctx->log, -EINVAL, "record %u: the network lock's name is not one of "
			     "ckpt's", rec->index);
	if (r >= 0) {
		qsort(ctx->by_pid, ctx->npids, sizeof(*ctx->by_pid), ctx_cmp_pid);
		r = link_parents(ctx, rec);
	}
out:
	tree_entry__free_unpacked(tree, NULL);
	return r;
}

/* --- planning: who forks whom ---------------------------------------- */

static bool outside_sid(struct rst_ctx *ctx, pid_t sid)
{
	const struct rst_task *root = &ctx->tasks[0];
	return sid == root->sid && root->sid != root->pid && !find_proc(ctx, sid);
}

static bool outside_pgid(struct rst_ctx *ctx, pid_t pgid)
{
	const struct rst_task *root = &ctx->tasks[0];
	return pgid == root->pgid && root->pgid != root->pid && !find_proc(ctx, pgid);
}

static struct rst_task *find_ghost(struct rst_ctx *ctx, pid_t pid)
{
	for (size_t i = ctx->nimage; i < ctx->ntasks; i++)
		if (ctx->tasks[i].pid == pid)
			return &ctx->tasks[i];
	return NULL;
}

static struct rst_task *add_ghost(struct rst_ctx *ctx, pid_t pid, int parent, pid_t sid,
				  pid_t pgid)
{
	struct rst_task *g = &ctx->tasks[ctx->ntasks++];
	*g = (struct rst_task){
		.pid = pid,
		.ppid = ctx->tasks[parent].pid,
		.sid = sid,
		.pgid = pgid,
		.exit_signal = SIGCHLD,
		.ghost = true,
		.parent = parent,
		.creator = parent,
		.pup = { .memfd = -1 },
	};
	return g;
}

/* Who forks t, so that it has its parent and its session. */
static int plan_session(struct rst_ctx *ctx, struct rst_task *t)
{
	struct rst_task *p = &ctx->tasks[t->parent];
	pid_t s = t->sid;

	t->creator = t->parent;
	struct rst_task *sib = share_sibling(ctx, t);
	if (sib) {
		/* forked by the sibling whose table it shares, with CLONE_PARENT */
		if (s != t->pid && s != sib->sid)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: shares with its sibling %d, which is in another "
					"session; not supported yet",
					t->pid, sib->pid);
		t->creator = (int)(sib - ctx->tasks);
		return 0;
	}
	if (s == t->pid || s == p->sid)
		return 0;
	if (outside_sid(ctx, s))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: is in the session outside the image (%d) while its parent "
				"%d is not; this cannot be rebuilt",
				t->pid, s, p->pid);
	struct rst_task *l = find_proc(ctx, s);
	if (!l) {
		l = find_ghost(ctx, s);
		if (!l)
			l = add_ghost(ctx, s, t->parent, s, s);
	}
	if (l->parent != t->parent || l->sid != s)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: is in session %d, which neither its parent %d nor a child "
				"of that parent leads; not supported yet",
				t->pid, s, p->pid);
	t->creator = (int)(l - ctx->tasks);
	return 0;
}

/* --- creation --------------------------------------------------------- */

static int wait_pid_free(struct rst_ctx *ctx, pid_t pid)
{
	/* a pid held by a dying zombie frees up soon (pid 1 reaps late here) */
	for (int waited = 0;; waited += 20) {
		_cleanup_free_ char *text = NULL;
		struct proc_status st;
		/* no task has it (kill finds threads too): no /proc read */
		if ((kill(pid, 0) < 0 && errno == ESRCH) || proc_read(pid, "status", &text, NULL) < 0)
			return 0;
		if (proc_parse_status(text, &st) == 0 && st.state != 'Z' && st.state != 'X')
			return log_fail(&ctx->log, -EEXIST,
					"pid %d is in use by '%s'; restore it where the pid is free "
					"(or kill that process)",
					pid, st.name);
		if (waited >= 5000)
			return log_fail(&ctx->log, -EEXIST,
					"pid %d is held by a zombie its parent has not reaped", pid);
		usleep(20000);
	}
}

static int spawn_error(struct rst_ctx *ctx, struct rst_task *t, int r)
{
	if (r == -EEXIST)
		return log_fail(&ctx->log, r, "pid %d is taken", t->pid);
	if (r == -EPERM)
		return log_fail(&ctx->log, r,
				"pid %d: creating a process with a chosen pid needs "
				"CAP_CHECKPOINT_RESTORE (or a user namespace of one's own)",
				t->pid);
	return log_fail(&ctx->log, r, "pid %d: cannot create it: %s", t->pid, strerror(-r));
}

struct rseq_config {
	uint64_t ptr;
	uint32_t size, sig, flags, pad;
};

/* A new puppet still has ckpt's rseq area registered: drop it before its
 * memory goes. */
static int unregister_rseq(struct puppet *p)
{
	struct rseq_config rc = { 0 };
	if (puppet_get_rseq(p, &rc, sizeof(rc)) <= 0 || !rc.ptr)
		return 0;
	long r = puppet_syscall(p, SYS_rseq, rc.ptr, rc.size, RSEQ_FLAG_UNREGISTER, rc.sig);
	return r < 0 ? (int)r : 0;
}

/*
 * RESTART_PIDNS: pid 1 of a new pid namespace, ckpt's init, forks the
 * subtree's root with its pid (free in the new namespace).
 */
static int spawn_under_init(struct rst_ctx *ctx, struct rst_task *t)
{
	struct puppet *init = &ctx->init;
	int r = puppet_spawn_init(init, 0, ctx->ctl[1], ctx->ctl_remote);
	/* without privilege: in a user namespace of the caller's own, where
	 * the caller's uid and gid stay what they are */
	if (r == -EPERM) {
		r = puppet_spawn_init(init, CLONE_NEWUSER, ctx->ctl[1], ctx->ctl_remote);
		const char *what;
		if (r >= 0 && (r = userns_map_self(init->pid, &what)) < 0)
			/* the init dies with the others (kill_created) */
			return log_fail(&ctx->log, r, "cannot write the user namespace's %s: %s",
					what, strerror(-r));
		if (r >= 0)
			log_info(&ctx->log, "RESTART_PIDNS without privilege: in a user namespace "
					    "mapping uid %u and gid %u to themselves",
				 (unsigned)geteuid(), (unsigned)getegid());
	}
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot make a pid namespace: %s%s", strerror(-r),
				r == -EPERM ? " (nor a user namespace to make it in)" : "");
	if ((r = puppet_find_syscall(init)) < 0 || (r = unregister_rseq(init)) < 0 ||
	    (r = puppet_scratch_map_stub_at(init, ctx->scratch_addr, PUPPET_SCRATCH_SIZE)) < 0)
		return log_fail(&ctx->log, r, "the new pid namespace's init: %s", strerror(-r));
	/* it outlives ckpt (--detach) */
	puppet_syscall(init, SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0);
	r = puppet_clone(init, &t->pup, t->pid, 0, t->exit_signal);
	if (r < 0)
		return spawn_error(ctx, t, r);
	t->created = true;
	log_info(&ctx->log, "pid %d: restored in a new pid namespace (its init is pid %d here)",
		 t->pid, init->pid);
	return 0;
}

/* Lets ckpt's init run: the last step, after the tree is released. */
int tree_release_init(struct rst_ctx *ctx)
{
	struct puppet *init = &ctx->init;
	if (!ctx->pidns || !init->held)
		return 0;
	int r = puppet_scratch_unmap(init);
	if (r >= 0)
		r = puppet_release(init, 0);
	pid_t root = ctx->tasks[0].pid;
	if (r >= 0 && send(ctx->ctl[0], &root, sizeof(root), MSG_NOSIGNAL) != sizeof(root))
		r = -errno;
	return r < 0 ? log_fail(&ctx->log, r, "cannot start the pid namespace's init: %s",
				strerror(-r))
		     : 0;
}

/* Step "spawn root": the root, a bare puppet, in its new namespaces. */
int tree_spawn_root(struct rst_ctx *ctx)
{
	struct rst_task *t = &ctx->tasks[0];
	uint32_t ns = ctx->root_clone;
	/* in a fresh pid namespace every pid is free */
	int r = ns || ctx->pidns ? 0 : wait_pid_free(ctx, t->pid);
	if (r < 0)
		return r;
	r = ctx->pidns ? spawn_under_init(ctx, t)
		       : puppet_spawn(&t->pup, ns ? 0 : t->pid, ns, ctx->ctl[1], ctx->ctl_remote);
	if (r < 0)
		return ctx->pidns ? r : spawn_error(ctx, t, r);
	t->created = true;
	log_debug(&ctx->log, "pid %d: %s", t->pid,
		  t->pup.bare ? "a bare puppet, exec'd (no copy of ckpt)" : "a puppet forked from ckpt");
	return 0;
}

/* Step "root ready": the root can take injected calls. */
int tree_root_ready(struct rst_ctx *ctx)
{
	struct rst_task *t = &ctx->tasks[0];
	int r;
	if (ctx->pidns) /* a fork of the init: its scratch, no rseq */
		return 0;
	if ((r = puppet_find_syscall(&t->pup)) < 0)
		return log_fail(&ctx->log, r, "pid %d: no vDSO syscall in the puppet", t->pid);
	if ((r = unregister_rseq(&t->pup)) < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot unregister ckpt's rseq: %s", t->pid,
				strerror(-r));
	if ((r = puppet_scratch_map_stub_at(&t->pup, ctx->scratch_addr, PUPPET_SCRATCH_SIZE)) <
	    0)
		return log_fail(&ctx->log, r, "pid %d: cannot map the scratch area: %s", t->pid,
				strerror(-r));
	return 0;
}

/* A task just made: a session leader calls setsid() (then the kinds' session
 * op); then the kinds' forked op. */
static int made_one(struct rst_ctx *ctx, struct rst_task *t)
{
	if (t->sid == t->pid) {
		long e = puppet_syscall(&t->pup, SYS_setsid);
		if (rst_check(ctx, t, e, "setsid") < 0)
			return (int)e;
		/* before it forks those who inherit what it gets (a controlling tty) */
		int r = t->ghost ? 0 : seq_rst_task(ctx, RST_SESSION, t);
		if (r < 0)
			return r;
	}
	int r = t->ghost || t->zombie ? 0 : seq_rst_task(ctx, RST_FORKED, t);
	if (r < 0)
		return r;
	log_debug(&ctx->log, "pid %d: created%s", t->pid, t->ghost ? " (ghost)" : "");
	return 0;
}

/* clone3's flags and exit signal for t */
static uint64_t clone_flags(const struct rst_task *t, int *ret_sig)
{
	uint64_t flags = (t->creator != t->parent ? CLONE_PARENT : 0) |
			 (t->files_with ? CLONE_FILES : 0) | (t->fs_with ? CLONE_FS : 0);
	/* with CLONE_PARENT the child takes the creator's exit signal */
	*ret_sig = (flags & CLONE_PARENT) ? 0 : t->exit_signal;
	return flags;
}

/* What comes before t's fork: its pid free, its kinds' before_fork. */
static int before_fork(struct rst_ctx *ctx, struct rst_task *t)
{
	/* in a fresh pid namespace every pid is free */
	int r = ctx->root_clone || ctx->pidns ? 0 : wait_pid_free(ctx, t->pid);
	if (r < 0)
		return r;
	return t->ghost ? 0 : seq_rst_task(ctx, RST_FORK, t);
}

/* Forks t from its creator. */
static int create_one(struct rst_ctx *ctx, struct rst_task *t)
{
	int r = before_fork(ctx, t);
	if (r < 0)
		return r;
	struct rst_task *c = &ctx->tasks[t->creator];
	int sig;
	uint64_t flags = clone_flags(t, &sig);
	r = puppet_clone(&c->pup, &t->pup, t->pid, flags, sig);
	if (r < 0)
		return spawn_error(ctx, t, r);
	t->created = true;
	return made_one(ctx, t);
}

/*
 * Forks b[0..n) (siblings: one creator, the same flags) by one batch of
 * clones of their creator: one stop of the creator for each and one for
 * the batch, where a clone each was two. Each one's before_fork first
 * (the creator's memory is restored by the first that needs it, as when
 * they were forked one by one), then the clones, then each one's setsid
 * and session and forked ops.
 */
static int create_batch(struct rst_ctx *ctx, struct rst_task *const *b, size_t n)
{
	struct puppet *ps[PUPPET_MANY_MAX];
	pid_t pids[PUPPET_MANY_MAX];
	int err[PUPPET_MANY_MAX], sig, r = 0;
	uint64_t flags = clone_flags(b[0], &sig);
	for (size_t i = 0; i < n; i++) {
		if ((r = before_fork(ctx, b[i])) < 0)
			return r;
		ps[i] = &b[i]->pup;
		pids[i] = b[i]->pid;
	}
	puppet_clone_many(&ctx->tasks[b[0]->creator].pup, ps, pids, n, flags, sig, err);
	for (size_t i = 0; i < n; i++) {
		b[i]->created = err[i] == 0;
		if (err[i] < 0 && r >= 0)
			r = spawn_error(ctx, b[i], err[i]);
	}
	for (size_t i = 0; i < n && r >= 0; i++)
		r = made_one(ctx, b[i]);
	return r;
}

/* Can u be forked in the same batch as t? */
static bool same_batch(const struct rst_task *t, const struct rst_task *u)
{
	int ts, us;
	return !u->created && !u->ghost && u->creator == t->creator &&
	       clone_flags(u, &us) == clone_flags(t, &ts) && us == ts;
}

/*
 * Creates the tasks of the image and the session ghosts, each once its
 * creator exists (a session leader may come after the task it forks);
 * siblings that can, up to PUPPET_MANY_MAX at a time, by one batch.
 */
static int create_all(struct rst_ctx *ctx)
{
	size_t left = ctx->ntasks - 1; /* the root is made */
	while (left) {
		size_t before = left;
		for (size_t i = 0; i < ctx->ntasks; i++) {
			struct rst_task *t = &ctx->tasks[i];
			if (t->created || t->creator < 0 || !ctx->tasks[t->creator].created)
				continue;
			struct rst_task *b[PUPPET_MANY_MAX] = { t };
			size_t n = 1;
			for (size_t j = i + 1; !t->ghost && j < ctx->ntasks && n < PUPPET_MANY_MAX;
			     j++)
				if (same_batch(t, &ctx->tasks[j]))
					b[n++] = &ctx->tasks[j];
			int r = n > 1 ? create_batch(ctx, b, n) : create_one(ctx, t);
			if (r < 0)
				return r;
			left -= n;
		}
		if (left == before)
			return log_fail(&ctx->log, -EINVAL, "the tree's sessions form a cycle");
	}
	return 0;
}

static bool leads_a_group(struct rst_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; i < ctx->nimage; i++)
		if (ctx->tasks[i].pgid == pid)
			return true;
	return false;
}

/* Is t in group pgid (0: its own) already, inherited from its creator?
 * Asked from ckpt's side where pids are the same for both. */
static bool in_group(struct rst_ctx *ctx, struct rst_task *t, pid_t pgid)
{
	if (ctx->root_clone || ctx->pidns)
		return false;
	pid_t cur = getpgid(t->pup.pid);
	return cur > 0 && cur == (pgid ? pgid : t->pid);
}

static int join_group(struct rst_ctx *ctx, struct rst_task *t, pid_t pgid)
{
	/* a no-op setpgid costs a stop per process */
	if (in_group(ctx, t, pgid))
		return 0;
	long r = puppet_syscall(&t->pup, SYS_setpgid, 0, pgid);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d: cannot join process group %d: %s",
				t->pid, pgid, strerror((int)-r));
	return 0;
}

/* The group t must join: its own, ckpt's for the outside one, or 0 (none). */
static int group_target(struct rst_ctx *ctx, struct rst_task *t, pid_t *ret)
{
	*ret = 0;
	if (t->sid == t->pid || t->pgid == t->pid)
		return 0;
	if (outside_pgid(ctx, t->pgid)) {
		/* ckpt's group; in a container it stays the one inherited */
		*ret = ctx->root_clone || ctx->pidns ? 0 : getpgrp();
		return 0;
	}
	if (find_proc(ctx, t->pgid) || find_ghost(ctx, t->pgid)) {
		*ret = t->pgid;
		return 0;
	}
	/* its leader is gone: a ghost forked by this member leads it */
	if (ctx->ntasks == 2 * ctx->nimage)
		return -ENOSPC;
	struct rst_task *g = add_ghost(ctx, t->pgid, (int)(t - ctx->tasks), t->sid, t->pgid);
	int r = create_one(ctx, g);
	if (r < 0)
		return r;
	r = join_group(ctx, g, 0);
	if (r < 0)
		return r;
	*ret = t->pgid;
	return 0;
}

/*
 * Groups: leaders first, then members; a leader that has since moved to
 * another group moves last, once its old group has members.
 */
static int set_groups(struct rst_ctx *ctx)
{
	int r;
	for (size_t i = 0; i < ctx->nimage; i++) {
		struct rst_task *t = &ctx->tasks[i];
		if (t->sid != t->pid && leads_a_group(ctx, t->pid) && (r = join_group(ctx, t, 0)) < 0)
			return r;
	}
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < ctx->nimage; i++) {
			struct rst_task *t = &ctx->tasks[i];
			pid_t target;
			if (leads_a_group(ctx, t->pid) != (pass == 1))
				continue;
			r = group_target(ctx, t, &target);
			if (r < 0)
				return r;
			if (target && (r = join_group(ctx, t, target)) < 0)
				return r;
		}
	}
	return 0;
}

/* Ghosts exit and their parents reap them; then zombies exit and stay
 * (a ghost's parent may be a member that is a zombie: it reaps first). */
static int finish_dead(struct rst_ctx *ctx)
{
	for (size_t k = 0; k < 2 * ctx->ntasks; k++) {
		struct rst_task *t = &ctx->tasks[k % ctx->ntasks];
		if (k < ctx->ntasks ? !t->ghost : !t->zombie)
			continue;
		int r = puppet_exit(&t->pup, t->ghost ? 0 : t->exit_code);
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot make it exit: %s", t->pid,
					strerror(-r));
		if (!t->ghost)
			continue;
		struct rst_task *p = &ctx->tasks[t->parent];
		long w = puppet_syscall(&p->pup, SYS_wait4, t->pid, 0, __WALL, 0);
		if (w != t->pid)
			return log_fail(&ctx->log, w < 0 ? (int)w : -ECHILD,
					"pid %d: cannot reap ghost %d", p->pid, t->pid);
		t->created = false;
		log_debug(&ctx->log, "ghost %d: done", t->pid);
	}
	return 0;
}

/* Threads are forked by their (bare) leader, each with its tid, a few at
 * a time (one batch of clones each). */
static int create_threads(struct rst_ctx *ctx, struct rst_task *t)
{
	const uint64_t flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			       CLONE_SYSVSEM;
	for (size_t i = 0; i < t->nthreads; i += PUPPET_CLONE_MAX) {
		size_t n = MIN(t->nthreads - i, (size_t)PUPPET_CLONE_MAX);
		struct puppet *ps[PUPPET_CLONE_MAX];
		pid_t tids[PUPPET_CLONE_MAX];
		int err[PUPPET_CLONE_MAX];
		for (size_t j = 0; j < n; j++) {
			struct rst_task *th = &t->threads[i + j];
			int r = ctx->root_clone || ctx->pidns ? 0 : wait_pid_free(ctx, th->pid);
			if (r < 0)
				return r;
			ps[j] = &th->pup;
			tids[j] = th->pid;
		}
		puppet_clone_many(&t->pup, ps, tids, n, flags, 0, err);
		int r = 0;
		for (size_t j = 0; j < n; j++) {
			struct rst_task *th = &t->threads[i + j];
			th->created = err[j] == 0;
			if (err[j] < 0 && r >= 0)
				r = spawn_error(ctx, th, err[j]);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Step "create tasks": who forks whom planned, then every task forked. */
int tree_create_tasks(struct rst_ctx *ctx)
{
	int r;
	for (size_t i = 1; i < ctx->nimage; i++) {
		r = plan_session(ctx, &ctx->tasks[i]);
		if (r < 0)
			return r;
	}
	/* the root's session, once it is ready (its tty in its devpts) */
	r = made_one(ctx, &ctx->tasks[0]);
	return r < 0 ? r : create_all(ctx);
}

/* Step "groups". */
int tree_set_groups(struct rst_ctx *ctx)
{
	return set_groups(ctx);
}

/* Step "tree ready": threads made, ghosts and zombies gone. */
int tree_create_threads(struct rst_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nimage; i++) {
		int r = create_threads(ctx, &ctx->tasks[i]);
		if (r < 0)
			return r;
	}
	return finish_dead(ctx);
}
