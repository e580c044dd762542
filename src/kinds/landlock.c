/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Landlock (landlock_restrict_self): a task sandboxed by it is refused.
 * Nothing of a Landlock domain can be read back (the kernel shows no
 * rule, not even that a task has a domain), so a restart would run the
 * program unconfined: a sandbox lost without a word.
 *
 * What shows it: a task in a Landlock domain may not look at a task
 * outside it (ptrace_may_access fails, even for kcmp, which only
 * compares), where the same user could otherwise. So ckpt makes, for
 * each real uid and gid of the tree's tasks, a reference process of that
 * uid and gid, dumpable, with no capability and in no domain (sleep(1)
 * run by a vfork, or a fork of ckpt's that sleeps; either is killed with
 * ckpt), and each task and thread runs, in its probes, a kcmp(KCMP_VM) of
 * itself and the reference: a result is no domain, EPERM a domain (or
 * another LSM that forbids the look, which ckpt cannot tell apart:
 * refused as well, naming both). No capability: the kernel lets a task
 * look at a process of its user namespace only if that one's permitted
 * capabilities are a subset of its own, and a root daemon with a reduced
 * bounding set would otherwise fail the look as if sandboxed. The
 * references are killed at "finish". A container's tasks name only the
 * processes of its pid namespace, and look without a capability check
 * only at those of its user namespace: their references are made in
 * there (make_ref_in).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx.h"
#include "util/cleanup.h"
#include "util/userns.h"

struct landlock_ref {
	uint32_t uid, gid;
	pid_t pid;    /* < 0: it could not be made (-errno) */
	pid_t vpid;   /* the pid the tree's tasks name it by */
	pid_t keeper; /* a container's: ckpt's fork that holds it; else 0 */
};

struct landlock_refs {
	size_t n;
	struct landlock_ref r[];
};

struct landlock_ckpt {
	int call;    /* the probe; -ENOENT: not asked */
	int ref_err; /* the reference could not be made (-errno) */
	uint32_t uid;
	pid_t ref;   /* the reference's pid */
	pid_t vref;  /* and the one the task names it by */
};

/*
 * The reference process of uid and gid by vfork and exec of sleep(1), with
 * nothing of ckpt's but its ids: a fork would make ckpt's memory
 * copy-on-write until the reference dies, and ckpt writes much of it while
 * it collects (1,000 threads: 40 ms more). Its exec gives it no
 * capability: no ambient ones, and, as uid 0, SECBIT_NOROOT (which takes
 * CAP_SETPCAP). 0 if it could not be made so (then make_ref forks).
 */
static pid_t spawn_ref(uint32_t uid, uint32_t gid)
{
	static char *const argv[] = {"sleep", "infinity", NULL};
	static char *const envp[] = {NULL};
	pid_t parent = getpid();
	bool same = geteuid() == uid && getegid() == gid;
	pid_t pid = vfork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		/* raw calls only: the parent's memory, until the exec */
		if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
		    syscall(SYS_getppid) != parent)
			syscall(SYS_exit, 1);
		if (!same && (syscall(SYS_setgroups, 0, NULL) < 0 ||
			      syscall(SYS_setresgid, gid, gid, gid) < 0 ||
			      syscall(SYS_setresuid, uid, uid, uid) < 0))
			syscall(SYS_exit, 1);
		if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
		    (uid == 0 && syscall(SYS_prctl, PR_SET_SECUREBITS, SECBIT_NOROOT, 0, 0, 0) < 0))
			syscall(SYS_exit, 1);
		syscall(SYS_close_range, 3, ~0u, 0);
		syscall(SYS_execve, "/bin/sleep", argv, envp);
		syscall(SYS_exit, 127);
	}
	/* vfork returns once the exec has let go of ckpt's memory, before it
	 * has made the new one dumpable: until then a task of that uid may
	 * not look at the reference, and the probe would take that for a
	 * Landlock domain (a window of microseconds; not shown to be what
	 * refused nginx's workers once in CI). The exec names the task right
	 * after, and gives up root's capabilities (SECBIT_NOROOT) later
	 * still: "sleep" with none tells it is that far, a zombie that it
	 * failed. At most 2 s. */
	for (int i = 0; i < 20000; i++) {
		_cleanup_free_ char *comm = NULL, *status = NULL;
		struct proc_status now;
		if (proc_read_one(pid, "status", &status) < 0 ||
		    proc_parse_status(status, &now) < 0 || now.state == 'Z' ||
		    proc_read_one(pid, "comm", &comm) < 0 ||
		    (!strcmp(comm, "sleep\n") && now.cap_prm == 0))
			break;
		usleep(100);
	}
	/* the exec is done, or the child is exiting: its ids tell */
	_cleanup_free_ char *text = NULL;
	struct proc_status ps;
	if (proc_read_one(pid, "status", &text) == 0 && proc_parse_status(text, &ps) == 0 &&
	    ps.state != 'Z' && ps.uid[0] == uid && ps.uid[1] == uid && ps.uid[2] == uid &&
	    ps.gid[0] == gid && ps.gid[1] == gid && ps.gid[2] == gid && ps.cap_prm == 0)
		return pid;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}

