/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cgroup v2 membership. Checkpoint saves, for each process, its cgroup's
 * path as ckpt sees it (the "0::" line of /proc/PID/cgroup, relative to
 * ckpt's cgroup namespace root), each cgroup once (an object). A cgroup
 * that holds only processes of the image, or is a container's own (the
 * root of its cgroup namespace), also has its limits saved: memory.max,
 * memory.high, memory.swap.max, cpu.max, cpu.weight, pids.max, the hugetlb
 * limits and cgroup.max.depth / max.descendants, those of its files that
 * exist (a controller enabled in its parent).
 *
 * A thread in another cgroup than its process (a threaded cgroup,
 * cgroup.type "threaded") is saved with it: restart makes the cgroup
 * threaded again and writes the thread's tid to its cgroup.threads after
 * the process joined its own.
 *
 * Refused, by name: a task outside ckpt's cgroup namespace ("/.." paths); a
 * cgroup other than the root while no cgroup2 is mounted where ckpt can
 * reach it; a thread apart from its process in a cgroup that is not
 * threaded; a cgroup v1 hierarchy where the task is not in ckpt's own v1
 * cgroup (v1 membership is not saved, and would otherwise be lost).
 *
 * Restart moves each process, from ckpt's side, into its cgroup (its pid
 * as ckpt sees it written to cgroup.procs) at the first restore step,
 * before anything is charged to it. A cgroup that exists is joined as it
 * is; if it holds no process its saved limits are set, if it holds others
 * they are not changed (the log says which differ). A missing one is made
 * (mkdir -p under the mount), the controllers its limits need enabled in
 * its ancestors' subtree_control, its limits set. When the restart fails
 * (or is a dry run) the cgroups it made are removed again. A cgroup that
 * cannot be made or joined fails the restart, except for a lack of
 * permission (EACCES, EPERM, EROFS: a user without a delegated subtree):
 * then the task stays in ckpt's cgroup, with a warning that names the path
 * and the limits lost.
 *
 * A container's root in a cgroup namespace of its own is moved into its
 * cgroup as it is made (tree.c) and unshares CLONE_NEWCGROUP there, so the
 * tasks it forks share the namespace and see "/" as their root again.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.pb-c.h"
#include "core/ctx.h"
#include "kinds/ns.h"
#include "util/cgroup.h"
#include "util/cleanup.h"

enum {
	CGROUP_DIR = REC_TYPE(KID_cgroup, 1),
	CGROUP_TASK = REC_TYPE(KID_cgroup, 2),
};

#define LIMITS_MAX 32

/* checkpoint: one cgroup */
struct cg_dir {
	CgroupDir e;
	bool force_own; /* a container's own cgroup */
	size_t nlimits;
	CgroupLimit limits[LIMITS_MAX];
	CgroupLimit *lp[LIMITS_MAX];
};

struct cg_task {
	CgroupTask e;
};

/* restart: one cgroup */
struct cg_rdir {
	CgroupDir *e;
	bool ready;  /* made or checked: tasks may join */
	bool lost;   /* cannot be joined for lack of permission */
	char **made; /* the directories this restart made for it */
	size_t nmade;
};

static uint64_t path_key(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void free_dir(void *ptr)
{
	struct cg_dir *d = ptr;
	if (!d)
		return;
	for (size_t i = 0; i < d->nlimits; i++) {
		free(d->limits[i].name);
		free(d->limits[i].value);
	}
	free(d->e.path);
	free(d);
}

/* The v1 hierarchies the task is in where ckpt is not. */
static int check_v1(struct ckpt_ctx *ctx, struct task *t, const char *text, const char *self)
{
	int r = 0;
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		size_t n = strcspn(p, "\n");
		if (!strncmp(p, "0::", 3))
			continue;
		/* the same line in ckpt's own file: same hierarchy, same cgroup */
		bool same = false;
		for (const char *q = self; q && *q && !same;
		     q = strchr(q, '\n'), q = q ? q + 1 : NULL)
			same = strcspn(q, "\n") == n && !strncmp(p, q, n);
		if (same)
			continue;
		r = log_fail(&ctx->log, -EOPNOTSUPP,
			     "pid %d: cgroup v1 '%.*s' is not ckpt's own: v1 cgroups are not saved "
			     "(only cgroup v2 is)",
			     t->pid, (int)n, p);
	}
	return r;
}

static int find_dir(struct ckpt_ctx *ctx, const char *path, struct obj **ret);

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/*
 * The threads in cgroup path (its cgroup.threads, ids as ckpt sees them),
 * sorted, into *ret (n of them); NULL if it cannot be read.
 */
