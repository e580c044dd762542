/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Terminals at restart (tty.c says what is saved and how it comes back):
 * the records loaded and checked, the ptys and terminal files made on
 * ckpt's side (prepare, or root_ready in a container's own devpts), the
 * controlling terminals taken after setsid (session), the foreground
 * groups (groups_ready), TIOCNOTTY for a task that had dropped its
 * terminal (restore), and a shell job's hold on ckpt's own terminal
 * (release, handover, wait, handed_back, restore_abort).
 */
#include "kinds/ns.h"
#include "kinds/tty.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdtable.h"
#include "kinds/tty-io.h"
#include "tty.pb-c.h"
#include "util/cleanup.h"


/* --- restart --------------------------------------------------------- */

static bool termios_ok(const TtyTermios *t)
{
	return t && t->cc.len == NCCS;
}

static bool winsize_ok(const TtyWinsize *w)
{
	return w && w->rows <= 0xffff && w->cols <= 0xffff && w->xpixel <= 0xffff &&
	       w->ypixel <= 0xffff;
}

static bool flags_ok(uint32_t flags)
{
	return !(flags & ~FILE_FLAGS) && (flags & O_ACCMODE) != O_ACCMODE;
}

static bool pty_ok(const TtyEntry *e)
{
	if (!e || e->index >= PTY_MAX_INDEX || !flags_ok(e->master_flags) ||
	    !termios_ok(e->termios) || !winsize_ok(e->winsize) || e->slave_mode > 07777 ||
	    (strcmp(e->master_path, "/dev/ptmx") && strcmp(e->master_path, "/dev/pts/ptmx")))
		return false;
	if ((e->has_master_queue && e->master_queue.len > TTY_MAX_QUEUE) ||
	    (e->has_input_rest && e->input_rest.len > TTY_MAX_QUEUE) ||
	    e->n_input_lines > TTY_MAX_LINES)
		return false;
	for (size_t i = 0; i < e->n_input_lines; i++)
		if (e->input_lines[i]->data.len > 8192)
			return false;
	return (!e->has_sid || (e->sid && e->sid < PID_LIMIT)) &&
	       (!e->has_fg_pgrp || (e->has_sid && e->fg_pgrp && e->fg_pgrp < PID_LIMIT));
}

static bool file_ok(const TtyFileEntry *f)
{
	return f && f->type >= TF_PTS && f->type <= TF_CONSOLE && flags_ok(f->flags) &&
	       (f->type == TF_CONSOLE) == f->has_rdev && !(f->type == TF_CONSOLE && f->has_tty_id) &&
	       !(f->hung_up && (f->has_tty_id || f->type == TF_CONSOLE));
}

static int load_obj(struct rst_ctx *ctx, const struct img_record *rec)
{
	struct tty_robj *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->master = o->slave = o->fd = -1;
	o->is_file = rec->type == TTY_FILE_ENTRY;
	if (o->is_file)
		o->f = rctx_unpack(ctx, rec, &tty_file_entry__descriptor);
	else
		o->e = rctx_unpack(ctx, rec, &tty_entry__descriptor);
	bool ok = o->is_file ? file_ok(o->f) : pty_ok(o->e);
	uint32_t id = o->is_file ? (o->f ? o->f->id : 0) : (o->e ? o->e->id : 0);
	if (ok && objhash_add(&ctx->objs, KIND_tty, o->is_file ? 1 : 0, id, o, NULL) == 0)
		return 0;
	if (o->f)
		tty_file_entry__free_unpacked(o->f, NULL);
	if (o->e)
		tty_entry__free_unpacked(o->e, NULL);
	free(o);
	return log_fail(&ctx->log, -EINVAL, "record %u: %s is not valid", rec->index,
			rec->type == TTY_FILE_ENTRY ? "terminal file" : "pty");
}

