/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The file descriptor table: which fd number holds which open file (an
 * objref of file_reg), and close-on-exec per fd. Holes stay holes: at
 * restart the puppet holds nothing but ckpt's control socket, which sits
 * above every fd of the image.
 *
 * The signal-driven I/O settings of each open file go with it: the owner
 * (F_GETOWN_EX on a pidfd_getfd copy: a thread, process or process group,
 * saved by the id the image gives it; an owner outside the image is
 * refused), the signal (F_GETSIG) and O_ASYNC. They are set again on ckpt's
 * fd of the file in restore_end, once every task exists and every kind has
 * refilled its objects (a queue refilled under O_ASYNC would leave a SIGIO
 * pending that the original did not have): owner and signal on ckpt's fd,
 * O_ASYNC by the task on its fd (the kernel puts the fd it was set through
 * in the signal's si_fd). The kernel records the
 * credentials of whoever set the owner, ckpt's after a restart, for its
 * permission check when it sends the signal.
 *
 * External fds (ckpt_opts.external_fds, checkpoint --external fd:N): fds of
 * the root held outside the tree, an inherited pipe say, are treated like a
 * shell job's terminal: the entry says "external" and nothing of the open
 * file is collected. Restart puts the caller's fd for it there
 * (ckpt_opts.inherit_fds, --inherit-fd N:FD), and refuses before anything
 * is built when one is not given. Another task of the tree that holds the
 * same open file at another fd still has it collected as usual.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <sys/xattr.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/netlock.h"
#include "files.pb-c.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/mm.h"
#include "util/cleanup.h"
#include "util/par.h"

enum { FDTABLE_ENTRY = REC_TYPE(KID_fdtable, 1) };
#define FD_MAX_RESTORE (1 << 20)

struct fdt_ckpt {
	FdTableEntry e;
	FdEntry *fds;
	FdEntry **pfds;
	FdOwner *owners;
	struct fdtable_seen *seen; /* each fd looked at, for the locks kind */
	size_t nseen;
	bool walked;
	struct fd_link *links; /* fdtable_links, once read */
	size_t nlinks;
	bool linked;
};

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int fdtable_list(pid_t pid, int **ret_fds, size_t *ret_n)
{
	char path[64];
	_cleanup_free_ int *fds = NULL;
	size_t n = 0, cap = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			int *nf = realloc(fds, cap * sizeof(*fds));
			if (!nf)
				return -ENOMEM;
			fds = nf;
		}
		fds[n++] = atoi(de->d_name);
	}
	if (n)
		qsort(fds, n, sizeof(*fds), cmp_int);
	*ret_fds = TAKE_PTR(fds);
	*ret_n = n;
	return 0;
}

/* Why no kind took the file behind fd: said by what it is. */
static int refuse_fd(struct ckpt_ctx *ctx, const struct fd_info *fi)
{
	const char *why = "this kind of file is not supported yet";
	char buf[256];

	if (S_ISSOCK(fi->st.st_mode))
		why = "sockets are not supported yet";
	else if (S_ISFIFO(fi->st.st_mode))
		why = "named FIFOs are not supported yet";
	else if (!strcmp(fi->path, "anon_inode:[io_uring]"))
		snprintf(buf, sizeof(buf),
			 "io_uring instance at fd %d: not supported (ckpt does not make io_uring "
			 "instances again: its rings, registered files and buffers would be lost, "
			 "and requests in flight cannot be read from the kernel)",
			 fi->fd),
		    why = buf;
	else if (!strncmp(fi->path, "anon_inode:", 11))
		snprintf(buf, sizeof(buf), "%s files are not supported yet", fi->path + 11), why = buf;
	else if (S_ISCHR(fi->st.st_mode))
		snprintf(buf, sizeof(buf), "character device %u:%u is not supported yet",
			 major(fi->st.st_rdev), minor(fi->st.st_rdev)),
			why = buf;
	else if (S_ISBLK(fi->st.st_mode))
		why = "block devices are not supported yet";
	return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (%s): %s", fi->pid, fi->fd, fi->path,
			why);
}

/* A socket's protocol name, "" if it cannot be read. */
static void read_sockproto(pid_t pid, int fd, char *name, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	ssize_t n = getxattr(path, "system.sockprotoname", name, size - 1);
	name[n > 0 ? n : 0] = '\0';
}

bool fdtable_sock_proto(const struct fd_info *fi, const char *proto)
{
	char name[32];
	if (!S_ISSOCK(fi->st.st_mode))
		return false;
	if (fi->sockproto_read) /* fdtable_inspect_fd read it */
		snprintf(name, sizeof(name), "%s", fi->sockproto);
	else
		read_sockproto(fi->pid, fi->fd, name, sizeof(name));
	return !strncmp(name, proto, strlen(proto));
}