static pid_t *threads_in(const char *path, size_t *n)
{
	char mnt[CG_PATH_MAX], file[CG_PATH_MAX + 32];
	size_t len = 0, cap = 16384, count = 0;
	*n = 0;
	if (cg_mount(mnt, sizeof(mnt)) < 0 ||
	    (size_t)snprintf(file, sizeof(file), "%s%s/cgroup.threads", mnt,
			     strcmp(path, "/") ? path : "") >= sizeof(file))
		return NULL;
	_cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *text = malloc(cap);
	if (fd < 0 || !text)
		return NULL;
	for (;;) {
		if (cap - len < 2) {
			char *nt = realloc(text, cap * 2);
			if (!nt)
				return NULL;
			text = nt;
			cap *= 2;
		}
		ssize_t r = read(fd, text + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return NULL;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	text[len] = '\0';
	for (size_t i = 0; i < len; i++)
		count += text[i] == '\n';
	pid_t *v = malloc((count ? count : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (char *p = text, *end; *p && *n < count; p = end) {
		long tid = strtol(p, &end, 10);
		if (end == p)
			break;
		v[(*n)++] = (pid_t)tid;
	}
	qsort(v, *n, sizeof(*v), cmp_pid);
	return v;
}

/*
 * Threads in other cgroups than their process: threaded cgroups. Those
 * that its cgroup's cgroup.threads lists are with it (one read, where each
 * thread's /proc file was one: 1,000 of them for 1,000 threads); the
 * others, if any, are looked for one by one.
 */
static int collect_threads(struct ckpt_ctx *ctx, struct task *t, struct cg_task *k,
			   const char *path)
{
	size_t nwith = 0;
	_cleanup_free_ pid_t *with = t->nthreads ? threads_in(path, &nwith) : NULL;
	for (size_t i = 0; i < t->nthreads; i++) {
		_cleanup_free_ char *text = NULL;
		char name[64], tpath[CG_PATH_MAX], type[32];
		struct obj *o;
		if (with && bsearch(&t->threads[i].pid, with, nwith, sizeof(*with), cmp_pid))
			continue; /* with its process */
		snprintf(name, sizeof(name), "task/%d/cgroup", t->threads[i].pid);
		if (proc_read_one(t->pid, name, &text) < 0 ||
		    cg_v2_path(text, tpath, sizeof(tpath)) < 0 || !strcmp(tpath, path))
			continue; /* gone, no v2, or with its process */
		char mnt[CG_PATH_MAX];
		int r = cg_mount(mnt, sizeof(mnt));
		if (r >= 0)
			r = cg_read(mnt, tpath, "cgroup.type", type, sizeof(type));
		if (r < 0 || strcmp(type, "threaded") || !strncmp(tpath, "/..", 3))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"thread %d of pid %d: in cgroup %s apart from its process "
					"(%s), which is not a threaded cgroup ckpt can see: not "
					"supported",
					t->threads[i].pid, t->pid, tpath, path);
		if ((r = find_dir(ctx, tpath, &o)) < 0)
			return r;
		((struct cg_dir *)o->ptr)->e.has_threaded = true;
		((struct cg_dir *)o->ptr)->e.threaded = true;
		CgroupThread **th = realloc(k->e.threads, (k->e.n_threads + 1) * sizeof(*th));
		if (!th)
			return -ENOMEM;
		k->e.threads = th;
		if (!(th[k->e.n_threads] = malloc(sizeof(**th))))
			return -ENOMEM;
		cgroup_thread__init(th[k->e.n_threads]);
		th[k->e.n_threads]->tid = (uint32_t)t->threads[i].vpid;
		th[k->e.n_threads++]->dir = o->id;
	}
	return 0;
}

static void free_task_state(void *ptr)
{
	struct cg_task *k = ptr;
	if (!k)
		return;
	for (size_t i = 0; i < k->e.n_threads; i++)
		free(k->e.threads[i]);
	free(k->e.threads);
	free(k);
}

/* The container's root: is its cgroup the root of its cgroup namespace?
 * Asked by an injected read of its own /proc/self/cgroup ("0::/"). */
static int check_ns_root(struct ckpt_ctx *ctx, struct task *t)
{
	static const char path[] = "/proc/self/cgroup";
	struct puppet *p = &t->pup;
	char buf[512] = {0}, mine[CG_PATH_MAX];
	uint64_t rpath = puppet_scratch_put(p, 0, path, sizeof(path));
	if (!rpath)
		return -EFAULT;
	long fd = puppet_syscall(p, SYS_openat, AT_FDCWD, rpath, O_RDONLY | O_CLOEXEC);
	long n = fd < 0 ? fd : puppet_syscall(p, SYS_read, fd, rpath + 64, sizeof(buf) - 1);
	if (fd >= 0)
		puppet_syscall(p, SYS_close, fd);
	if (n < 0 || puppet_read(p, rpath + 64, buf, (size_t)n) < 0)
		return log_fail(&ctx->log, n < 0 ? (int)n : -EIO,
				"pid %d: cannot read its cgroup inside its namespace", t->pid);
	if (cg_v2_path(buf, mine, sizeof(mine)) < 0 || strcmp(mine, "/"))
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d: its cgroup namespace's root is not its own cgroup (it is in "
		    "%s inside): not supported",
		    t->pid, buf);
	return 0;
}

/*
 * What cgroup_collect reads of ckpt itself, the same for every process:
 * read at the first one and kept for the checkpoint (ctx->cg_self), where
 * each process read /proc/self/cgroup, /proc/self/mountinfo (the whole
 * table, for cg_mount) and stat'd /proc/self/ns/cgroup again.
 */
struct cg_self {
	int mnt_r;              /* cg_mount's result; mnt valid if 0 */
	char mnt[CG_PATH_MAX];
	bool ns_ok;             /* ns_dev, ns_ino: /proc/self/ns/cgroup's */
	dev_t ns_dev;
	ino_t ns_ino;
	char text[];            /* /proc/self/cgroup */
};

static int self_of(struct ckpt_ctx *ctx, struct cg_self **ret)
{
	if (ctx->cg_self) {
		*ret = ctx->cg_self;
		return 0;
	}
	_cleanup_free_ char *text = NULL;
	int r = proc_read(0, "cgroup", &text, NULL);
	if (r < 0)
		return r;
	size_t n = strlen(text);
	struct cg_self *s = malloc(sizeof(*s) + n + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s->text, text, n + 1);
	s->mnt_r = cg_mount(s->mnt, sizeof(s->mnt));
	struct stat st;
	s->ns_ok = stat("/proc/self/ns/cgroup", &st) == 0;
	s->ns_dev = s->ns_ok ? st.st_dev : 0;
	s->ns_ino = s->ns_ok ? st.st_ino : 0;
	*ret = ctx->cg_self = s;
	return 0;
}

/* Are the two tasks (0: ckpt, whose namespace is self's) in one cgroup namespace? */
static bool same_cgroup_ns(const struct cg_self *self, pid_t a, pid_t b)
{
	char path[64];
	struct stat sa, sb;
	snprintf(path, sizeof(path), "/proc/%d/ns/cgroup", a);
	if (stat(path, &sa) < 0)
		return true;
	if (!b)
		return self->ns_ok && sa.st_ino == self->ns_ino && sa.st_dev == self->ns_dev;
	snprintf(path, sizeof(path), "/proc/%d/ns/cgroup", b);
	return stat(path, &sb) == 0 && sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev;
}

static int find_dir(struct ckpt_ctx *ctx, const char *path, struct obj **ret)
{
	uint64_t key = path_key(path);
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_cgroup, key));) {
		struct cg_dir *d = o->ptr;
		if (!strcmp(d->e.path, path)) {
			*ret = o;
			return 0;
		}
	}
	struct cg_dir *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	cgroup_dir__init(&d->e);
	if (!(d->e.path = strdup(path))) {
		free(d);
		return -ENOMEM;
	}
	int r = objhash_add(&ctx->objs, KIND_cgroup, key, 0, d, ret);
	if (r < 0) {
		free_dir(d);
		return r;
	}
	d->e.id = (*ret)->id;
	return 0;
}

