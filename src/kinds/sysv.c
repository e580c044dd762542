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
 * Checkpoint: objects are listed with the *_STAT_ANY commands. A segment
 * is read through an attachment of ckpt's (SHM_RDONLY): the pages mincore
 * shows (every page if any shm of the namespace is swapped out), all-zero
 * ones dropped, as a SysvShmData record (runs) and a raw page-aligned one,
 * in chunks of the copy buffer. Messages are read by msgrcv(MSG_COPY),
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
 * segment by id while it exists). mm then attaches each task's segments
 * by an injected shmat. A failed restart removes the segments it made in
 * the host's namespace; a container's go with their namespace.
 *
 * Not restored: times, cpid/lpid, lspid/lrpid, sempid (the restart's);
 * SEM_UNDO adjustments, which no interface shows. kcmp(KCMP_SYSVSEM)
 * against a process without one tells whether a task has a semaphore undo
 * list at all (a SEM_UNDO semop or creating a thread makes one), and such
 * a task is refused when its namespace has semaphore sets. hugetlb
 * segments are refused.
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
#include "sysv.pb-c.h"
#include "util/cleanup.h"

enum {
	SYSV_NS = REC_TYPE(KID_sysv, 1),
	SYSV_SHM = REC_TYPE(KID_sysv, 2),
	SYSV_SHM_DATA = REC_TYPE(KID_sysv, 3),
	SYSV_SHM_PAGES = REC_TYPE(KID_sysv, 4),
	SYSV_MSG = REC_TYPE(KID_sysv, 5),
	SYSV_SEM = REC_TYPE(KID_sysv, 6),
};

#define PAGE	      4096ull
#define SHM_SIZE_MAX  (1ull << 46)
#define SEM_NSEMS_MAX 65535
#define SEMVAL_MAX    32767
#define MSG_TEXT_MAX  (1u << 30)
#define MAX_OBJECTS   65536 /* of each type, in an image */
#define MAX_RUNS      4096

union sysv_semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
	struct seminfo *info;
};

/*
 * The namespace's sysctls, in the order they are set at restart: the
 * limits first (raised before the objects are made, exact after them),
 * then the ones that act at once.
 */
static const char *const limit_names[] = {
    "msgmax", "msgmnb",		 "msgmni",	"shmmax",      "shmall",      "shmmni",
    "sem",    "shm_rmid_forced", "shm_next_id", "msg_next_id", "sem_next_id",
};
#define NLIMITS	  ARRAY_SIZE(limit_names)
#define NRAISED	  7
#define LIMIT_LEN 64

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
static int in_ns(struct ckpt_log *log, int nsfd, int (*fn)(void *), void *arg)
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

bool sysv_vma_is_shm(const struct proc_vma *pv)
{
	const char *p = pv->path;
	return pv->shared && pv->deleted && strlen(p) == 13 && !strncmp(p, "/SYSV", 5) &&
	       strspn(p + 5, "0123456789abcdef") == 8;
}

static bool page_is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;
	for (size_t i = 0; i < PAGE / 8; i++)
		if (w[i])
			return false;
	return true;
}

/* --- checkpoint: what there is ----------------------------------------- */

struct shm_seg {
	SysvShmEntry e;
	SysvPerm perm;
	uint64_t nattch;
	size_t seen;   /* vmas of the image's tasks that map it */
	bool key_seen; /* its key was taken from a mapping's name */
	pid_t cpid, lpid;
};

struct msg_queue {
	SysvMsgEntry e;
	SysvPerm perm;
	SysvMsg *m;
	SysvMsg **pm;
	uint8_t *text; /* every message's text, one after the other */
};

struct sem_set {
	SysvSemEntry e;
	SysvPerm perm;
	uint32_t *values;
};

/* In the root's kstate; the other tasks' collect adds to it. */
struct sysv_ckpt {
	struct ckpt_ctx *ctx;
	bool own_ns;
	int nsfd;	/* own_ns: the container's ipc namespace */
	struct stat ns; /* the namespace the objects are in */
	bool rmid_forced;
	SysvNsEntry nse;
	SysvLimit lim[NLIMITS];
	SysvLimit *plim[NLIMITS];
	char val[NLIMITS][LIMIT_LEN];
	struct shm_seg *shm;
	size_t nshm;
	struct msg_queue *msg;
	size_t nmsg;
	struct sem_set *sem;
	size_t nsem;
	size_t host_nsem; /* host: semaphore sets of the namespace */
};

static void perm_of(SysvPerm *p, const struct ipc_perm *ip, int id)
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

static struct shm_seg *find_seg(struct sysv_ckpt *s, int id)
{
	for (size_t i = 0; i < s->nshm; i++)
		if (s->shm[i].perm.id == id)
			return &s->shm[i];
	return NULL;
}