/* The reference process of uid and gid: in no Landlock domain, dumpable,
 * with no capability, killed if ckpt dies; its pid once it has its ids, or
 * -errno. spawn_ref's, else a fork of ckpt's that sleeps. */
static pid_t make_ref(uint32_t uid, uint32_t gid)
{
	pid_t spawned = spawn_ref(uid, gid);
	if (spawned > 0)
		return spawned;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		/* raw calls: in the fork of a process with threads */
		bool same = geteuid() == uid && getegid() == gid;
		if (!same && (syscall(SYS_setgroups, 0, NULL) < 0 ||
			      syscall(SYS_setresgid, gid, gid, gid) < 0 ||
			      syscall(SYS_setresuid, uid, uid, uid) < 0))
			_exit(1);
		struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct none[2] = {{0}};
		if (syscall(SYS_getuid) != uid || syscall(SYS_getgid) != gid ||
		    syscall(SYS_capset, &h, none) < 0 ||
		    syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
		    prctl(PR_SET_DUMPABLE, 1) < 0)
			_exit(1);
		char ok = 1;
		if (write(p[1], &ok, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	char ok = 0;
	ssize_t n;
	while ((n = read(p[0], &ok, 1)) < 0 && errno == EINTR)
		;
	close(p[0]);
	if (n == 1 && ok == 1)
		return pid;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -EPERM;
}

/*
 * A container's reference of uid and gid (ids as ckpt sees them): a fork
 * of ckpt's, the keeper, joins the pid namespace of the container's root
 * (and its user namespace when it has one of its own: a task there looks
 * without a capability check only at a process of its namespace) and
 * forks the reference in there, which takes the ids as the namespace
 * maps them, drops every capability and reports its pid inside; the
 * keeper reports both pids, waits for the reference and exits once it is
 * reaped. Either dies with its parent. The reference is a process of the
 * container's pid namespace outside the tree while it lives: it is made
 * after step "seize" has listed that namespace, and killed at "finish".
 */
static int make_ref_in(pid_t root, uint32_t uid, uint32_t gid, struct landlock_ref *ref)
{
	char umap[512], gmap[512];
	bool userns = !proc_ns_same(root, 0, "user"); /* gone: its maps fail */
	int64_t iu = uid, ig = gid;
	if (userns && (userns_read_map(root, "uid_map", umap, sizeof(umap)) < 0 ||
		       userns_read_map(root, "gid_map", gmap, sizeof(gmap)) < 0 ||
		       (iu = userns_map_id(umap, uid, false)) < 0 ||
		       (ig = userns_map_id(gmap, gid, false)) < 0))
		return -EOVERFLOW;
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, root, 0);
	int p[2];
	if (pidfd < 0 || pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t parent = getpid();
	pid_t keeper = fork();
	if (keeper < 0) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (keeper == 0) { /* system calls only: ckpt has threads */
		int q[2];
		/* nothing of ckpt's open but what it needs (the image, the
		 * tasks' sockets: an fd held here would outlive ckpt's close) */
		int lo = pidfd < p[1] ? pidfd : p[1], hi = pidfd < p[1] ? p[1] : pidfd;
		syscall(SYS_close_range, 0u, (unsigned)lo - 1, 0);
		syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0);
		syscall(SYS_close_range, (unsigned)hi + 1, ~0u, 0);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent ||
		    setns(pidfd, CLONE_NEWPID | (userns ? CLONE_NEWUSER : 0)) < 0 ||
		    pipe2(q, O_CLOEXEC) < 0)
			_exit(1);
		int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
		pid_t child = self < 0 ? -1 : fork();
		if (child == 0) {
			struct pollfd gone = { .fd = self, .events = POLLIN };
			struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
			struct __user_cap_data_struct none[2] = { { 0 } };
			close(q[0]);
			close(p[1]);
			/* the keeper may have died before the death signal was set */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || poll(&gone, 1, 0) != 0)
				_exit(1);
			/* no groups; a user namespace may deny setgroups (an
			 * unprivileged one's): the look does not ask for them */
			if ((syscall(SYS_setgroups, 0, NULL) < 0 && !userns) ||
			    syscall(SYS_setresgid, ig, ig, ig) < 0 ||
			    syscall(SYS_setresuid, iu, iu, iu) < 0 || syscall(SYS_capset, &h, none) < 0 ||
			    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
			    prctl(PR_SET_DUMPABLE, 1) < 0)
				_exit(1);
			pid_t inside = getpid();
			if (write(q[1], &inside, sizeof(inside)) != sizeof(inside))
				_exit(1);
			for (;;)
				pause();
		}
		close(q[1]);
		pid_t both[2] = { child, 0 };
		ssize_t n = -1;
		while (child > 0 && (n = read(q[0], &both[1], sizeof(both[1]))) < 0 && errno == EINTR)
			;
		if (n == sizeof(both[1]) && write(p[1], both, sizeof(both)) == sizeof(both))
			while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
				;
		_exit(1);
	}
	close(p[1]);
	pid_t both[2];
	ssize_t n;
	while ((n = read(p[0], both, sizeof(both))) < 0 && errno == EINTR)
		;
	close(p[0]);
	if (n != sizeof(both)) {
		kill(keeper, SIGKILL);
		while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR)
			;
		return -EPERM;
	}
	ref->pid = both[0];
	ref->vpid = both[1];
	ref->keeper = keeper;
	return 0;
}

