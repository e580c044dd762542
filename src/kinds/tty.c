/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Terminals: pseudo-terminal pairs, the open files of their slaves,
 * /dev/tty and /dev/console opened by name, controlling terminals and
 * foreground groups, and the terminal outside the image of a shell job.
 *
 * A pty pair is one object, which is also its master's open file: a master
 * has exactly one (opening /dev/ptmx again makes another pair). It holds
 * the pts index, the slave's termios and window size, packet mode, lock,
 * exclusive modes, the slave node's mode and owner, the queued bytes of
 * both directions (tty-io.h says how they are read out and put back) and
 * the session whose controlling terminal it is with its foreground group,
 * as TIOCGSID and TIOCGPGRP on the master tell. Each open file of the
 * slave (/dev/pts/N, or /dev/tty, which names the same tty) is an object
 * of its own, shared between fds as kcmp says.
 *
 * Checkpoint. fd_collect only names the objects; collect_end, with the
 * whole tree collected and stopped, links each slave file to its master,
 * reads the sessions, checks every task's tty_nr against its session's
 * terminal, then reads each pty's state and queues. Refused: a slave whose
 * master is outside the image (unless it is the shell job's terminal), a
 * pty held or used as a terminal by a process outside the image, a slave
 * never opened, a packet status byte not read yet, stopped output, input
 * queued in EXTPROC mode, a controlling terminal outside the image without
 * CKPT_SHELL_JOB. With CKPT_DETACH_CLIENTS a terminal outside the image
 * that no task has as its controlling terminal (a client's, held by a
 * server such as tmux or screen) is saved as hung up: restart opens the
 * slave of a pty of its own and closes the master.
 *
 * Restart. prepare, on ckpt's side: each master is opened again until the
 * kernel gives its old index (lower free indexes are held meanwhile; an
 * index in use is refused), unlocked, its slave opened (TIOCGPTPEER), the
 * queues put back, termios, size, owner and mode set; then every slave
 * file is opened, /dev/tty through a short-lived helper that takes the pty
 * as its controlling terminal just to open it; then exclusive, packet and
 * lock modes (in a container's own devpts: at root_ready, once its root
 * has mounted it). Each session leader takes its terminal with TIOCSCTTY
 * right after its setsid() (the session op), so that every task it forks
 * inherits it, and sets the foreground group once the groups exist
 * (groups_ready). A task that had dropped its terminal does TIOCNOTTY in
 * restore. A shell job (RESTART_SHELL_JOB) runs on ckpt's own terminal:
 * its fds of the old one are opened on ckpt's, and the release op makes it
 * the foreground job; ckpt keeps the terminal past the restart (handover)
 * to pass the job's stops on while it waits, and gives it back after.
 * This file: checkpoint, freeing and the ops; tty-rst.c: restart.
 */
#include "kinds/ns.h"
#include "kinds/tty.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "kinds/tty-io.h"
#include "tty.pb-c.h"
#include "util/cleanup.h"

#define FOR_TTY(h, o)                                                                              \
	for (struct obj *ob_ = NULL; (ob_ = objhash_next_of((h), KIND_tty, ob_));)                  \
		if (((o) = ob_->ptr))

static struct task *find_task(struct ckpt_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (ctx->tasks[i].pid == pid)
			return &ctx->tasks[i];
	return NULL;
}

static const char *obj_name(const struct tty_obj *o, char *buf, size_t len)
{
	static const char *const names[] = {
	    [TF_DEVTTY] = "/dev/tty", [TF_CONSOLE] = "/dev/console"};
	if (!o->is_file)
		snprintf(buf, len, "%s, master of /dev/pts/%u", o->path, o->index);
	else if (o->f.type == TF_PTS)
		snprintf(buf, len, "/dev/pts/%u", o->index);
	else
		snprintf(buf, len, "%s", names[o->f.type]);
	return buf;
}

/* "pid P fd F (what): why", for an object. */
#define obj_fail(ctx, o, r, fmt, ...)                                                              \
	({                                                                                         \
		char n_[64];                                                                       \
		log_fail(&(ctx)->log, (r), "pid %d fd %d (%s): " fmt, (o)->pid, (o)->fd,           \
			 obj_name((o), n_, sizeof(n_)), ##__VA_ARGS__);                            \
	})

static int copy_fd(struct ckpt_ctx *ctx, struct tty_obj *o)
{
	struct task *t = find_task(ctx, o->pid);
	int fd = t ? puppet_getfd(&t->pup, o->fd) : -ESRCH;
	if (fd < 0)
		return obj_fail(ctx, o, fd, "cannot take a copy: %s", strerror(-fd));
	return fd;
}

static bool tty_fd_claim(const struct fd_info *fi)
{
	unsigned int maj = major(fi->st.st_rdev), min = minor(fi->st.st_rdev);
	return S_ISCHR(fi->st.st_mode) && ((maj == 5 && min <= 2) || maj == PTS_MAJOR);
}

static int add_obj(struct ckpt_ctx *ctx, uint64_t key, struct tty_obj *o, uint32_t *ret_id)
{
	struct obj *ob;
	int r = objhash_add(&ctx->objs, KIND_tty, key, 0, o, &ob);
	if (r < 0) {
		free(o);
		return r;
	}
	if (o->is_file)
		o->f.id = ob->id;
	else
		o->e.id = ob->id;
	*ret_id = ob->id;
	return 0;
}

static struct tty_obj *new_obj(struct task *t, const struct fd_info *fi, bool is_file)
{
	struct tty_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->is_file = is_file;
	o->pid = t->pid;
	o->fd = fi->fd;
	tty_entry__init(&o->e);
	tty_file_entry__init(&o->f);
	return o;
}

static int collect_master(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			  uint32_t *ret_id)
{
	_cleanup_close_ int m = -1, peer = -1;
	struct stat st;
	int index;

	if (strcmp(fi->path, "/dev/ptmx") && strcmp(fi->path, "/dev/pts/ptmx"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a pty master under another name; not supported",
				t->pid, fi->fd, fi->path);
	m = puppet_getfd(&t->pup, fi->fd);
	if (m < 0 || ioctl(m, TIOCGPTN, &index) < 0 ||
	    (peer = ioctl(m, TIOCGPTPEER, O_PATH | O_CLOEXEC)) < 0 || fstat(peer, &st) < 0)
		return log_fail(&ctx->log, m < 0 ? m : -errno,
				"pid %d fd %d (%s): cannot find its slave: %s", t->pid, fi->fd,
				fi->path, strerror(m < 0 ? -m : errno));
	for (struct obj *o = NULL;
	     (o = objhash_next_key(&ctx->objs, o, KIND_tty, (uint32_t)index));) {
		struct tty_obj *p = o->ptr;
		if (!p->is_file && p->dev == st.st_dev) {
			*ret_id = o->id;
			return 0;
		}
	}
	struct tty_obj *p = new_obj(t, fi, false);
	if (!p)
		return -ENOMEM;
	tty_termios__init(&p->tio);
	tty_winsize__init(&p->ws);
	p->e.termios = &p->tio;
	p->e.winsize = &p->ws;
	snprintf(p->path, sizeof(p->path), "%.15s", fi->path);
	p->e.master_path = p->path;
	p->e.index = p->index = (uint32_t)index;
	p->e.master_flags = fi->fi.flags & FILE_FLAGS;
	p->e.slave_mode = st.st_mode & 07777;
	p->e.slave_uid = st.st_uid;
	p->e.slave_gid = st.st_gid;
	p->dev = st.st_dev;
	return add_obj(ctx, (uint32_t)index, p, ret_id);
}

/* A /dev/pts/N slave, /dev/tty or /dev/console. */
static int collect_file(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi, int type,
			uint32_t *ret_id)
{
	_cleanup_close_ int c = puppet_getfd(&t->pup, fi->fd);
	struct termios2 tio;
	unsigned int real = 0;
	uint32_t index = 0;
	uint64_t key;
	bool hung = false;

	if (c < 0)
		return log_fail(&ctx->log, c, "pid %d fd %d (%s): cannot take a copy: %s", t->pid,
				fi->fd, fi->path, strerror(-c));
	if (type == TF_PTS) {
		index = minor(fi->st.st_rdev);
		if (ioctl(c, TCGETS2, &tio) < 0 && !(hung = errno == EIO))
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (%s): %s", t->pid,
					fi->fd, fi->path, strerror(errno));
		key = index;
	} else {
		if (ioctl(c, TIOCGDEV, &real) < 0 && !(hung = errno == EIO))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (%s): cannot tell which terminal it is: %s",
					t->pid, fi->fd, fi->path, strerror(errno));
		if (major(real) == PTS_MAJOR)
			index = minor(real);
		key = (1ull << 32) | real;
	}
	if (hung && (type == TF_CONSOLE || !(ctx->flags & CKPT_DETACH_CLIENTS)))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): hung up: its master was closed%s", t->pid, fi->fd,
				fi->path,
				type == TF_CONSOLE ? "" : "; --detach-clients saves it hung up");
	for (struct obj *o = NULL; (o = objhash_next_key(&ctx->objs, o, KIND_tty, key));) {
		struct tty_obj *f = o->ptr;
		if (f->is_file && fdobj_same(f->pid, f->fd, t->pid, fi->fd)) {
			*ret_id = o->id;
			return 0;
		}
	}
	struct tty_obj *f = new_obj(t, fi, true);
	if (!f)
		return -ENOMEM;
	f->f.type = (uint32_t)type;
	f->f.flags = fi->fi.flags & FILE_FLAGS;
	f->f.has_hung_up = f->f.hung_up = hung; /* a client gone already */
	if (hung)
		log_info(&ctx->log, "pid %d fd %d (%s): hung up already: saved hung up", t->pid,
			 fi->fd, fi->path);
	if (type == TF_CONSOLE) {
		f->f.has_rdev = true;
		f->f.rdev = real;
	}
	f->dev = fi->st.st_dev;
	f->index = index;
	f->real = real;
	return add_obj(ctx, key, f, ret_id);
}