static int cgroup_collect(struct ckpt_ctx *ctx, struct task *t)
{
	_cleanup_free_ char *text = NULL;
	struct cg_self *self = NULL;
	char path[CG_PATH_MAX];
	int r = proc_read(t->pid, "cgroup", &text, NULL);
	if (r >= 0)
		r = self_of(ctx, &self);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its cgroups: %s", t->pid,
				strerror(-r));
	if ((r = check_v1(ctx, t, text, self->text)) < 0)
		return r;
	if (cg_v2_path(text, path, sizeof(path)) < 0)
		return 0; /* no cgroup v2 hierarchy here */
	if (!strncmp(path, "/..", 3))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: its cgroup %s is outside ckpt's cgroup namespace", t->pid,
				path);
	/* a cgroup namespace: only the container's own, made by its root */
	bool own_ns = false;
	if (!same_cgroup_ns(self, t->pid, 0)) {
		if (!ctx->container || !same_cgroup_ns(self, t->pid, ctx->tasks[0].pid) ||
		    same_cgroup_ns(self, ctx->tasks[0].pid, 0))
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d: in a cgroup namespace that is not its container's: "
			    "not supported",
			    t->pid);
		own_ns = t == &ctx->tasks[0];
	}
	if (self->mnt_r < 0) {
		if (!strcmp(path, "/") && !own_ns)
			return 0; /* the root: where a restart puts it anyway */
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: in cgroup %s, but no cgroup2 file system of ckpt's cgroup "
				"namespace is mounted",
				t->pid, path);
	}
	if (own_ns && (r = check_ns_root(ctx, t)) < 0)
		return r;
	struct cg_task *k = task_state(t, KIND_cgroup, sizeof(*k));
	struct obj *o;
	if (!k)
		return -ENOMEM;
	cgroup_task__init(&k->e);
	if ((r = collect_threads(ctx, t, k, path)) < 0)
		return r;
	if ((r = find_dir(ctx, path, &o)) < 0)
		return log_fail(&ctx->log, r, "pid %d: cgroup %s: %s", t->pid, path, strerror(-r));
	k->e.dir = o->id;
	if (own_ns) {
		k->e.has_ns_root = k->e.ns_root = true;
		((struct cg_dir *)o->ptr)->force_own = true;
	}
	return 0;
}

