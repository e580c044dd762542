/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV IPC: shared memory segments, message queues, semaphore sets. They
 * live in an ipc namespace, not in a task, so the kind works through the
 * root task: its collect finds what to save, its records hold every
 * object, its restore makes them all before mm attaches any segment.
 *
 * What is saved:
 * - a container with an ipc namespace of its own (ckpt run): every object
 *   of it and its sysctls (kernel.msgmax, msgmnb, msgmni, shmmax, shmall,
 *   shmmni, sem, shm_rmid_forced, the *_next_id); every task must be in it;
 * - a tree in the host's ipc namespace: the shm segments its tasks have
 *   attached, nothing else. What else it uses cannot be told from other
 *   programs' objects, and is refused when /proc attributes it to a pid of
 *   the tree: a queue whose last sender or receiver, a semaphore whose last
 *   semop, a segment whose creator or last shmat/shmdt is one of them.
 *   With CKPT_KILL, once the tree is gone, its segments that were not
 *   removed are (after_kill): they now live in the image, and a restart on
 *   this host needs their ids and keys free.
 * ckpt acts in a namespace from a helper thread of its own that has done
 * setns(CLONE_NEWIPC): SysV calls and /proc/sys/kernel's ipc sysctls act
 * on the caller thread's namespace.
 *
 * The kind is split by IPC type: this file has the namespace, its
 * limits and the kind's ops; sysv-shm.c the segments and their
 * attachments (the kind's vma ops), sysv-msg.c the queues, sysv-sem.c the
 * semaphore sets; sysv.h what they share.
 *
 * Checkpoint: objects are listed with the *_STAT_ANY commands. A segment
 * is read through an attachment of ckpt's (SHM_RDONLY): the pages mincore
 * shows (every page if any shm of the namespace is swapped out) go to the
 * page store (img/pages.h). Messages are read by msgrcv(MSG_COPY),
 * which leaves the queue as it is; semaphores by GETALL. An attachment is
 * whole (see sysv.h) or refused, and every attachment of a segment must be
 * in the image (nattch). Attaching a segment sets its lpid and times, which
 * a process that goes on after the checkpoint sees.
 *
 * Restart: in the root's restore (a container's from a thread in the root
 * puppet's fresh ipc namespace), every object is made with its id (the
 * {shm,msg,sem}_next_id sysctl, CONFIG_CHECKPOINT_RESTORE, written just
 * before each *get) and key, by a thread whose effective ids are the
 * creator's, then filled and given its owner and mode. ckpt holds every
 * segment attached until the restart is over, so that none is destroyed
 * before its tasks attach it (shm_rmid_forced): a removed one is made,
 * attached, then removed at once (Linux lets a task attach a removed
 * segment by id while it exists). mm then has each task's segments
 * attached by an injected shmat (the kind's vma_map). A failed restart removes the segments it made in
 * the host's namespace; a container's go with their namespace.
 *
 * Not restored: times, cpid/lpid, lspid/lrpid, sempid (the restart's);
 * SEM_UNDO adjustments, which no interface shows. kcmp(KCMP_SYSVSEM)
 * against a process without one tells whether a task has a semaphore undo
 * list at all (a SEM_UNDO semop or creating a thread makes one), and such
 * a task is refused when its namespace has semaphore sets. hugetlb
 * segments (SHM_HUGETLB) are made again with their page size (sysv-shm.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/ns.h"
#include "kinds/sysv.h"
#include "util/cleanup.h"


/*
 * The namespace's sysctls, in the order they are set at restart: the
 * limits first (raised before the objects are made, exact after them),
 * then the ones that act at once.
 */
static const char *const limit_names[] = {
    "msgmax", "msgmnb",		 "msgmni",	"shmmax",      "shmall",      "shmmni",
    "sem",    "shm_rmid_forced", "shm_next_id", "msg_next_id", "sem_next_id",
};
_Static_assert(ARRAY_SIZE(limit_names) == NLIMITS, "sysv.h: NLIMITS");
#define NRAISED 7

/* --- common ------------------------------------------------------------ */

static int sysctl_read(const char *name, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	if (n < 0)
		return -errno;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	return 0;
}

static int sysctl_write(const char *name, const char *value)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* The numbers of a sysctl value, as strings ([-]digits, none too long for
 * tok), at most 4; -1 if it is not that. */
static int split_nums(const char *s, char tok[4][24])
{
	int n = 0;
	for (;;) {
		s += strspn(s, " \t");
		if (!*s)
			return n;
		size_t len = strcspn(s, " \t"), neg = *s == '-';
		if (n == 4 || len == neg || len >= 24 || strspn(s + neg, "0123456789") != len - neg)
			return -1;
		memcpy(tok[n], s, len);
		tok[n++][len] = '\0';
		s += len;
	}
}

/* <0, 0, >0: a is less than, equal to, greater than b (from split_nums;
 * shmmax and shmall do not fit an int64) */
static int num_cmp(const char *a, const char *b)
{
	bool na = *a == '-', nb = *b == '-';
	if (na != nb)
		return na ? -1 : 1;
	a += na + strspn(a + na, "0");
	b += nb + strspn(b + nb, "0");
	size_t la = strlen(a), lb = strlen(b);
	int c = la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
	return na ? -c : c;
}

static int limit_index(const char *name)
{
	for (size_t i = 0; i < NLIMITS; i++)
		if (!strcmp(name, limit_names[i]))
			return (int)i;
	return -1;
}

struct ns_job {
	int nsfd;
	int (*fn)(void *arg);
	void *arg;
	int r, setns_err;
};

static void *ns_thread(void *p)
{
	struct ns_job *j = p;
	if (j->nsfd >= 0 && setns(j->nsfd, CLONE_NEWIPC) < 0)
		j->setns_err = -errno;
	else
		j->r = j->fn(j->arg);
	return NULL;
}

/* Runs fn(arg) on a thread of ckpt's own, in the ipc namespace nsfd
 * (-1: ckpt's); the thread and what it changed in itself end with it. */
int sysv_in_ns(struct ckpt_log *log, int nsfd, int (*fn)(void *), void *arg)
{
	struct ns_job j = {.nsfd = nsfd, .fn = fn, .arg = arg};
	pthread_t th;
	int e = pthread_create(&th, NULL, ns_thread, &j);
	if (e)
		return log_fail(log, -e, "cannot start a thread for SysV IPC: %s", strerror(e));
	pthread_join(th, NULL);
	if (j.setns_err)
		return log_fail(log, j.setns_err, "cannot enter the ipc namespace: %s",
				strerror(-j.setns_err));
	return j.r;
}

/* The number of SysV objects in t's ipc namespace, by injected *_INFO calls. */
static int count_in_container(struct ckpt_ctx *ctx, struct task *t)
{
	struct puppet *p = &t->pup;
	struct shm_info shm = { 0 };
	struct msginfo msg = { 0 };
	struct seminfo sem = { 0 };
	long a = puppet_syscall(p, SYS_shmctl, 0, SHM_INFO, p->scratch);
	int ra = a < 0 ? (int)a : puppet_read(p, p->scratch, &shm, sizeof(shm));
	long b = puppet_syscall(p, SYS_msgctl, 0, MSG_INFO, p->scratch);
	int rb = b < 0 ? (int)b : puppet_read(p, p->scratch, &msg, sizeof(msg));
	long c = puppet_syscall(p, SYS_semctl, 0, 0, SEM_INFO, p->scratch);
	int rc = c < 0 ? (int)c : puppet_read(p, p->scratch, &sem, sizeof(sem));
	if (ra < 0 || rb < 0 || rc < 0)
		return log_fail(&ctx->log, -EIO, "pid %d: cannot count its SysV IPC objects", t->pid);
	if (shm.used_ids || msg.msgpool || sem.semusz)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: its container has SysV IPC objects (%d shm, %d msg, %d "
				"sem); saving them needs root (ckpt must enter the namespace)",
				t->pid, shm.used_ids, msg.msgpool, sem.semusz);
	return 0;
}

/* The ipc namespace of pid (0: the calling thread). */
static int ns_stat(pid_t pid, struct stat *st)
{
	char path[64];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/ipc", pid);
	else
		snprintf(path, sizeof(path), "/proc/thread-self/ns/ipc");
	return stat(path, st) < 0 ? -errno : 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

void sysv_perm_of(SysvPerm *p, const struct ipc_perm *ip, int id)
{
	sysv_perm__init(p);
	p->key = ip->__key;
	p->id = id;
	p->mode = ip->mode & 0777;
	p->uid = ip->uid;
	p->gid = ip->gid;
	p->cuid = ip->cuid;
	p->cgid = ip->cgid;
}

static int read_limits(struct sysv_ckpt *s)
{
	sysv_ns_entry__init(&s->nse);
	s->nse.own_ns = s->own_ns;
	for (size_t i = 0; s->own_ns && i < NLIMITS; i++) {
		int r = sysctl_read(limit_names[i], s->val[i], LIMIT_LEN);
		if (r == -ENOENT) /* *_next_id: without CONFIG_CHECKPOINT_RESTORE */
			continue;
		if (r < 0)
			return log_fail(&s->ctx->log, r, "cannot read kernel.%s: %s",
					limit_names[i], strerror(-r));
		SysvLimit *l = &s->lim[s->nse.n_limits];
		sysv_limit__init(l);
		l->name = (char *)limit_names[i];
		l->value = s->val[i];
		s->plim[s->nse.n_limits++] = l;
		if (!strcmp(limit_names[i], "shm_rmid_forced"))
			s->rmid_forced = strcmp(s->val[i], "0") != 0;
	}
	s->nse.limits = s->plim;
	return 0;
}

/* In the container's namespace: everything in it. */
static int list_all(void *arg)
{
	struct sysv_ckpt *s = arg;
	int r = read_limits(s);
	if (r >= 0)
		r = sysv_list_shm(s);
	if (r >= 0)
		r = sysv_list_msg(s);
	if (r >= 0)
		r = sysv_list_sem(s);
	return r;
}

static int collect_root(struct ckpt_ctx *ctx, struct task *t)
{
	struct sysv_ckpt *s = task_state(t, KIND_sysv, sizeof(*s));
	struct stat mine;
	if (!s)
		return -ENOMEM;
	s->nsfd = -1;
	s->ctx = ctx;
	if (ns_stat(t->pid, &s->ns) < 0 || ns_stat(0, &mine) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot read its ipc namespace: %s",
				t->pid, strerror(errno));
	s->own_ns = ctx->container && !same_file(&s->ns, &mine);
	if (s->own_ns && geteuid() != 0) {
		/* unprivileged, ckpt may not enter the container's ipc namespace:
		 * ask its root how many objects there are; none: nothing to save */
		int r = count_in_container(ctx, t);
		if (r < 0)
			return r;
		s->own_ns = false;
	}
	if (!s->own_ns) {
		s->ns = mine;
		return read_limits(s);
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", t->pid);
	s->nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->nsfd < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot open its ipc namespace: %s",
				t->pid, strerror(errno));
	return sysv_in_ns(&ctx->log, s->nsfd, list_all, s);
}

static int sysv_collect(struct ckpt_ctx *ctx, struct task *t)
{
	int r;
	if (t == &ctx->tasks[0] && (r = collect_root(ctx, t)) < 0)
		return r;
	struct sysv_ckpt *s = ctx->tasks[0].kstate[KIND_sysv];
	struct stat ns;

	if (!s->own_ns && !sysv_shm_attached(t))
		return 0;
	/* the objects must be those of the task's own namespace */
	if (ns_stat(t->pid, &ns) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot read its ipc namespace: %s",
				t->pid, strerror(errno));
	if (!same_file(&ns, &s->ns))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: is in an ipc namespace other than %s; not supported",
				t->pid,
				s->own_ns ? "the container's" : "ckpt's, with SysV shm attached");
	return sysv_shm_collect(ctx, s, t);
}

/* --- checkpoint: the whole image --------------------------------------- */

bool sysv_pid_in_image(struct ckpt_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; pid > 0 && i < ctx->ntasks; i++)
		if (ctx->tasks[i].pid == pid)
			return true;
	return false;
}

int sysv_refuse_used(struct ckpt_ctx *ctx, pid_t pid, const char *what, int id, int key)
{
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d: uses SysV %s id %d (key %#x) of the host's ipc namespace, which a "
			"tree is not saved with; checkpoint it as a container (ckpt run)",
			pid, what, id, key);
}

/* Host: the objects /proc attributes to the tree that are not saved. */
static int host_used(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	int r = sysv_msg_host_used(ctx);
	if (r >= 0)
		r = sysv_sem_host_used(ctx, s);
	if (r >= 0)
		r = sysv_shm_host_used(ctx, s);
	return r;
}

static int sysv_collect_end(struct ckpt_ctx *ctx)
{
	struct sysv_ckpt *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_sysv] : NULL;
	int r;
	if (!s)
		return 0;
	if ((r = sysv_shm_collect_end(ctx, s)) < 0)
		return r;
	if (!s->own_ns && (r = host_used(ctx, s)) < 0)
		return r;
	return sysv_check_undo(ctx, s);
}

/* In the objects' namespace: every object, in the order they are made. */
static int dump_all(void *arg)
{
	struct sysv_ckpt *s = arg;
	struct ckpt_ctx *ctx = s->ctx;
	int r = sysv_shm_dump(ctx, s);

	for (size_t i = 0; r >= 0 && i < s->nmsg; i++) {
		s->msg[i].e.perm = &s->msg[i].perm;
		r = ctx_write_msg(ctx, SYSV_MSG, &s->msg[i].e.base);
	}
	for (size_t i = 0; r >= 0 && i < s->nsem; i++) {
		s->sem[i].e.perm = &s->sem[i].perm;
		r = ctx_write_msg(ctx, SYSV_SEM, &s->sem[i].e.base);
	}
	return r;
}

static int sysv_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct sysv_ckpt *s = t->kstate[KIND_sysv];
	if (!s || (!s->own_ns && !s->nshm))
		return 0;
	int r = ctx_write_msg(ctx, SYSV_NS, &s->nse.base);
	if (r < 0)
		return r;
	log_debug(&ctx->log, "sysv: %zu shm, %zu msg, %zu sem (%s namespace)", s->nshm, s->nmsg,
		  s->nsem, s->own_ns ? "the container's" : "the host's");
	return sysv_in_ns(&ctx->log, s->nsfd, dump_all, s);
}