/* The reference for uid and gid, made on first use (NULL: no memory) */
static const struct landlock_ref *ref_of(struct ckpt_ctx *ctx, uint32_t uid, uint32_t gid)
{
	struct landlock_refs *rs = ctx->landlock_refs;
	for (size_t i = 0; rs && i < rs->n; i++)
		if (rs->r[i].uid == uid && rs->r[i].gid == gid)
			return &rs->r[i];
	size_t n = rs ? rs->n : 0;
	rs = realloc(rs, sizeof(*rs) + (n + 1) * sizeof(rs->r[0]));
	if (!rs)
		return NULL;
	rs->n = n + 1;
	ctx->landlock_refs = rs;
	struct landlock_ref *ref = &rs->r[n];
	*ref = (struct landlock_ref){ .uid = uid, .gid = gid };
	if (ctx->container) {
		int r = make_ref_in(ctx->pid, uid, gid, ref);
		if (r < 0)
			ref->pid = r;
	} else {
		ref->pid = ref->vpid = make_ref(uid, gid);
	}
	return ref;
}

static int landlock_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct landlock_ckpt *k = task_state(t, KIND_landlock, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->call = -ENOENT;
	const struct landlock_ref *ref = ref_of(ctx, t->status.uid[0], t->status.gid[0]);
	if (!ref)
		return -ENOMEM;
	k->uid = ref->uid;
	k->ref = ref->pid;
	k->vref = ref->vpid;
	k->ref_err = ref->pid < 0 ? ref->pid : 0;
	if (!k->ref_err)
		k->call =
		    task_probe_call(t, PUPPET_CALL(SYS_kcmp, t->vpid, ref->vpid, KCMP_VM, 0, 0));
	return 0;
}

/* Is pid in the namespace of that name ("user", "pid") where the
 * reference is: ckpt's, or a container's root's? */
static bool same_ns(const struct ckpt_ctx *ctx, pid_t pid, const char *name)
{
	return proc_ns_same(pid, ctx->container ? ctx->pid : 0, name);
}