static int add_limit(struct cg_dir *d, const char *name, const char *value)
{
	if (d->nlimits == LIMITS_MAX)
		return 0;
	CgroupLimit *l = &d->limits[d->nlimits];
	cgroup_limit__init(l);
	l->name = strdup(name);
	l->value = strdup(value);
	if (!l->name || !l->value) {
		free(l->name);
		free(l->value);
		return -ENOMEM;
	}
	d->lp[d->nlimits++] = l;
	return 0;
}

/* Its limit files that exist: the fixed ones, then hugetlb's. */
static int read_limits(const char *mnt, struct cg_dir *d)
{
	char value[256];
	int r;
	for (size_t i = 0; i < cg_nlimit_names; i++)
		if (cg_read(mnt, d->e.path, cg_limit_names[i], value, sizeof(value)) == 0 &&
		    (r = add_limit(d, cg_limit_names[i], value)) < 0)
			return r;
	char hp[CG_PATH_MAX + 8];
	snprintf(hp, sizeof(hp), "%s%s", mnt, strcmp(d->e.path, "/") ? d->e.path : "");
	_cleanup_closedir_ DIR *dir = opendir(hp);
	r = 0;
	for (struct dirent *de; r >= 0 && dir && (de = readdir(dir));)
		if (!strncmp(de->d_name, "hugetlb.", 8) && cg_limit_name_ok(de->d_name) &&
		    cg_read(mnt, d->e.path, de->d_name, value, sizeof(value)) == 0)
			r = add_limit(d, de->d_name, value);
	if (r < 0)
		return r;
	d->e.n_limits = d->nlimits;
	d->e.limits = d->lp;
	return 0;
}

/* Does every process in the cgroup belong to the image? */
static bool holds_only_image(struct ckpt_ctx *ctx, const char *mnt, const char *path)
{
	char file[CG_PATH_MAX + 16];
	snprintf(file, sizeof(file), "%s%s/cgroup.procs", mnt, strcmp(path, "/") ? path : "");
	_cleanup_fclose_ FILE *f = fopen(file, "re");
	int pid;
	if (!f)
		return false;
	while (fscanf(f, "%d", &pid) == 1)
		if (!ctx_find_task(ctx, pid))
			return false;
	return true;
}

static int cgroup_collect_end(struct ckpt_ctx *ctx)
{
	char mnt[CG_PATH_MAX];
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_cgroup, o));) {
		struct cg_dir *d = o->ptr;
		if (cg_mount(mnt, sizeof(mnt)) < 0)
			return 0;
		if (strcmp(d->e.path, "/") &&
		    (d->force_own || holds_only_image(ctx, mnt, d->e.path))) {
			d->e.own = true;
			int r = read_limits(mnt, d);
			if (r < 0)
				return log_fail(&ctx->log, r,
						"cgroup %s: cannot read its limits: %s", d->e.path,
						strerror(-r));
		}
		log_debug(&ctx->log, "cgroup %s: %s, %zu limit(s) saved", d->e.path,
			  d->e.own ? "the image's own" : "shared", d->nlimits);
	}
	return 0;
}

static int dump_dir(struct ckpt_ctx *ctx, uint32_t id)
{
	struct obj *o;
	int r = objhash_get(&ctx->objs, id, KIND_cgroup, &o);
	if (r < 0 || o->dumped)
		return r;
	struct cg_dir *d = o->ptr;
	if ((r = ctx_write_msg(ctx, CGROUP_DIR, &d->e.base)) < 0)
		return r;
	o->dumped = true;
	return 0;
}

static int cgroup_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct cg_task *k = t->kstate[KIND_cgroup];
	if (!k)
		return 0;
	int r = dump_dir(ctx, k->e.dir);
	for (size_t i = 0; r >= 0 && i < k->e.n_threads; i++)
		r = dump_dir(ctx, k->e.threads[i]->dir);
	return r < 0 ? r : ctx_write_msg(ctx, CGROUP_TASK, &k->e.base);
}

/* --- restart ---------------------------------------------------------- */