static void sysv_free_state(void *state)
{
	struct sysv_ckpt *s = state;
	if (!s)
		return;
	if (s->nsfd >= 0)
		close(s->nsfd);
	for (size_t i = 0; i < s->nmsg; i++) {
		free(s->msg[i].m);
		free(s->msg[i].pm);
		free(s->msg[i].text);
	}
	for (size_t i = 0; i < s->nsem; i++)
		free(s->sem[i].values);
	free(s->shm);
	free(s->msg);
	free(s->sem);
	free(s);
}

bool sysv_perm_ok(const SysvPerm *p)
{
	return p && p->id >= 0 && !(p->mode & ~0777u) && p->uid != (uint32_t)-1 &&
	       p->gid != (uint32_t)-1 && p->cuid != (uint32_t)-1 && p->cgid != (uint32_t)-1;
}

static int load_ns(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	if (s->ns)
		return log_fail(&ctx->log, -EINVAL, "record %u: a second SysV namespace record",
				rec->index);
	s->ns = rctx_unpack(ctx, rec, &sysv_ns_entry__descriptor);
	if (!s->ns)
		return -EINVAL;
	for (size_t i = 0; i < s->ns->n_limits; i++) {
		const SysvLimit *l = s->ns->limits[i];
		int k = limit_index(l->name);
		char tok[4][24];
		if (!s->ns->own_ns || k < 0 || s->limit[k] || strlen(l->value) >= LIMIT_LEN ||
		    split_nums(l->value, tok) < 1)
			return log_fail(&ctx->log, -EINVAL,
					"record %u (sysv/ns): limit %zu is not valid", rec->index,
					i);
		s->limit[k] = l->value;
	}
	return 0;
}