static int tty_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			  uint32_t *ret_id)
{
	unsigned int maj = major(fi->st.st_rdev), min = minor(fi->st.st_rdev);
	if (maj == 5 && min == 2)
		return collect_master(ctx, t, fi, ret_id);
	if (maj == 5)
		return collect_file(ctx, t, fi, min == 0 ? TF_DEVTTY : TF_CONSOLE, ret_id);
	return collect_file(ctx, t, fi, TF_PTS, ret_id);
}

/* Each slave file (and /dev/tty) to its pty, when the image has it. */
static int link_files(struct ckpt_ctx *ctx)
{
	struct tty_obj *f, *p;
	FOR_TTY(&ctx->objs, f)
	{
		if (!f->is_file || f->f.type == TF_CONSOLE || f->f.hung_up)
			continue;
		if (f->f.type == TF_DEVTTY && major(f->real) != PTS_MAJOR)
			continue;
		int n = 0;
		FOR_TTY(&ctx->objs, p)
		{
			if (p->is_file || p->index != f->index)
				continue;
			if (f->f.type == TF_PTS && p->dev != f->dev)
				continue;
			f->pty = p;
			n++;
		}
		if (n > 1)
			return obj_fail(
			    ctx, f, -EOPNOTSUPP,
			    "ptys of two devpts instances have index %u: cannot tell which "
			    "one it is",
			    f->index);
		if (f->pty) {
			f->pty->slave_held = true;
			f->f.has_tty_id = true;
			f->f.tty_id = f->pty->e.id;
		}
	}
	return 0;
}