static void free_rdir(void *ptr)
{
	struct cg_rdir *d = ptr;
	if (!d)
		return;
	for (size_t i = 0; i < d->nmade; i++)
		free(d->made[i]);
	free(d->made);
	if (d->e)
		cgroup_dir__free_unpacked(d->e, NULL);
	free(d);
}

static int load_dir(struct rst_ctx *ctx, const struct img_record *rec)
{
	CgroupDir *e = rctx_unpack(ctx, rec, &cgroup_dir__descriptor);
	if (!e)
		return -EINVAL;
	bool ok = cg_path_ok(e->path) && e->n_limits <= LIMITS_MAX;
	for (size_t i = 0; ok && i < e->n_limits; i++)
		ok = cg_limit_name_ok(e->limits[i]->name) && strlen(e->limits[i]->value) < 200 &&
		     !strchr(e->limits[i]->value, '\n');
	struct cg_rdir *d = ok ? calloc(1, sizeof(*d)) : NULL;
	if (!d) {
		cgroup_dir__free_unpacked(e, NULL);
		return ok ? -ENOMEM
			  : log_fail(&ctx->log, -EINVAL, "record %u: cgroup entry is not valid",
				     rec->index);
	}
	d->e = e;
	int r = objhash_add(&ctx->objs, KIND_cgroup, 0, e->id, d, NULL);
	if (r < 0) {
		uint32_t id = e->id; /* e goes with d */
		free_rdir(d);
		return log_fail(&ctx->log, -EINVAL, "record %u: cgroup id %u: %s", rec->index,
				id, strerror(-r));
	}
	return 0;
}

static int cgroup_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	if (rec->type == CGROUP_DIR)
		return load_dir(ctx, rec);
	CgroupTask *e =
	    rctx_load_one(ctx, t, rec, KIND_cgroup, CGROUP_TASK, &cgroup_task__descriptor);
	struct obj *o;
	if (!e)
		return -EINVAL;
	for (size_t i = 0; i < e->n_threads; i++)
		if (objhash_get(&ctx->objs, e->threads[i]->dir, KIND_cgroup, &o) < 0)
			return log_fail(&ctx->log, -EINVAL,
					"record %u: cgroup of a thread of pid "
					"%d is not valid",
					rec->index, t->pid);
	if (objhash_get(&ctx->objs, e->dir, KIND_cgroup, &o) < 0 ||
	    (e->ns_root &&
	     (t != &ctx->tasks[0] || !(ns_rst_flags(ctx) & CLONE_NEWCGROUP))))
		return log_fail(&ctx->log, -EINVAL, "record %u: cgroup of pid %d is not valid",
				rec->index, t->pid);
	return 0;
}

static bool denied(int r)
{
	return r == -EACCES || r == -EPERM || r == -EROFS;
}

/* mkdir -p of the cgroup, each directory made noted in d->made. */
static int make_path(struct cg_rdir *d, const char *mnt, char *ret_where)
{
	const char *rel = d->e->path;
	for (const char *p = rel; *p == '/';) {
		const char *next = strchr(p + 1, '/');
		size_t n = next ? (size_t)(next - rel) : strlen(rel);
		size_t ml = strlen(mnt);
		if (ml + n >= CG_PATH_MAX)
			return -ENAMETOOLONG;
		memcpy(ret_where, mnt, ml);
		memcpy(ret_where + ml, rel, n);
		ret_where[ml + n] = '\0';
		if (mkdir(ret_where, 0755) == 0) {
			char **m = realloc(d->made, (d->nmade + 1) * sizeof(*m));
			if (!m)
				return -ENOMEM;
			d->made = m;
			if (!(m[d->nmade] = strdup(ret_where)))
				return -ENOMEM;
			d->nmade++;
		} else if (errno != EEXIST) {
			return -errno;
		}
		if (!next)
			return 0;
		p = next;
	}
	return 0;
}

static int set_limits(struct rst_ctx *ctx, const char *mnt, const CgroupDir *e)
{
	char where[CG_PATH_MAX];
	for (size_t i = 0; i < e->n_limits; i++) {
		const CgroupLimit *l = e->limits[i];
		int r = cg_enable_for(mnt, e->path, l->name, where);
		if (r < 0)
			return log_fail(&ctx->log, r,
					"cgroup %s: cannot enable the controller of %s in %s: %s%s",
					e->path, l->name, where, strerror(-r),
					r == -EBUSY ? " (it holds processes: cgroup v2 allows "
						      "controllers only below cgroups without)"
						    : "");
		r = cg_write(mnt, e->path, l->name, l->value);
		if (r < 0)
			return log_fail(&ctx->log, r, "cgroup %s: cannot set %s to '%s': %s",
					e->path, l->name, l->value, strerror(-r));
	}
	return 0;
}

