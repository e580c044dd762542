/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Who outside the tree holds a file the tree shares (a pipe, a FIFO), for
 * the refusals of kinds that find one of its ends "held outside the image":
 * the holders by pid, name and fd, and, when one is the process that
 * started the tree, that the fd was inherited and how to start it instead
 * or save the fd as external (a root's fd only: other tasks' fds cannot be).
 * And who outside a container is in it, or holds one of its namespaces
 * (ctx_look_outside).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "util/cleanup.h"
#include "util/par.h"

#define MAX_NAMED 3

static bool in_tree(void *arg, pid_t pid)
{
	struct ckpt_ctx *ctx = arg;
	return pid == getpid() || ctx_find_task(ctx, pid) != NULL;
}

static bool mode_matches(uint32_t flags, int accmode)
{
	int m = (int)(flags & O_ACCMODE);
	return accmode < 0 || m == accmode || m == O_RDWR;
}

/* Appends to buf (len bytes, NUL-terminated) at *at; cut short when full. */
static void append(char *buf, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	if (*at + 1 >= len)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}

/* Is the root's fd this file? Only a root's fd can be saved as external. */
static bool root_holds(pid_t root, int fd, uint64_t dev, uint64_t ino)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", root, fd);
	return stat(path, &st) == 0 && st.st_ino == ino && (!dev || st.st_dev == dev);
}

bool ctx_outside_holders(struct ckpt_ctx *ctx, uint64_t dev, uint64_t ino, int accmode, int fd,
			 char *buf, size_t len)
{
	struct proc_holder h[32];
	const struct task *root = ctx_find_task(ctx, ctx->pid);
	pid_t parent = root ? root->stat.ppid : 0;
	int n = proc_find_holders(dev, ino, in_tree, ctx, h, sizeof(h) / sizeof(h[0]));
	size_t named = 0, at = 0;
	bool inherited = false;

	if (!len)
		return false;
	buf[0] = '\0';
	for (int i = 0; i < n && i < (int)(sizeof(h) / sizeof(h[0])); i++) {
		if (!mode_matches(h[i].flags, accmode))
			continue;
		if (named == MAX_NAMED) {
			append(buf, len, &at, ", ...");
			break;
		}
		append(buf, len, &at, "%s pid %d (%s) fd %d", named ? "," : " by", h[i].pid,
		       h[i].comm, h[i].fd);
		named++;
		if (h[i].pid == parent && parent > 0)
			inherited = true;
	}
	if (inherited)
		append(buf, len, &at,
		       "; pid %d is the parent that started the tree: the fd was inherited; "
		       "start the program with ckpt run (fds above 2 closed) or close it (%d>&-)",
		       parent, fd);
	if (inherited && root_holds(ctx->pid, fd, dev, ino))
		append(buf, len, &at, ", or save it as external (--external fd:%d, given again "
		       "at restart with --inherit-fd %d:FD)", fd, fd);
	return inherited;
}

/* --- who outside the tree is in a container -------------------------- */

/*
 * The namespaces of a container that a restart makes anew. A process
 * outside the tree in one of the first N_JOINED (setns: nsenter -n, ip
 * netns exec, a sidecar sharing a pod's network) would stay in the old
 * one, cut off: its connections to the container's sockets, its SysV
 * objects, its mounts. Any of them bound on a path, or held open by an fd
 * outside, would still name the old one.
 */
static const char *const ns_names[] = { "net", "ipc", "mnt", "uts", "pid", "user", "cgroup",
					"time" };
#define N_NS (sizeof(ns_names) / sizeof(ns_names[0]))
#define N_JOINED 3

/* What the parallel pass found of one process outside the tree. */
enum found { FOUND_NOTHING, FOUND_ENTERED, FOUND_JOINED, FOUND_THREAD, FOUND_FD };
struct outsider {
	pid_t pid;
	enum found found;
	pid_t id;        /* FOUND_ENTERED: its pid inside; FOUND_THREAD: the thread */
	int fd;          /* FOUND_FD */
	size_t which;    /* the namespace: FOUND_JOINED, FOUND_THREAD, FOUND_FD */
	struct stat mnt; /* its mount namespace (st_ino 0: not read) */
};

/* What each process outside the tree is compared with. */
struct look {
	struct ckpt_ctx *ctx;
	struct stat pidns, mine; /* the container's pid namespace, ckpt's */
	uint32_t depth;          /* the container's level: its root's NSpid count */
	pid_t parent;            /* the root's */
	struct stat ns[N_NS];
	bool own[N_NS];          /* ns[i] is the container's, and not ckpt's too */
	struct outsider *o;      /* every process outside the tree */
	size_t n;
	struct stat *mnts;       /* the mount namespaces whose mounts were read */
	size_t nmnts;
	int r;
};

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/* Is the pid namespace at fd the one at st, or inside it, up to levels
 * parents away? */
