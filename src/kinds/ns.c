/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A container's namespaces: pid, mount, uts, ipc, user and cgroup. They
 * are its root's, and every task of the container is in them (checked by
 * the checkpoint's ids, assign_vpids), so the kind's state and its one
 * record (NamespacesEntry) are the root's.
 *
 * Checkpoint: which namespaces the root has of its own (their /proc/PID/ns
 * inodes against ckpt's), its hostname (an injected uname), a devpts of
 * its own on /dev/pts (its mount options), its user namespace's id maps
 * (which the creds kind reads ids through). Time and network namespaces
 * are the timens and netns kinds' (timens.c, netns.c).
 * Restart: the load sets the flags the root is spawned with (rctx's
 * root_clone); at "spawn root" the maps of its new user namespace are
 * written from ckpt's side; at "root ready" it mounts its own /proc and
 * devpts and sets its hostname, before the other kinds (the cgroup kind's
 * namespace, tty's ptys in that devpts) and before anything forks.
 *
 * A plain tree (not a container) whose root has a uts namespace of its
 * own (systemd's ProtectHostname=yes, unshare -u) has a record too, with
 * CLONE_NEWUTS alone: every task of it must be in the root's, and the
 * restarted root unshares a new one at "root ready" (an injected unshare,
 * not a clone flag: it is the same for a root forked by --pidns's init,
 * and root_clone keeps meaning "a container", which the tree code asks),
 * where it sets the hostname and domainname saved. So for a mount
 * namespace of the root's own derived from ckpt's (PrivateTmp=yes,
 * unshare -m): CLONE_NEWNS, its mounts made slaves (mnt_slave) or private
 * as they were, and shared in peer groups of their own after that where
 * they were (mnt_shared: systemd's default MountFlags=shared); the mounts
 * it made of its own are the mnt kind's, as a host-rooted container's.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "kinds/mnt.h"
#include "kinds/ns.h"
#include "util/cleanup.h"
#include "util/par.h"
#include "util/userns.h"

enum { NS_ENTRY = REC_TYPE(KID_ns, 1) };

/* one line of a user namespace's uid_map or gid_map */
struct idmap {
	uint32_t inner, outer, count;
};
#define IDMAP_MAX 16

/*
 * The namespaces every task must share with the tree: a container's, its
 * root's; a plain subtree's, ckpt's own, since a subtree is restarted in
 * the restarting ckpt's (a process of it that unshared CLONE_NEWIPC would
 * come back without its SysV objects), but for uts and mnt: its root's,
 * which the restarted root unshares anew. Net, time and cgroup namespaces are
 * their kinds'; the mount namespace of a task other than the root is mnt's
 * (in_root_mntns). A thread has uts, ipc and pid_for_children of its own;
 * user and pid are its process's. pid_for_children is held to the tree's
 * pid namespace (a task that unshared CLONE_NEWPID would fork its children
 * into a new one).
 */
enum {
	SHARED_UTS,
	SHARED_IPC,
	SHARED_PIDC,
	SHARED_THREAD, /* those before are a thread's own */
	SHARED_USER = SHARED_THREAD,
	SHARED_PID,
	SHARED_MNT,
	SHARED_MAX
};
#define NS_LINK_MAX 48
static const char *const shared_names[SHARED_MAX] = { "uts",  "ipc", "pid_for_children",
						      "user", "pid", "mnt" };

struct ns_ckpt {
	NamespacesEntry e;
	char ref[SHARED_MAX][NS_LINK_MAX]; /* the tree's namespaces: "uts:[INODE]" */
	char hostname[65];
	char domainname[65];
	char devpts_opts[128];  /* its own devpts' mount options */
	uint64_t devpts_dev;    /* and its device, 0 if it has none */
	char uid_map[512], gid_map[512];
	struct idmap uids[IDMAP_MAX], gids[IDMAP_MAX];
	int nuids, ngids;       /* 0: no user namespace of its own */
};

/* --- checkpoint ------------------------------------------------------- */

static struct ns_ckpt *root_ns(struct ckpt_ctx *ctx)
{
	return ctx->ntasks ? ctx->tasks[0].kstate[KIND_ns] : NULL;
}

static uint32_t id_inside(const struct idmap *map, int n, uint32_t outer)
{
	if (!n)
		return outer;
	for (int i = 0; i < n; i++)
		if (outer >= map[i].outer && outer - map[i].outer < map[i].count)
			return map[i].inner + (outer - map[i].outer);
	return 65534;
}

uint32_t ns_uid_inside(struct ckpt_ctx *ctx, uint32_t uid)
{
	const struct ns_ckpt *n = root_ns(ctx);
	return n ? id_inside(n->uids, n->nuids, uid) : uid;
}

uint32_t ns_gid_inside(struct ckpt_ctx *ctx, uint32_t gid)
{
	const struct ns_ckpt *n = root_ns(ctx);
	return n ? id_inside(n->gids, n->ngids, gid) : gid;
}

bool ns_own_userns(struct ckpt_ctx *ctx)
{
	const struct ns_ckpt *n = root_ns(ctx);
	return n && n->nuids;
}

uint64_t ns_devpts_dev(struct ckpt_ctx *ctx)
{
	const struct ns_ckpt *n = root_ns(ctx);
	return n ? n->devpts_dev : 0;
}

/* Is pid in ckpt's namespace NAME? true if pid's cannot be read */
static bool same_ns(pid_t pid, const char *name)
{
	struct stat a, b;
	return proc_ns_stat(pid, name, &a) < 0 ||
	       (proc_ns_stat(0, name, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev);
}

static int parse_idmap(const char *text, struct idmap *map, int *n)
{
	*n = 0;
	for (const char *p = text; *p;) {
		unsigned a, b, c;
		int used;
		if (sscanf(p, " %u %u %u%n", &a, &b, &c, &used) != 3 || *n == IDMAP_MAX)
			return -EINVAL;
		map[(*n)++] = (struct idmap){ a, b, c };
		p += used;
		while (*p == '\n' || *p == ' ')
			p++;
	}
	return *n ? 0 : -EINVAL;
}

/* A container in a user namespace of its own: its uid and gid maps. */
static int read_idmaps(struct ckpt_ctx *ctx, struct ns_ckpt *n, pid_t pid)
{
	_cleanup_free_ char *u = NULL, *g = NULL;
	if (proc_read(pid, "uid_map", &u, NULL) < 0 || proc_read(pid, "gid_map", &g, NULL) < 0 ||
	    parse_idmap(u, n->uids, &n->nuids) < 0 || parse_idmap(g, n->gids, &n->ngids) < 0)
		return log_fail(&ctx->log, -EINVAL, "pid %d: cannot read its user namespace's id maps",
				pid);
	snprintf(n->uid_map, sizeof(n->uid_map), "%s", u);
	snprintf(n->gid_map, sizeof(n->gid_map), "%s", g);
	n->e.flags |= CLONE_NEWUSER;
	n->e.uid_map = n->uid_map;
	n->e.gid_map = n->gid_map;
	return 0;
}

/*
 * The devpts instance of its own a container has on /dev/pts (ckpt run
 * mounts one): the last devpts mount there in its mountinfo, when it is
 * not the one ckpt sees on /dev/pts.
 */
static int read_devpts(struct ckpt_ctx *ctx, struct ns_ckpt *n, struct task *root)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read(root->pid, "mountinfo", &text, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its mountinfo: %s", root->pid,
				strerror(-r));
	unsigned int maj, min;
	char point[32], type[16], opts[128];
	bool found = false;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *tail = strstr(line, " - ");
		if (sscanf(line, "%*u %*u %u:%u %*s %31s", &maj, &min, point) != 3 || !tail ||
		    sscanf(tail, " - %15s %*s %127s", type, opts) != 2 || strcmp(point, "/dev/pts") ||
		    strcmp(type, "devpts"))
			continue;
		found = true;
		n->devpts_dev = makedev(maj, min);
		snprintf(n->devpts_opts, sizeof(n->devpts_opts), "%s", opts);
	}
	struct stat host;
	if (!found || (stat("/dev/pts", &host) == 0 && host.st_dev == n->devpts_dev)) {
		n->devpts_dev = 0;
		return 0;
	}
	n->e.devpts = n->devpts_opts;
	log_debug(&ctx->log, "pid %d: a devpts of its own (%s)", root->pid, opts);
	return 0;
}

/* Its hostname and domainname, by an injected uname (the scratch area is
 * mapped). */
static int read_hostname(struct ckpt_ctx *ctx, struct ns_ckpt *n, struct task *root)
{
	struct utsname u;
	long r = puppet_syscall(&root->pup, SYS_uname, root->pup.scratch);
	if (r < 0 || puppet_read(&root->pup, root->pup.scratch, &u, sizeof(u)) < 0)
		return log_fail(&ctx->log, r < 0 ? (int)r : -EIO, "pid %d: cannot read its hostname",
				root->pid);
	snprintf(n->hostname, sizeof(n->hostname), "%s", u.nodename);
	snprintf(n->domainname, sizeof(n->domainname), "%s", u.domainname);
	n->e.hostname = n->hostname;
	n->e.domainname = n->domainname;
	return 0;
}

/*
 * /proc/TID/ns/NAME read into link (NS_LINK_MAX): "uts:[INODE]". A readlink
 * gives the namespace's name and inode with no lookup of the namespace
 * itself (a stat took 50% longer); /proc/TID reaches a thread too, with no
 * walk of its process's task/. -errno.
 */
static int ns_link(pid_t tid, const char *name, char *link)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", tid, name);
	ssize_t len = readlink(path, link, NS_LINK_MAX - 1);
	if (len < 0)
		return -errno;
	link[len] = '\0';
	return 0;
}

/* Is task tid's namespace k (shared_names) not ref? link: what it is. Not
 * when the task is gone: that is its own business. */
static bool ns_differs(pid_t tid, int k, const char *ref, char *link)
{
	char pid[NS_LINK_MAX];
	int r = ns_link(tid, shared_names[k], link);
	if (r == 0)
		return strcmp(link, ref) != 0;
	/* ns/pid_for_children of a task that unshared CLONE_NEWPID and forked
	 * nothing since is ENOENT (the namespace has no init yet), where its
	 * ns/pid is there */
	snprintf(link, NS_LINK_MAX, "pid:[unborn]");
	return r == -ENOENT && k == SHARED_PIDC && ns_link(tid, "pid", pid) == 0;
}

/* The reference namespaces (ns_ckpt.ref) from the root's or ckpt's own;
 * a plain tree's uts and mount namespaces are its root's (restarted in new
 * ones; the other tasks' mount namespace is mnt's). */
static int read_refs(struct ckpt_ctx *ctx, struct ns_ckpt *n)
{
	for (int k = 0; k < SHARED_MAX; k++) {
		bool root = ctx->container || k == SHARED_UTS || k == SHARED_MNT;
		pid_t pid = root ? ctx->tasks[0].pid : getpid();
		/* pid_for_children is held to the tree's pid namespace */
		const char *name = shared_names[k == SHARED_PIDC ? SHARED_PID : k];
		int r = ns_link(pid, name, n->ref[k]);
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d: cannot read its %s namespace: %s",
					pid, name, strerror(-r));
	}
	return 0;
}

/* One task to look at: a process (its process-wide namespaces too) or a
 * thread (uts, ipc and pid_for_children). */
struct shared_one {
	const struct task *t; /* the process */
	pid_t tid;            /* 0: the process itself */
	int bad;              /* -1, or the first SHARED_ index that differs */
};

struct shared_check {
	struct ckpt_ctx *ctx;
	const struct ns_ckpt *n;
	struct shared_one *v;
};

/* The namespaces v[i] must share: a container's root is in its own (but
 * for pid_for_children), the mount namespace of a task other than the
 * root is mnt's. */
static bool shared_wanted(struct ckpt_ctx *ctx, const struct shared_one *o, int k)
{
	bool root = o->t == &ctx->tasks[0] && !o->tid;
	if (o->tid)
		return k < SHARED_THREAD;
	return !(root && ctx->container && k != SHARED_PIDC) && !(k == SHARED_MNT && !root);
}

static void one_shared(void *arg, size_t i, unsigned slot)
{
	struct shared_check *a = arg;
	struct shared_one *o = &a->v[i];
	char link[NS_LINK_MAX];
	(void)slot;
	o->bad = -1;
	for (int k = 0; k < SHARED_MAX && o->bad < 0; k++)
		if (shared_wanted(a->ctx, o, k) &&
		    ns_differs(o->tid ? o->tid : o->t->pid, k, a->n->ref[k], link))
			o->bad = k;
}

static int refuse_ns(struct ckpt_ctx *ctx, const struct task *t, pid_t tid, int k,
		     const char *link, const char *ref)
{
	char own[NS_LINK_MAX];
	bool root = t == &ctx->tasks[0] && !tid && ctx->container;
	/* pid_for_children is looked at first, but a task in a pid namespace
	 * of its own (chromium's zygote, the init of one) has both: the
	 * namespace it is in is the reason */
	if (k == SHARED_PIDC && !root && ns_link(tid ? tid : t->pid, "pid", own) == 0 &&
	    strcmp(own, ref)) {
		k = SHARED_PID;
		link = own;
	}
	if (k == SHARED_PIDC)
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d%s%.0d: its children's pid namespace (%s) is not %s (unshare "
		    "CLONE_NEWPID%s); not supported yet",
		    t->pid, tid ? " thread " : "", tid, link,
		    ctx->container ? "the container's" : "ckpt's",
		    strcmp(link, "pid:[unborn]") ? "" : " without a fork since");
	if (ctx->container || k == SHARED_UTS)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d%s%.0d: in another %s namespace (%s) than the %s root (pid "
				"%d, %s); not supported yet",
				t->pid, tid ? " thread " : "", tid, shared_names[k], link,
				ctx->container ? "container's" : "tree's", ctx->tasks[0].pid, ref);
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d%s%.0d: its %s namespace (%s) is not ckpt's (%s): a process tree "
			"is restarted in ckpt's namespaces (but for uts and mount namespaces of "
			"its root's own), where it would lose it; not supported yet (a container "
			"is checkpointed by the pid of its init)",
			t->pid, tid ? " thread " : "", tid, shared_names[k], link, ref);
}