/* A cgroup that exists and holds other processes: joined as it is. */
static void compare_limits(struct rst_ctx *ctx, const char *mnt, const CgroupDir *e)
{
	char now[256];
	log_info(&ctx->log,
		 "cgroup %s exists and holds other processes: joined as it is, "
		 "its limits unchanged",
		 e->path);
	for (size_t i = 0; i < e->n_limits; i++) {
		const CgroupLimit *l = e->limits[i];
		if (cg_read(mnt, e->path, l->name, now, sizeof(now)) < 0)
			snprintf(now, sizeof(now), "(none)");
		if (strcmp(now, l->value))
			log_warn(&ctx->log, "cgroup %s: %s is '%s', it was '%s'", e->path, l->name,
				 now, l->value);
	}
}

/* Makes or checks the cgroup, once, before its first task joins. */
static int ready_dir(struct rst_ctx *ctx, struct rst_task *t, struct cg_rdir *d, const char *mnt)
{
	char where[CG_PATH_MAX];
	const CgroupDir *e = d->e;
	if (d->ready || d->lost)
		return 0;
	size_t before = d->nmade;
	int r = make_path(d, mnt, where);
	if (r < 0) {
		if (denied(r))
			goto lost;
		return log_fail(&ctx->log, r, "pid %d: cannot make its cgroup %s (%s): %s", t->pid,
				e->path, where, strerror(-r));
	}
	if (d->nmade > before && e->threaded &&
	    (r = cg_write(mnt, e->path, "cgroup.type", "threaded")) < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot make cgroup %s threaded: %s", t->pid,
				e->path, strerror(-r));
	if (d->nmade == before && e->own) {
		r = cg_is_empty(mnt, e->path);
		if (r == 0) {
			compare_limits(ctx, mnt, e);
			d->ready = true;
			return 0;
		}
	}
	if (e->own && (r = set_limits(ctx, mnt, e)) < 0) {
		if (!denied(r))
			return log_fail(&ctx->log, r,
					"pid %d: its cgroup %s cannot be made as it "
					"was",
					t->pid, e->path);
		goto lost;
	}
	if (d->nmade > before)
		log_info(&ctx->log, "cgroup %s: made, %zu limit(s) set", e->path, e->n_limits);
	d->ready = true;
	return 0;
lost:
	log_warn(&ctx->log,
		 "pid %d: cgroup %s cannot be made or joined (%s): the task stays in "
		 "ckpt's cgroup%s",
		 t->pid, e->path, strerror(-r), e->n_limits ? ", without the cgroup's limits" : "");
	d->lost = true;
	return 0;
}

/*
 * Writes task (a thread, or with cgroup.procs its whole process t) into a
 * cgroup's file. A real-time task may not join a cgroup whose cpu
 * controller grants no real-time runtime (CONFIG_RT_GROUP_SCHED): EINVAL;
 * the puppets have ckpt's real-time priority (rtprio.h), so they then take
 * back the caller's first (the sched kind sets the image's later).
 */
static int cg_join_write(struct rst_ctx *ctx, const struct rst_task *t, const struct rst_task *task,
			 const char *mnt, const char *path, const char *file)
{
	char id[16];
	snprintf(id, sizeof(id), "%d", task->pup.pid);
	int r = cg_write(mnt, path, file, id);
	if (r != -EINVAL || !ctx->prio.raised)
		return r;
	bool all = task == t;
	for (size_t j = 0; all && j < t->nthreads; j++)
		if (t->threads[j].pup.pid > 0 &&
		    rtprio_give_back(&ctx->prio, t->threads[j].pup.pid) < 0)
			return r;
	if (rtprio_give_back(&ctx->prio, task->pup.pid) < 0)
		return r;
	log_debug(&ctx->log, "pid %d: out of real time to join cgroup %s", t->pid, path);
	return cg_write(mnt, path, file, id);
}

/*
 * The cgroup process t is in now, before it joins its own: that of the
 * process that forked it, as that one was before its own join at "task
 * state" (every task is forked before it; the root's move at root_ready
 * comes before its forks and is not kept here), else its
 * /proc/PID/cgroup. state: at "task state", kept for the tasks t forked
 * (ctx->cg_before): a child of the tree takes its parent's, where each
 * read its own.
 */
static const char *cg_before(struct rst_ctx *ctx, struct rst_task *t, bool state, char *buf,
			     size_t len)
{
	_cleanup_free_ char *text = NULL;
	size_t i = (size_t)(t - ctx->tasks);
	if (state && !ctx->cg_before)
		ctx->cg_before = calloc(ctx->ntasks, sizeof(*ctx->cg_before));
	if (!state || !ctx->cg_before || i >= ctx->ntasks)
		return proc_read(t->pup.pid, "cgroup", &text, NULL) == 0 &&
			       cg_v2_path(text, buf, len) == 0
			   ? buf
			   : NULL;
	const char *from = t->creator >= 0 && (size_t)t->creator < ctx->ntasks
				   ? ctx->cg_before[t->creator]
				   : NULL;
	if (from && strlen(from) < len)
		strcpy(buf, from);
	else if (proc_read(t->pup.pid, "cgroup", &text, NULL) < 0 ||
		 cg_v2_path(text, buf, len) < 0)
		return NULL;
	free(ctx->cg_before[i]);
	ctx->cg_before[i] = strdup(buf);
	return buf;
}