static int load_task(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	if (t->kstate[KIND_tty])
		return log_fail(&ctx->log, -EINVAL, "record %u: pid %d has two terminal records",
				rec->index, t->pid);
	struct tty_rtask *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->own = -1;
	t->kstate[KIND_tty] = k;
	k->e = rctx_unpack(ctx, rec, &tty_task_entry__descriptor);
	if (!k->e)
		return -EINVAL;
	const TtyShellEntry *sh = k->e->shell;
	if (sh && (t != &ctx->tasks[0] || (sh->termios && !termios_ok(sh->termios)) ||
		   (sh->winsize && !winsize_ok(sh->winsize))))
		return log_fail(&ctx->log, -EINVAL, "record %u: shell job entry is not valid",
				rec->index);
	return 0;
}

int tty_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	if (rec->type == TTY_ENTRY || rec->type == TTY_FILE_ENTRY)
		return load_obj(ctx, rec);
	if (rec->type == TTY_TASK_ENTRY)
		return load_task(ctx, t, rec);
	return log_fail(&ctx->log, -EINVAL, "record %u: unknown tty subtype %u", rec->index,
			REC_SUB(rec->type));
}

static struct tty_robj *rget(const struct objhash *h, uint32_t id)
{
	struct obj *o;
	return objhash_get(h, id, KIND_tty, &o) == 0 ? o->ptr : NULL;
}

#define FOR_RTTY(h, o)                                                                             \
	for (struct obj *ob_ = NULL; (ob_ = objhash_next_of((h), KIND_tty, ob_));)                  \
		if (((o) = ob_->ptr))

static struct tty_robj *pty_of_sid(struct rst_ctx *ctx, pid_t sid)
{
	struct tty_robj *p;
	FOR_RTTY(&ctx->objs, p)
	if (!p->is_file && p->e->has_sid && (pid_t)p->e->sid == sid)
		return p;
	return NULL;
}

static struct tty_rtask *root_state(struct rst_ctx *ctx, bool create)
{
	struct rst_task *root = &ctx->tasks[0];
	struct tty_rtask *k = root->kstate[KIND_tty];
	if (!k && create && (k = calloc(1, sizeof(*k))))
		k->own = -1, k->shell.fd = -1, root->kstate[KIND_tty] = k;
	return k;
}

static void set_termios(struct termios2 *t, const TtyTermios *in)
{
	memset(t, 0, sizeof(*t));
	t->c_iflag = in->iflag;
	t->c_oflag = in->oflag;
	t->c_cflag = in->cflag;
	t->c_lflag = in->lflag;
	t->c_line = (cc_t)in->line;
	memcpy(t->c_cc, in->cc.data, NCCS);
	t->c_ispeed = in->ispeed;
	t->c_ospeed = in->ospeed;
}

/* ckpt's own terminal, which a shell job gets (and tasks without one drop). */
static int open_own(struct rst_ctx *ctx)
{
	struct tty_rtask *rk = root_state(ctx, false);
	struct tty_robj *f;
	bool need = rk && rk->e && rk->e->shell;
	FOR_RTTY(&ctx->objs, f)
	need |= f->is_file && f->f->type != TF_CONSOLE && !f->f->has_tty_id && !f->f->hung_up;
	if (need && !(ctx->flags & RESTART_SHELL_JOB))
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "the image is a job of a terminal (checkpoint --shell-job): restart "
		    "it with --shell-job, on the terminal it is to run on");
	_cleanup_close_ int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	unsigned int dev = 0;
	if (fd < 0 || ioctl(fd, TIOCGDEV, &dev) < 0) {
		if (need)
			return log_fail(
			    &ctx->log, -ENOTTY,
			    "restart --shell-job needs a controlling terminal to attach "
			    "the job to; ckpt has none");
		return 0;
	}
	if (!(rk = root_state(ctx, true)))
		return -ENOMEM;
	rk->own = TAKE_FD(fd);
	rk->own_dev = dev;
	return 0;
}