/* Every live task and thread of the tree in its namespaces (ns_ckpt.ref),
 * all at once on every CPU, or the first that is not refused by pid and
 * namespace. */
static int check_shared(struct ckpt_ctx *ctx, const struct ns_ckpt *n)
{
	size_t count = 0, m = 0;
	for (size_t i = 0; i < ctx->ntasks; i++)
		count += ctx->tasks[i].zombie ? 0 : 1 + ctx->tasks[i].nthreads;
	_cleanup_free_ struct shared_one *v = calloc(count ? count : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		const struct task *t = &ctx->tasks[i];
		for (size_t j = 0; !t->zombie && j <= t->nthreads; j++)
			v[m++] = (struct shared_one){ .t = t, .tid = j ? t->threads[j - 1].pid : 0 };
	}
	struct shared_check a = { .ctx = ctx, .n = n, .v = v };
	par_for(count, count >= 32 ? par_cpus() : 1, one_shared, &a);
	for (size_t i = 0; i < count; i++) {
		char link[NS_LINK_MAX];
		int k = v[i].bad;
		pid_t tid = v[i].tid ? v[i].tid : v[i].t->pid;
		if (k >= 0 && ns_differs(tid, k, n->ref[k], link))
			return refuse_ns(ctx, v[i].t, v[i].tid, k, link, n->ref[k]);
	}
	return 0;
}