static int sysv_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	struct sysv_rst *s = t->kstate[KIND_sysv];
	if (t != &ctx->tasks[0])
		return log_fail(&ctx->log, -EINVAL,
				"record %u: SysV IPC records of pid %d, not of the "
				"root",
				rec->index, t->pid);
	if (!s) {
		s = t->kstate[KIND_sysv] = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		s->root = t;
	}
	if (rec->type != SYSV_NS && !s->ns)
		return log_fail(&ctx->log, -EINVAL,
				"record %u: SysV IPC before its namespace record", rec->index);
	switch (rec->type) {
	case SYSV_NS:
		return load_ns(ctx, s, rec);
	case SYSV_SHM:
		return sysv_load_shm(ctx, s, rec);
	case SYSV_SHM_PAGES:
		return sysv_load_shm_pages(ctx, s, rec);
	case SYSV_MSG:
	case SYSV_SEM:
		/* only a container's own namespace is saved with them */
		if (!s->ns->own_ns)
			return log_fail(&ctx->log, -EINVAL, "record %u: sysv/%u out of place",
					rec->index, REC_SUB(rec->type));
		return (rec->type == SYSV_MSG ? sysv_load_msg : sysv_load_sem)(ctx, s, rec);
	default:
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown sysv subtype %u",
				rec->index, REC_SUB(rec->type));
	}
}