/*
 * A look refused: asked once more by a call of its own (a task in a
 * domain is refused again). CI saw nginx's workers, restored once,
 * refused so once, the next run passing, cause unknown; the log line
 * (info: in the test runner's logs) says what the reference was like
 * then, for the next time.
 */
static long look_again(struct ckpt_ctx *ctx, struct task *t, const struct landlock_ckpt *k,
		       long first)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status ps = { 0 };
	struct stat dir = { 0 };
	char path[32];
	snprintf(path, sizeof(path), "/proc/%d", k->ref);
	bool known = proc_read_one(k->ref, "status", &text) == 0 &&
		     proc_parse_status(text, &ps) == 0 && stat(path, &dir) == 0;
	long again = puppet_syscall(&t->pup, SYS_kcmp, t->vpid, k->vref, KCMP_VM, 0, 0);
	log_info(&ctx->log,
		 "%s %d: kcmp with reference %d (uid %u): %s; asked again: %s; the reference: "
		 "%s state %c, uid %u, gid %u, capabilities %llx, its /proc owned by %u",
		 t->leader ? "thread" : "pid", t->pid, k->ref, k->uid, strerror((int)-first),
		 again < 0 ? strerror((int)-again) : "allowed", known ? "" : "(unreadable)",
		 known ? ps.state : '?', ps.uid[0], ps.gid[0], (unsigned long long)ps.cap_prm,
		 (unsigned)dir.st_uid);
	return again;
}

static int landlock_collect(struct ckpt_ctx *ctx, struct task *t)
{
	const struct landlock_ckpt *k = t->kstate[KIND_landlock];
	const char *who = t->leader ? "thread" : "pid";
	if (k && k->ref_err)
		return log_fail(
		    &ctx->log, k->ref_err,
		    "%s %d: cannot tell whether Landlock sandboxes it: no process of its "
		    "uid %u could be made to compare it with (%s)",
		    who, t->pid, k->uid, strerror(-k->ref_err));
	if (!k || k->call == -ENOENT)
		return 0;
	long r = task_probe_ret(t, k->call);
	if (r >= 0 || r == -ENOSYS)
		return 0;
	if ((r == -EPERM || r == -EACCES) && !same_ns(ctx, t->pid, "user"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"%s %d: cannot tell whether Landlock sandboxes it: it is in "
				"another user namespace than %s, where it may not look at a "
				"process of that one's",
				who, t->pid, ctx->container ? "the container's root" : "ckpt");
	/* the reference's pid is ckpt's: a task in a pid namespace of its own
	 * (chromium's zygote and renderers) finds no such process */
	if (r == -ESRCH && !same_ns(ctx, t->pid, "pid"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"%s %d: cannot tell whether Landlock sandboxes it: it is in "
				"another pid namespace than %s, where the process ckpt compares "
				"it with has no pid",
				who, t->pid, ctx->container ? "the container's root" : "ckpt");
	if (r == -EPERM || r == -EACCES)
		r = look_again(ctx, t, k, r);
	if (r >= 0)
		return 0;
	if (r == -EPERM || r == -EACCES)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"%s %d: is sandboxed by Landlock (it may not look at a process of "
				"its own uid %u outside its domain; or another security module "
				"forbids that): its rules cannot be read back, and a restart would "
				"run it unconfined",
				who, t->pid, k->uid);
	return log_fail(&ctx->log, (int)r,
			"%s %d: cannot tell whether Landlock sandboxes it (kcmp of a process of "
			"its uid: %s)",
			who, t->pid, strerror((int)-r));
}

static void landlock_finish(struct ckpt_ctx *ctx)
{
	struct landlock_refs *rs = ctx->landlock_refs;
	for (size_t i = 0; rs && i < rs->n; i++) {
		const struct landlock_ref *ref = &rs->r[i];
		if (ref->pid > 0)
			kill(ref->pid, SIGKILL);
		/* a keeper exits once it has reaped its reference */
		pid_t child = ref->keeper > 0 ? ref->keeper : ref->pid;
		while (child > 0 && waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	free(rs);
	ctx->landlock_refs = NULL;
}

const struct kind_ops landlock_ops = {
    .per_thread = true,
    .probe = landlock_probe,
    .collect = landlock_collect,
    .finish = landlock_finish,
    .free_state = free,
};