static int add_seg(struct sysv_ckpt *s, int id, const struct shmid_ds *ds)
{
	struct shm_seg *n = realloc(s->shm, (s->nshm + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	s->shm = n;
	struct shm_seg *g = &s->shm[s->nshm++];
	*g = (struct shm_seg){.nattch = ds->shm_nattch, .cpid = ds->shm_cpid, .lpid = ds->shm_lpid};
	sysv_shm_entry__init(&g->e);
	perm_of(&g->perm, &ds->shm_perm, id);
	g->e.size = ds->shm_segsz;
	g->e.has_removed = g->e.removed = (ds->shm_perm.mode & SHM_DEST) != 0;
	g->e.has_locked = g->e.locked = (ds->shm_perm.mode & SHM_LOCKED) != 0;
	return 0;
}

/* Attaches segment id in ckpt a moment: is it of hugetlbfs? */
static int check_hugetlb(struct ckpt_ctx *ctx, int id)
{
	void *a = shmat(id, NULL, SHM_RDONLY);
	if (a == (void *)-1)
		return log_fail(&ctx->log, -errno, "shm id %d: cannot attach it to read it: %s", id,
				strerror(errno));
	_cleanup_free_ char *text = NULL;
	struct proc_vmas v = {0};
	int r = proc_read(0, "smaps", &text, NULL);
	if (r >= 0)
		r = proc_parse_smaps(text, &v);
	bool huge = false, found = false;
	for (size_t i = 0; r >= 0 && i < v.n; i++)
		if (v.v[i].start == (uint64_t)(uintptr_t)a) {
			found = true;
			huge = v.v[i].vmflags & VMF_HT;
		}
	proc_vmas_free(&v);
	shmdt(a);
	if (r < 0 || !found)
		return log_fail(&ctx->log, r < 0 ? r : -ENOENT,
				"shm id %d: cannot find ckpt's own attachment of it", id);
	if (huge)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"shm id %d: a hugetlb (SHM_HUGETLB) segment; not supported yet",
				id);
	return 0;
}

static int list_shm(struct sysv_ckpt *s)
{
	struct ckpt_ctx *ctx = s->ctx;
	struct shm_info info;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)&info);
	if (max < 0)
		return log_fail(&ctx->log, -errno, "cannot list SysV shm segments: %s",
				strerror(errno));
	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		int id = shmctl(idx, SHM_STAT_ANY, &ds);
		if (id < 0 && (errno == EINVAL || errno == EIDRM))
			continue;
		if (id < 0)
			return log_fail(&ctx->log, -errno, "cannot read shm index %d: %s", idx,
					strerror(errno));
		int r = add_seg(s, id, &ds);
		if (r >= 0)
			r = check_hugetlb(ctx, id);
		if (r < 0)
			return r;
		if (s->rmid_forced && !ds.shm_nattch)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "shm id %d (key %#x): not attached, with kernel.shm_rmid_forced "
			    "set: it lives as long as its creator, which cannot be restored",
			    id, ds.shm_perm.__key);
	}
	return 0;
}

/* The messages of queue id, in order, read without taking them. */
static int read_queue(struct ckpt_ctx *ctx, struct msg_queue *q, int id, const struct msqid_ds *ds)
{
	size_t n = ds->msg_qnum, bytes = ds->__msg_cbytes;
	q->m = calloc(n ? n : 1, sizeof(*q->m));
	q->pm = calloc(n ? n : 1, sizeof(*q->pm));
	q->text = malloc(bytes ? bytes : 1);
	_cleanup_free_ struct msgbuf *buf = malloc(sizeof(long) + bytes + 1);
	if (!q->m || !q->pm || !q->text || !buf)
		return -ENOMEM;
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		ssize_t got = msgrcv(id, buf, bytes, (long)i, IPC_NOWAIT | MSG_COPY);
		if (got < 0 && errno == ENOSYS)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "msg queue id %d: reading messages without taking them needs "
			    "MSG_COPY (CONFIG_CHECKPOINT_RESTORE)",
			    id);
		if (got < 0)
			return log_fail(&ctx->log, -errno,
					"msg queue id %d: cannot read message %zu of %zu: %s%s", id,
					i, n, strerror(errno),
					errno == EINVAL ? " (larger than kernel.msgmax?)" : "");
		if ((size_t)got > bytes - used)
			return log_fail(&ctx->log, -EAGAIN, "msg queue id %d: changed meanwhile",
					id);
		memcpy(q->text + used, buf->mtext, (size_t)got);
		sysv_msg__init(&q->m[i]);
		q->m[i].type = buf->mtype;
		q->m[i].text.data = q->text + used;
		q->m[i].text.len = (size_t)got;
		q->pm[i] = &q->m[i];
		used += (size_t)got;
	}
	q->e.n_msgs = n;
	q->e.msgs = q->pm;
	return 0;
}

static int list_msg(struct sysv_ckpt *s)
{
	struct ckpt_ctx *ctx = s->ctx;
	struct msginfo info;
	int max = msgctl(0, MSG_INFO, (struct msqid_ds *)&info);
	if (max < 0)
		return log_fail(&ctx->log, -errno, "cannot list SysV message queues: %s",
				strerror(errno));
	for (int idx = 0; idx <= max; idx++) {
		struct msqid_ds ds;
		int id = msgctl(idx, MSG_STAT_ANY, &ds);
		if (id < 0 && (errno == EINVAL || errno == EIDRM))
			continue;
		if (id < 0)
			return log_fail(&ctx->log, -errno, "cannot read msg index %d: %s", idx,
					strerror(errno));
		struct msg_queue *nq = realloc(s->msg, (s->nmsg + 1) * sizeof(*nq));
		if (!nq)
			return -ENOMEM;
		s->msg = nq;
		struct msg_queue *q = &s->msg[s->nmsg++];
		*q = (struct msg_queue){0};
		sysv_msg_entry__init(&q->e);
		perm_of(&q->perm, &ds.msg_perm, id);
		q->e.qbytes = ds.msg_qbytes;
		int r = read_queue(ctx, q, id, &ds);
		if (r < 0)
			return r;
	}
	return 0;
}