/* The session a pty is the controlling terminal of, and its foreground group. */
static int read_session(struct ckpt_ctx *ctx, struct tty_obj *p)
{
	_cleanup_close_ int m = copy_fd(ctx, p);
	pid_t sid = 0, pgrp = 0;

	if (m < 0)
		return m;
	if (ioctl(m, TIOCGSID, &sid) < 0)
		return 0; /* none */
	if (ioctl(m, TIOCGPGRP, &pgrp) < 0)
		pgrp = 0;
	struct task *l = find_task(ctx, sid);
	if (!l || l->zombie || l->stat.session != sid)
		return obj_fail(
		    ctx, p, -EOPNOTSUPP,
		    "it is the controlling terminal of session %d, which is outside the "
		    "image",
		    sid);
	p->sid = sid;
	p->e.has_sid = true;
	p->e.sid = (uint32_t)l->vpid;
	if (!pgrp)
		return 0;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *g = &ctx->tasks[i];
		if (g->stat.pgrp == pgrp && g->stat.session == sid) {
			p->pgrp = pgrp;
			p->e.has_fg_pgrp = true;
			p->e.fg_pgrp = (uint32_t)g->vpgid;
			return 0;
		}
	}
	return obj_fail(ctx, p, -EOPNOTSUPP,
			"its foreground process group %d has no process in the image", pgrp);
}