/* --- restart: make ----------------------------------------------------- */

static int sysv_prepare(struct rst_ctx *ctx)
{
	struct sysv_rst *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_sysv] : NULL;
	if (!s)
		return 0;
	bool own = ns_rst_flags(ctx) & CLONE_NEWIPC;
	if (s->ns->own_ns != own)
		return log_fail(&ctx->log, -EINVAL,
				"image: SysV IPC objects of %s ipc namespace, but the tree is %s",
				s->ns->own_ns ? "a container's own" : "the host's",
				own ? "a container with one" : "not in one of its own");
	return own ? 0 : sysv_shm_check_free(ctx, s);
}

static int set_next_id(struct rst_ctx *ctx, const char *what, int id)
{
	char name[16], val[16];
	snprintf(name, sizeof(name), "%s_next_id", what);
	snprintf(val, sizeof(val), "%d", id);
	int r = sysctl_write(name, val);
	if (r < 0)
		return log_fail(&ctx->log, r, "%s id %d: cannot choose it with kernel.%s: %s%s",
				what, id, name, strerror(-r),
				r == -ENOENT ? " (the kernel lacks CONFIG_CHECKPOINT_RESTORE)"
					     : "");
	return 0;
}


int sysv_make_obj(struct rst_ctx *ctx, const struct getter *g, const SysvPerm *p)
{
	uid_t euid = geteuid();
	gid_t egid = getegid();
	int r = set_next_id(ctx, g->what, p->id);
	if (r < 0)
		return r;
	if ((p->cgid != egid && syscall(SYS_setresgid, -1, p->cgid, -1) < 0) ||
	    (p->cuid != euid && syscall(SYS_setresuid, -1, p->cuid, -1) < 0))
		r = -errno;
	int id = r < 0 ? -1 : g->get(g, p->key, IPC_CREAT | IPC_EXCL | (int)p->mode);
	int err = errno;
	/* raw calls: only this thread's ids change, and back */
	syscall(SYS_setresuid, -1, euid, -1);
	syscall(SYS_setresgid, -1, egid, -1);
	if (r < 0)
		return log_fail(&ctx->log, r, "%s id %d: cannot take its creator's ids %u:%u: %s",
				g->what, p->id, p->cuid, p->cgid, strerror(-r));
	if (id < 0)
		return log_fail(&ctx->log, -err, "%s id %d (key %#x): cannot make it: %s", g->what,
				p->id, p->key, strerror(err));
	if (id != p->id) {
		g->rm(id);
		return log_fail(&ctx->log, -EEXIST,
				"%s id %d came out as id %d (something else made one meanwhile?)",
				g->what, p->id, id);
	}
	return 0;
}

