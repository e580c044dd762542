/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * POSIX message queues. Two kinds of object, like pipes: the queue (an
 * inode of the mqueue file system: its name, whether it was unlinked,
 * mq_maxmsg and mq_msgsize, mode and owner, the queued messages with their
 * priorities, a registered notification) and each open file of it (an
 * open file description: access mode and O_NONBLOCK, mq_getattr's
 * mq_flags, and the offset), shared between fds as kcmp says. An fd of a
 * queue links to "/name" (with " (deleted)" once unlinked) on the mqueue
 * file system, known by its statfs magic.
 *
 * Checkpoint. ckpt opens its own read-write, non-blocking file of the
 * queue through /proc/PID/fd/FD (so nothing of the task's open file
 * changes) and reads mq_getattr, fstat, and the status line a read()
 * gives ("QSIZE: NOTIFY: SIGNO: NOTIFY_PID:"). Refused: a notification
 * registered by a process outside the image or with SIGEV_THREAD, a queue
 * a process outside the image holds open (found by a walk of /proc/PID/fd
 * of every process ckpt may look at; one that opens it by name during the
 * checkpoint is not seen), more than 64 MiB queued.
 *
 * The messages cannot be read without taking them: there is no peek. So
 * in `dump`, after every kind's collect and collect_end has passed (no
 * refusal can come after this point), ckpt takes them all with
 * mq_timedreceive on its own file and at once sends them back in the same
 * order with the same priorities, which leaves the queue as it was (its
 * order is by priority, then by arrival). Nothing else can see the queue
 * meanwhile: the tasks of the image are stopped and no process outside
 * holds it. A failure to send one back (the queue filled up meanwhile,
 * through a process that opened it by name) loses messages, and is said.
 *
 * A registered notification fires when the queue goes from empty to not
 * empty, and is then gone: the first message sent back fires it (on an
 * empty queue ckpt sends and takes back one empty message). A SIGEV_SIGNAL
 * notification queues its signal to the registrant, which is stopped with
 * every signal blocked, and carries sigev_value, which nothing else shows:
 * ckpt reads it there (PTRACE_PEEKSIGINFO, si_code SI_MESGQ), takes the
 * signal back with an injected rt_sigtimedwait and registers the same
 * notification again by an injected mq_notify on an fd the registrant
 * holds. The signal must not be pending in the registrant beforehand (it
 * would be told apart from ckpt's only by luck): then the checkpoint is
 * refused.
 *
 * Restart. The kind comes after fdtable in kinds.def, to register
 * notifications once the registrant's fds are all in place (the kernel
 * drops a registration when its registrant closes any fd of the queue,
 * and fdtable closes fds as it installs them). Queues are made on the
 * first fd_get, when every task exists: in the restored tasks' ipc
 * namespace (ckpt enters a container's with setns for the calls that use
 * the name), with mq_open(O_CREAT | O_EXCL), fchmod, fchown, and the
 * messages sent in order; an unlinked one is unlinked again at once. A
 * name that exists already is used only if that queue is the same:
 * attributes, mode, owner, no notification, the same messages (read and
 * sent back as at checkpoint); else the restart fails naming it. Each open
 * file is opened again through /proc/self/fd of ckpt's file of the queue,
 * with its flags. The queue is charged to ckpt's user's RLIMIT_MSGQUEUE,
 * not to its owner's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mqueue.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/ns.h"
#include "mqueue.pb-c.h"
#include "util/cleanup.h"

enum {
	MQ_ENTRY = REC_TYPE(KID_mqueue, 1),
	MQ_FILE_ENTRY = REC_TYPE(KID_mqueue, 2),
};
#define MQUEUE_MAGIC_K	   0x19800202
#define MQ_HARD_MSGMAX	   65536
#define MQ_HARD_MSGSIZEMAX (16u << 20)
#define MQ_PRIO_MAX_K	   32768
#define MQ_MAX_DATA	   (64u << 20)
#ifndef PTRACE_PEEKSIGINFO_SHARED
#define PTRACE_PEEKSIGINFO_SHARED 1
#endif

/* checkpoint: a queue or an open file of one */
struct mq_obj {
	bool is_file;
	MqueueEntry q;
	MqueueFileEntry f;
	dev_t dev;
	int fd;	   /* queue: ckpt's own file of it */
	struct fdobj of; /* file: a task holding it, and its fd; queue: -1 */
	pid_t pid; /* queue: a task holding it, and its fd */
	int hfd;
	MqueueMsg *m; /* queue: the messages read */
	MqueueMsg **pm;
	struct task *owner; /* queue: the notification's registrant */
	int owner_fd;	    /* an fd of the queue in the registrant's table */
	char name[NAME_MAX + 2];
};