static struct tty_obj *pty_of_session(struct ckpt_ctx *ctx, pid_t sid)
{
	struct tty_obj *p;
	FOR_TTY(&ctx->objs, p)
	if (!p->is_file && p->sid && p->sid == sid)
		return p;
	return NULL;
}

static struct tty_task *tstate(struct task *t)
{
	struct tty_task *k = task_state(t, KIND_tty, sizeof(*k));
	if (k && !k->e.base.descriptor)
		tty_task_entry__init(&k->e);
	return k;
}

static void get_termios(TtyTermios *out, uint8_t *cc, const struct termios2 *t)
{
	tty_termios__init(out);
	out->iflag = t->c_iflag;
	out->oflag = t->c_oflag;
	out->cflag = t->c_cflag;
	out->lflag = t->c_lflag;
	out->line = t->c_line;
	memcpy(cc, t->c_cc, NCCS);
	out->cc.data = cc;
	out->cc.len = NCCS;
	out->ispeed = t->c_ispeed;
	out->ospeed = t->c_ospeed;
}

static void get_winsize(TtyWinsize *out, const struct winsize *ws)
{
	tty_winsize__init(out);
	out->rows = ws->ws_row;
	out->cols = ws->ws_col;
	out->xpixel = ws->ws_xpixel;
	out->ypixel = ws->ws_ypixel;
}

/* A shell job's terminal: its termios and size, from a file of it or its device. */
static void read_shell_tty(struct ckpt_ctx *ctx, struct tty_task *k, uint32_t ext)
{
	struct tty_obj *f;
	int fd = -1;
	FOR_TTY(&ctx->objs, f)
	{
		if (fd < 0 && f->is_file && !f->pty && f->f.type != TF_CONSOLE && !f->f.hung_up) {
			struct task *t = find_task(ctx, f->pid);
			fd = t ? puppet_getfd(&t->pup, f->fd) : -1;
		}
	}
	if (fd < 0 && major(ext) == PTS_MAJOR) {
		char path[32];
		snprintf(path, sizeof(path), "/dev/pts/%u", minor(ext));
		fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	}
	struct termios2 tio;
	struct winsize ws;
	if (fd >= 0 && ioctl(fd, TCGETS2, &tio) == 0 && ioctl(fd, TIOCGWINSZ, &ws) == 0) {
		get_termios(&k->tio, k->cc, &tio);
		get_winsize(&k->ws, &ws);
		k->sh.termios = &k->tio;
		k->sh.winsize = &k->ws;
	}
	if (fd >= 0)
		close(fd);
}

/* A task whose controlling terminal no pty of the image is: a shell job's. */
static int outside_ctty(struct ckpt_ctx *ctx, struct task *t, uint32_t *ext)
{
	struct task *root = &ctx->tasks[0];
	uint32_t nr = (uint32_t)t->stat.tty_nr;
	if (!(ctx->flags & CKPT_SHELL_JOB))
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d: its controlling terminal (%u:%u) is outside the image; a job "
		    "started from a terminal is checkpointed with --shell-job",
		    t->pid, major(nr), minor(nr));
	if (t->stat.session != root->stat.session || find_task(ctx, root->stat.session))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: session %d has a terminal outside the image; --shell-job "
				"saves jobs of a session led from outside (by the shell) only",
				t->pid, t->stat.session);
	if (*ext && *ext != nr)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: has another terminal outside the image (%u:%u) than its "
				"session's other tasks",
				t->pid, major(nr), minor(nr));
	*ext = nr;
	return 0;
}