static int join(struct rst_ctx *ctx, struct rst_task *t, const CgroupTask *e, bool state)
{
	char mnt[CG_PATH_MAX];
	struct obj *o;
	int r = objhash_get(&ctx->objs, e->dir, KIND_cgroup, &o);
	if (r < 0)
		return r;
	struct cg_rdir *d = o->ptr;
	/* already there (forked in it): nothing to write, and no need to look
	 * for the mount (mountinfo read whole: it was most of this step) */
	char now[CG_PATH_MAX];
	const char *at = d->e->own ? NULL : cg_before(ctx, t, state, now, sizeof(now));
	if (at && !strcmp(at, d->e->path))
		return 0;
	if (cg_mount(mnt, sizeof(mnt)) < 0) {
		log_warn(&ctx->log,
			 "pid %d: no cgroup2 file system is mounted here: the task stays "
			 "in ckpt's cgroup, not %s",
			 t->pid, d->e->path);
		return 0;
	}
	if ((r = ready_dir(ctx, t, d, mnt)) < 0 || d->lost)
		return r;
	r = cg_join_write(ctx, t, t, mnt, d->e->path, "cgroup.procs");
	if (r == -ENOENT) {
		/* removed meanwhile (the end of an earlier restart of it) */
		d->ready = false;
		if ((r = ready_dir(ctx, t, d, mnt)) < 0 || d->lost)
			return r;
		r = cg_join_write(ctx, t, t, mnt, d->e->path, "cgroup.procs");
	}
	if (r < 0 && denied(r)) {
		log_warn(&ctx->log,
			 "pid %d: cannot join cgroup %s (%s): the task stays in ckpt's "
			 "cgroup",
			 t->pid, d->e->path, strerror(-r));
		return 0;
	}
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot join its cgroup %s: %s%s", t->pid,
				d->e->path, strerror(-r),
				r == -EBUSY ? " (it has controllers enabled for cgroups below it: "
					      "cgroup v2 allows no processes there)"
					    : "");
	log_debug(&ctx->log, "pid %d: in cgroup %s", t->pid, d->e->path);
	return 0;
}

/* Each thread saved apart from its process, into its threaded cgroup. */
static int join_threads(struct rst_ctx *ctx, struct rst_task *t, const CgroupTask *e)
{
	char mnt[CG_PATH_MAX];
	for (size_t i = 0; i < e->n_threads; i++) {
		struct rst_task *th = NULL;
		struct obj *o;
		for (size_t j = 0; j < t->nthreads && !th; j++)
			if ((uint32_t)t->threads[j].pid == e->threads[i]->tid)
				th = &t->threads[j];
		int r = objhash_get(&ctx->objs, e->threads[i]->dir, KIND_cgroup, &o);
		if (!th || r < 0)
			return log_fail(&ctx->log, -EINVAL,
					"pid %d: cgroup of thread %u is not valid", t->pid,
					e->threads[i]->tid);
		struct cg_rdir *d = o->ptr;
		if (cg_mount(mnt, sizeof(mnt)) < 0)
			return 0;
		if ((r = ready_dir(ctx, t, d, mnt)) < 0 || d->lost)
			return r;
		r = cg_join_write(ctx, t, th, mnt, d->e->path, "cgroup.threads");
		if (r < 0 && denied(r)) {
			log_warn(&ctx->log,
				 "thread %d: cannot join cgroup %s (%s): it stays with its "
				 "process",
				 th->pid, d->e->path, strerror(-r));
		} else if (r < 0) {
			return log_fail(&ctx->log, r,
					"thread %d of pid %d: cannot join its threaded "
					"cgroup %s: %s",
					th->pid, t->pid, d->e->path, strerror(-r));
		}
	}
	return 0;
}

static int cgroup_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	CgroupTask *e = t->kstate[KIND_cgroup];
	if (e && e->ns_root) /* joined at root_ready */
		return 0;
	int r = e ? join(ctx, t, e, true) : 0;
	return r < 0 || !e ? r : join_threads(ctx, t, e);
}

/*
 * A container's root made in a cgroup namespace of its own: moves the
 * puppet into its saved cgroup and has it unshare CLONE_NEWCGROUP there,
 * before it forks anything: the namespace's root is where it unshares.
 */