int fdtable_copy(struct task *t, const struct fd_info *fi)
{
	if (fi->copy < 0)
		return puppet_getfd(&t->pup, fi->fd);
	int c = fcntl(fi->copy, F_DUPFD_CLOEXEC, 3);
	return c < 0 ? -errno : c;
}

/* The "lock:" lines of an fdinfo text (the last ones the kernel prints),
 * malloc'ed; NULL when there are none. */
static char *lock_lines(const char *text)
{
	const char *l = !strncmp(text, "lock:", 5) ? text : strstr(text, "\nlock:");
	return l ? strdup(l + (*l == '\n')) : NULL;
}

/* fdtable_inspect_fd, and with pidfd >= 0 (the task's) the copy too;
 * fdinfo_dir: an fd of /proc/PID/fdinfo, or -1; ret_locks (if not NULL):
 * the fdinfo's lock lines (lock_lines) */
static int inspect_core(const struct ckpt_ctx *ctx, pid_t pid, int fd, struct fd_info *fi,
			int pidfd, int fdinfo_dir, char **ret_locks, bool *ret_fdinfo)
{
	char link[64], *text = NULL;
	ssize_t n;
	int r;

	*ret_fdinfo = false;
	fi->pid = pid;
	fi->fd = fd;
	/* pidfd_getfd's copy is close-on-exec; none for an fd gone meanwhile
	 * (the readlink below says so) */
	fi->copy = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0) : -1;
	snprintf(link, sizeof(link), "/proc/%d/fd/%d", pid, fd);
	/* the copy's inode is the link's, without a walk of /proc; a
	 * socket's link is "socket:[INODE]" (no readlink) */
	bool stated = fi->copy >= 0 && fstat(fi->copy, &fi->st) == 0;
	if (stated && S_ISSOCK(fi->st.st_mode))
		n = snprintf(fi->path, sizeof(fi->path), "socket:[%llu]",
			     (unsigned long long)fi->st.st_ino);
	else if ((n = readlink(link, fi->path, sizeof(fi->path) - 1)) < 0 ||
		 (!stated && stat(link, &fi->st) < 0))
		return -errno;
	fi->path[n] = '\0';
	fi->sockproto_read = S_ISSOCK(fi->st.st_mode);
	/* a TCP socket the network lock's dump saw: its name is its family's */
	const struct tcp_seen *ts =
	    fi->sockproto_read && stated && ctx ? ckpt_tcp_seen(ctx, fi->st.st_ino) : NULL;
	if (ts)
		snprintf(fi->sockproto, sizeof(fi->sockproto), "%s",
			 ts->family == AF_INET ? "TCP" : "TCPv6");
	else if (fi->sockproto_read && fi->copy >= 0) { /* each socket kind's claim asks for it */
		ssize_t l = fgetxattr(fi->copy, "system.sockprotoname", fi->sockproto,
				      sizeof(fi->sockproto) - 1);
		fi->sockproto[l > 0 ? l : 0] = '\0';
	} else if (fi->sockproto_read)
		read_sockproto(pid, fd, fi->sockproto, sizeof(fi->sockproto));
	if (fdinfo_dir >= 0) { /* one read, no walk of /proc/PID */
		snprintf(link, sizeof(link), "%d", fd);
		r = proc_read_single(fdinfo_dir, link, &text);
	} else {
		snprintf(link, sizeof(link), "fdinfo/%d", fd);
		r = proc_read(pid, link, &text, NULL);
	}
	if (r >= 0)
		r = proc_parse_fdinfo(text, &fi->fi);
	if (r >= 0 && ret_locks && !(*ret_locks = lock_lines(text)) && strstr(text, "lock:"))
		r = -ENOMEM;
	free(text);
	*ret_fdinfo = r < 0;
	return r;
}

static int inspect_fd(struct ckpt_ctx *ctx, struct task *t, int fd, struct fd_info *fi, int pidfd,
		      int fdinfo_dir, char **ret_locks)
{
	bool fdinfo;
	int r = inspect_core(ctx, t->pid, fd, fi, pidfd, fdinfo_dir, ret_locks, &fdinfo);
	if (r < 0 && fdinfo)
		return log_fail(&ctx->log, r, "pid %d fd %d: cannot read its fdinfo", t->pid, fd);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d: cannot inspect: %s", t->pid, fd,
				strerror(-r));
	return 0;
}

int fdtable_inspect_fd(struct ckpt_ctx *ctx, struct task *t, int fd, struct fd_info *fi)
{
	return inspect_fd(ctx, t, fd, fi, -1, -1, NULL);
}