/*
 * Every task's tty_nr against its session's terminal; the shell job's
 * terminal; the files of terminals outside the image.
 */
static int check_cttys(struct ckpt_ctx *ctx)
{
	struct task *root = &ctx->tasks[0];
	uint32_t ext = 0;
	int r;

	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (t->zombie || !t->stat.tty_nr)
			continue;
		struct tty_obj *p = pty_of_session(ctx, t->stat.session);
		if (!p && (r = outside_ctty(ctx, t, &ext)) < 0)
			return r;
		if (p && (uint32_t)t->stat.tty_nr != enc_dev(PTS_MAJOR, p->index))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: its controlling terminal is not its session's "
					"(/dev/pts/%u)",
					t->pid, p->index);
	}
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (t->zombie || t->stat.tty_nr)
			continue;
		if (pty_of_session(ctx, t->stat.session) ||
		    (ext && t->stat.session == root->stat.session)) {
			struct tty_task *k = tstate(t);
			if (!k)
				return -ENOMEM;
			k->e.has_no_ctty = k->e.no_ctty = true;
		}
	}
	struct tty_obj *f;
	FOR_TTY(&ctx->objs, f)
	{
		if (!f->is_file || f->pty || f->f.type == TF_CONSOLE || f->f.hung_up)
			continue;
		uint32_t dev = f->f.type == TF_PTS ? enc_dev(PTS_MAJOR, f->index) : f->real;
		if (ext && dev == ext)
			continue;
		if (!(ctx->flags & CKPT_DETACH_CLIENTS))
			return obj_fail(ctx, f, -EOPNOTSUPP,
					"the master of this terminal is outside the image and it is "
					"no controlling terminal of the tree%s (a client's terminal, "
					"as a tmux or screen server holds); --detach-clients restores "
					"it hung up, as if the client had gone",
					ext ? " nor the job's" : "");
		f->f.has_hung_up = f->f.hung_up = true;
		log_info(&ctx->log,
			 "pid %d fd %d: a terminal outside the image (%u:%u): detached, it comes "
			 "back hung up",
			 f->pid, f->fd, major(dev), minor(dev));
	}
	if (!ext)
		return 0;
	struct tty_task *k = tstate(root);
	if (!k)
		return -ENOMEM;
	tty_shell_entry__init(&k->sh);
	k->sh.rdev = ext;
	k->sh.has_foreground = true;
	k->sh.foreground = root->stat.tpgid == root->stat.pgrp;
	read_shell_tty(ctx, k, ext);
	k->e.shell = &k->sh;
	log_info(&ctx->log, "pid %d: a shell job of terminal %u:%u", root->pid, major(ext),
		 minor(ext));
	return 0;
}

/* "tty-index:" of an fdinfo, -1 if none. */
static long fdinfo_index(pid_t pid, const char *fd)
{
	char name[64];
	_cleanup_free_ char *text = NULL;
	snprintf(name, sizeof(name), "fdinfo/%.20s", fd);
	if (proc_read(pid, name, &text, NULL) < 0)
		return -1;
	const char *p = strstr(text, "tty-index:");
	return p ? strtol(p + 10, NULL, 10) : -1;
}

/* A pty of the image that pid's fd is a file of, or NULL. */
static struct tty_obj *outside_fd(struct ckpt_ctx *ctx, pid_t pid, const char *fd)
{
	char link[64], path[64];
	struct stat st;
	snprintf(link, sizeof(link), "/proc/%d/fd/%.20s", pid, fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n > 0)
		path[n] = '\0';
	if (n <= 0 || strncmp(path, "/dev/", 5) || stat(link, &st) < 0 || !S_ISCHR(st.st_mode))
		return NULL;
	struct tty_obj *p;
	bool master = st.st_rdev == makedev(5, 2);
	long index = master ? fdinfo_index(pid, fd) : (long)minor(st.st_rdev);
	if (!master && major(st.st_rdev) != PTS_MAJOR)
		return NULL;
	FOR_TTY(&ctx->objs, p)
	{
		if (p->is_file || p->index != index)
			continue;
		if (master ? fdobj_same(p->pid, p->fd, pid, atoi(fd))
			   : p->dev == st.st_dev)
			return p;
	}
	return NULL;
}