/* A plain tree's root in a mount namespace of its own: saved with
 * whether its copies of ckpt's mounts are slaves of them or private, and
 * shared in groups of their own or not (mnt_subtree_prop, which refuses
 * what a restart cannot make again). */
static int subtree_mnt(struct ckpt_ctx *ctx, struct ns_ckpt *n, struct task *root)
{
	bool slave, shared;
	int r = mnt_subtree_prop(ctx, root->pid, &slave, &shared);
	if (r < 0)
		return r;
	n->e.flags |= CLONE_NEWNS;
	n->e.has_mnt_slave = true;
	n->e.mnt_slave = slave;
	n->e.has_mnt_shared = shared;
	n->e.mnt_shared = shared;
	log_info(&ctx->log, "pid %d: in a mount namespace of its own (%s%s)", root->pid,
		 slave ? "slaves of ckpt's mounts" : "private", shared ? ", shared" : "");
	return 0;
}

/* A plain tree's root in uts or mount namespaces of its own: its hostname
 * and domainname, its mounts' propagation, restored in new ones (the
 * record's CLONE_NEWUTS and CLONE_NEWNS alone). */
static int subtree_ns(struct ckpt_ctx *ctx, struct ns_ckpt *n, struct task *root)
{
	int r = 0;
	if (!same_ns(root->pid, "uts")) {
		n->e.flags = CLONE_NEWUTS;
		r = read_hostname(ctx, n, root);
		if (r >= 0)
			log_info(&ctx->log, "pid %d: in a uts namespace of its own (hostname '%s')",
				 root->pid, n->hostname);
	}
	if (r >= 0 && !same_ns(root->pid, "mnt"))
		r = subtree_mnt(ctx, n, root);
	return r;
}