static int list_sem(struct sysv_ckpt *s)
{
	struct ckpt_ctx *ctx = s->ctx;
	struct seminfo info;
	int max = semctl(0, 0, SEM_INFO, (union sysv_semun){.info = &info});
	if (max < 0)
		return log_fail(&ctx->log, -errno, "cannot list SysV semaphore sets: %s",
				strerror(errno));
	for (int idx = 0; idx <= max; idx++) {
		struct semid_ds ds;
		int id = semctl(idx, 0, SEM_STAT_ANY, (union sysv_semun){.buf = &ds});
		if (id < 0 && (errno == EINVAL || errno == EIDRM))
			continue;
		if (id < 0)
			return log_fail(&ctx->log, -errno, "cannot read sem index %d: %s", idx,
					strerror(errno));
		struct sem_set *ns = realloc(s->sem, (s->nsem + 1) * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		s->sem = ns;
		struct sem_set *m = &s->sem[s->nsem++];
		*m = (struct sem_set){0};
		sysv_sem_entry__init(&m->e);
		perm_of(&m->perm, &ds.sem_perm, id);
		size_t n = ds.sem_nsems;
		_cleanup_free_ unsigned short *v = calloc(n ? n : 1, sizeof(*v));
		m->values = calloc(n ? n : 1, sizeof(*m->values));
		if (!v || !m->values)
			return -ENOMEM;
		if (semctl(id, 0, GETALL, (union sysv_semun){.array = v}) < 0)
			return log_fail(&ctx->log, -errno, "sem id %d: cannot read its values: %s",
					id, strerror(errno));
		for (size_t i = 0; i < n; i++)
			m->values[i] = v[i];
		m->e.n_values = n;
		m->e.values = m->values;
	}
	return 0;
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
		r = list_shm(s);
	if (r >= 0)
		r = list_msg(s);
	if (r >= 0)
		r = list_sem(s);
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
	return in_ns(&ctx->log, s->nsfd, list_all, s);
}

/* --- checkpoint: the tasks' attachments -------------------------------- */

static int vma_fail(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, int r,
		    const char *why)
{
	return log_fail(&ctx->log, r, "pid %d vma %llx-%llx (%s): %s", t->pid,
			(unsigned long long)pv->start, (unsigned long long)pv->end, pv->path, why);
}

/* The segment pv maps; in the host's namespace, found on first sight. */
static int seg_of(struct ckpt_ctx *ctx, struct sysv_ckpt *s, struct task *t,
		  const struct proc_vma *pv, struct shm_seg **ret)
{
	int id = (int)pv->ino; /* a SysV shm file's inode number is its shmid */
	*ret = find_seg(s, id);
	if (*ret || s->own_ns) {
		if (!*ret)
			return vma_fail(ctx, t, pv, -EOPNOTSUPP,
					"its segment is not in the container's ipc namespace");
		return 0;
	}
	struct shmid_ds ds;
	if (shmctl(id, IPC_STAT, &ds) < 0)
		return log_fail(&ctx->log, -errno,
				"pid %d vma %llx (%s): cannot read shm id %d: %s", t->pid,
				(unsigned long long)pv->start, pv->path, id, strerror(errno));
	if (pv->vmflags & VMF_HT)
		return vma_fail(ctx, t, pv, -EOPNOTSUPP,
				"a hugetlb (SHM_HUGETLB) segment; not supported yet");
	int r = add_seg(s, id, &ds);
	if (r < 0)
		return r;
	*ret = &s->shm[s->nshm - 1];
	return 0;
}

/* One attachment: vmas i.. of t, the first at offset 0; returns the
 * index after its last vma. */
static int note_attachment(struct ckpt_ctx *ctx, struct sysv_ckpt *s, struct task *t, size_t i,
			   size_t *ret_next)
{
	const struct proc_vma *v = t->vmas.v, *pv = &v[i];
	struct shm_seg *g;
	int r = seg_of(ctx, s, t, pv, &g);
	if (r < 0)
		return r;
	if (pv->pgoff)
		return vma_fail(ctx, t, pv, -EOPNOTSUPP,
				"a part of a SysV shm attachment whose start is unmapped; not "
				"supported");
	uint64_t want = ALIGN_UP(g->e.size, PAGE), end = pv->start;
	size_t j = i;
	while (j < t->vmas.n && sysv_vma_is_shm(&v[j]) && v[j].ino == pv->ino &&
	       v[j].start == end && v[j].pgoff == end - pv->start && end - pv->start < want)
		end = v[j++].end;
	if (end - pv->start != want)
		return vma_fail(ctx, t, pv, -EOPNOTSUPP,
				"maps only a part of its SysV shm segment (partly unmapped or "
				"moved); not supported");
	unsigned long key = strtoul(pv->path + 5, NULL, 16);
	if (g->e.removed && !g->key_seen) /* a removed segment reads key 0 */
		g->perm.key = (int32_t)key;
	g->key_seen = true;
	g->seen += j - i;
	*ret_next = j;
	return 0;
}

static int sysv_collect(struct ckpt_ctx *ctx, struct task *t)
{
	int r;
	if (t == &ctx->tasks[0] && (r = collect_root(ctx, t)) < 0)
		return r;
	struct sysv_ckpt *s = ctx->tasks[0].kstate[KIND_sysv];
	bool attached = false;
	struct stat ns;

	for (size_t i = 0; i < t->vmas.n; i++)
		attached |= sysv_vma_is_shm(&t->vmas.v[i]);
	if (!s->own_ns && !attached)
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
	for (size_t i = 0; i < t->vmas.n;) {
		if (!sysv_vma_is_shm(&t->vmas.v[i])) {
			i++;
			continue;
		}
		r = note_attachment(ctx, s, t, i, &i);
		if (r < 0)
			return r;
	}
	return 0;
}

int sysv_collect_vma(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, VmaEntry *v)
{
	struct sysv_ckpt *s = ctx->tasks[0].kstate[KIND_sysv];
	if (!s || !find_seg(s, (int)pv->ino))
		return vma_fail(ctx, t, pv, -EOPNOTSUPP,
				"a SysV shm segment that was not collected");
	v->kind = VMA_KIND__VMA_SYSV_SHM;
	v->has_shm_id = true;
	v->shm_id = (int32_t)pv->ino;
	return 0;
}

/* --- checkpoint: the whole image --------------------------------------- */

static bool pid_in_image(struct ckpt_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; pid > 0 && i < ctx->ntasks; i++)
		if (ctx->tasks[i].pid == pid)
			return true;
	return false;
}

static int refuse_used(struct ckpt_ctx *ctx, pid_t pid, const char *what, int id, int key)
{
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d: uses SysV %s id %d (key %#x) of the host's ipc namespace, which a "
			"tree is not saved with; checkpoint it as a container (ckpt run)",
			pid, what, id, key);
}