/* restart */
struct mq_robj {
	bool is_file;
	MqueueEntry *q;
	MqueueFileEntry *f;
	int fd; /* queue: ckpt's file of it; file: the reopened file */
};

/* What a read() of a queue says. */
struct mq_status {
	unsigned long long qsize;
	int notify, signo;
	long pid;
};

static bool mqueue_fd_is_queue(const struct fd_info *fi)
{
	char path[64];
	struct statfs sf;

	if (!S_ISREG(fi->st.st_mode) || fi->path[0] != '/' || strchr(fi->path + 1, '/'))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", fi->pid, fi->fd);
	return statfs(path, &sf) == 0 && sf.f_type == MQUEUE_MAGIC_K;
}

static int read_status(int fd, struct mq_status *ret)
{
	char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (sscanf(buf, "QSIZE:%llu NOTIFY:%d SIGNO:%d NOTIFY_PID:%ld", &ret->qsize, &ret->notify,
		   &ret->signo, &ret->pid) != 4)
		return -EINVAL;
	return 0;
}

static struct task *find_task(struct ckpt_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (ctx->tasks[i].pid == pid && !ctx->tasks[i].zombie)
			return &ctx->tasks[i];
	return NULL;
}

/* The notification of a queue, from its status. */
static int collect_notify(struct ckpt_ctx *ctx, struct task *t, int fd, struct mq_obj *q,
			  const struct mq_status *st)
{
	if (!st->pid && !st->notify)
		return 0;
	if (st->pid <= 0 || !(q->owner = find_task(ctx, (pid_t)st->pid)))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (mqueue %s): a notification (mq_notify) is "
				"registered by pid %ld, outside the image; not supported",
				t->pid, fd, q->name, st->pid);
	if (st->notify != SIGEV_SIGNAL && st->notify != SIGEV_NONE)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (mqueue %s): pid %ld registered a SIGEV_THREAD "
				"notification (a netlink socket); not supported",
				t->pid, fd, q->name, st->pid);
	q->q.has_notify = q->q.has_notify_pid = true;
	q->q.notify = (uint32_t)st->notify;
	q->q.notify_pid = (uint32_t)q->owner->vpid;
	if (st->notify == SIGEV_SIGNAL)
		q->q.has_signo = q->q.has_sigval = true;
	q->q.signo = (uint32_t)st->signo;
	return 0;
}

/* A queue seen for the first time: ckpt's own file of it, and what it is. */
static int new_queue(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		     struct mq_obj *q)
{
	char path[64];
	struct mq_attr a;
	struct mq_status st;
	struct stat s;
	size_t n = strlen(fi->path);

	mqueue_entry__init(&q->q);
	q->fd = q->owner_fd = -1;
	q->pid = t->pid;
	q->hfd = fi->fd;
	q->of.fd = -1;
	q->dev = fi->st.st_dev;
	q->q.deleted = n > 10 && !strcmp(fi->path + n - 10, " (deleted)");
	if (n - (q->q.deleted ? 10 : 0) > NAME_MAX + 1)
		return log_fail(&ctx->log, -EINVAL, "pid %d fd %d (%s): the name is too long",
				t->pid, fi->fd, fi->path);
	snprintf(q->name, sizeof(q->name), "%.*s", (int)(n - (q->q.deleted ? 10 : 0)), fi->path);
	q->q.name = q->name;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", t->pid, fi->fd);
	q->fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (q->fd < 0 || mq_getattr(q->fd, &a) < 0 || fstat(q->fd, &s) < 0 ||
	    read_status(q->fd, &st) < 0)
		return log_fail(&ctx->log, -errno, "pid %d fd %d (mqueue %s): cannot open it: %s",
				t->pid, fi->fd, q->name, strerror(errno));
	q->q.maxmsg = (uint64_t)a.mq_maxmsg;
	q->q.msgsize = (uint64_t)a.mq_msgsize;
	q->q.mode = s.st_mode & 07777;
	q->q.uid = s.st_uid;
	q->q.gid = s.st_gid;
	if (st.qsize > MQ_MAX_DATA)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (mqueue %s): %llu bytes queued, more than %u MiB",
				t->pid, fi->fd, q->name, st.qsize, MQ_MAX_DATA >> 20);
	return collect_notify(ctx, t, fi->fd, q, &st);
}