/* One process outside the image: does it hold or use a pty of the image? */
static int check_process(struct ckpt_ctx *ctx, pid_t pid)
{
	_cleanup_free_ char *stat = NULL;
	struct proc_stat st;
	if (proc_read(pid, "stat", &stat, NULL) == 0 && proc_parse_stat(stat, &st) == 0) {
		struct tty_obj *p = pty_of_session(ctx, st.session);
		if (p)
			return obj_fail(ctx, p, -EOPNOTSUPP,
					"pid %d, outside the image, is in the session this is the "
					"controlling terminal of",
					pid);
	}
	char dir[32];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d)
		return 0;
	int r = 0;
	for (struct dirent *de; r >= 0 && (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		struct tty_obj *p = outside_fd(ctx, pid, de->d_name);
		if (p)
			r = obj_fail(ctx, p, -EOPNOTSUPP,
				     "pid %d, outside the image, holds it too (fd %s)", pid,
				     de->d_name);
	}
	return r;
}

/* No process outside the image may hold a pty of the image or be in its session. */
static int check_outside(struct ckpt_ctx *ctx)
{
	struct tty_obj *p;
	bool any = false;
	FOR_TTY(&ctx->objs, p)
	any |= !p->is_file;
	if (!any)
		return 0;
	_cleanup_closedir_ DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	int r = 0;
	for (struct dirent *de; r >= 0 && (de = readdir(d));) {
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid <= 0 || pid == getpid() || find_task(ctx, pid))
			continue;
		r = check_process(ctx, pid);
	}
	return r;
}

static bool cap_sys_admin(void)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status st;
	return proc_read(getpid(), "status", &text, NULL) == 0 &&
	       proc_parse_status(text, &st) == 0 && (st.cap_eff & (1ull << 21));
}

static int fill_queues(struct tty_obj *p)
{
	struct tty_queues *q = &p->q;
	if (q->out_len) {
		p->e.has_master_queue = true;
		p->e.master_queue.data = q->out;
		p->e.master_queue.len = q->out_len;
	}
	if (q->rest_len) {
		p->e.has_input_rest = true;
		p->e.input_rest.data = q->rest;
		p->e.input_rest.len = q->rest_len;
	}
	if (!q->nlines)
		return 0;
	p->lines = calloc(q->nlines, sizeof(*p->lines));
	p->plines = calloc(q->nlines, sizeof(*p->plines));
	if (!p->lines || !p->plines)
		return -ENOMEM;
	for (size_t i = 0; i < q->nlines; i++) {
		tty_line__init(&p->lines[i]);
		p->lines[i].data.data = q->lines[i].data;
		p->lines[i].data.len = q->lines[i].len;
		p->lines[i].eof = q->lines[i].eof;
		p->plines[i] = &p->lines[i];
	}
	p->e.input_lines = p->plines;
	p->e.n_input_lines = q->nlines;
	return 0;
}