/* Host: the objects /proc attributes to the tree that are not saved. */
static int host_used(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	struct msginfo mi;
	int max = msgctl(0, MSG_INFO, (struct msqid_ds *)&mi);
	for (int idx = 0; idx <= max; idx++) {
		struct msqid_ds ds;
		int id = msgctl(idx, MSG_STAT_ANY, &ds);
		pid_t who = id < 0			      ? 0
			    : pid_in_image(ctx, ds.msg_lspid) ? ds.msg_lspid
							      : ds.msg_lrpid;
		if (id >= 0 && pid_in_image(ctx, who))
			return refuse_used(ctx, who, "message queue", id, ds.msg_perm.__key);
	}
	struct seminfo si;
	max = semctl(0, 0, SEM_INFO, (union sysv_semun){.info = &si});
	for (int idx = 0; idx <= max; idx++) {
		struct semid_ds ds;
		int id = semctl(idx, 0, SEM_STAT_ANY, (union sysv_semun){.buf = &ds});
		if (id < 0)
			continue;
		s->host_nsem++;
		for (unsigned long i = 0; i < ds.sem_nsems; i++) {
			pid_t who = semctl(id, (int)i, GETPID);
			if (pid_in_image(ctx, who))
				return refuse_used(ctx, who, "semaphore set", id,
						   ds.sem_perm.__key);
		}
	}
	struct shm_info shi;
	max = shmctl(0, SHM_INFO, (struct shmid_ds *)&shi);
	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		int id = shmctl(idx, SHM_STAT_ANY, &ds);
		pid_t who = id < 0 ? 0 : pid_in_image(ctx, ds.shm_cpid) ? ds.shm_cpid : ds.shm_lpid;
		if (id >= 0 && !find_seg(s, id) && pid_in_image(ctx, who))
			return refuse_used(ctx, who,
					   "shm segment (made or last attached by it, not "
					   "attached now)",
					   id, ds.shm_perm.__key);
	}
	return 0;
}

/* A process of ckpt's with no semaphore undo list, for kcmp to compare with. */
static pid_t fork_blank(int *ret_fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t c = fork();
	if (c == 0) {
		char b;
		close(p[1]);
		while (read(p[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	if (c < 0) {
		close(p[1]);
		return -errno;
	}
	*ret_fd = p[1];
	return c;
}

static int undo_check_one(struct ckpt_ctx *ctx, pid_t blank, pid_t pid, size_t nsets)
{
	long r = syscall(SYS_kcmp, blank, pid, KCMP_SYSVSEM, 0, 0);
	if (r == 0)
		return 0;
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d: %s, and its ipc namespace has %zu SysV semaphore set(s): SEM_UNDO "
			"adjustments cannot be read; not supported",
			pid,
			r < 0 ? "cannot tell whether it has a semaphore undo list"
			      : "has a semaphore undo list (made by a SEM_UNDO semop, or by "
				"starting a thread)",
			nsets);
}

static int check_undo(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	size_t nsets = s->own_ns ? s->nsem : s->host_nsem;
	int fd = -1, r = 0;
	if (!nsets)
		return 0;
	pid_t blank = fork_blank(&fd);
	if (blank < 0)
		return log_fail(&ctx->log, blank, "cannot fork: %s", strerror(-blank));
	for (size_t i = 0; r >= 0 && i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (t->zombie)
			continue;
		r = undo_check_one(ctx, blank, t->pid, nsets);
		for (size_t j = 0; r >= 0 && j < t->nthreads; j++)
			r = undo_check_one(ctx, blank, t->threads[j].pid, nsets);
	}
	close(fd);
	waitpid(blank, NULL, 0);
	return r;
}

static int sysv_collect_end(struct ckpt_ctx *ctx)
{
	struct sysv_ckpt *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_sysv] : NULL;
	int r;
	if (!s)
		return 0;
	for (size_t i = 0; i < s->nshm; i++) {
		const struct shm_seg *g = &s->shm[i];
		if (g->seen < g->nattch)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "shm id %d (key %#x): attached %llu times, %zu of them in the "
			    "image; the others are outside it",
			    g->perm.id, g->perm.key, (unsigned long long)g->nattch, g->seen);
	}
	if (!s->own_ns && (r = host_used(ctx, s)) < 0)
		return r;
	return check_undo(ctx, s);
}

/* --- checkpoint: after --kill ------------------------------------------ */

/*
 * The tree is gone. A host segment of the image that was not removed
 * would outlive it (PostgreSQL's interlock segment), keeping its id and
 * key from a restart on this host. collect_end found every attachment of
 * each one in the image's tasks, so nothing else uses it: it is removed,
 * if it is still the segment saved (key, size, creator) and nothing has
 * attached it since. A removed one went with its last attachment.
 */
static void sysv_after_kill(struct ckpt_ctx *ctx)
{
	struct sysv_ckpt *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_sysv] : NULL;
	if (!s || s->own_ns) /* a container's go with its namespace */
		return;
	for (size_t i = 0; i < s->nshm; i++) {
		const struct shm_seg *g = &s->shm[i];
		struct shmid_ds ds;
		if (g->e.removed || shmctl(g->perm.id, IPC_STAT, &ds) < 0)
			continue;
		if (ds.shm_perm.__key != g->perm.key || ds.shm_segsz != g->e.size ||
		    ds.shm_cpid != g->cpid) {
			log_warn(&ctx->log,
				 "shm id %d: not the segment saved any more; left as it is",
				 g->perm.id);
		} else if (ds.shm_nattch) {
			log_warn(&ctx->log,
				 "shm id %d (key %#x): attached %lu time(s) since the checkpoint; "
				 "left in place, a restart on this host needs it removed",
				 g->perm.id, g->perm.key, (unsigned long)ds.shm_nattch);
		} else if (shmctl(g->perm.id, IPC_RMID, NULL) < 0) {
			log_warn(&ctx->log, "shm id %d (key %#x): cannot remove it: %s", g->perm.id,
				 g->perm.key, strerror(errno));
		} else {
			log_info(&ctx->log, "shm id %d (key %#x): removed, the image holds it",
				 g->perm.id, g->perm.key);
		}
	}
}

/* --- checkpoint: dump -------------------------------------------------- */

struct runs {
	uint64_t off[MAX_RUNS];
	uint32_t npages[MAX_RUNS];
	size_t n;
	uint64_t bytes; /* kept in ctx->buf */
};