int fdtable_claim(struct ckpt_ctx *ctx, const struct fd_info *fi, int *ret_kind)
{
	enum kind order[KIND_MAX];
	size_t n = kind_claim_order(order);
	for (size_t i = 0; i < n; i++) {
		const struct kind_ops *ops = kinds[order[i]].ops;
		bool (*claim)(const struct fd_info *) = ops->file ? ops->file->claim : ops->fd_claim;
		if (claim(fi)) {
			*ret_kind = (int)order[i];
			return 0;
		}
	}
	return refuse_fd(ctx, fi);
}

int fdtable_collect_file(struct ckpt_ctx *ctx, int k, struct task *t, const struct fd_info *fi,
			 uint32_t *ret_id)
{
	const struct kind_ops *ops = kinds[k].ops;
	return ops->file ? fdobj_collect(ctx, ops->file, t, fi, ret_id)
			 : ops->fd_collect(ctx, t, fi, ret_id);
}

static int collect_one(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		       uint32_t *ret_id)
{
	int k, r = fdtable_claim(ctx, fi, &k);
	return r < 0 ? r : fdtable_collect_file(ctx, k, t, fi, ret_id);
}

/* The id the image gives ckpt's thread, process or group id `id`; 0 if none. */
static pid_t image_id(struct ckpt_ctx *ctx, int type, pid_t id)
{
	const struct task *root = &ctx->tasks[0];
	/* the root's group, when it does not lead it, is not in the image */
	if (type == F_OWNER_PGRP && id == root->stat.pgrp && root->stat.pgrp != root->pid)
		return 0;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		const struct task *t = &ctx->tasks[i];
		if (type == F_OWNER_PGRP) {
			if (t->stat.pgrp == id)
				return t->vpgid;
			continue;
		}
		if (t->pid == id && !t->zombie)
			return t->vpid;
		for (size_t j = 0; type == F_OWNER_TID && j < t->nthreads; j++)
			if (t->threads[j].pid == id)
				return t->threads[j].vpid;
	}
	return 0;
}

/* An fd's owner and signal as read ahead (fd_pre), or not yet (read). */
struct owner_pre {
	bool read;
	int sig;
	struct f_owner_ex own;
};

static int collect_owner(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			 const struct owner_pre *op, FdOwner *o, FdEntry *e)
{
	struct f_owner_ex own = { 0 };
	int sig;
	if (fi->fi.flags & O_PATH) /* only a path: no I/O, no owner */
		return 0;
	if (op && op->read) {
		sig = op->sig;
		own = op->own;
	} else {
		_cleanup_close_ int own_copy = fi->copy < 0 ? puppet_getfd(&t->pup, fi->fd) : -1;
		int copy = fi->copy < 0 ? own_copy : fi->copy;
		if (copy < 0)
			return log_fail(&ctx->log, copy, "pid %d fd %d (%s): cannot take a copy: %s",
					t->pid, fi->fd, fi->path, strerror(-copy));
		sig = fcntl(copy, F_GETSIG);
		if (fcntl(copy, F_GETOWN_EX, &own) < 0 || sig < 0)
			return log_fail(&ctx->log, -errno,
					"pid %d fd %d (%s): cannot read its owner: %m", t->pid,
					fi->fd, fi->path);
	}
	bool async = fi->fi.flags & O_ASYNC;
	if (!own.pid && !sig && !async)
		return 0;
	/* F_NOTIFY makes the task its directory fd's owner, and that is all
	 * of a dnotify watch that shows: its events are not in /proc and no
	 * call reads them back, so it would be lost */
	if (S_ISDIR(fi->st.st_mode) && own.pid && !async)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a directory with a signal owner (pid %d): a "
				"dnotify watch (F_NOTIFY), which ckpt cannot read or set again; "
				"not supported (inotify is)",
				t->pid, fi->fd, fi->path, own.pid);
	fd_owner__init(o);
	o->type = (uint32_t)own.type;
	if (own.pid) {
		o->pid = image_id(ctx, own.type, own.pid);
		if (!o->pid)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (%s): the %s that gets its SIGIO (%d) is outside "
					"the image", t->pid, fi->fd, fi->path,
					own.type == F_OWNER_PGRP ? "process group" : "task", own.pid);
	}
	o->has_sig = o->has_async = true;
	o->sig = (uint32_t)sig;
	o->async = async;
	e->owner = o;
	return 0;
}

/* Is fd of t one the caller named external (the root's only)? */
static bool is_external(const struct ckpt_ctx *ctx, const struct task *t, int fd)
{
	const struct ckpt_opts *o = ctx->opts;
	if (t != &ctx->tasks[0] || !o ||
	    o->size < offsetof(struct ckpt_opts, n_external_fds) + sizeof(o->n_external_fds))
		return false;
	for (size_t i = 0; i < o->n_external_fds && o->external_fds; i++)
		if (o->external_fds[i] == fd)
			return true;
	return false;
}