/* A file of ckpt's own terminal with these flags (a shell job's fd). */
static int open_own_file(struct rst_ctx *ctx, int type, int flags)
{
	struct tty_rtask *rk = root_state(ctx, false);
	char path[32];
	if (type == TF_DEVTTY)
		return open("/dev/tty", flags & ~O_NOCTTY);
	if (major(rk->own_dev) == PTS_MAJOR) {
		snprintf(path, sizeof(path), "/dev/pts/%u", minor(rk->own_dev));
		return open(path, flags);
	}
	for (int fd = 0; fd < 3; fd++) {
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
		    enc_dev(major(st.st_rdev), minor(st.st_rdev)) == rk->own_dev) {
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			return open(path, flags);
		}
	}
	errno = ENOENT;
	return log_fail(&ctx->log, -ENOENT, "cannot find the device of ckpt's terminal (%u:%u)",
			major(rk->own_dev), minor(rk->own_dev));
}

static int cmp_index(const void *a, const void *b)
{
	const struct tty_robj *x = *(struct tty_robj *const *)a, *y = *(struct tty_robj *const *)b;
	return (x->e->index > y->e->index) - (x->e->index < y->e->index);
}

/* "pid P fd F" of the first task of the image that holds the pty's master. */
static const char *holder(struct rst_ctx *ctx, const struct tty_robj *p, char *buf, size_t len)
{
	int fd;
	snprintf(buf, len, "no process");
	for (size_t i = 0; i < ctx->nimage; i++)
		if (fdtable_rst_fd_of(&ctx->tasks[i], p->e->id, &fd) == 0) {
			snprintf(buf, len, "pid %d fd %d", ctx->tasks[i].pid, fd);
			break;
		}
	return buf;
}

/*
 * Opens /dev/ptmx until it gives index; the lower free ones are held in
 * held. A pty of the container's own devpts: its /dev/ptmx, through the
 * root's /proc/PID/root (opening it finds the devpts on the /dev/pts
 * beside it, the container's).
 */
static int open_index(struct rst_ctx *ctx, struct tty_robj *p, int *held, size_t *nheld)
{
	char path[64];
	snprintf(path, sizeof(path), "%s", p->e->master_path);
	if (p->e->private_pts)
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)ctx->tasks[0].pup.pid,
			 p->e->master_path);
	for (;;) {
		int m = open(path, (int)(p->e->master_flags & O_ACCMODE) | O_NOCTTY | O_CLOEXEC);
		int n = -1;
		char who[48];
		if (m < 0 || ioctl(m, TIOCGPTN, &n) < 0) {
			int e = errno;
			if (m >= 0)
				close(m);
			return log_fail(&ctx->log, -e, "%s (pty /dev/pts/%u): cannot open %s: %s",
					holder(ctx, p, who, sizeof(who)), p->e->index, path,
					strerror(e));
		}
		if ((uint32_t)n == p->e->index) {
			p->master = m;
			return 0;
		}
		if ((uint32_t)n > p->e->index || *nheld == MAX_HELD) {
			close(m);
			return log_fail(&ctx->log, -EBUSY,
					"%s (pty /dev/pts/%u): that pts index is taken on this "
					"machine's devpts; restore it where it is free (or in a "
					"`ckpt run` container, whose ptys are its own)",
					holder(ctx, p, who, sizeof(who)), p->e->index);
		}
		held[(*nheld)++] = m;
	}
}

/* Every pty with its old index, lowest first. */
static int alloc_ptys(struct rst_ctx *ctx)
{
	struct tty_robj *p, **all = NULL;
	size_t n = 0, nheld = 0;
	int r = 0;
	FOR_RTTY(&ctx->objs, p)
	n += !p->is_file;
	if (!n)
		return 0;
	all = calloc(n, sizeof(*all));
	int *held = calloc(MAX_HELD, sizeof(*held));
	if (!all || !held) {
		free(all);
		free(held);
		return -ENOMEM;
	}
	n = 0;
	FOR_RTTY(&ctx->objs, p)
	if (!p->is_file)
		all[n++] = p;
	qsort(all, n, sizeof(*all), cmp_index);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (i && all[i]->e->index == all[i - 1]->e->index)
			r = log_fail(&ctx->log, -EINVAL, "the image has two ptys with index %u",
				     all[i]->e->index);
		else
			r = open_index(ctx, all[i], held, &nheld);
	}
	for (size_t i = 0; i < nheld; i++)
		close(held[i]);
	free(held);
	free(all);
	return r;
}