static struct mq_obj *find_queue(struct ckpt_ctx *ctx, const struct stat *st)
{
	for (struct obj *o = NULL;
	     (o = objhash_next_key(&ctx->objs, o, KIND_mqueue, st->st_ino));) {
		struct mq_obj *q = o->ptr;
		if (!q->is_file && q->dev == st->st_dev)
			return q;
	}
	return NULL;
}

static void mqueue_free_obj(void *ptr)
{
	struct mq_obj *q = ptr;
	if (!q)
		return;
	if (!q->is_file && q->fd >= 0)
		close(q->fd);
	for (size_t i = 0; q->m && i < q->q.n_msgs; i++)
		free(q->m[i].data.data);
	free(q->m);
	free(q->pm);
	free(q);
}

static int add_obj(struct ckpt_ctx *ctx, uint64_t key, struct mq_obj *p, uint32_t *ret_id)
{
	struct obj *o;
	int r = objhash_add(&ctx->objs, KIND_mqueue, key, 0, p, &o);
	if (r < 0) {
		mqueue_free_obj(p);
		return r;
	}
	*ret_id = o->id;
	return 0;
}

static int mqueue_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			     uint32_t *ret_id)
{
	struct mq_obj *q = find_queue(ctx, &fi->st);
	int r;

	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return -ENOMEM;
		r = new_queue(ctx, t, fi, q);
		if (r >= 0)
			r = add_obj(ctx, fi->st.st_ino, q, &q->q.id);
		else
			mqueue_free_obj(q);
		if (r < 0)
			return r;
	}
	if (q->owner && q->owner_fd < 0 && (q->owner == t || q->owner->files_with == t->pid))
		q->owner_fd = fi->fd;
	struct obj *o = fdobj_find(ctx, KIND_mqueue, fi->st.st_ino, offsetof(struct mq_obj, of),
				   t->pid, fi->fd);
	if (o) {
		*ret_id = o->id;
		return 0;
	}
	struct mq_obj *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->is_file = true;
	f->fd = -1;
	f->of = (struct fdobj){ .pid = t->pid, .fd = fi->fd };
	mqueue_file_entry__init(&f->f);
	f->f.queue_id = q->q.id;
	f->f.flags = fi->fi.flags & (O_ACCMODE | O_NONBLOCK);
	f->f.has_pos = fi->fi.pos != 0;
	f->f.pos = (uint64_t)fi->fi.pos;
	r = add_obj(ctx, fi->st.st_ino, f, &f->f.id);
	if (r < 0)
		return r;
	*ret_id = f->f.id;
	return 0;
}

/* A process outside the image with fd open on one of the image's queues. */
static struct mq_obj *queue_at(struct ckpt_ctx *ctx, pid_t pid, const char *fd)
{
	char path[300], link[NAME_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid, fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 1 || link[0] != '/' || memchr(link + 1, '/', (size_t)n - 1) || stat(path, &st) < 0)
		return NULL;
	return find_queue(ctx, &st);
}

/* Every process ckpt may look at: does one outside the image hold a queue? */
static int check_outside(struct ckpt_ctx *ctx)
{
	_cleanup_closedir_ DIR *proc = opendir("/proc");
	int r = 0;

	if (!proc)
		return -errno;
	for (struct dirent *de; r >= 0 && (de = readdir(proc));) {
		pid_t pid = (pid_t)atoi(de->d_name);
		char path[64];
		if (pid <= 0 || pid == getpid() || find_task(ctx, pid))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		_cleanup_closedir_ DIR *d = opendir(path);
		for (struct dirent *fe; d && (fe = readdir(d));) {
			struct mq_obj *q =
			    fe->d_name[0] != '.' ? queue_at(ctx, pid, fe->d_name) : NULL;
			if (q) {
				r = log_fail(
				    &ctx->log, -EOPNOTSUPP,
				    "pid %d fd %d (mqueue %s): also open in pid %d (fd %s), "
				    "outside the image; not supported",
				    q->pid, q->hfd, q->name, pid, fe->d_name);
				break;
			}
		}
	}
	return r;
}

/* A signal pending in the registrant would be mistaken for the one the
 * notification sends when ckpt lets it fire. */