/* Every external fd the caller named must be open in the root. */
static int check_external(struct ckpt_ctx *ctx, struct task *t, const int *fds, size_t n)
{
	const struct ckpt_opts *o = ctx->opts;
	if (t != &ctx->tasks[0] || !o ||
	    o->size < offsetof(struct ckpt_opts, n_external_fds) + sizeof(o->n_external_fds))
		return 0;
	for (size_t i = 0; i < o->n_external_fds && o->external_fds; i++) {
		bool open = false;
		for (size_t j = 0; j < n && !open; j++)
			open = fds[j] == o->external_fds[i];
		if (!open)
			return log_fail(&ctx->log, -EBADF, "pid %d fd %d: named external (--external "
					"fd:%d), but the root has no fd %d", t->pid,
					o->external_fds[i], o->external_fds[i], o->external_fds[i]);
	}
	return 0;
}

/*
 * A table's fds inspected ahead by threads (util/par.h), a batch at a time
 * (each holds a copy until its turn: PRE_BATCH more fds at most): copy,
 * stat, link, protocol name, fdinfo, owner, each of them a system call or
 * more, for 10,000 sockets. The walk then takes what they read; an fd they
 * could not inspect is inspected again in turn, which says why.
 */
#define PRE_BATCH   512
#define PRE_THREADS 4

struct fd_pre {
	int r; /* inspect_core's; its copy closed if not 0 */
	int copy;
	struct stat st;
	struct proc_fdinfo fi;
	char sockproto[32];
	bool sockproto_read;
	char *path, *locks;
	struct owner_pre own;
};

struct pre_batch {
	const struct ckpt_ctx *ctx; /* read only: its tcp_seen */
	pid_t pid;
	int pidfd, fdinfo_dir;
	const int *fds; /* the batch's */
	struct fd_pre *pre;
	struct fd_info **buf; /* one a thread */
};

static void pre_inspect(void *arg, size_t i, unsigned slot)
{
	struct pre_batch *b = arg;
	struct fd_pre *p = &b->pre[i];
	struct fd_info *fi = b->buf[slot];
	bool fdinfo;
	p->r = inspect_core(b->ctx, b->pid, b->fds[i], fi, b->pidfd, b->fdinfo_dir, &p->locks,
			    &fdinfo);
	p->copy = fi->copy;
	if (p->r == 0 && !(p->path = strdup(fi->path)))
		p->r = -ENOMEM;
	if (p->r < 0) {
		if (fi->copy >= 0)
			close(fi->copy);
		p->copy = -1;
		free(p->locks);
		p->locks = NULL;
		return;
	}
	p->st = fi->st;
	p->fi = fi->fi;
	memcpy(p->sockproto, fi->sockproto, sizeof(p->sockproto));
	p->sockproto_read = fi->sockproto_read;
	if (p->copy >= 0 && !(fi->fi.flags & O_PATH)) {
		p->own.sig = fcntl(p->copy, F_GETSIG);
		p->own.read = p->own.sig >= 0 && fcntl(p->copy, F_GETOWN_EX, &p->own.own) == 0;
	}
}

/* The pre-inspection of fd i into fi (its copy, path and lock lines given
 * over); false if there is none to take. */
static bool pre_take(struct fd_pre *p, struct fd_info *fi, pid_t pid, int fd, char **ret_locks)
{
	if (!p || p->r < 0)
		return false;
	fi->pid = pid;
	fi->fd = fd;
	fi->copy = p->copy;
	fi->st = p->st;
	fi->fi = p->fi;
	memcpy(fi->sockproto, p->sockproto, sizeof(fi->sockproto));
	fi->sockproto_read = p->sockproto_read;
	snprintf(fi->path, sizeof(fi->path), "%s", p->path);
	free(p->path);
	p->path = NULL;
	p->copy = -1;
	*ret_locks = p->locks;
	p->locks = NULL;
	return true;
}

/* Empties n entries (their copies closed): none to take. */
static void pre_free(struct fd_pre *pre, size_t n)
{
	for (size_t i = 0; pre && i < n; i++) {
		if (pre[i].copy >= 0)
			close(pre[i].copy);
		free(pre[i].path);
		free(pre[i].locks);
		pre[i] = (struct fd_pre){ .r = -EAGAIN, .copy = -1 };
	}
}