static int flush_runs(struct ckpt_ctx *ctx, struct runs *x)
{
	if (!x->n)
		return 0;
	SysvShmData d = SYSV_SHM_DATA__INIT;
	d.n_off = d.n_npages = x->n;
	d.off = x->off;
	d.npages = x->npages;
	int r = ctx_write_msg(ctx, SYSV_SHM_DATA, &d.base);
	if (r < 0)
		return r;
	struct iovec iov = {.iov_base = ctx->buf, .iov_len = x->bytes};
	r = img_write_aligned(&ctx->w, SYSV_SHM_PAGES, &iov, 1);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot write shm pages to the image: %s",
				strerror(-r));
	x->n = 0;
	x->bytes = 0;
	return 0;
}

/* The pages of segment g that exist and are not all zero. */
static int dump_pages(struct ckpt_ctx *ctx, const struct shm_seg *g, bool swapped)
{
	uint64_t len = ALIGN_UP(g->e.size, PAGE);
	size_t np = len / PAGE;
	_cleanup_free_ unsigned char *vec = malloc(np ? np : 1);
	_cleanup_free_ struct runs *x = calloc(1, sizeof(*x));
	uint8_t *a = shmat(g->perm.id, NULL, SHM_RDONLY);
	int r = 0;

	if (a == (void *)-1)
		return log_fail(&ctx->log, -errno, "shm id %d: cannot attach it to read it: %s",
				g->perm.id, strerror(errno));
	if (!vec || !x) {
		shmdt(a);
		return -ENOMEM;
	}
	/* mincore sees what is in memory; a swapped-out page only by reading */
	if (swapped || mincore(a, len, vec) < 0)
		memset(vec, 1, np);
	for (size_t p = 0; r >= 0 && p < np; p++) {
		uint8_t *dst = (uint8_t *)ctx->buf + x->bytes;
		if (!(vec[p] & 1))
			continue;
		memcpy(dst, a + p * PAGE, PAGE);
		if (page_is_zero(dst))
			continue;
		if (x->n && x->off[x->n - 1] + x->npages[x->n - 1] * PAGE == p * PAGE) {
			x->npages[x->n - 1]++;
		} else {
			x->off[x->n] = p * PAGE;
			x->npages[x->n++] = 1;
		}
		x->bytes += PAGE;
		if (x->bytes == ctx->bufsize || x->n == MAX_RUNS)
			r = flush_runs(ctx, x);
	}
	if (r >= 0)
		r = flush_runs(ctx, x);
	shmdt(a);
	return r;
}