/* At the root, every task: in the tree's namespaces. A container's root:
 * its namespaces (a subtree has none of its own, but for uts and mount
 * namespaces: without them its record is not written). */
static int ns_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct task *root = &ctx->tasks[0];
	if (t != root)
		return 0;
	struct ns_ckpt *n = task_state(root, KIND_ns, sizeof(*n));
	if (!n)
		return -ENOMEM;
	namespaces_entry__init(&n->e);
	int r = read_refs(ctx, n);
	if (r >= 0)
		r = check_shared(ctx, n);
	if (r < 0)
		return r;
	if (!ctx->container)
		return subtree_ns(ctx, n, t);
	n->e.flags = CLONE_NEWPID;
	r = same_ns(t->pid, "user") ? 0 : read_idmaps(ctx, n, t->pid);
	if (r >= 0 && !same_ns(t->pid, "mnt")) {
		n->e.flags |= CLONE_NEWNS;
		r = read_devpts(ctx, n, t);
	}
	/* on ckpt's root: its copies of ckpt's mounts slaves or private,
	 * shared or not, as they are (unshare --pid --fork --mount
	 * --propagation slave; ckpt run makes them private) */
	bool slave = false, shared = false;
	if (r >= 0 && (n->e.flags & CLONE_NEWNS))
		r = mnt_subtree_prop(ctx, t->pid, &slave, &shared);
	if (r < 0)
		return r;
	n->e.has_mnt_slave = n->e.mnt_slave = slave;
	n->e.has_mnt_shared = n->e.mnt_shared = shared;
	if (r >= 0 && !same_ns(t->pid, "uts")) {
		n->e.flags |= CLONE_NEWUTS;
		r = read_hostname(ctx, n, t);
	}
	if (r < 0)
		return r;
	if (!same_ns(t->pid, "ipc"))
		n->e.flags |= CLONE_NEWIPC;
	if (!same_ns(t->pid, "cgroup")) /* made again by the cgroup kind */
		n->e.flags |= CLONE_NEWCGROUP;
	/* network and time namespaces are the netns and timens kinds' */
	log_info(&ctx->log, "pid %d: a container (namespaces %#x)", t->pid, n->e.flags);
	return 0;
}