static bool pidns_within(int fd, const struct stat *st, uint32_t levels)
{
	_cleanup_close_ int ns = dup(fd);
	for (uint32_t i = 0; ns >= 0; i++) {
		struct stat at;
		if (fstat(ns, &at) < 0)
			return false;
		if (same_file(&at, st))
			return true;
		if (i == levels)
			return false;
		int up = ioctl(ns, NS_GET_PARENT);
		close(ns);
		ns = up;
	}
	return false;
}

/* Is pid ckpt or a process of ckpt's (the Landlock reference inside a
 * container, the guardian)? */
static bool ckpts(pid_t pid)
{
	for (int i = 0; i < 8 && pid > 1; i++) {
		if (pid == getpid())
			return true;
		_cleanup_free_ char *text = NULL;
		struct proc_stat st;
		if (proc_read(pid, "stat", &text, NULL) < 0 || proc_parse_stat(text, &st) < 0)
			return false;
		pid = st.ppid;
	}
	return false;
}

/* The first of the container's namespaces (of the first N_JOINED kinds)
 * that dir, a process's or a thread's directory in /proc, is in: its
 * index; N_JOINED if none. The mount namespace's stat into mnt, if it was
 * read and mnt is not NULL. */
static size_t joined(const struct look *l, int dir, struct stat *mnt)
{
	char path[16];
	struct stat at;
	for (size_t i = 0; i < N_JOINED; i++) {
		snprintf(path, sizeof(path), "ns/%s", ns_names[i]);
		if (!l->own[i] || fstatat(dir, path, &at, 0) < 0)
			continue;
		if (mnt && !strcmp(ns_names[i], "mnt"))
			*mnt = at;
		if (same_file(&at, &l->ns[i]))
			return i;
	}
	return N_JOINED;
}

/* Did pid (its pid namespace at) enter the container's pid namespace, or
 * is it in one nested inside? Then its pid inside in *vpid; a zombie has
 * nothing to lose. */
static bool entered(const struct look *l, pid_t pid, const struct stat *at, pid_t *vpid)
{
	if (!same_file(at, &l->pidns) && same_file(at, &l->mine))
		return false; /* most of the machine: above the container */
	_cleanup_free_ char *text = NULL;
	struct proc_status st;
	if (proc_read(pid, "status", &text, NULL) < 0 || proc_parse_status(text, &st) < 0 ||
	    st.state == 'Z' || st.nspid_n < l->depth)
		return false;
	*vpid = st.nspid[l->depth - 1];
	if (same_file(at, &l->pidns))
		return true;
	if (st.nspid_n == l->depth)
		return false;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 && pidns_within(fd, &l->pidns, st.nspid_n - l->depth);
}

/* The directory name under dir, listed; NULL if it cannot be. */
static DIR *opendir_at(int dir, const char *name)
{
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* A thread of the process at dir (not its first, pid) in one of the
 * joined namespaces of the container's: its tid, the namespace's index in
 * *which; 0 if none. (A thread may join a network or ipc namespace alone,
 * and a mount namespace once it has unshared its filesystem.) The task
 * directory's link count is 2 and one per thread: most processes have
 * one, and their task directory is not read. */
static pid_t joined_thread(const struct look *l, int dir, pid_t pid, size_t *which)
{
	struct stat st;
	if (fstatat(dir, "task", &st, 0) < 0 || st.st_nlink <= 3)
		return 0;
	_cleanup_closedir_ DIR *d = opendir_at(dir, "task");
	for (struct dirent *e; d && (e = readdir(d));) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);
		if (*end || tid <= 0 || tid == pid)
			continue;
		_cleanup_close_ int t = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (t >= 0 && (*which = joined(l, t, NULL)) < N_JOINED)
			return (pid_t)tid;
	}
	return 0;
}

/* The first fd of the process at dir open on one of the container's
 * namespaces (as setns tools and container managers keep them): its
 * number, the namespace's index in *which; -1 if none. */