static int check_notify(struct ckpt_ctx *ctx, struct mq_obj *q)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status st;

	if (!q->owner)
		return 0;
	if (q->owner_fd < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (mqueue %s): pid %d registered a notification but "
				"holds no fd of the queue; not supported",
				q->pid, q->hfd, q->name, q->owner->pid);
	if (q->q.notify != SIGEV_SIGNAL || !q->q.signo)
		return 0;
	if (proc_read(q->owner->pid, "status", &text, NULL) < 0 || proc_parse_status(text, &st) < 0)
		return log_fail(&ctx->log, -ESRCH, "pid %d: cannot read its status", q->owner->pid);
	uint64_t bit = 1ull << (q->q.signo - 1);
	if ((st.sig_pnd | st.shd_pnd) & bit)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (mqueue %s): signal %u of pid %d's notification is "
				"pending already, so ckpt cannot read the notification's value; "
				"not supported",
				q->pid, q->hfd, q->name, q->q.signo, q->owner->pid);
	return 0;
}

static int mqueue_collect_end(struct ckpt_ctx *ctx)
{
	bool any = false;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_mqueue, o));) {
		if (((struct mq_obj *)o->ptr)->is_file)
			continue;
		any = true;
		int r = check_notify(ctx, o->ptr);
		if (r < 0)
			return r;
	}
	return any ? check_outside(ctx) : 0;
}

/* Takes every message of the queue into q->m. */
static int drain(struct ckpt_ctx *ctx, struct mq_obj *q, size_t want)
{
	_cleanup_free_ char *buf = malloc(q->q.msgsize ? q->q.msgsize : 1);
	q->m = calloc(want + 1, sizeof(*q->m));
	q->pm = calloc(want + 1, sizeof(*q->pm));
	if (!buf || !q->m || !q->pm)
		return -ENOMEM;
	while (q->q.n_msgs <= want) {
		unsigned int prio;
		ssize_t n = mq_receive(q->fd, buf, q->q.msgsize, &prio);
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return log_fail(&ctx->log, -errno,
					"mqueue %s: cannot read its messages: %s", q->name,
					strerror(errno));
		MqueueMsg *m = &q->m[q->q.n_msgs];
		mqueue_msg__init(m);
		m->prio = prio;
		m->data.len = (size_t)n;
		m->data.data = malloc(n ? (size_t)n : 1);
		if (!m->data.data)
			return -ENOMEM;
		memcpy(m->data.data, buf, (size_t)n);
		q->pm[q->q.n_msgs++] = m;
		if (q->q.n_msgs > want)
			break; /* one more than mq_curmsgs: sent back, then refused */
	}
	q->q.msgs = q->pm;
	return 0;
}