/* The queues, through ckpt's own open file of the slave (put back at once). */
static int read_queues(struct ckpt_ctx *ctx, struct tty_obj *p, int m, const struct termios2 *tio,
		       int pkt, int lck)
{
	int zero = 0, one = 1;
	if (lck && ioctl(m, TIOCSPTLCK, &zero) < 0)
		return obj_fail(ctx, p, -errno, "cannot unlock it: %s", strerror(errno));
	_cleanup_close_ int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	int e = errno;
	if (lck)
		ioctl(m, TIOCSPTLCK, &one);
	if (s < 0)
		return obj_fail(ctx, p, -e, "cannot open its slave: %s", strerror(e));
	int sex = 0;
	if (ioctl(s, TIOCGEXCL, &sex) == 0 && sex)
		p->e.has_slave_excl = p->e.slave_excl = true;
	/* stopped output (^S, tcflow) would hold the bytes put back */
	struct pollfd pf[2] = {{.fd = s, .events = POLLOUT}, {.fd = m, .events = POLLOUT}};
	if (poll(pf, 2, 0) < 0 || !(pf[0].revents & POLLOUT) || !(pf[1].revents & POLLOUT))
		return obj_fail(ctx, p, -EOPNOTSUPP,
				"its output is stopped (^S or tcflow) or 64 KiB are waiting; not "
				"supported");
	if (pkt)
		ioctl(m, TIOCPKT, &zero); /* no status posted meanwhile */
	int r = ttyio_take_master(m, &p->q);
	if (r >= 0)
		r = ttyio_take_slave(s, tio, &p->q);
	int pr = ttyio_put_back(s, tio, &p->q);
	if (pkt)
		ioctl(m, TIOCPKT, &one);
	if (pr < 0)
		return obj_fail(ctx, p, pr, "cannot put its queued bytes back: %s", strerror(-pr));
	if (r == -EOPNOTSUPP)
		return obj_fail(ctx, p, r,
				"input is queued in external processing mode (EXTPROC); "
				"not supported");
	if (r < 0)
		return obj_fail(ctx, p, r, "cannot read its queues: %s", strerror(-r));
	log_debug(&ctx->log,
		  "/dev/pts/%u: %zu bytes to the master, %zu lines and %zu bytes of input",
		  p->index, p->q.out_len, p->q.nlines, p->q.rest_len);
	return fill_queues(p);
}

/* Everything of one pty pair but its session. */
static int read_pty(struct ckpt_ctx *ctx, struct tty_obj *p, bool admin)
{
	_cleanup_close_ int m = copy_fd(ctx, p);
	struct termios2 tio;
	struct winsize ws;
	int pkt = 0, lck = 0, mex = 0;

	if (m < 0)
		return m;
	if (ioctl(m, TCGETS2, &tio) < 0 || ioctl(m, TIOCGWINSZ, &ws) < 0 ||
	    ioctl(m, TIOCGPKT, &pkt) < 0 || ioctl(m, TIOCGPTLCK, &lck) < 0 ||
	    ioctl(m, TIOCGEXCL, &mex) < 0)
		return obj_fail(ctx, p, -errno, "cannot read its state: %s", strerror(errno));
	get_termios(&p->tio, p->cc, &tio);
	get_winsize(&p->ws, &ws);
	p->e.has_packet = p->e.packet = pkt != 0;
	p->e.has_locked = p->e.locked = lck != 0;
	p->e.has_master_excl = p->e.master_excl = mex != 0;
	struct pollfd pf = {.fd = m, .events = POLLIN | POLLPRI};
	if (poll(&pf, 1, 0) < 0)
		return -errno;
	if (pkt && (pf.revents & POLLPRI))
		return obj_fail(ctx, p, -EOPNOTSUPP,
				"a packet-mode status byte waits to be read; not supported");
	if (!p->slave_held && !(pf.revents & POLLHUP))
		return obj_fail(ctx, p, -EOPNOTSUPP,
				"its slave has never been opened: its input cannot be read without "
				"opening it, which the master would see; not supported");
	if (!p->slave_held)
		p->e.has_slave_closed = p->e.slave_closed = true;
	if (!admin)
		return obj_fail(ctx, p, -EPERM,
				"reading a terminal's queues and putting them back needs "
				"CAP_SYS_ADMIN (TIOCSTI)");
	return read_queues(ctx, p, m, &tio, pkt, lck);
}

/*
 * Which devpts a pty is of: the one ckpt sees on /dev/pts, or the
 * container's own (restored in a fresh instance there, where every index
 * is free).
 */