static int ns_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct ns_ckpt *n = t->kstate[KIND_ns];
	return n && n->e.flags ? ctx_write_msg(ctx, NS_ENTRY, &n->e.base) : 0;
}

/*
 * Before --kill: a container is restarted in namespaces of its own, which
 * take CAP_SYS_ADMIN, or a user namespace of the caller's own mapping the
 * one id each of its maps holds (those are then the only ids it has).
 */
static int ns_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	const struct ns_ckpt *n = t->kstate[KIND_ns];
	struct restart_caller *c = ctx->caller;
	if (!n || !n->e.flags || caller_can(c, CAP_SYS_ADMIN))
		return 0;
	if (!(n->e.flags & CLONE_NEWPID))
		return log_fail(&ctx->log, -EPERM,
				"pid %d: in %s namespace of its own; restarting it needs "
				"CAP_SYS_ADMIN, which this caller lacks",
				t->pid, n->e.flags & CLONE_NEWNS ? "a mount" : "a uts");
	if (!n->nuids)
		return log_fail(&ctx->log, -EPERM,
				"pid %d: a container without a user namespace of its own; "
				"restarting it needs CAP_SYS_ADMIN, which this caller lacks",
				t->pid);
	if (n->nuids != 1 || n->uids[0].count != 1 || n->ngids != 1 || n->gids[0].count != 1)
		return log_fail(&ctx->log, -EPERM,
				"pid %d: its user namespace maps several ids; only root can "
				"restart it",
				t->pid);
	if (!userns_can_make())
		return log_fail(&ctx->log, -EPERM,
				"pid %d: restarting this container needs a user namespace, which "
				"this caller cannot make",
				t->pid);
	c->userns = true;
	c->map_uid = n->uids[0].inner;
	c->map_gid = n->gids[0].inner;
	return 0;
}