void sysv_set_perm(struct ipc_perm *ip, const SysvPerm *p)
{
	ip->uid = p->uid;
	ip->gid = p->gid;
	ip->mode = p->mode;
}

int sysv_fail_id(struct rst_ctx *ctx, const char *what, int id, const char *op)
{
	return log_fail(&ctx->log, -errno, "%s id %d: %s: %s", what, id, op, strerror(errno));
}

/* The namespace's sysctls: raise (the limits, to at least the image's)
 * before the objects, or exact after them. */
static int set_limits(struct rst_ctx *ctx, const struct sysv_rst *s, bool raise)
{
	for (size_t k = 0; k < (raise ? NRAISED : NLIMITS); k++) {
		char cur[LIMIT_LEN], want[LIMIT_LEN], a[4][24], b[4][24];
		if (!s->limit[k])
			continue;
		int r = sysctl_read(limit_names[k], cur, sizeof(cur));
		if (r < 0)
			return log_fail(&ctx->log, r, "cannot read kernel.%s: %s", limit_names[k],
					strerror(-r));
		int na = split_nums(cur, a), nb = split_nums(s->limit[k], b);
		bool same = na == nb;
		for (int i = 0; same && i < nb; i++)
			same = !num_cmp(a[i], b[i]);
		if (same)
			continue;
		snprintf(want, sizeof(want), "%s", s->limit[k]);
		for (int i = 0, len = 0; raise && na == nb && i < nb; i++)
			len += snprintf(want + len, sizeof(want) - (size_t)len, "%s%s",
					i ? "\t" : "", num_cmp(a[i], b[i]) > 0 ? a[i] : b[i]);
		r = sysctl_write(limit_names[k], want);
		if (r < 0)
			return log_fail(&ctx->log, r, "cannot set kernel.%s to %s: %s",
					limit_names[k], want, strerror(-r));
	}
	return 0;
}

/* In the objects' namespace: removed segments first (their key is free
 * once they are removed), then the others, the queues and the sets. */