static int fdtable_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct fdt_ckpt *f;
	struct fd_info *fi;
	int *fds = NULL, r = 0;
	size_t n = 0;

	if (t->files_with) /* one table, saved with the task it is shared with */
		return 0;
	f = task_state(t, KIND_fdtable, sizeof(*f));
	fi = malloc(sizeof(*fi));
	if (!f || !fi) {
		free(fi);
		return -ENOMEM;
	}
	fd_table_entry__init(&f->e);
	r = fdtable_list(t->pid, &fds, &n);
	if (r < 0) {
		free(fi);
		return log_fail(&ctx->log, r, "pid %d: cannot list fds: %s", t->pid, strerror(-r));
	}
	/* ckpt's own dirty tracking (mm-dirty.c) is not the program's */
	size_t kept = 0;
	for (size_t i = 0; i < n; i++)
		if (!mm_dirty_skip_fd(t, fds[i]))
			fds[kept++] = fds[i];
	n = kept;
	f->fds = calloc(n ? n : 1, sizeof(*f->fds));
	f->pfds = calloc(n ? n : 1, sizeof(*f->pfds));
	f->owners = calloc(n ? n : 1, sizeof(*f->owners));
	f->seen = calloc(n ? n : 1, sizeof(*f->seen));
	if (!f->fds || !f->pfds || !f->owners || !f->seen)
		r = -ENOMEM;
	f->walked = true;
	int refused = 0; /* the first refusal; the other fds are looked at too */
	/* one pidfd for the table's copies (not one a copy) */
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fdinfo", t->pid);
	_cleanup_close_ int fdinfo_dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fi->copy = -1;
	/* threads for a large table (10,000 sockets) */
	unsigned th = par_cpus();
	th = th < PRE_THREADS ? th : PRE_THREADS;
	_cleanup_free_ struct fd_pre *pre = NULL;
	struct fd_info *buf[PRE_THREADS] = { 0 };
	/* a batch's copies come on top of what the kinds keep (inet one a
	 * socket): within the fd limit, with room for them */
	struct rlimit nofile;
	size_t batch = n < PRE_BATCH ? n : PRE_BATCH;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
		size_t room = nofile.rlim_cur > n + 64 ? (size_t)(nofile.rlim_cur - n - 64) / 2 : 0;
		batch = batch < room ? batch : room;
	}
	if (r >= 0 && batch && th > 1 && pidfd >= 0 && fdinfo_dir >= 0 &&
	    (pre = calloc(batch, sizeof(*pre)))) {
		for (size_t k = 0; k < batch; k++)
			pre[k] = (struct fd_pre){ .r = -EAGAIN, .copy = -1 };
		for (unsigned k = 0; k < th; k++)
			if (!(buf[k] = malloc(sizeof(*buf[k]))))
				th = 0;
		if (!th) {
			free(pre);
			pre = NULL;
		}
	}
	for (size_t i = 0; r >= 0 && i < n; i++) {
		FdEntry *e = &f->fds[i];
		fd_entry__init(e);
		e->fd = fds[i];
		bool ext = is_external(ctx, t, fds[i]);
		if (fi->copy >= 0)
			close(fi->copy);
		fi->copy = -1;
		if (pre && i % batch == 0) {
			pre_free(pre, batch);
			size_t nb = n - i < batch ? n - i : batch;
			struct pre_batch b = { ctx, t->pid, pidfd, fdinfo_dir, fds + i, pre, buf };
			par_for(nb, th, pre_inspect, &b);
		}
		struct fd_pre *p = pre ? &pre[i % batch] : NULL;
		char *locks = NULL;
		r = pre_take(p, fi, t->pid, fds[i], &locks)
			? 0
			: inspect_fd(ctx, t, fds[i], fi, pidfd, fdinfo_dir, &locks);
		if (r >= 0)
			f->seen[f->nseen++] = (struct fdtable_seen){
				.fd = fds[i], .dev = fi->st.st_dev, .ino = fi->st.st_ino, .locks = locks
			};
		if (r >= 0 && ext) {
			e->has_external = e->external = true;
			log_info(&ctx->log, "pid %d fd %d (%s): saved as external, to be given "
				 "again at restart (--inherit-fd %d:FD)", t->pid, fds[i], fi->path,
				 fds[i]);
		}
		if (r >= 0 && !ext)
			r = collect_one(ctx, t, fi, &e->file_id);
		if (r >= 0 && !ext)
			r = collect_owner(ctx, t, fi, p ? &p->own : NULL, &f->owners[i], e);
		if (log_gathers(&ctx->log, r)) {
			refused = refused ? refused : r;
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		e->has_cloexec = true;
		e->cloexec = fi->fi.flags & O_CLOEXEC;
		f->pfds[f->e.n_fds++] = e;
	}
	if (fi->copy >= 0)
		close(fi->copy);
	pre_free(pre, pre ? batch : 0);
	for (unsigned k = 0; k < PRE_THREADS; k++)
		free(buf[k]);
	f->e.fds = f->pfds;
	if (r >= 0)
		r = check_external(ctx, t, fds, n);
	free(fds);
	free(fi);
	return r < 0 ? r : refused;
}