/* --- restart ---------------------------------------------------------- */

const NamespacesEntry *ns_rst(struct rst_ctx *ctx)
{
	return ctx->ntasks ? ctx->tasks[0].kstate[KIND_ns] : NULL;
}

uint32_t ns_rst_flags(struct rst_ctx *ctx)
{
	const NamespacesEntry *e = ns_rst(ctx);
	return e ? e->flags : 0;
}

/*
 * The mount data of a container's own devpts from the options saved
 * (mountinfo's: "rw,gid=5,mode=620,ptmxmode=666"): numeric uid, gid,
 * mode, ptmxmode and max only. False if the options hold anything else.
 */
static bool devpts_data(const char *opts, char *out, size_t len)
{
	static const char *const keys[] = { "uid=", "gid=", "mode=", "ptmxmode=", "max=" };
	size_t n = (size_t)snprintf(out, len, "newinstance");
	if (strlen(opts) >= 128)
		return false;
	for (const char *o = opts; *o;) {
		size_t k = strcspn(o, ","), i = 0;
		if (k == 2 && !strncmp(o, "rw", 2))
			goto next;
		for (; i < 5; i++) {
			size_t kl = strlen(keys[i]);
			if (k > kl && k - kl <= 10 && !strncmp(o, keys[i], kl) &&
			    strspn(o + kl, "0123456789") == k - kl)
				break;
		}
		if (i == 5 || n + 1 + k >= len)
			return false;
		n += (size_t)snprintf(out + n, len - n, ",%.*s", (int)k, o);
	next:
		o += k + (o[k] == ',');
	}
	return true;
}

/* The root's record: namespaces a restart can make, and only those. */
static int ns_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	if (t != &ctx->tasks[0])
		return log_fail(&ctx->log, -EINVAL, "record %u: namespaces of pid %d, not of the root",
				rec->index, t->pid);
	NamespacesEntry *e =
		rctx_load_one(ctx, t, rec, KIND_ns, NS_ENTRY, &namespaces_entry__descriptor);
	if (!e)
		return -EINVAL;
	const uint32_t ok = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
			    CLONE_NEWUSER | CLONE_NEWCGROUP;
	bool user = e->flags & CLONE_NEWUSER;
	char data[160];
	if (e->devpts && (!(e->flags & CLONE_NEWNS) || !devpts_data(e->devpts, data, sizeof(data))))
		return log_fail(&ctx->log, -EINVAL, "record %u: the devpts options are not valid",
				rec->index);
	if ((e->hostname && strlen(e->hostname) > 64) ||
	    (e->domainname && strlen(e->domainname) > 64))
		return log_fail(&ctx->log, -EINVAL, "record %u: namespaces are not valid", rec->index);
	/* a plain tree's root in uts or mount namespaces of its own: those
	 * alone (no devpts: that is a container's) */
	if (!(e->flags & CLONE_NEWPID) && e->flags && !(e->flags & ~(CLONE_NEWUTS | CLONE_NEWNS)) &&
	    !e->uid_map && !e->gid_map && !e->devpts)
		return 0;
	if (!(e->flags & CLONE_NEWPID) || (e->flags & ~ok) || user != (e->uid_map && e->gid_map) ||
	    (user && (strlen(e->uid_map) > 500 || strlen(e->gid_map) > 500)) || t->pid != 1)
		return log_fail(&ctx->log, -EINVAL, "record %u: namespaces are not valid", rec->index);
	/* the cgroup namespace is unshared later (cgroup.c), in its cgroup */
	ctx->root_clone = e->flags & ~(uint32_t)CLONE_NEWCGROUP;
	return 0;
}