static int make_all(void *arg)
{
	struct sysv_rst *s = arg;
	struct rst_ctx *ctx = s->ctx;
	int r = s->ns->own_ns ? set_limits(ctx, s, true) : 0;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; r >= 0 && i < s->nshm; i++)
			if (s->shm[i].e->removed == (pass == 0))
				r = sysv_make_shm(ctx, &s->shm[i]);
	for (size_t i = 0; r >= 0 && i < s->nmsg; i++)
		r = sysv_make_msg(ctx, s->msg[i]);
	for (size_t i = 0; r >= 0 && i < s->nsem; i++)
		r = sysv_make_sem(ctx, s->sem[i]);
	if (r >= 0 && s->ns->own_ns)
		r = set_limits(ctx, s, false);
	return r;
}

/* At "root ready", before any task forks: what memory attaches, in the
 * root's ipc namespace. */
static int sysv_root_ready(struct rst_ctx *ctx, struct rst_task *t)
{
	struct sysv_rst *s = t->kstate[KIND_sysv];
	_cleanup_close_ int nsfd = -1;
	if (!s)
		return 0;
	if (s->ns->own_ns) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/ipc", t->pup.pid);
		nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			return log_fail(&ctx->log, -errno,
					"pid %d: cannot open its ipc namespace: %s", t->pid,
					strerror(errno));
	}
	s->ctx = ctx;
	int r = sysv_in_ns(&ctx->log, nsfd, make_all, s);
	if (r >= 0)
		log_debug(&ctx->log, "sysv: made %zu shm, %zu msg, %zu sem", s->nshm, s->nmsg,
			  s->nsem);
	return r;
}

static int sysv_restore_end(struct rst_ctx *ctx)
{
	struct sysv_rst *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_sysv] : NULL;
	if (s)
		sysv_shm_detach(s);
	return 0;
}

static void sysv_free_rstate(void *state)
{
	struct sysv_rst *s = state;
	if (!s)
		return;
	/* a failed restart (its tasks killed) leaves no segment in the host's
	 * namespace; a container's die with it */
	sysv_shm_release(s, !s->root->created && s->ns && !s->ns->own_ns);
	for (size_t i = 0; i < s->nmsg; i++)
		sysv_msg_entry__free_unpacked(s->msg[i], NULL);
	for (size_t i = 0; i < s->nsem; i++)
		sysv_sem_entry__free_unpacked(s->sem[i], NULL);
	if (s->ns)
		sysv_ns_entry__free_unpacked(s->ns, NULL);
	free(s->msg);
	free(s->sem);
	free(s);
}

static const ProtobufCMessageDescriptor *sysv_descriptor(uint32_t sub)
{
	switch (sub) {
	case REC_SUB(SYSV_NS):
		return &sysv_ns_entry__descriptor;
	case REC_SUB(SYSV_SHM):
		return &sysv_shm_entry__descriptor;
	case REC_SUB(SYSV_MSG):
		return &sysv_msg_entry__descriptor;
	case REC_SUB(SYSV_SEM):
		return &sysv_sem_entry__descriptor;
	default:
		return NULL;
	}
}

/* Before --kill: host segments come back with their ids, which only a
 * caller that may write the host's shm_next_id can choose. */
static int sysv_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	const struct sysv_ckpt *s = t->kstate[KIND_sysv];
	if (t != &ctx->tasks[0] || !s || s->own_ns || !s->nshm)
		return 0;
	if (faccessat(AT_FDCWD, "/proc/sys/kernel/shm_next_id", W_OK, AT_EACCESS) == 0)
		return 0;
	return log_fail(&ctx->log, -EPERM,
			"pid %d: shm segment %d of the host's ipc namespace: a restart by this "
			"caller could not give it its id back (kernel.shm_next_id is root's)",
			t->pid, (int)s->shm[0].perm.id);
}

const struct kind_ops sysv_ops = {
    .check_restore = sysv_check_restore,
    .collect = sysv_collect,
    .collect_end = sysv_collect_end,
    .dump = sysv_dump,
    .after_kill = sysv_after_kill,
    .load = sysv_load,
    .prepare = sysv_prepare,
    .root_ready = sysv_root_ready,
    .restore_end = sysv_restore_end,
    .free_state = sysv_free_state,
    .free_rstate = sysv_free_rstate,
    .descriptor = sysv_descriptor,
    .vma_claim = sysv_vma_claim,
    .vma_collect = sysv_vma_collect,
    .vma_check = sysv_vma_check,
    .vma_map = sysv_vma_map,
    .vma_prio = 10, /* a segment reads as a deleted file: before memfd */
};