/* Sends the messages back, in order. */
static int refill(struct ckpt_ctx *ctx, struct mq_obj *q)
{
	for (size_t i = 0; i < q->q.n_msgs; i++) {
		const MqueueMsg *m = q->pm[i];
		if (mq_send(q->fd, (const char *)m->data.data, m->data.len, m->prio) < 0) {
			log_error(
			    &ctx->log,
			    "mqueue %s: cannot send message %zu of %zu back: %s; the messages "
			    "from there on are lost",
			    q->name, i + 1, q->q.n_msgs, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* The SIGEV_SIGNAL notification fired: its value, and its signal taken back. */
static int take_signal(struct ckpt_ctx *ctx, struct mq_obj *q)
{
	struct task *t = q->owner;
	union {
		siginfo_t si;
		char raw[128];
	} u;
	siginfo_t si;
	bool found = false;

	for (uint64_t off = 0;; off++) {
		long n = puppet_peek_siginfo(&t->pup, off, true, 1, &u);
		si = u.si;
		if (n <= 0)
			break;
		if (si.si_signo == (int)q->q.signo && si.si_code == SI_MESGQ) {
			found = true;
			q->q.sigval = (uint64_t)(uintptr_t)si.si_value.sival_ptr;
		}
	}
	if (!found)
		return log_fail(&ctx->log, -EIO,
				"pid %d (mqueue %s): the notification's signal %u did not come",
				t->pid, q->name, q->q.signo);
	uint64_t set = 1ull << (q->q.signo - 1);
	struct timespec zero = {0, 0};
	uint64_t aset = puppet_scratch_put(&t->pup, 0, &set, sizeof(set));
	uint64_t ats = puppet_scratch_put(&t->pup, 64, &zero, sizeof(zero));
	long r =
	    aset && ats ? puppet_syscall(&t->pup, SYS_rt_sigtimedwait, aset, 0, ats, 8) : -EFAULT;
	if (r != (long)q->q.signo)
		return log_fail(&ctx->log, r < 0 ? (int)r : -EIO,
				"pid %d (mqueue %s): cannot take the notification's signal %u back",
				t->pid, q->name, q->q.signo);
	return 0;
}

/* The notification fired while the queue was read: register it again. */
static int renotify(struct ckpt_ctx *ctx, struct mq_obj *q)
{
	struct task *t = q->owner;
	struct mq_status st;
	int r = q->q.notify == SIGEV_SIGNAL && q->q.signo ? take_signal(ctx, q) : 0;
	if (r < 0)
		return r;
	struct sigevent ev = {.sigev_notify = (int)q->q.notify, .sigev_signo = (int)q->q.signo};
	ev.sigev_value.sival_ptr = (void *)(uintptr_t)q->q.sigval;
	uint64_t addr = puppet_scratch_put(&t->pup, 0, &ev, sizeof(ev));
	long n = addr ? puppet_syscall(&t->pup, SYS_mq_notify, q->owner_fd, addr) : -EFAULT;
	if (n < 0 || read_status(q->fd, &st) < 0 || st.pid != t->pid)
		return log_fail(&ctx->log, n < 0 ? (int)n : -EIO,
				"pid %d fd %d (mqueue %s): cannot register its notification again",
				t->pid, q->owner_fd, q->name);
	return 0;
}

/*
 * Reads the messages and puts them back as they were. Runs in dump, once
 * nothing can refuse the checkpoint any more: see the top of the file.
 */
static int peek(struct ckpt_ctx *ctx, struct mq_obj *q)
{
	struct mq_attr a;
	if (mq_getattr(q->fd, &a) < 0 || a.mq_curmsgs < 0 || a.mq_curmsgs > a.mq_maxmsg)
		return log_fail(&ctx->log, -EIO, "mqueue %s: cannot read its attributes", q->name);
	int r = drain(ctx, q, (size_t)a.mq_curmsgs);
	int e = r;
	if (q->q.n_msgs > 0 || q->owner) {
		r = refill(ctx, q);
		if (r >= 0 && !q->q.n_msgs) { /* fire the notification: one message, taken back */
			_cleanup_free_ char *buf = malloc(q->q.msgsize);
			unsigned int prio;
			if (!buf || mq_send(q->fd, "", 0, 0) < 0 ||
			    mq_receive(q->fd, buf, q->q.msgsize, &prio) != 0)
				r = log_fail(&ctx->log, -errno,
					     "mqueue %s: cannot fire its notification", q->name);
		}
		if (r >= 0 && q->owner)
			r = renotify(ctx, q);
	}
	if (e < 0)
		return e;
	if (r >= 0 && q->q.n_msgs != (size_t)a.mq_curmsgs)
		r = log_fail(&ctx->log, -EAGAIN,
			     "mqueue %s: held %zu messages, not %ld; it changed "
			     "meanwhile",
			     q->name, q->q.n_msgs, (long)a.mq_curmsgs);
	return r;
}

static int mqueue_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	/* queues first, then their open files */
	for (int pass = 0; pass < 2; pass++) {
		for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_mqueue, o));) {
			if (o->dumped)
				continue;
			struct mq_obj *p = o->ptr;
			if (p->is_file != (pass == 1))
				continue;
			int r = p->is_file ? 0 : peek(ctx, p);
			if (r >= 0)
				r = p->is_file ? ctx_write_msg(ctx, MQ_FILE_ENTRY, &p->f.base)
					       : ctx_write_msg(ctx, MQ_ENTRY, &p->q.base);
			if (r < 0)
				return r;
			o->dumped = true;
		}
	}
	return 0;
}

/* --- restart --------------------------------------------------------- */

static const char *invalid_queue(struct rst_ctx *ctx, const MqueueEntry *q)
{
	size_t n = strlen(q->name), total = 0;
	if (n < 2 || n > NAME_MAX + 1 || q->name[0] != '/' || strchr(q->name + 1, '/'))
		return "the name is not valid";
	if (!q->maxmsg || q->maxmsg > MQ_HARD_MSGMAX || !q->msgsize ||
	    q->msgsize > MQ_HARD_MSGSIZEMAX)
		return "the attributes are out of range";
	if (q->mode & ~07777u)
		return "the mode is not valid";
	if (q->n_msgs > q->maxmsg)
		return "more messages than mq_maxmsg";
	for (size_t i = 0; i < q->n_msgs; i++) {
		const MqueueMsg *m = q->msgs[i];
		if (m->data.len > q->msgsize || m->prio >= MQ_PRIO_MAX_K ||
		    (i && m->prio > q->msgs[i - 1]->prio))
			return "a message is too long, of a bad priority or out of order";
		total += m->data.len;
	}
	if (total > MQ_MAX_DATA)
		return "too much data";
	if (q->has_notify) {
		struct rst_task *o =
		    q->has_notify_pid ? tree_find(ctx, (pid_t)q->notify_pid) : NULL;
		if (!o || o->leader || o->zombie)
			return "the notification's registrant is not a live process of the tree";
		if (q->notify != SIGEV_SIGNAL && q->notify != SIGEV_NONE)
			return "unknown notification";
		if (q->notify == SIGEV_SIGNAL && (!q->has_signo || q->signo > 64))
			return "the notification's signal is not valid";
	}
	return NULL;
}