static int check_instance(struct ckpt_ctx *ctx, struct tty_obj *p, dev_t host)
{
	if (ns_devpts_dev(ctx) && p->dev == ns_devpts_dev(ctx)) {
		p->e.has_private_pts = p->e.private_pts = true;
		return 0;
	}
	if (p->dev == host)
		return 0;
	return obj_fail(ctx, p, -EOPNOTSUPP,
			"is of a devpts instance (%u:%u) that is neither ckpt's /dev/pts nor the "
			"container's own; not supported",
			major(p->dev), minor(p->dev));
}

static int tty_collect_end(struct ckpt_ctx *ctx)
{
	struct tty_obj *p;
	struct stat host = {0};
	int r = link_files(ctx);
	if (stat("/dev/pts", &host) < 0)
		host.st_dev = 0;
	FOR_TTY(&ctx->objs, p)
	if (r >= 0 && !p->is_file && (r = check_instance(ctx, p, host.st_dev)) >= 0)
		r = read_session(ctx, p);
	if (r >= 0)
		r = check_cttys(ctx);
	if (r >= 0)
		r = check_outside(ctx);
	bool admin = cap_sys_admin();
	FOR_TTY(&ctx->objs, p)
	if (r >= 0 && !p->is_file)
		r = read_pty(ctx, p, admin);
	return r;
}

static int tty_dump(struct ckpt_ctx *ctx, struct task *t)
{
	for (int pass = 0; pass < 2; pass++) {
		for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_tty, o));) {
			if (o->dumped)
				continue;
			struct tty_obj *p = o->ptr;
			if (p->is_file != (pass == 1))
				continue;
			int r = p->is_file ? ctx_write_msg(ctx, TTY_FILE_ENTRY, &p->f.base)
					   : ctx_write_msg(ctx, TTY_ENTRY, &p->e.base);
			if (r < 0)
				return r;
			o->dumped = true;
		}
	}
	struct tty_task *k = t->kstate[KIND_tty];
	if (k && (k->e.has_no_ctty || k->e.shell))
		return ctx_write_msg(ctx, TTY_TASK_ENTRY, &k->e.base);
	return 0;
}

/* --- freeing ---------------------------------------------------------- */

static void tty_free_obj(void *ptr)
{
	struct tty_obj *o = ptr;
	if (!o)
		return;
	ttyio_queues_free(&o->q);
	free(o->lines);
	free(o->plines);
	free(o);
}

static void tty_free_robj(void *ptr)
{
	struct tty_robj *o = ptr;
	if (!o)
		return;
	for (int *fd = &o->master; fd <= &o->fd; fd++)
		if (*fd >= 0)
			close(*fd);
	if (o->e)
		tty_entry__free_unpacked(o->e, NULL);
	if (o->f)
		tty_file_entry__free_unpacked(o->f, NULL);
	free(o);
}

static void tty_free_rstate(void *ptr)
{
	struct tty_rtask *k = ptr;
	if (!k)
		return;
	if (k->own >= 0)
		close(k->own);
	if (k->e)
		tty_task_entry__free_unpacked(k->e, NULL);
	free(k);
}

static const ProtobufCMessageDescriptor *tty_descriptor(uint32_t sub)
{
	switch (sub) {
	case REC_SUB(TTY_ENTRY):
		return &tty_entry__descriptor;
	case REC_SUB(TTY_FILE_ENTRY):
		return &tty_file_entry__descriptor;
	case REC_SUB(TTY_TASK_ENTRY):
		return &tty_task_entry__descriptor;
	}
	return NULL;
}

const struct kind_ops tty_ops = {
    .fd_claim = tty_fd_claim,
    .fd_collect = tty_fd_collect,
    .fd_get = tty_fd_get,
    .collect_end = tty_collect_end,
    .dump = tty_dump,
    .load = tty_load,
    .prepare = tty_prepare,
    .root_ready = tty_root_ready,
    .session = tty_session,
    .groups_ready = tty_groups_ready,
    .restore = tty_restore,
    .release = tty_release,
    .handover = tty_handover,
    .wait = tty_wait,
    .handed_back = tty_handed_back,
    .restore_abort = tty_restore_abort,
    .free_obj = tty_free_obj,
    .free_robj = tty_free_robj,
    .free_state = free,
    .free_rstate = tty_free_rstate,
    .descriptor = tty_descriptor,
};