/* RESTART_PIDNS asked for a container: its own namespaces anyway. */
static int ns_prepare(struct rst_ctx *ctx)
{
	if (ctx->pidns && (ns_rst_flags(ctx) & CLONE_NEWPID)) {
		log_info(&ctx->log, "RESTART_PIDNS: the image is a container, restored in its own "
				    "namespaces anyway");
		ctx->pidns = false;
	}
	return 0;
}

/* The maps of its new user namespace, from ckpt's side, before anything
 * is injected: the saved ones (root) or the caller's own id. */
static int ns_root_spawned(struct rst_ctx *ctx, struct rst_task *t)
{
	const NamespacesEntry *e = t->kstate[KIND_ns];
	const char *what;
	if (!e || !(e->flags & CLONE_NEWUSER))
		return 0;
	int r = userns_write_maps(t->pup.pid, e->uid_map, e->gid_map, &what);
	if (r == -EDOM)
		return log_fail(&ctx->log, -EPERM,
				"the container's %s maps several ids; only root can restore it",
				what);
	if (r < 0 && !strcmp(what, "setgroups"))
		return log_fail(&ctx->log, r, "cannot deny setgroups in the user namespace: %s",
				strerror(-r));
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot write the user namespace's %s: %s", what,
				strerror(-r));
	return 0;
}

static long inject_str(struct puppet *p, size_t off, const char *s)
{
	return (long)puppet_scratch_put(p, off, s, strlen(s) + 1);
}

/* "/" and every mount under it made slaves of ckpt's or private, then
 * shared each in a new peer group of the namespace's own, as its copies
 * of ckpt's mounts were (mnt_slave, mnt_shared) */
static long copies_propagation(struct puppet *p, const NamespacesEntry *ns)
{
	long r = puppet_syscall(p, SYS_mount, 0, inject_str(p, 0, "/"), 0,
				MS_REC | (ns->mnt_slave ? MS_SLAVE : MS_PRIVATE), 0);
	if (r >= 0 && ns->mnt_shared)
		r = puppet_syscall(p, SYS_mount, 0, inject_str(p, 0, "/"), 0, MS_REC | MS_SHARED,
				   0);
	return r;
}

/* A plain tree's root: its new uts and mount namespaces, its mounts made
 * slaves of ckpt's or private as they were, then shared in groups of
 * their own if they were (nothing it mounts leaks out). */
static int subtree_unshare(struct rst_ctx *ctx, struct rst_task *t, const NamespacesEntry *ns)
{
	struct puppet *p = &t->pup;
	long r = puppet_syscall(p, SYS_unshare, ns->flags & (CLONE_NEWUTS | CLONE_NEWNS));
	if (rst_check(ctx, t, r, "unshare") < 0)
		return (int)r;
	if (ns->flags & CLONE_NEWNS) {
		r = copies_propagation(p, ns);
		if (rst_check(ctx, t, r, "setting its mounts' propagation") < 0)
			return (int)r;
	}
	log_debug(&ctx->log, "pid %d: namespaces %#x of its own", t->pid, ns->flags);
	return 0;
}

/* Its hostname and domainname. */
static int set_uts(struct rst_ctx *ctx, struct rst_task *t, const NamespacesEntry *ns)
{
	struct puppet *p = &t->pup;
	long r = 0;
	if (ns->hostname) {
		r = puppet_syscall(p, SYS_sethostname, inject_str(p, 0, ns->hostname),
				   strnlen(ns->hostname, 64));
		if (rst_check(ctx, t, r, "sethostname") < 0)
			return (int)r;
	}
	if (ns->domainname) {
		r = puppet_syscall(p, SYS_setdomainname, inject_str(p, 0, ns->domainname),
				   strnlen(ns->domainname, 64));
		if (rst_check(ctx, t, r, "setdomainname") < 0)
			return (int)r;
	}
	return 0;
}

/*
 * The container's root, pid 1 of its new namespaces: its own /proc (the
 * mounts are made private first, so nothing leaks out), its own devpts
 * when it had one (its ptys come next, tty.c), and hostname. A plain
 * tree's root: its uts and mount namespaces (the mnt kind's mounts come
 * next).
 */