/* The session and foreground group must be the image's. */
static int check_session(struct rst_ctx *ctx, const TtyEntry *e)
{
	if (!e->has_sid)
		return 0;
	struct rst_task *l = tree_find(ctx, (pid_t)e->sid);
	if (!l || l->leader || l->zombie || l->sid != l->pid)
		return log_fail(&ctx->log, -EINVAL,
				"pty /dev/pts/%u: its session %u is not a session of the image",
				e->index, e->sid);
	for (size_t i = 0; e->has_fg_pgrp && i < ctx->nimage; i++)
		if (ctx->tasks[i].pgid == (pid_t)e->fg_pgrp && ctx->tasks[i].sid == l->sid)
			return 0;
	if (e->has_fg_pgrp)
		return log_fail(&ctx->log, -EINVAL,
				"pty /dev/pts/%u: its foreground group %u is not one of session %u",
				e->index, e->fg_pgrp, e->sid);
	return 0;
}

static int put_queues(struct rst_ctx *ctx, struct tty_robj *p, const struct termios2 *t)
{
	const TtyEntry *e = p->e;
	struct tty_queues q = {0};
	struct tty_line *lines = e->n_input_lines ? calloc(e->n_input_lines, sizeof(*lines)) : NULL;
	if (e->n_input_lines && !lines)
		return -ENOMEM;
	for (size_t i = 0; i < e->n_input_lines; i++)
		lines[i] = (struct tty_line){.data = e->input_lines[i]->data.data,
					     .len = e->input_lines[i]->data.len,
					     .eof = e->input_lines[i]->eof};
	q.lines = lines;
	q.nlines = e->n_input_lines;
	if (e->has_master_queue)
		q.out = e->master_queue.data, q.out_len = e->master_queue.len;
	if (e->has_input_rest)
		q.rest = e->input_rest.data, q.rest_len = e->input_rest.len;
	int r = ttyio_put_back(p->slave, t, &q);
	free(lines);
	if (r == -EPERM || r == -EIO)
		return log_fail(
		    &ctx->log, r,
		    "pty /dev/pts/%u: putting its input back needs CAP_SYS_ADMIN (TIOCSTI)",
		    e->index);
	if (r < 0)
		return log_fail(&ctx->log, r,
				"pty /dev/pts/%u: cannot put its queued bytes back: %s", e->index,
				strerror(-r));
	return 0;
}