static const char *invalid_file(const MqueueFileEntry *f)
{
	if ((f->flags & ~(uint32_t)(O_ACCMODE | O_NONBLOCK)) || (f->flags & O_ACCMODE) == O_ACCMODE)
		return "unknown flags";
	if (f->has_pos && f->pos > INT64_MAX)
		return "the offset is out of range";
	return NULL;
}

static void mqueue_free_robj(void *ptr)
{
	struct mq_robj *p = ptr;
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->q)
		mqueue_entry__free_unpacked(p->q, NULL);
	if (p->f)
		mqueue_file_entry__free_unpacked(p->f, NULL);
	free(p);
}

static int mqueue_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	struct mq_robj *p = calloc(1, sizeof(*p));
	const char *why = NULL;
	uint32_t id = 0;

	if (!p)
		return -ENOMEM;
	p->fd = -1;
	if (rec->type == MQ_ENTRY) {
		p->q = rctx_unpack(ctx, rec, &mqueue_entry__descriptor);
		why = !p->q ? "cannot decode it" : invalid_queue(ctx, p->q);
		id = p->q ? p->q->id : 0;
	} else if (rec->type == MQ_FILE_ENTRY) {
		p->is_file = true;
		p->f = rctx_unpack(ctx, rec, &mqueue_file_entry__descriptor);
		why = !p->f ? "cannot decode it" : invalid_file(p->f);
		id = p->f ? p->f->id : 0;
	} else {
		why = "unknown subtype";
	}
	if (!why && objhash_add(&ctx->objs, KIND_mqueue, 0, id, p, NULL) < 0)
		why = "its object id is defined twice";
	if (why) {
		mqueue_free_robj(p);
		return log_fail(&ctx->log, -EINVAL, "record %u: mqueue entry: %s", rec->index, why);
	}
	return 0;
}

static struct mq_robj *rqueue(struct rst_ctx *ctx, uint32_t id)
{
	struct obj *o;
	if (objhash_get(&ctx->objs, id, KIND_mqueue, &o) < 0 || ((struct mq_robj *)o->ptr)->is_file)
		return NULL;
	return o->ptr;
}

/* Every open file names a queue of the image; no two live queues share a name. */
static int check_one(struct rst_ctx *ctx, void *obj)
{
	struct mq_robj *p = obj;
	if (p->is_file && !rqueue(ctx, p->f->queue_id))
		return log_fail(&ctx->log, -EINVAL,
				"image: mqueue file %u names queue %u, which it lacks", p->f->id,
				p->f->queue_id);
	for (struct obj *o = NULL; !p->is_file && !p->q->deleted &&
				   (o = objhash_next_of(&ctx->objs, KIND_mqueue, o)) && o->ptr != p;) {
		const struct mq_robj *other = o->ptr;
		if (!other->is_file && !other->q->deleted && !strcmp(other->q->name, p->q->name))
			return log_fail(&ctx->log, -EINVAL, "image: two message queues named %s",
					p->q->name);
	}
	return 0;
}

static int mqueue_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare(ctx, KIND_mqueue, check_one);
}

/* Sends the image's messages into fd, in order. */
static int send_all(struct rst_ctx *ctx, const MqueueEntry *q, int fd)
{
	for (size_t i = 0; i < q->n_msgs; i++)
		if (mq_send(fd, (const char *)q->msgs[i]->data.data, q->msgs[i]->data.len,
			    q->msgs[i]->prio) < 0)
			return log_fail(&ctx->log, -errno, "mqueue %s: cannot send message %zu: %s",
					q->name, i + 1, strerror(errno));
	return 0;
}

/* Why the queue at fd is not the image's, or NULL; its messages read and
 * sent back. */