static int cmp_link(const void *a, const void *b)
{
	return ((const struct fd_link *)a)->fd - ((const struct fd_link *)b)->fd;
}

/* What fdtable_links read before it failed: gone, so that a later call
 * starts again from nothing. */
static int links_drop(struct fdt_ckpt *f, int err)
{
	for (size_t i = 0; i < f->nlinks; i++)
		free(f->links[i].link);
	free(f->links);
	f->links = NULL;
	f->nlinks = 0;
	return err;
}

int fdtable_links(struct task *t, const struct fd_link **ret, size_t *ret_n)
{
	struct fdt_ckpt *f = task_state(t, KIND_fdtable, sizeof(*f));
	char path[64], target[PATH_MAX];
	size_t cap = 0;
	if (!f)
		return -ENOMEM;
	if (!f->linked) {
		snprintf(path, sizeof(path), "/proc/%d/fd", t->pid);
		_cleanup_closedir_ DIR *d = opendir(path);
		if (!d)
			return -errno;
		for (struct dirent *de; (de = readdir(d));) {
			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			/* relative to the directory: no walk of /proc/PID each */
			ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
			if (n < 0)
				continue; /* closed meanwhile */
			target[n] = '\0';
			if (f->nlinks == cap) {
				size_t nc = cap ? 2 * cap : 64;
				struct fd_link *v = realloc(f->links, nc * sizeof(*v));
				if (!v)
					return links_drop(f, -ENOMEM);
				f->links = v;
				cap = nc;
			}
			char *l = strdup(target);
			if (!l)
				return links_drop(f, -ENOMEM);
			f->links[f->nlinks++] = (struct fd_link){ atoi(de->d_name), l };
		}
		if (f->nlinks)
			qsort(f->links, f->nlinks, sizeof(*f->links), cmp_link);
		f->linked = true;
	}
	*ret = f->links;
	*ret_n = f->nlinks;
	return 0;
}

int fdtable_seen(struct task *t, const struct fdtable_seen **ret, size_t *ret_n)
{
	const struct fdt_ckpt *f = t->kstate[KIND_fdtable];
	if (!f || !f->walked)
		return -ENOENT;
	*ret = f->seen;
	*ret_n = f->nseen;
	return 0;
}

static int fdtable_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct fdt_ckpt *f = t->kstate[KIND_fdtable];
	/* a table shared with another task has links (fdtable_links) and no walk */
	return f && f->walked ? ctx_write_msg(ctx, FDTABLE_ENTRY, &f->e.base) : 0;
}

static int fdtable_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	FdTableEntry *e = rctx_load_one(ctx, t, rec, KIND_fdtable, FDTABLE_ENTRY, &fd_table_entry__descriptor);
	if (!e)
		return -EINVAL;
	for (size_t i = 0; i < e->n_fds; i++) {
		if (e->fds[i]->fd >= FD_MAX_RESTORE || (i && e->fds[i]->fd <= e->fds[i - 1]->fd))
			return log_fail(&ctx->log, -EINVAL,
					"record %u: fd table of pid %d: fd %u is out of order or range",
					rec->index, t->pid, e->fds[i]->fd);
		if (e->fds[i]->external && (t != &ctx->tasks[0] || e->fds[i]->owner))
			return log_fail(&ctx->log, -EINVAL,
					"record %u: fd table of pid %d: fd %u is external, which only "
					"the root's fds can be", rec->index, t->pid, e->fds[i]->fd);
	}
	return 0;
}

/* The caller's fd given for the root's external fd, or -1. */
static int inherited(const struct rst_ctx *ctx, uint32_t fd)
{
	for (size_t i = 0; i < ctx->ninherit; i++)
		if (ctx->inherit[i].fd >= 0 && (uint32_t)ctx->inherit[i].fd == fd)
			return ctx->inherit[i].local;
	return -1;
}