static int ns_root_ready(struct rst_ctx *ctx, struct rst_task *t)
{
	const NamespacesEntry *ns = t->kstate[KIND_ns];
	struct puppet *p = &t->pup;
	long r = 0;

	if (!ns)
		return 0;
	if (!(ns->flags & CLONE_NEWPID) && (r = subtree_unshare(ctx, t, ns)) < 0)
		return (int)r;
	if ((ns->flags & CLONE_NEWPID) && (ns->flags & CLONE_NEWNS)) {
		/* slaves of ckpt's mounts where they were (on ckpt's root) */
		r = copies_propagation(p, ns);
		/* a root of its own: its /proc and devpts are the mnt kind's */
		if (r >= 0 && !mnt_rst_tree(ctx))
			r = puppet_syscall(p, SYS_mount, inject_str(p, 0, "proc"),
					   inject_str(p, 64, "/proc"), inject_str(p, 0, "proc"),
					   MS_NOSUID | MS_NODEV | MS_NOEXEC, 0);
		if (rst_check(ctx, t, r, "mounting the container's /proc") < 0)
			return (int)r;
	}
	if (ns->devpts && !mnt_rst_tree(ctx)) {
		char data[160];
		devpts_data(ns->devpts, data, sizeof(data));
		r = puppet_syscall(p, SYS_mount, inject_str(p, 0, "devpts"),
				   inject_str(p, 64, "/dev/pts"), inject_str(p, 0, "devpts"),
				   MS_NOSUID | MS_NOEXEC, inject_str(p, 128, data));
		if (rst_check(ctx, t, r, "mounting the container's devpts") < 0)
			return (int)r;
	}
	if ((ns->flags & CLONE_NEWUTS) && (r = set_uts(ctx, t, ns)) < 0)
		return (int)r;
	log_debug(&ctx->log, "container: pid %d outside, namespaces %#x", p->pid, ns->flags);
	return 0;
}

static const ProtobufCMessageDescriptor *ns_descriptor(uint32_t sub)
{
	return sub == REC_SUB(NS_ENTRY) ? &namespaces_entry__descriptor : NULL;
}

const struct kind_ops ns_ops = {
	.collect = ns_collect,
	.dump = ns_dump,
	.check_restore = ns_check_restore,
	.load = ns_load,
	.prepare = ns_prepare,
	.root_spawned = ns_root_spawned,
	.root_ready = ns_root_ready,
	.free_state = free,
	.descriptor = ns_descriptor,
};

struct ns_thread_read {
	const struct task *t;
	int dfd; /* /proc/PID/task */
	const char *name;
	struct ns_thread_ino *v;
};

/* ns/NAME of thread i by a readlink of TID/ns/NAME relative to its
 * process's task directory: "mnt:[INODE]". A stat of it opens the
 * namespace's file (7.3-8.1 ms for 1,000 threads on one CPU, against
 * 5.9-6.8; /proc/TID/ns/NAME from / 6.9-7.6). */
static void ns_ino_one(void *arg, size_t i, unsigned slot)
{
	struct ns_thread_read *a = arg;
	char path[48], link[NS_LINK_MAX];
	(void)slot;
	snprintf(path, sizeof(path), "%d/ns/%s", a->t->threads[i].pid, a->name);
	ssize_t len = readlinkat(a->dfd, path, link, sizeof(link) - 1);
	if (len < 0) {
		a->v[i].err = -errno;
		return;
	}
	link[len] = '\0';
	const char *at = strchr(link, '[');
	char *end = NULL;
	a->v[i].ino = at ? strtoull(at + 1, &end, 10) : 0;
	if (!at || !end || *end != ']')
		a->v[i].err = -EINVAL;
}

struct ns_thread_ino *ns_threads_ino(const struct task *t, const char *name)
{
	char path[48];
	struct ns_thread_ino *v = calloc(t->nthreads ? t->nthreads : 1, sizeof(*v));
	if (!v || !t->nthreads) /* no thread: nothing to open (2 opens a process) */
		return v;
	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	_cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct ns_thread_read a = { .t = t, .dfd = dfd, .name = name, .v = v };
	par_for(t->nthreads, t->nthreads >= 32 ? par_cpus() : 1, ns_ino_one, &a);
	return v;
}