/* In the objects' namespace: every object, in the order they are made. */
static int dump_all(void *arg)
{
	struct sysv_ckpt *s = arg;
	struct ckpt_ctx *ctx = s->ctx;
	struct shm_info info;
	bool swapped = shmctl(0, SHM_INFO, (struct shmid_ds *)&info) < 0 || info.shm_swp;
	int r = 0;

	for (size_t i = 0; r >= 0 && i < s->nshm; i++) {
		struct shm_seg *g = &s->shm[i];
		g->e.perm = &g->perm;
		r = ctx_write_msg(ctx, SYSV_SHM, &g->e.base);
		if (r >= 0)
			r = dump_pages(ctx, g, swapped);
	}
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
	return in_ns(&ctx->log, s->nsfd, dump_all, s);
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

/* --- restart: load ----------------------------------------------------- */

struct shm_chunk {
	SysvShmData *d;
	const uint8_t *data;
};

struct shm_rst {
	SysvShmEntry *e;
	struct shm_chunk *chunks;
	size_t nchunks;
	void *addr; /* ckpt's attachment, held until the end */
	bool made;
};

/* In the root's kstate. */
struct sysv_rst {
	struct rst_task *root; /* its 'created' says at the end if the restart failed */
	struct rst_ctx *ctx;
	SysvNsEntry *ns;
	const char *limit[NLIMITS]; /* by limit_names index, NULL: not in the image */
	struct shm_rst *shm;
	size_t nshm;
	SysvMsgEntry **msg;
	size_t nmsg;
	SysvSemEntry **sem;
	size_t nsem;
	SysvShmData *pending; /* data waiting for its pages */
};

static bool perm_ok(const SysvPerm *p)
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

static bool shm_valid(const struct sysv_rst *s, const SysvShmEntry *e)
{
	if (!perm_ok(e->perm) || !e->size || e->size > SHM_SIZE_MAX || s->nshm >= MAX_OBJECTS)
		return false;
	for (size_t i = 0; i < s->nshm; i++) {
		const SysvShmEntry *o = s->shm[i].e;
		if (o->perm->id == e->perm->id ||
		    (!e->removed && !o->removed && e->perm->key != IPC_PRIVATE &&
		     o->perm->key == e->perm->key))
			return false;
	}
	return true;
}

static int load_shm(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	if (s->pending)
		return log_fail(&ctx->log, -EINVAL,
				"record %u: shm segment before the pages of the last one",
				rec->index);
	SysvShmEntry *e = rctx_unpack(ctx, rec, &sysv_shm_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (!shm_valid(s, e)) {
		sysv_shm_entry__free_unpacked(e, NULL);
		return log_fail(
		    &ctx->log, -EINVAL,
		    "record %u (sysv/shm): segment is not valid or repeats an id or key",
		    rec->index);
	}
	struct shm_rst *n = realloc(s->shm, (s->nshm + 1) * sizeof(*n));
	if (!n) {
		sysv_shm_entry__free_unpacked(e, NULL);
		return -ENOMEM;
	}
	s->shm = n;
	s->shm[s->nshm++] = (struct shm_rst){.e = e};
	return 0;
}

static int load_data(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	if (s->pending || !s->nshm)
		return log_fail(&ctx->log, -EINVAL, "record %u: shm data out of place", rec->index);
	SysvShmData *d = rctx_unpack(ctx, rec, &sysv_shm_data__descriptor);
	if (!d)
		return -EINVAL;
	uint64_t len = ALIGN_UP(s->shm[s->nshm - 1].e->size, PAGE), prev = 0;
	bool ok = d->n_off == d->n_npages && d->n_off > 0;
	for (size_t i = 0; ok && i < d->n_off; i++) {
		uint64_t off = d->off[i], bytes = (uint64_t)d->npages[i] * PAGE;
		ok = off % PAGE == 0 && bytes && off >= prev && off <= len && bytes <= len - off;
		prev = off + bytes;
	}
	if (!ok) {
		sysv_shm_data__free_unpacked(d, NULL);
		return log_fail(&ctx->log, -EINVAL,
				"record %u (sysv/data): runs lie outside shm id %d or out of order",
				rec->index, s->shm[s->nshm - 1].e->perm->id);
	}
	s->pending = d;
	return 0;
}

static int load_pages(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	if (!s->pending)
		return log_fail(&ctx->log, -EINVAL, "record %u: shm pages without a data record",
				rec->index);
	uint64_t want = 0;
	for (size_t i = 0; i < s->pending->n_npages; i++)
		want += (uint64_t)s->pending->npages[i] * PAGE;
	if (want != rec->len)
		return log_fail(&ctx->log, -EINVAL,
				"record %u (sysv/pages): %llu bytes, its data record says %llu",
				rec->index, (unsigned long long)rec->len, (unsigned long long)want);
	struct shm_rst *g = &s->shm[s->nshm - 1];
	struct shm_chunk *nc = realloc(g->chunks, (g->nchunks + 1) * sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	g->chunks = nc;
	g->chunks[g->nchunks++] = (struct shm_chunk){.d = TAKE_PTR(s->pending), .data = rec->data};
	return 0;
}

static bool msg_valid(const struct sysv_rst *s, const SysvMsgEntry *e)
{
	if (!perm_ok(e->perm) || e->qbytes > INT32_MAX || s->nmsg >= MAX_OBJECTS ||
	    e->n_msgs > MSG_TEXT_MAX)
		return false;
	uint64_t bytes = 0;
	for (size_t i = 0; i < e->n_msgs; i++) {
		if (e->msgs[i]->type < 1 || e->msgs[i]->text.len > MSG_TEXT_MAX)
			return false;
		bytes += e->msgs[i]->text.len;
	}
	for (size_t i = 0; i < s->nmsg; i++)
		if (s->msg[i]->perm->id == e->perm->id ||
		    (e->perm->key != IPC_PRIVATE && s->msg[i]->perm->key == e->perm->key))
			return false;
	return bytes <= MSG_TEXT_MAX;
}

static bool sem_valid(const struct sysv_rst *s, const SysvSemEntry *e)
{
	if (!perm_ok(e->perm) || !e->n_values || e->n_values > SEM_NSEMS_MAX ||
	    s->nsem >= MAX_OBJECTS)
		return false;
	for (size_t i = 0; i < e->n_values; i++)
		if (e->values[i] > SEMVAL_MAX)
			return false;
	for (size_t i = 0; i < s->nsem; i++)
		if (s->sem[i]->perm->id == e->perm->id ||
		    (e->perm->key != IPC_PRIVATE && s->sem[i]->perm->key == e->perm->key))
			return false;
	return true;
}

static int load_msg(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	SysvMsgEntry *e = rctx_unpack(ctx, rec, &sysv_msg_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (!msg_valid(s, e)) {
		sysv_msg_entry__free_unpacked(e, NULL);
		return log_fail(&ctx->log, -EINVAL,
				"record %u (sysv/msg): queue is not valid or repeats an id or key",
				rec->index);
	}
	SysvMsgEntry **n = realloc(s->msg, (s->nmsg + 1) * sizeof(*n));
	if (!n) {
		sysv_msg_entry__free_unpacked(e, NULL);
		return -ENOMEM;
	}
	s->msg = n;
	s->msg[s->nmsg++] = e;
	return 0;
}

static int load_sem(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	SysvSemEntry *e = rctx_unpack(ctx, rec, &sysv_sem_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (!sem_valid(s, e)) {
		sysv_sem_entry__free_unpacked(e, NULL);
		return log_fail(&ctx->log, -EINVAL,
				"record %u (sysv/sem): set is not valid or repeats an id or key",
				rec->index);
	}
	SysvSemEntry **n = realloc(s->sem, (s->nsem + 1) * sizeof(*n));
	if (!n) {
		sysv_sem_entry__free_unpacked(e, NULL);
		return -ENOMEM;
	}
	s->sem = n;
	s->sem[s->nsem++] = e;
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
		return load_shm(ctx, s, rec);
	case SYSV_SHM_DATA:
		return load_data(ctx, s, rec);
	case SYSV_SHM_PAGES:
		return load_pages(ctx, s, rec);
	case SYSV_MSG:
	case SYSV_SEM:
		/* only a container's own namespace is saved with them */
		if (s->pending || !s->ns->own_ns)
			return log_fail(&ctx->log, -EINVAL, "record %u: sysv/%u out of place",
					rec->index, REC_SUB(rec->type));
		return (rec->type == SYSV_MSG ? load_msg : load_sem)(ctx, s, rec);
	default:
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown sysv subtype %u",
				rec->index, REC_SUB(rec->type));
	}
}

static const struct shm_rst *find_rseg(const struct sysv_rst *s, int id)
{
	for (size_t i = 0; s && i < s->nshm; i++)
		if (s->shm[i].e->perm->id == id)
			return &s->shm[i];
	return NULL;
}

int sysv_check_vmas(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
{
	const struct sysv_rst *s = ctx->tasks[0].kstate[KIND_sysv];
	for (size_t i = 0; i < e->n_vmas;) {
		const VmaEntry *v = e->vmas[i];
		if (v->kind != VMA_KIND__VMA_SYSV_SHM) {
			i++;
			continue;
		}
		const struct shm_rst *g = v->has_shm_id ? find_rseg(s, v->shm_id) : NULL;
		uint64_t want = g ? ALIGN_UP(g->e->size, PAGE) : 0, at = v->start;
		size_t j = i;
		while (g && v->shared && v->has_vmflags && !v->pgoff && j < e->n_vmas) {
			const VmaEntry *w = e->vmas[j];
			if (w->kind != VMA_KIND__VMA_SYSV_SHM || !w->has_shm_id ||
			    w->shm_id != v->shm_id || w->start != at || w->pgoff != at - v->start ||
			    !w->shared || !w->has_vmflags || ((w->vmflags ^ v->vmflags) & VMF_MW) ||
			    at - v->start >= want)
				break;
			at = w->end;
			j++;
		}
		if (!g || at - v->start != want)
			return log_fail(
			    &ctx->log, -EINVAL,
			    "image: pid %d vma %llx: not a whole attachment of a SysV shm "
			    "segment of the image",
			    t->pid, (unsigned long long)v->start);
		i = j;
	}
	return 0;
}

/* --- restart: make ----------------------------------------------------- */

/* The host's namespace: ids and keys must be free (the old ones are not
 * removed when the tree dies, unless IPC_RMID'd). */
static int check_free(struct rst_ctx *ctx, const struct sysv_rst *s)
{
	for (size_t i = 0; i < s->nshm; i++) {
		const SysvPerm *p = s->shm[i].e->perm;
		struct shmid_ds ds;
		if (shmctl(p->id, IPC_STAT, &ds) >= 0 || errno == EACCES)
			return log_fail(
			    &ctx->log, -EEXIST,
			    "shm id %d is in use in this ipc namespace (key %#x); remove it "
			    "(ipcrm -m %d) or restart where it is free",
			    p->id, p->key, p->id);
		int other = p->key != IPC_PRIVATE ? shmget(p->key, 0, 0) : -1;
		if (other >= 0 || (p->key != IPC_PRIVATE && errno == EACCES))
			return log_fail(
			    &ctx->log, -EEXIST,
			    "shm key %#x (of id %d) is taken by shm id %d; remove it (ipcrm "
			    "-M %#x) or restart where it is free",
			    p->key, p->id, other, p->key);
	}
	return 0;
}

static int sysv_prepare(struct rst_ctx *ctx)
{
	struct sysv_rst *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_sysv] : NULL;
	if (!s)
		return 0;
	if (s->pending)
		return log_fail(&ctx->log, -EINVAL, "image ends shm data without its pages");
	bool own = ns_rst_flags(ctx) & CLONE_NEWIPC;
	if (s->ns->own_ns != own)
		return log_fail(&ctx->log, -EINVAL,
				"image: SysV IPC objects of %s ipc namespace, but the tree is %s",
				s->ns->own_ns ? "a container's own" : "the host's",
				own ? "a container with one" : "not in one of its own");
	return own ? 0 : check_free(ctx, s);
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

/*
 * Makes one object with id and key as creator p->cuid/cgid (the thread's
 * effective ids for the call: the kernel takes them for cuid, cgid) and
 * checks the id; get is shmget, msgget or semget through a closure.
 */
struct getter {
	const char *what; /* "shm", "msg", "sem" */
	int (*get)(const struct getter *g, int key, int flags);
	int (*rm)(int id);
	uint64_t size; /* shm: bytes; sem: nsems */
};

static int get_shm(const struct getter *g, int key, int flags)
{
	return shmget(key, g->size, flags);
}

static int get_msg(const struct getter *g, int key, int flags)
{
	(void)g;
	return msgget(key, flags);
}

static int get_sem(const struct getter *g, int key, int flags)
{
	return semget(key, (int)g->size, flags);
}

static int rm_shm(int id)
{
	return shmctl(id, IPC_RMID, NULL);
}

static int rm_msg(int id)
{
	return msgctl(id, IPC_RMID, NULL);
}

static int rm_sem(int id)
{
	return semctl(id, 0, IPC_RMID);
}

static int make_obj(struct rst_ctx *ctx, const struct getter *g, const SysvPerm *p)
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

static void set_perm(struct ipc_perm *ip, const SysvPerm *p)
{
	ip->uid = p->uid;
	ip->gid = p->gid;
	ip->mode = p->mode;
}

static int fail_id(struct rst_ctx *ctx, const char *what, int id, const char *op)
{
	return log_fail(&ctx->log, -errno, "%s id %d: %s: %s", what, id, op, strerror(errno));
}

static int make_shm(struct rst_ctx *ctx, struct shm_rst *g)
{
	const SysvPerm *p = g->e->perm;
	struct getter get = {"shm", get_shm, rm_shm, g->e->size};
	int r = make_obj(ctx, &get, p);
	if (r < 0)
		return r;
	g->made = true;
	void *a = shmat(p->id, NULL, 0);
	if (a == (void *)-1)
		return fail_id(ctx, "shm", p->id, "cannot attach it in ckpt");
	g->addr = a;
	for (size_t c = 0; c < g->nchunks; c++) {
		const SysvShmData *d = g->chunks[c].d;
		const uint8_t *src = g->chunks[c].data;
		for (size_t i = 0; i < d->n_off; i++) {
			size_t len = (size_t)d->npages[i] * PAGE;
			memcpy((uint8_t *)a + d->off[i], src, len);
			src += len;
		}
	}
	struct shmid_ds ds;
	if (shmctl(p->id, IPC_STAT, &ds) < 0)
		return fail_id(ctx, "shm", p->id, "IPC_STAT");
	set_perm(&ds.shm_perm, p);
	if (shmctl(p->id, IPC_SET, &ds) < 0)
		return fail_id(ctx, "shm", p->id, "IPC_SET");
	if (g->e->locked && shmctl(p->id, SHM_LOCK, NULL) < 0)
		return fail_id(ctx, "shm", p->id, "SHM_LOCK");
	if (g->e->removed && shmctl(p->id, IPC_RMID, NULL) < 0)
		return fail_id(ctx, "shm", p->id, "IPC_RMID");
	return 0;
}

static int msg_set(int id, struct msqid_ds *ds, uint64_t qbytes)
{
	ds->msg_qbytes = qbytes;
	return msgctl(id, IPC_SET, ds);
}

static int make_msg(struct rst_ctx *ctx, const SysvMsgEntry *e)
{
	const SysvPerm *p = e->perm;
	struct getter get = {"msg", get_msg, rm_msg, 0};
	int r = make_obj(ctx, &get, p);
	if (r < 0)
		return r;
	uint64_t bytes = 0, most = 0;
	for (size_t i = 0; i < e->n_msgs; i++) {
		bytes += e->msgs[i]->text.len;
		most = MAX(most, e->msgs[i]->text.len);
	}
	/* room for the queue (a limit lowered after it filled included) */
	struct msqid_ds ds;
	if (msgctl(p->id, IPC_STAT, &ds) < 0)
		return fail_id(ctx, "msg", p->id, "IPC_STAT");
	set_perm(&ds.msg_perm, p);
	if (msg_set(p->id, &ds, MAX(e->qbytes, MAX(bytes, e->n_msgs))) < 0)
		return fail_id(ctx, "msg", p->id, "IPC_SET");
	_cleanup_free_ struct msgbuf *buf = malloc(sizeof(long) + most + 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < e->n_msgs; i++) {
		buf->mtype = e->msgs[i]->type;
		if (e->msgs[i]->text.len) /* an empty one has no data */
			memcpy(buf->mtext, e->msgs[i]->text.data, e->msgs[i]->text.len);
		if (msgsnd(p->id, buf, e->msgs[i]->text.len, IPC_NOWAIT) < 0)
			return log_fail(&ctx->log, -errno,
					"msg id %d: cannot queue message %zu "
					"(%zu bytes): %s",
					p->id, i, e->msgs[i]->text.len, strerror(errno));
	}
	if (ds.msg_qbytes != e->qbytes && msg_set(p->id, &ds, e->qbytes) < 0)
		return fail_id(ctx, "msg", p->id, "IPC_SET");
	return 0;
}

static int make_sem(struct rst_ctx *ctx, const SysvSemEntry *e)
{
	const SysvPerm *p = e->perm;
	struct getter get = {"sem", get_sem, rm_sem, e->n_values};
	int r = make_obj(ctx, &get, p);
	if (r < 0)
		return r;
	_cleanup_free_ unsigned short *v = calloc(e->n_values, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < e->n_values; i++)
		v[i] = (unsigned short)e->values[i];
	if (semctl(p->id, 0, SETALL, (union sysv_semun){.array = v}) < 0)
		return fail_id(ctx, "sem", p->id, "SETALL");
	struct semid_ds ds;
	if (semctl(p->id, 0, IPC_STAT, (union sysv_semun){.buf = &ds}) < 0)
		return fail_id(ctx, "sem", p->id, "IPC_STAT");
	set_perm(&ds.sem_perm, p);
	if (semctl(p->id, 0, IPC_SET, (union sysv_semun){.buf = &ds}) < 0)
		return fail_id(ctx, "sem", p->id, "IPC_SET");
	return 0;
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
				r = make_shm(ctx, &s->shm[i]);
	for (size_t i = 0; r >= 0 && i < s->nmsg; i++)
		r = make_msg(ctx, s->msg[i]);
	for (size_t i = 0; r >= 0 && i < s->nsem; i++)
		r = make_sem(ctx, s->sem[i]);
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
	int r = in_ns(&ctx->log, nsfd, make_all, s);
	if (r >= 0)
		log_debug(&ctx->log, "sysv: made %zu shm, %zu msg, %zu sem", s->nshm, s->nmsg,
			  s->nsem);
	return r;
}

int sysv_shm_attach(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	bool ro = !(v->vmflags & VMF_MW);
	uint32_t prot = ro ? PROT_READ : PROT_READ | PROT_WRITE;
	struct puppet *p = &t->pup;
	long r;

	if (!v->pgoff) { /* the attachment's first vma: it maps all of it */
		r = puppet_syscall(p, SYS_shmat, v->shm_id, v->start, ro ? SHM_RDONLY : 0);
		if (r < 0 && r > -4096)
			return log_fail(&ctx->log, (int)r,
					"pid %d vma %llx: shmat of shm id %d: %s", t->pid,
					(unsigned long long)v->start, v->shm_id, strerror((int)-r));
		if ((uint64_t)r != v->start)
			return log_fail(&ctx->log, -EEXIST,
					"pid %d: shm id %d attached at %lx, not %llx", t->pid,
					v->shm_id, r, (unsigned long long)v->start);
	}
	if (v->prot != prot) {
		r = puppet_syscall(p, SYS_mprotect, v->start, v->end - v->start, v->prot);
		if (rst_check(ctx, t, r, "mprotect of a SysV shm attachment") < 0)
			return (int)r;
	}
	if (v->vmflags & VMF_LO)
		puppet_syscall(p, SYS_mlock, v->start, v->end - v->start);
	return 0;
}

static void sysv_free_rstate(void *state)
{
	struct sysv_rst *s = state;
	if (!s)
		return;
	/* a failed restart (its tasks killed) leaves no segment in the host's
	 * namespace; a container's die with it */
	bool undo = !s->root->created && s->ns && !s->ns->own_ns;
	for (size_t i = 0; i < s->nshm; i++) {
		struct shm_rst *g = &s->shm[i];
		if (undo && g->made)
			shmctl(g->e->perm->id, IPC_RMID, NULL);
		if (g->addr)
			shmdt(g->addr);
		for (size_t c = 0; c < g->nchunks; c++)
			sysv_shm_data__free_unpacked(g->chunks[c].d, NULL);
		free(g->chunks);
		sysv_shm_entry__free_unpacked(g->e, NULL);
	}
	for (size_t i = 0; i < s->nmsg; i++)
		sysv_msg_entry__free_unpacked(s->msg[i], NULL);
	for (size_t i = 0; i < s->nsem; i++)
		sysv_sem_entry__free_unpacked(s->sem[i], NULL);
	if (s->pending)
		sysv_shm_data__free_unpacked(s->pending, NULL);
	if (s->ns)
		sysv_ns_entry__free_unpacked(s->ns, NULL);
	free(s->shm);
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
	case REC_SUB(SYSV_SHM_DATA):
		return &sysv_shm_data__descriptor;
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
    .free_state = sysv_free_state,
    .free_rstate = sysv_free_rstate,
    .descriptor = sysv_descriptor,
};