static int cgroup_root_ready(struct rst_ctx *ctx, struct rst_task *t)
{
	if (!(ns_rst_flags(ctx) & CLONE_NEWCGROUP))
		return 0;
	CgroupTask *e = t->kstate[KIND_cgroup];
	if (!e || !e->ns_root)
		return log_fail(&ctx->log, -EINVAL,
				"pid %d: the image names no cgroup namespace "
				"root",
				t->pid);
	int r = join(ctx, t, e, false);
	if (r < 0)
		return r;
	long u = puppet_syscall(&t->pup, SYS_unshare, CLONE_NEWCGROUP);
	return (int)rst_check(ctx, t, u, "making its cgroup namespace (unshare)");
}

static int cmp_len_desc(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? 1 : la > lb ? -1 : 0;
}

/* A cgroup whose killed tasks are still exiting is busy for a moment. */
static void remove_dir(struct rst_ctx *ctx, const char *path)
{
	for (int i = 0; i < 200; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
	log_warn(&ctx->log, "cannot remove cgroup %s that this restart made: %m", path);
}

/* The cgroups a restart made, taken out of its context, children first. */
struct cgroup_made {
	char **paths;
	size_t n;
};

static void take_made(struct rst_ctx *ctx, struct cgroup_made *ret)
{
	size_t n = 0, i = 0;
	*ret = (struct cgroup_made){0};
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_cgroup, o));)
		n += ((struct cg_rdir *)o->ptr)->nmade;
	char **all = n ? calloc(n, sizeof(*all)) : NULL;
	if (!all)
		return;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_cgroup, o));) {
		struct cg_rdir *d = o->ptr;
		for (size_t j = 0; j < d->nmade; j++)
			all[i++] = d->made[j];
		d->nmade = 0;
		d->ready = false;
	}
	/* children first: a longer path is never a parent of a shorter one */
	qsort(all, n, sizeof(*all), cmp_len_desc);
	ret->paths = all;
	ret->n = n;
}

/* Is a process in the cgroup or below it? */
static bool populated(const char *dir)
{
	char f[CG_PATH_MAX + 16], events[256];
	snprintf(f, sizeof(f), "%s/cgroup.events", dir);
	_cleanup_close_ int fd = open(f, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, events, sizeof(events) - 1) : -1;
	if (n <= 0)
		return false;
	events[n] = '\0';
	return strstr(events, "populated 1") != NULL;
}

static void remove_made(struct cgroup_made *m)
{
	for (size_t i = 0; i < m->n; i++) {
		/* a task that exited leaves it a moment later; one that lives
		 * (a daemon that outlived the root) keeps it */
		for (int k = 0; k < 200; k++) {
			if (rmdir(m->paths[i]) == 0 || errno != EBUSY || populated(m->paths[i]))
				break;
			nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
		}
		free(m->paths[i]);
	}
	free(m->paths);
	*m = (struct cgroup_made){0};
}

static void cgroup_restore_abort(struct rst_ctx *ctx)
{
	struct cgroup_made m;
	take_made(ctx, &m);
	for (size_t i = 0; i < m.n; i++)
		remove_dir(ctx, m.paths[i]);
	for (size_t i = 0; i < m.n; i++)
		free(m.paths[i]);
	free(m.paths);
}

/* The cgroups a successful restart made go with the tree, once ckpt waited
 * for it (not RESTART_DETACH): kept past the context. */
static void *cgroup_handover(struct rst_ctx *ctx)
{
	struct cgroup_made *m = NULL;
	if (!(ctx->flags & RESTART_DETACH) && (m = malloc(sizeof(*m))))
		take_made(ctx, m);
	return m;
}

/* The tree ended: its cgroups are removed, those still holding a process
 * (a daemon that outlived the root) stay. */
static void cgroup_handed_back(void *kept, bool detached)
{
	(void)detached;
	if (!kept)
		return;
	remove_made(kept);
	free(kept);
}

static const ProtobufCMessageDescriptor *cgroup_descriptor(uint32_t sub)
{
	return sub == REC_SUB(CGROUP_DIR)    ? &cgroup_dir__descriptor
	       : sub == REC_SUB(CGROUP_TASK) ? &cgroup_task__descriptor
					     : NULL;
}

const struct kind_ops cgroup_ops = {
    .collect = cgroup_collect,
    .collect_end = cgroup_collect_end,
    .dump = cgroup_dump,
    .load = cgroup_load,
    .root_ready = cgroup_root_ready,
    .restore = cgroup_restore,
    .handover = cgroup_handover,
    .handed_back = cgroup_handed_back,
    .restore_abort = cgroup_restore_abort,
    .free_state = free_task_state,
    .free_obj = free_dir,
    .free_robj = free_rdir,
    .descriptor = cgroup_descriptor,
};