static const char *differs(const MqueueEntry *q, int fd)
{
	struct mq_attr a;
	struct stat st;
	struct mq_status s;

	if (mq_getattr(fd, &a) < 0 || fstat(fd, &st) < 0 || read_status(fd, &s) < 0)
		return "it cannot be read";
	if ((uint64_t)a.mq_maxmsg != q->maxmsg || (uint64_t)a.mq_msgsize != q->msgsize)
		return "other mq_maxmsg or mq_msgsize";
	if ((st.st_mode & 07777) != q->mode || st.st_uid != q->uid || st.st_gid != q->gid)
		return "another mode or owner";
	if (s.pid || s.notify)
		return "a notification is registered on it";
	if ((uint64_t)a.mq_curmsgs != q->n_msgs)
		return "another number of messages";
	_cleanup_free_ char *buf = malloc(q->msgsize);
	MqueueMsg *got = calloc(q->n_msgs + 1, sizeof(*got));
	const char *why = buf && got ? NULL : "out of memory";
	size_t n = 0;
	for (; !why && n < q->n_msgs; n++) {
		unsigned int prio;
		ssize_t len = mq_receive(fd, buf, q->msgsize, &prio);
		got[n].prio = prio;
		got[n].data.data = len >= 0 ? malloc(len ? (size_t)len : 1) : NULL;
		if (!got[n].data.data) {
			why = "its messages cannot be read";
			break;
		}
		got[n].data.len = (size_t)len;
		memcpy(got[n].data.data, buf, (size_t)len);
		if (prio != q->msgs[n]->prio || (size_t)len != q->msgs[n]->data.len ||
		    memcmp(buf, q->msgs[n]->data.data, (size_t)len))
			why = "other messages";
	}
	for (size_t i = 0; i < n && got[i].data.data; i++) {
		if (mq_send(fd, (const char *)got[i].data.data, got[i].data.len, got[i].prio) < 0)
			why = "its messages could not all be sent back";
		free(got[i].data.data);
	}
	free(got);
	return why;
}

/* Makes one queue (in the current ipc namespace), or takes the same one. */
static int make_queue(struct rst_ctx *ctx, struct mq_robj *p)
{
	const MqueueEntry *q = p->q;
	struct mq_attr a = {.mq_maxmsg = (long)q->maxmsg, .mq_msgsize = (long)q->msgsize};
	const char *why;

	p->fd = mq_open(q->name, O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC, q->mode, &a);
	if (p->fd >= 0) {
		if (fchmod(p->fd, q->mode) < 0 || fchown(p->fd, q->uid, q->gid) < 0)
			return log_fail(&ctx->log, -errno,
					"mqueue %s: cannot set its mode or owner: %s", q->name,
					strerror(errno));
		int r = send_all(ctx, q, p->fd);
		if (r >= 0 && q->deleted && mq_unlink(q->name) < 0)
			r = log_fail(&ctx->log, -errno, "mqueue %s: cannot unlink it again: %s",
				     q->name, strerror(errno));
		return r;
	}
	if (errno != EEXIST)
		return log_fail(&ctx->log, -errno, "mqueue %s: cannot make it: %s", q->name,
				strerror(errno));
	if (q->deleted)
		return log_fail(&ctx->log, -EEXIST,
				"mqueue %s (deleted): another queue has that name now; restart "
				"needs it free for a moment",
				q->name);
	p->fd = mq_open(q->name, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	why = p->fd < 0 ? strerror(errno) : differs(q, p->fd);
	if (why)
		return log_fail(&ctx->log, -EEXIST,
				"mqueue %s: exists and differs from the image (%s); remove it "
				"(mq_unlink) or restart in a new ipc namespace",
				q->name, why);
	log_info(&ctx->log, "mqueue %s: exists as the image has it; used", q->name);
	return 0;
}

/* ckpt's thread in the restored tasks' ipc namespace; *ret_saved its own. */
static int enter_ipc(struct rst_ctx *ctx, int *ret_saved)
{
	char path[64];
	*ret_saved = -1;
	if (!(ns_rst_flags(ctx) & CLONE_NEWIPC))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", ctx->tasks[0].pup.pid);
	_cleanup_close_ int target = open(path, O_RDONLY | O_CLOEXEC);
	int saved = open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
	if (target < 0 || saved < 0 || setns(target, CLONE_NEWIPC) < 0) {
		int e = errno;
		if (saved >= 0)
			close(saved);
		return log_fail(&ctx->log, -e, "cannot enter the restored ipc namespace: %s",
				strerror(e));
	}
	*ret_saved = saved;
	return 0;
}

/* All queues, once: unlinked ones first, so a live one may take the name after. */
static int make_all(struct rst_ctx *ctx)
{
	int saved, r = enter_ipc(ctx, &saved);
	for (int pass = 0; r >= 0 && pass < 2; pass++) {
		for (struct obj *o = NULL; r >= 0 && (o = objhash_next_of(&ctx->objs, KIND_mqueue, o));) {
			struct mq_robj *p = rqueue(ctx, o->id);
			if (p && p->fd < 0 && p->q->deleted == (pass == 0))
				r = make_queue(ctx, p);
		}
	}
	if (saved >= 0) {
		if (setns(saved, CLONE_NEWIPC) < 0 && r >= 0)
			r = log_fail(&ctx->log, -errno,
				     "cannot go back to ckpt's ipc namespace: %s", strerror(errno));
		close(saved);
	}
	return r;
}

static int mqueue_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct mq_robj *f = robj;
	char path[64];

	if (!f->is_file)
		return log_fail(&ctx->log, -EINVAL,
				"an fd refers to a message queue, not to an "
				"open file of one");
	struct mq_robj *q = rqueue(ctx, f->f->queue_id);
	if (!q)
		return -EINVAL;
	if (q->fd < 0) {
		int r = make_all(ctx);
		if (r < 0)
			return r;
	}
	if (f->fd < 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", q->fd);
		f->fd = open(path, (int)f->f->flags | O_CLOEXEC);
		if (f->fd < 0)
			return log_fail(&ctx->log, -errno, "mqueue %s: cannot open it again: %s",
					q->q->name, strerror(errno));
		if (f->f->has_pos && lseek(f->fd, (off_t)f->f->pos, SEEK_SET) < 0)
			return log_fail(&ctx->log, -errno, "mqueue %s: cannot set its offset: %s",
					q->q->name, strerror(errno));
	}
	*ret_fd = f->fd;
	return 0;
}