/* The root's external fds each given, and nothing given that is not one. */
static int check_inherited(struct rst_ctx *ctx, struct rst_task *t, const FdTableEntry *e)
{
	for (size_t i = 0; e && i < e->n_fds; i++) {
		const FdEntry *fe = e->fds[i];
		if (!fe->external)
			continue;
		int local = inherited(ctx, fe->fd);
		if (local < 0 && (ctx->flags & RESTART_VERIFY))
			continue; /* a dry run for checkpoint --verify: the original holds it */
		if (local < 0)
			return log_fail(&ctx->log, -EBADF, "pid %d fd %u: external in the image (saved "
					"with --external fd:%u): give it with --inherit-fd %u:FD",
					t->pid, fe->fd, fe->fd, fe->fd);
		if (fcntl(local, F_GETFD) < 0)
			return log_fail(&ctx->log, -EBADF, "pid %d fd %u: the fd given for it "
					"(--inherit-fd %u:%d) is not open", t->pid, fe->fd, fe->fd,
					local);
	}
	for (size_t i = 0; i < ctx->ninherit; i++) {
		uint32_t id;
		int fd = ctx->inherit[i].fd;
		bool ext = false;
		for (size_t j = 0; e && fd >= 0 && j < e->n_fds && !ext; j++)
			ext = e->fds[j]->external && (int)e->fds[j]->fd == fd;
		if (!ext)
			return log_fail(&ctx->log, -EINVAL, "--inherit-fd %d:%d: the image has no "
					"external fd %d (its root's external fds are saved with "
					"checkpoint --external fd:N)%s", fd, ctx->inherit[i].local, fd,
					e && fd >= 0 && fdtable_rst_file_id(t, fd, &id) == 0
						? "; that fd is saved in the image" : "");
	}
	return 0;
}

/* Every process has a table (its own, or its parent's: CLONE_FILES); the
 * highest fd of all is where the control socket goes above (rctx->max_fd). */
static int fdtable_loaded(struct rst_ctx *ctx, struct rst_task *t)
{
	FdTableEntry *e = t->kstate[KIND_fdtable];
	if (t == &ctx->tasks[0]) {
		int r = check_inherited(ctx, t, e);
		if (r < 0)
			return r;
	}
	if (!e)
		return t->files_with ? 0 : rst_require(ctx, t, KIND_fdtable);
	if (e->n_fds)
		ctx->max_fd = MAX(ctx->max_fd, (int)e->fds[e->n_fds - 1]->fd);
	return 0;
}

static int find_fd(FdEntry *const *fds, size_t n, int fd, uint32_t *ret_id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if ((int)fds[mid]->fd == fd) {
			if (fds[mid]->external) /* not an object of the image */
				return -ENOENT;
			*ret_id = fds[mid]->file_id;
			return 0;
		}
		if ((int)fds[mid]->fd < fd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

int fdtable_file_id(struct task *t, int fd, uint32_t *ret_id)
{
	const struct fdt_ckpt *f = t->kstate[KIND_fdtable];
	return f ? find_fd(f->pfds, f->e.n_fds, fd, ret_id) : -ENOENT;
}

int fdtable_find_file(struct ckpt_ctx *ctx, bool (*match)(pid_t pid, int fd, void *arg),
		      void *arg, uint32_t *ret_id)
{
	for (size_t i = 0; i < ctx->ntasks; i++) {
		const struct fdt_ckpt *f = ctx->tasks[i].kstate[KIND_fdtable];
		for (size_t j = 0; f && j < f->e.n_fds; j++) {
			if (!f->pfds[j]->external && match(ctx->tasks[i].pid, (int)f->pfds[j]->fd, arg)) {
				*ret_id = f->pfds[j]->file_id;
				return 0;
			}
		}
	}
	return -ENOENT;
}

int fdtable_rst_file_id(struct rst_task *t, int fd, uint32_t *ret_id)
{
	const FdTableEntry *e = t->kstate[KIND_fdtable];
	return e ? find_fd(e->fds, e->n_fds, fd, ret_id) : -ENOENT;
}

int fdtable_rst_fd_of(struct rst_task *t, uint32_t id, int *ret_fd)
{
	const FdTableEntry *e = t->kstate[KIND_fdtable];
	for (size_t i = 0; e && i < e->n_fds; i++) {
		if (e->fds[i]->file_id == id && !e->fds[i]->external) {
			*ret_fd = (int)e->fds[i]->fd;
			return 0;
		}
	}
	return -ENOENT;
}

int fdtable_local_fd(struct rst_ctx *ctx, uint32_t id, int *ret_fd)
{
	struct obj *o = objhash_find(&ctx->objs, id);
	if (!o || !kinds[o->kind].ops->fd_get)
		return log_fail(&ctx->log, -EINVAL, "image refers to open file %u, which %s", id,
				o ? "is not an open file" : "it does not define");
	return kinds[o->kind].ops->fd_get(ctx, o->ptr, ret_fd);
}

/* fds installed by batches of PUPPET_FDS_MAX: one sendmsg, one recvmsg
 * and one batch of dup3s in the task for each (puppet_install_fds) */
static int install_batch(struct rst_ctx *ctx, struct rst_task *t, const FdEntry *const *fes,
			 const int *local, size_t n)
{
	int target[PUPPET_FDS_MAX] = { 0 }, err[PUPPET_FDS_MAX] = { 0 };
	bool cloexec[PUPPET_FDS_MAX] = { 0 };

	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		target[i] = (int)fes[i]->fd;
		cloexec[i] = fes[i]->cloexec;
	}
	int r = puppet_install_fds(&t->pup, ctx->ctl[0], ctx->ctl_remote, local, target, cloexec,
				   n, err);
	for (size_t i = 0; r < 0 && i < n; i++)
		if (err[i] < 0)
			return log_fail(&ctx->log, err[i], "pid %d fd %u: cannot install it: %s",
					t->pid, fes[i]->fd, strerror(-err[i]));
	return r;
}

static int fdtable_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	FdTableEntry *e = t->kstate[KIND_fdtable];
	const FdEntry *fes[PUPPET_FDS_MAX];
	int locals[PUPPET_FDS_MAX];
	size_t n = 0;

	for (size_t i = 0; e && i < e->n_fds; i++) {
		const FdEntry *fe = e->fds[i];
		int local = fe->external ? inherited(ctx, fe->fd) : -1, r = 0;
		if (fe->external && local < 0) /* a dry run's (check_inherited) */
			continue;
		if (!fe->external && (r = fdtable_local_fd(ctx, fe->file_id, &local)) < 0)
			return r;
		fes[n] = fe;
		locals[n++] = local;
		if (n == PUPPET_FDS_MAX) {
			r = install_batch(ctx, t, fes, locals, n);
			if (r < 0)
				return r;
			n = 0;
		}
	}
	return install_batch(ctx, t, fes, locals, n);
}