/* Unlocked, its slave opened by ckpt, queues, termios, size, owner and mode. */
static int setup_pty(struct rst_ctx *ctx, struct tty_robj *p)
{
	const TtyEntry *e = p->e;
	struct termios2 t;
	struct winsize ws = {.ws_row = (unsigned short)e->winsize->rows,
			     .ws_col = (unsigned short)e->winsize->cols,
			     .ws_xpixel = (unsigned short)e->winsize->xpixel,
			     .ws_ypixel = (unsigned short)e->winsize->ypixel};
	int zero = 0, r = check_session(ctx, e);

	if (r < 0)
		return r;
	if (ioctl(p->master, TIOCSPTLCK, &zero) < 0 ||
	    (p->slave = ioctl(p->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) <
		0)
		return log_fail(&ctx->log, -errno, "pty /dev/pts/%u: cannot open its slave: %s",
				e->index, strerror(errno));
	if (fchown(p->slave, e->slave_uid, e->slave_gid) < 0 || fchmod(p->slave, e->slave_mode) < 0)
		return log_fail(&ctx->log, -errno,
				"pty /dev/pts/%u: cannot set its owner and mode: %s", e->index,
				strerror(errno));
	set_termios(&t, e->termios);
	if ((r = put_queues(ctx, p, &t)) < 0)
		return r;
	if (ioctl(p->slave, TCSETS2, &t) < 0 || ioctl(p->master, TIOCSWINSZ, &ws) < 0)
		return log_fail(&ctx->log, -errno,
				"pty /dev/pts/%u: cannot set termios and size: %s", e->index,
				strerror(errno));
	if ((e->master_flags & O_NONBLOCK) && fcntl(p->master, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Exclusive, packet and lock modes: once every file of the slave is open. */
static int finish_pty(struct rst_ctx *ctx, struct tty_robj *p)
{
	const TtyEntry *e = p->e;
	int one = 1;
	if ((e->master_excl && ioctl(p->master, TIOCEXCL) < 0) ||
	    (e->slave_excl && ioctl(p->slave, TIOCEXCL) < 0) ||
	    (e->packet && ioctl(p->master, TIOCPKT, &one) < 0) ||
	    (e->locked && ioctl(p->master, TIOCSPTLCK, &one) < 0))
		return log_fail(&ctx->log, -errno, "pty /dev/pts/%u: cannot set its modes: %s",
				e->index, strerror(errno));
	return 0;
}

/*
 * A /dev/tty file of the pty: only a process whose controlling terminal it
 * is can open one, so a helper does (setsid, TIOCSCTTY, open) and exits,
 * which leaves the pty without a session again.
 */
static int open_devtty(struct rst_ctx *ctx, struct tty_robj *p, int flags)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	pid_t c = fork();
	if (c == 0) {
		close(sp[0]);
		int fd = -1;
		if (setsid() >= 0 && ioctl(p->slave, TIOCSCTTY, 0) >= 0)
			fd = open("/dev/tty", flags & ~O_NOCTTY);
		char buf[CMSG_SPACE(sizeof(int))] = {0}, byte = 'T';
		struct iovec iov = {.iov_base = &byte, .iov_len = 1};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
		if (fd >= 0) {
			msg.msg_control = buf;
			msg.msg_controllen = sizeof(buf);
			struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &fd, sizeof(int));
		}
		_exit(sendmsg(sp[1], &msg, 0) == 1 && fd >= 0 ? 0 : 1);
	}
	close(sp[1]);
	int fd = -EIO;
	if (c > 0) {
		char buf[CMSG_SPACE(sizeof(int))], byte;
		struct iovec iov = {.iov_base = &byte, .iov_len = 1};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = buf,
				     .msg_controllen = sizeof(buf)};
		struct cmsghdr *cm;
		if (recvmsg(sp[0], &msg, MSG_CMSG_CLOEXEC) == 1 && (cm = CMSG_FIRSTHDR(&msg)) &&
		    cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
		while (waitpid(c, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close(sp[0]);
	if (fd < 0)
		return log_fail(&ctx->log, c < 0 ? -errno : -EIO,
				"pty /dev/pts/%u: cannot open it as /dev/tty", p->e->index);
	return fd;
}

/* A detached client's terminal: the slave of a pty of ckpt's whose master
 * is closed at once, so that it is hung up (reads 0, writes EIO). */
static int open_hung_up(int flags)
{
	_cleanup_close_ int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	int unlock = 0;
	if (m < 0 || ioctl(m, TIOCSPTLCK, &unlock) < 0)
		return -errno;
	int s = ioctl(m, TIOCGPTPEER, flags);
	return s < 0 ? -errno : s;
}

static int open_file(struct rst_ctx *ctx, struct tty_robj *f)
{
	const TtyFileEntry *e = f->f;
	int flags = (int)(e->flags & FILE_FLAGS) | O_CLOEXEC | O_NOCTTY;
	struct tty_robj *p = e->has_tty_id ? rget(&ctx->objs, e->tty_id) : NULL;
	unsigned int dev = 0;

	if (e->has_tty_id && (!p || p->is_file))
		return log_fail(&ctx->log, -EINVAL,
				"terminal file %u: its pty %u is not in the image", e->id,
				e->tty_id);
	if (e->type == TF_CONSOLE) {
		f->fd = open("/dev/console", flags);
		if (f->fd < 0 || ioctl(f->fd, TIOCGDEV, &dev) < 0 || dev != e->rdev)
			return log_fail(&ctx->log, f->fd < 0 ? -errno : -ESTALE, "/dev/console: %s",
					f->fd < 0 ? strerror(errno)
						  : "is another terminal than at checkpoint");
		return 0;
	}
	if (e->hung_up) {
		f->fd = open_hung_up(flags);
		if (f->fd < 0)
			return log_fail(&ctx->log, f->fd,
					"terminal file %u (a detached client's): cannot make a "
					"pty: %s",
					e->id, strerror(-f->fd));
		return 0;
	}
	if (!p)
		f->fd = open_own_file(ctx, (int)e->type, flags);
	else if (e->type == TF_PTS)
		f->fd = ioctl(p->master, TIOCGPTPEER, flags);
	else
		f->fd = open_devtty(ctx, p, flags);
	if (f->fd < 0)
		return log_fail(&ctx->log, -errno, "terminal file %u: cannot open it: %s", e->id,
				strerror(errno));
	return 0;
}

/* Whether the image has a pty of a container's own devpts. */
static bool has_private(struct rst_ctx *ctx)
{
	struct tty_robj *o;
	FOR_RTTY(&ctx->objs, o)
	if (!o->is_file && o->e->private_pts)
		return true;
	return false;
}

static int prepare_all(struct rst_ctx *ctx)
{
	struct tty_robj *o;
	int r = open_own(ctx);
	if (r >= 0)
		r = alloc_ptys(ctx);
	FOR_RTTY(&ctx->objs, o)
	if (r >= 0 && !o->is_file)
		r = setup_pty(ctx, o);
	FOR_RTTY(&ctx->objs, o)
	if (r >= 0 && o->is_file)
		r = open_file(ctx, o);
	FOR_RTTY(&ctx->objs, o)
	if (r >= 0 && !o->is_file)
		r = finish_pty(ctx, o);
	return r;
}

/* Everything, on ckpt's side; with ptys of a container's devpts, once it exists. */
int tty_prepare(struct rst_ctx *ctx)
{
	if (!has_private(ctx))
		return prepare_all(ctx);
	if (!ns_rst(ctx) || !ns_rst(ctx)->devpts)
		return log_fail(&ctx->log, -EINVAL,
				"the image has ptys of a container's own devpts, but no container "
				"with one");
	return 0;
}

/* A container with a devpts of its own has its ptys made in it, once its
 * root has mounted it. */
int tty_root_ready(struct rst_ctx *ctx, struct rst_task *root)
{
	(void)root;
	return ns_rst(ctx) && ns_rst(ctx)->devpts && has_private(ctx) ? prepare_all(ctx) : 0;
}

int tty_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct tty_robj *o = robj;
	int fd = o->is_file ? o->fd : o->master;
	if (fd < 0)
		return log_fail(&ctx->log, -EBADF, "a terminal of the image was not opened");
	*ret_fd = fd;
	return 0;
}

/* ioctl(fd, req, arg) in the task, on a copy of ckpt's local fd. */
static int task_ioctl(struct rst_ctx *ctx, struct rst_task *t, int local, unsigned long req,
		      long arg, const char *what)
{
	int fd = puppet_send_fd(&t->pup, ctx->ctl[0], ctx->ctl_remote, local);
	if (fd < 0)
		return log_fail(&ctx->log, fd, "pid %d: cannot pass it its terminal: %s", t->pid,
				strerror(-fd));
	long r = puppet_syscall(&t->pup, SYS_ioctl, fd, req, arg);
	puppet_syscall(&t->pup, SYS_close, fd);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d: %s: %s", t->pid, what,
				strerror((int)-r));
	return 0;
}

/* Right after t's setsid(), before it forks: TIOCSCTTY on the pty whose
 * session it leads (a controlling terminal is inherited at fork). */
int tty_session(struct rst_ctx *ctx, struct rst_task *t)
{
	struct tty_robj *p = pty_of_sid(ctx, t->pid);
	if (!p)
		return 0;
	log_debug(&ctx->log, "pid %d: controlling terminal /dev/pts/%u", t->pid, p->e->index);
	return task_ioctl(ctx, t, p->slave, TIOCSCTTY, 0, "TIOCSCTTY (its controlling terminal)");
}

/* Once every group exists: TIOCSPGRP, in the session leader, to the saved
 * foreground group. */
int tty_groups_ready(struct rst_ctx *ctx)
{
	struct tty_robj *p;
	FOR_RTTY(&ctx->objs, p)
	{
		if (p->is_file || !p->e->has_fg_pgrp)
			continue;
		struct rst_task *l = tree_find(ctx, (pid_t)p->e->sid);
		pid_t pg = (pid_t)p->e->fg_pgrp;
		if (!l || !l->created)
			return log_fail(&ctx->log, -EINVAL,
					"pty /dev/pts/%u: its session leader %u "
					"does not exist",
					p->e->index, p->e->sid);
		uint64_t addr = puppet_scratch_put(&l->pup, 0, &pg, sizeof(pg));
		int r = addr ? task_ioctl(ctx, l, p->slave, TIOCSPGRP, (long)addr,
					  "TIOCSPGRP (the foreground group)")
			     : -EFAULT;
		if (r < 0)
			return r;
	}
	return 0;
}

/* The root's session when the root does not lead it: ckpt's, at restart. */
static bool outside_session(struct rst_ctx *ctx, const struct rst_task *t)
{
	const struct rst_task *root = &ctx->tasks[0], *l = tree_find(ctx, root->sid);
	return t->sid == root->sid && root->sid != root->pid && !(l && !l->leader);
}

/*
 * A task that had dropped its terminal drops it again; one of the outside
 * session that had none does not keep the one it got from ckpt.
 */
int tty_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	const struct tty_rtask *k = t->kstate[KIND_tty], *rk = root_state(ctx, false);
	bool shell = rk && rk->e && rk->e->shell, outside = outside_session(ctx, t);
	int own = rk ? rk->own : -1, fd = -1;

	if (k && k->e && k->e->no_ctty) {
		struct tty_robj *p = pty_of_sid(ctx, t->sid);
		fd = p ? p->slave : outside ? own : -1;
	} else if (outside && !shell) {
		fd = own;
	}
	return fd < 0 ? 0 : task_ioctl(ctx, t, fd, TIOCNOTTY, 0, "TIOCNOTTY");
}

int tty_shell_attach(struct rst_ctx *ctx, struct tty_shell *sh)
{
	const struct tty_rtask *rk = root_state(ctx, false);
	const struct rst_task *root = &ctx->tasks[0];
	sigset_t ttou, old;

	*sh = (struct tty_shell){.fd = -1};
	if (!rk || !rk->e || !rk->e->shell || rk->own < 0)
		return 0;
	const TtyShellEntry *se = rk->e->shell;
	pid_t pg = root->pgid == root->pid ? root->pup.pid : getpgrp();
	sh->fd = fcntl(rk->own, F_DUPFD_CLOEXEC, 3);
	if (sh->fd < 0)
		return -errno;
	/* ckpt may be in the background of its terminal itself */
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &old);
	struct termios2 t;
	if (se->termios && ioctl(sh->fd, TCGETS2, &sh->termios) == 0) {
		sh->restore = true;
		set_termios(&t, se->termios);
		if (ioctl(sh->fd, TCSETS2, &t) < 0)
			log_warn(&ctx->log, "cannot give this terminal the job's termios: %s",
				 strerror(errno));
	}
	int r = ioctl(sh->fd, TIOCSPGRP, &pg) < 0 ? -errno : 0;
	struct winsize ws;
	if (r == 0 && se->winsize && ioctl(sh->fd, TIOCGWINSZ, &ws) == 0 &&
	    (ws.ws_row != se->winsize->rows || ws.ws_col != se->winsize->cols))
		kill(-pg, SIGWINCH); /* held until the release, then delivered */
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return log_fail(&ctx->log, r,
				"cannot make the job the foreground job of this "
				"terminal: %s",
				strerror(-r));
	sh->pgrp = pg;
	log_info(&ctx->log, "pid %d: the foreground job of this terminal", root->pup.pid);
	return 0;
}

/* The terminal to group pg with termios t (NULL: as it is), SIGTTOU blocked. */
static void give_terminal(int fd, pid_t pg, const struct termios2 *t)
{
	sigset_t ttou, old;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &old);
	if (ioctl(fd, TIOCSPGRP, &pg) == 0 && t)
		ioctl(fd, TCSETS2, t);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * The job stopped (^Z, SIGTTIN...): ckpt takes the terminal back with its
 * own termios and stops itself by the same signal, so that the shell that
 * ran `ckpt restart` sees its job stopped. Continued in the foreground
 * (fg), it gives the job the terminal and its termios again; in the
 * background (bg), it only continues it.
 */
static void suspend_job(struct tty_shell *sh, int sig)
{
	struct termios2 job;
	bool have = ioctl(sh->fd, TCGETS2, &job) == 0;
	pid_t me = getpgrp(), fg = 0;
	give_terminal(sh->fd, me, sh->restore ? &sh->termios : NULL);
	if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
		sig = SIGSTOP;
	raise(sig); /* returns once continued (or at once in an orphaned group) */
	if (ioctl(sh->fd, TIOCGPGRP, &fg) == 0 && fg == me)
		give_terminal(sh->fd, sh->pgrp, have ? &job : NULL);
	kill(-sh->pgrp, SIGCONT);
}

int tty_shell_wait(struct tty_shell *sh, pid_t child, int *ret_status)
{
	/* a job in ckpt's own group stops and continues with ckpt */
	bool own = sh->fd >= 0 && sh->pgrp != getpgrp();
	for (;;) {
		int st;
		if (waitpid(child, &st, own ? WUNTRACED : 0) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!WIFSTOPPED(st)) {
			*ret_status = st;
			return 0;
		}
		suspend_job(sh, WSTOPSIG(st));
	}
}

void tty_shell_detach(struct tty_shell *sh)
{
	if (sh->fd < 0)
		return;
	give_terminal(sh->fd, getpgrp(), sh->restore ? &sh->termios : NULL);
	close(sh->fd);
	sh->fd = -1;
}

/* RESTART_SHELL_JOB, before the release: the restored job becomes the
 * foreground job of ckpt's own terminal, with the saved termios. */
int tty_release(struct rst_ctx *ctx)
{
	struct tty_rtask *rk = root_state(ctx, false);
	return rk ? tty_shell_attach(ctx, &rk->shell) : 0;
}

/* The restart failed after the job took the terminal: ckpt's again. */
void tty_restore_abort(struct rst_ctx *ctx)
{
	struct tty_rtask *rk = ctx->ntasks ? root_state(ctx, false) : NULL;
	if (rk)
		tty_shell_detach(&rk->shell);
}

/* The job runs: ckpt keeps the terminal to pass stops on and take it back. */
void *tty_handover(struct rst_ctx *ctx)
{
	struct tty_rtask *rk = root_state(ctx, false);
	if (!rk || rk->shell.fd < 0)
		return NULL;
	struct tty_shell *sh = malloc(sizeof(*sh));
	if (!sh) {
		tty_shell_detach(&rk->shell);
		return NULL;
	}
	*sh = rk->shell;
	rk->shell.fd = -1;
	return sh;
}

int tty_wait(void *kept, pid_t child, int *ret_status)
{
	return tty_shell_wait(kept, child, ret_status);
}

/* The job is over: the terminal is ckpt's again; detached, the job keeps it. */
void tty_handed_back(void *kept, bool detached)
{
	struct tty_shell *sh = kept;
	if (!sh)
		return;
	if (detached)
		close(sh->fd);
	else
		tty_shell_detach(sh);
	free(sh);
}