/* An fd of queue q in t's fd table (the one it shares, with CLONE_FILES). */
static int owner_fd(struct rst_ctx *ctx, struct rst_task *t, const struct mq_robj *q)
{
	struct rst_task *table = t;
	for (int depth = 0; table && table->files_with && depth < 64; depth++)
		table = tree_find(ctx, table->files_with);
	for (struct obj *o = NULL; table && (o = objhash_next_of(&ctx->objs, KIND_mqueue, o));) {
		int fd;
		const struct mq_robj *f = o->ptr;
		if (f->is_file && f->f->queue_id == q->q->id &&
		    fdtable_rst_fd_of(table, o->id, &fd) == 0)
			return fd;
	}
	return -ENOENT;
}

/* Registers the notifications t had, now that its fds are all in place. */
static int mqueue_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_mqueue, o));) {
		struct mq_robj *q = rqueue(ctx, o->id);
		if (!q || !q->q->has_notify || (pid_t)q->q->notify_pid != t->pid)
			continue;
		int fd = owner_fd(ctx, t, q);
		if (fd < 0)
			return log_fail(&ctx->log, -EINVAL,
					"image: pid %d registered a notification on mqueue %s but "
					"holds no fd of it",
					t->pid, q->q->name);
		struct sigevent ev = {.sigev_notify = (int)q->q->notify,
				      .sigev_signo = (int)q->q->signo};
		ev.sigev_value.sival_ptr = (void *)(uintptr_t)q->q->sigval;
		uint64_t addr = puppet_scratch_put(&t->pup, 0, &ev, sizeof(ev));
		long r = addr ? puppet_syscall(&t->pup, SYS_mq_notify, fd, addr) : -EFAULT;
		if (r < 0)
			return log_fail(
			    &ctx->log, (int)r,
			    "pid %d fd %d (mqueue %s): cannot register its notification: "
			    "%s",
			    t->pid, fd, q->q->name, strerror((int)-r));
	}
	return 0;
}

static const ProtobufCMessageDescriptor *mqueue_descriptor(uint32_t sub)
{
	if (sub == REC_SUB(MQ_ENTRY))
		return &mqueue_entry__descriptor;
	return sub == REC_SUB(MQ_FILE_ENTRY) ? &mqueue_file_entry__descriptor : NULL;
}

const struct kind_ops mqueue_ops = {
    .fd_claim = mqueue_fd_is_queue,
    .fd_claim_rank = 1, /* regular files of the mqueue fs, before memfd and file_reg */
    .fd_collect = mqueue_fd_collect,
    .fd_get = mqueue_fd_get,
    .collect_end = mqueue_collect_end,
    .dump = mqueue_dump,
    .load = mqueue_load,
    .prepare = mqueue_prepare,
    .restore = mqueue_restore,
    .free_obj = mqueue_free_obj,
    .free_robj = mqueue_free_robj,
    .descriptor = mqueue_descriptor,
};
