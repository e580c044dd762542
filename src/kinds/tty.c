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
 * lock modes. tree.c makes each session leader take its terminal with
 * TIOCSCTTY right after its setsid() (tty_restore_ctty), so that every
 * task it forks inherits it, and sets the foreground group once the groups
 * exist (tty_restore_fg). A task that had dropped its terminal does
 * TIOCNOTTY in restore. A shell job (RESTART_SHELL_JOB) runs on ckpt's own
 * terminal: its fds of the old one are opened on ckpt's, and restart.c
 * makes it the foreground job (tty_shell_attach).
 */
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

enum {
	TTY_ENTRY = REC_TYPE(KID_tty, 1),
	TTY_FILE_ENTRY = REC_TYPE(KID_tty, 2),
	TTY_TASK_ENTRY = REC_TYPE(KID_tty, 3),
};
enum { TF_PTS = 1, TF_DEVTTY = 2, TF_CONSOLE = 3 };
#define PTS_MAJOR     136
#define PTY_MAX_INDEX (1u << 20)
#define FILE_FLAGS    (O_ACCMODE | O_NONBLOCK | O_APPEND)
#define PID_LIMIT     4194304
#define MAX_HELD      8192

/* checkpoint: a pty pair (and its master's open file), or a terminal's open file */
struct tty_obj {
	bool is_file;
	TtyEntry e; /* pty */
	TtyTermios tio;
	TtyWinsize ws;
	uint8_t cc[NCCS];
	char path[16];
	struct tty_queues q;
	TtyLine *lines, **plines;
	TtyFileEntry f; /* file */
	uint64_t dev;	/* the devpts instance of the slave */
	uint32_t index; /* pty, /dev/pts/N: N */
	uint32_t real;	/* /dev/tty, /dev/console: the tty behind it (TIOCGDEV) */
	pid_t pid;	/* a task holding it, and its fd */
	int fd;
	pid_t sid, pgrp;     /* pty: its session and foreground group, as ckpt sees them */
	bool slave_held;     /* pty: the image has a file of its slave */
	struct tty_obj *pty; /* file: its pty; NULL for the terminal outside */
};

/* checkpoint, per task */
struct tty_task {
	TtyTaskEntry e;
	TtyShellEntry sh;
	TtyTermios tio;
	TtyWinsize ws;
	uint8_t cc[NCCS];
};

/* restart */
struct tty_robj {
	bool is_file;
	TtyEntry *e;
	TtyFileEntry *f;
	int master, slave; /* pty: ckpt's own */
	int fd;		   /* file */
};

struct tty_rtask {
	TtyTaskEntry *e;
	int own; /* the root's: ckpt's own terminal (/dev/tty), or -1 */
	unsigned int own_dev;
};

/* A device number as tty_nr and TIOCGDEV give it. */
static uint32_t enc_dev(unsigned int maj, unsigned int min)
{
	return (min & 0xff) | (maj << 8) | ((min & ~0xffu) << 12);
}

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
	DIR *d = opendir(dir);
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
	closedir(d);
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
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	int r = 0;
	for (struct dirent *de; r >= 0 && (de = readdir(d));) {
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid <= 0 || pid == getpid() || find_task(ctx, pid))
			continue;
		r = check_process(ctx, pid);
	}
	closedir(d);
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
	if (ctx->devpts_dev && p->dev == ctx->devpts_dev) {
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

static int tty_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
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
		k->own = -1, root->kstate[KIND_tty] = k;
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
static int tty_prepare(struct rst_ctx *ctx)
{
	if (!has_private(ctx))
		return prepare_all(ctx);
	if (!ctx->ns || !ctx->ns->devpts)
		return log_fail(&ctx->log, -EINVAL,
				"the image has ptys of a container's own devpts, but no container "
				"with one");
	return 0;
}

int tty_prepare_devpts(struct rst_ctx *ctx)
{
	return has_private(ctx) ? prepare_all(ctx) : 0;
}

static int tty_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
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

int tty_restore_ctty(struct rst_ctx *ctx, struct rst_task *t)
{
	struct tty_robj *p = pty_of_sid(ctx, t->pid);
	if (!p)
		return 0;
	log_debug(&ctx->log, "pid %d: controlling terminal /dev/pts/%u", t->pid, p->e->index);
	return task_ioctl(ctx, t, p->slave, TIOCSCTTY, 0, "TIOCSCTTY (its controlling terminal)");
}

int tty_restore_fg(struct rst_ctx *ctx)
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
static int tty_restore(struct rst_ctx *ctx, struct rst_task *t)
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
    .restore = tty_restore,
    .free_obj = tty_free_obj,
    .free_robj = tty_free_robj,
    .free_state = free,
    .free_rstate = tty_free_rstate,
    .descriptor = tty_descriptor,
};