static int holds_ns(const struct look *l, int dir, size_t *which)
{
	_cleanup_closedir_ DIR *d = opendir_at(dir, "fd");
	for (struct dirent *e; d && (e = readdir(d));) {
		char *end;
		long n = strtol(e->d_name, &end, 10);
		struct stat st;
		if (*end || end == e->d_name || fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		for (*which = 0; *which < N_NS; (*which)++)
			if (l->own[*which] && same_file(&st, &l->ns[*which]))
				return (int)n;
	}
	return -1;
}

/* The parallel pass: one process outside the tree, what it has of the
 * container's, o->found. */
static void look_at(void *arg, size_t i, unsigned slot)
{
	(void)slot;
	struct look *l = arg;
	struct outsider *o = &l->o[i];
	char path[32];
	struct stat at;
	snprintf(path, sizeof(path), "/proc/%d", o->pid);
	_cleanup_close_ int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0 || fstatat(dir, "ns/pid", &at, 0) < 0)
		return; /* gone, a zombie, or a kernel thread */
	if (entered(l, o->pid, &at, &o->id)) {
		o->found = FOUND_ENTERED;
		return;
	}
	/* the root's parent made the namespaces and stays in them (unshare
	 * --fork --pid --mount): it waits for the root */
	if (o->pid != l->parent) {
		if ((o->which = joined(l, dir, &o->mnt)) < N_JOINED) {
			o->found = FOUND_JOINED;
			return;
		}
		if ((o->id = joined_thread(l, dir, o->pid, &o->which)) > 0) {
			o->found = FOUND_THREAD;
			return;
		}
	}
	if ((o->fd = holds_ns(l, dir, &o->which)) >= 0) {
		o->found = FOUND_FD;
		return;
	}
	if (!o->mnt.st_ino && fstatat(dir, "ns/mnt", &o->mnt, 0) < 0)
		o->mnt.st_ino = 0;
}

/* Logs a refusal of process pid, "pid P (COMM...) WHY", unless it is
 * ckpt's own; what comes in the parentheses after its name is in extra. */
static void refuse(struct look *l, pid_t pid, const char *extra, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void refuse(struct look *l, pid_t pid, const char *extra, const char *fmt, ...)
{
	if (ckpts(pid))
		return;
	_cleanup_free_ char *comm = NULL;
	if (proc_read_one(pid, "comm", &comm) == 0)
		comm[strcspn(comm, "\n")] = '\0';
	char why[640];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	l->r = log_fail(&l->ctx->log, -EOPNOTSUPP, "pid %d (%s%s): %s", pid, comm ? comm : "?",
			extra, why);
}

/* What the parallel pass found of o, refused. */
static void report(struct look *l, const struct outsider *o)
{
	char extra[64] = "";
	/* which names a namespace only for what was found in one */
	bool in_ns = o->found != FOUND_NOTHING && o->found != FOUND_ENTERED;
	const char *name = in_ns ? ns_names[o->which] : "";
	unsigned long ino = in_ns ? (unsigned long)l->ns[o->which].st_ino : 0;
	switch (o->found) {
	case FOUND_NOTHING:
		break;
	case FOUND_ENTERED:
		snprintf(extra, sizeof(extra), ", pid %d in the container", o->id);
		refuse(l, o->pid, extra,
		       "entered the container's pid namespace from outside (setns, as nsenter, "
		       "docker exec and lxc-attach do) and is no descendant of its init pid %d: "
		       "it would be left out of the image; let it end first",
		       l->ctx->pid);
		break;
	case FOUND_THREAD:
		snprintf(extra, sizeof(extra), ", its thread %d", o->id);
		/* fall through */
	case FOUND_JOINED:
		refuse(l, o->pid, extra,
		       "is in the %s namespace of container %d (%s:[%lu]) but not in its tree "
		       "(it joined it by setns, as nsenter and ip netns exec do): a restart makes "
		       "that namespace anew and it would stay in the old one, cut off; let it "
		       "end first",
		       name, l->ctx->pid, name, ino);
		break;
	case FOUND_FD:
		refuse(l, o->pid, "",
		       "its fd %d holds the %s namespace of container %d (%s:[%lu]) open: a "
		       "restart makes that namespace anew and the fd would still name the old "
		       "one; close it first",
		       o->fd, name, l->ctx->pid, name, ino);
		break;
	}
}

/*
 * Namespaces of the container's bound on a path of the mount namespace
 * pid is in (0: ckpt's): `ip netns attach NAME PID`, a CNI plugin's
 * /run/netns/cni-..., `unshare --net=FILE`. The path would still name the
 * old namespace, kept alive by the mount.
 */
static void look_mounts(struct look *l, pid_t pid)
{
	_cleanup_free_ char *text = NULL;
	if (proc_read(pid ? pid : getpid(), "mountinfo", &text, NULL) < 0) {
		if (!pid)
			l->r = log_fail(&l->ctx->log, -EIO, "cannot read /proc/self/mountinfo");
		return; /* gone since */
	}
	char in[64] = "";
	if (pid)
		snprintf(in, sizeof(in), " in the mount namespace of pid %d", pid);
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char root[64], where[512];
		const char *fs = strstr(line, " - ");
		unsigned long ino;
		if (!fs || strncmp(fs, " - nsfs ", 8) ||
		    sscanf(line, "%*u %*u %*s %63s %511s", root, where) != 2)
			continue;
		char *br = strchr(root, ':');
		if (!br || sscanf(br, ":[%lu]", &ino) != 1)
			continue;
		*br = '\0';
		for (size_t i = 0; i < N_NS; i++)
			if (l->own[i] && !strcmp(root, ns_names[i]) && l->ns[i].st_ino == ino)
				l->r = log_fail(&l->ctx->log, -EOPNOTSUPP,
						"container %d: its %s namespace (%s:[%lu]) is bound on "
						"%s%s (ip netns attach, a CNI plugin, unshare --%s=FILE): "
						"a restart makes the namespace anew and that path would "
						"still name the old one; unmount it first",
						l->ctx->pid, ns_names[i], ns_names[i], ino, where, in,
						ns_names[i]);
	}
}