static int set_owner(struct rst_ctx *ctx, struct rst_task *t, const FdEntry *fe)
{
	const FdOwner *o = fe->owner;
	int local, r = fdtable_local_fd(ctx, fe->file_id, &local);
	if (r < 0)
		return r;
	struct f_owner_ex own = { .type = (int)o->type };
	if (o->pid) {
		/* the group's leader may be gone: its pid is still the group's */
		const struct rst_task *to = tree_find(ctx, o->pid);
		if (!to)
			return log_fail(&ctx->log, -EINVAL, "pid %d fd %u: its SIGIO owner %d is "
					"not in the image", t->pid, fe->fd, o->pid);
		own.pid = to->pup.pid;
	}
	int fl = fcntl(local, F_GETFL);
	if (fcntl(local, F_SETOWN_EX, &own) < 0 || fcntl(local, F_SETSIG, (int)o->sig) < 0 ||
	    fl < 0)
		return log_fail(&ctx->log, -errno, "pid %d fd %u: cannot set its SIGIO owner or "
				"signal: %m", t->pid, fe->fd);
	if (!o->async)
		return 0;
	/* by the task, on its own fd: the signal's si_fd is the fd O_ASYNC
	 * was set through */
	long e = puppet_syscall(&t->pup, SYS_fcntl, fe->fd, F_SETFL, fl | O_ASYNC);
	if (e < 0)
		return log_fail(&ctx->log, (int)e, "pid %d fd %u: cannot set O_ASYNC: %s", t->pid,
				fe->fd, strerror((int)-e));
	return 0;
}

/* Signal-driven I/O last, once no kind writes into an object any more. */
static int fdtable_restore_end(struct rst_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nimage; i++) {
		struct rst_task *t = &ctx->tasks[i];
		const FdTableEntry *e = t->kstate[KIND_fdtable];
		for (size_t j = 0; e && j < e->n_fds; j++) {
			int r = e->fds[j]->owner ? set_owner(ctx, t, e->fds[j]) : 0;
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static void fdtable_free_state(void *state)
{
	struct fdt_ckpt *f = state;
	if (f) {
		free(f->fds);
		free(f->pfds);
		free(f->owners);
		for (size_t i = 0; i < f->nseen; i++)
			free(f->seen[i].locks);
		free(f->seen);
		for (size_t i = 0; i < f->nlinks; i++)
			free(f->links[i].link);
		free(f->links);
		free(f);
	}
}

static const ProtobufCMessageDescriptor *fdtable_descriptor(uint32_t sub)
{
	return sub == REC_SUB(FDTABLE_ENTRY) ? &fd_table_entry__descriptor : NULL;
}

const struct kind_ops fdtable_ops = {
	.collect = fdtable_collect,
	.dump = fdtable_dump,
	.load = fdtable_load,
	.loaded = fdtable_loaded,
	.restore = fdtable_restore,
	.restore_end = fdtable_restore_end,
	.free_state = fdtable_free_state,
	.descriptor = fdtable_descriptor,
};