/* The mounts of o's mount namespace, if no process's of the same was read
 * yet. l->mnts has room for every process's. */
static void look_mntns(struct look *l, const struct outsider *o)
{
	if (!o->mnt.st_ino)
		return;
	for (size_t i = 0; i < l->nmnts; i++)
		if (same_file(&l->mnts[i], &o->mnt))
			return;
	l->mnts[l->nmnts++] = o->mnt;
	look_mounts(l, o->pid);
}

/* Every process of the machine but ckpt and the tree's, into l->o. */
static int list_outsiders(struct look *l)
{
	_cleanup_closedir_ DIR *d = opendir("/proc");
	if (!d)
		return log_fail(&l->ctx->log, -errno, "cannot list /proc: %m");
	size_t cap = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == getpid() || ctx_find_task(l->ctx, (pid_t)pid))
			continue;
		if (l->n == cap) {
			cap = cap ? 2 * cap : 256;
			struct outsider *o = reallocarray(l->o, cap, sizeof(*o));
			if (!o)
				return log_fail(&l->ctx->log, -ENOMEM, "out of memory");
			l->o = o;
		}
		l->o[l->n++] = (struct outsider){ .pid = (pid_t)pid, .fd = -1 };
	}
	return 0;
}

int ctx_look_outside(struct ckpt_ctx *ctx)
{
	struct look l = { .ctx = ctx, .parent = ctx->ntasks ? ctx->tasks[0].stat.ppid : 0 };
	_cleanup_free_ char *text = NULL;
	struct proc_status root;
	if (!ctx->container || !ctx->ntasks)
		return 0;
	if (proc_ns_stat(ctx->pid, "pid", &l.pidns) < 0 || proc_ns_stat(0, "pid", &l.mine) < 0 ||
	    proc_read(ctx->pid, "status", &text, NULL) < 0 || proc_parse_status(text, &root) < 0)
		return log_fail(&ctx->log, -ESRCH, "pid %d: cannot read its pid namespace: %m",
				ctx->pid);
	l.depth = root.nspid_n;
	for (size_t i = 0; i < N_NS; i++) {
		struct stat mine;
		l.own[i] = proc_ns_stat(ctx->pid, ns_names[i], &l.ns[i]) == 0 &&
			   !(proc_ns_stat(0, ns_names[i], &mine) == 0 && same_file(&mine, &l.ns[i]));
	}
	int r = list_outsiders(&l);
	/* room for ckpt's and the container's mount namespaces, and one for
	 * each process */
	if (r >= 0 && !(l.mnts = calloc(l.n + 2, sizeof(*l.mnts))))
		r = log_fail(&ctx->log, -ENOMEM, "out of memory");
	if (r < 0) {
		free(l.o);
		return r;
	}
	/* a stat of a namespace link costs about 10 us here, and a
	 * machine of a thousand processes takes some 70 ms on one core */
	par_for(l.n, par_cpus(), look_at, &l);
	for (size_t i = 0; i < l.n; i++)
		report(&l, &l.o[i]);
	/* ckpt's mounts, then each other mount namespace's once; the
	 * container's own are its mounts kind's */
	if (proc_ns_stat(0, "mnt", &l.mnts[l.nmnts]) == 0)
		l.nmnts++;
	if (proc_ns_stat(ctx->pid, "mnt", &l.mnts[l.nmnts]) == 0)
		l.nmnts++;
	look_mounts(&l, 0);
	for (size_t i = 0; i < l.n; i++)
		if (l.o[i].found == FOUND_NOTHING)
			look_mntns(&l, &l.o[i]);
	free(l.mnts);
	free(l.o);
	return l.r;
}
