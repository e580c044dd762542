/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unix sockets, checkpoint: the swap of pending connections, the fds in
 * flight (unix.h, unix.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/ctx.h"
#include "core/netlock.h"
#include "util/proc.h"
#include "kinds/fdtable.h"
#include "kinds/netns.h"
#include "kinds/unix-sk.h"
#include "kinds/unix.h"
#include "unix.pb-c.h"
#include "util/cleanup.h"

/* The unix sockets among t's fds (fdtable_links: the links read once). */
static int task_unix_fds(const struct ckpt_ctx *ctx, struct task *t, struct sockfd **ret,
			 size_t *ret_n)
{
	const struct fd_link *links;
	size_t nfds, n = 0;
	unsigned long ino;

	int r = fdtable_links(t, &links, &nfds);
	if (r < 0)
		return r;
	struct sockfd *v = calloc(nfds ? nfds : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < nfds; i++) {
		struct fd_info fi = {.pid = t->pid, .fd = links[i].fd, .copy = -1};
		fi.st.st_mode = S_IFSOCK;
		/* a TCP socket the network lock's dump saw: no protocol name
		 * asked (getxattr by path) */
		if (!strncmp(links[i].link, "socket:[", 8) &&
		    sscanf(links[i].link, "socket:[%lu]", &ino) == 1 && !ckpt_tcp_seen(ctx, ino) &&
		    unix_fd_claim(&fi))
			v[n++] = (struct sockfd){.fd = fi.fd, .ino = (uint32_t)ino};
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* --- the swap of pending connections --------------------------------------- */

struct swap_client {
	uint32_t ino; /* 0: closed */
	int copy, flags;
	uint8_t shutdown;
	UnixOpts opts;
	int fds[16];
	bool cloexec[16];
	int nfds;
	int accepted; /* the embryo, accepted by ckpt */
	struct unix_msgs q;
};

struct swap {
	struct ckpt_ctx *ctx;
	struct task *t;
	const struct usk *l;
	int lfd;		/* the listener's fd in the task */
	int lcopy, opath, chan; /* ckpt's copies; chan: to pass fds in */
	int remote[2];		/* the task's end of chan, and its pair */
	struct sockaddr_un addr;
	socklen_t alen;
	struct swap_client *c;
	size_t n, ntaken;
};

/* Does reading the connections pending on l need the swap? */
bool unix_swap_needed(const struct unix_table *tab, const struct usk *l)
{
	for (uint32_t i = 0; i < l->nicons; i++) {
		const struct usk *c = unix_table_find(tab, l->icons[i]);
		if (!l->icons[i] || (c && c->wqlen))
			return true;
	}
	return false;
}

static int cloexec_of(pid_t pid, int fd, bool *ret)
{
	char name[32];
	_cleanup_free_ char *text = NULL;
	struct proc_fdinfo fi;
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	int r = proc_read(pid, name, &text, NULL);
	if (r >= 0)
		r = proc_parse_fdinfo(text, &fi);
	if (r >= 0)
		*ret = fi.flags & O_CLOEXEC;
	return r;
}

/* Checks and copies, before anything is changed. */
static int swap_gather(struct swap *sw, const struct unix_table *tab, const struct sockfd *fds,
		       size_t nfds)
{
	struct ckpt_ctx *ctx = sw->ctx;
	pid_t pid = sw->t->pid;
	bool filter;

	for (size_t i = 0; i < sw->n; i++) {
		struct swap_client *c = &sw->c[i];
		c->ino = sw->l->icons[i];
		const struct usk *k = unix_table_find(tab, c->ino);
		for (size_t j = 0; c->ino && j < nfds; j++)
			if (fds[j].ino == c->ino && c->nfds < 16)
				c->fds[c->nfds++] = fds[j].fd;
		if (c->ino && (!k || !c->nfds))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (unix listener socket:[%u]): a pending "
					"connection's peer outside the image (socket:[%u]), not "
					"accepted yet (not even --detach-clients saves it: retry "
					"once the server has accepted it)",
					pid, sw->lfd, sw->l->ino, c->ino);
		if (!c->ino)
			continue;
		if (k->namelen)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (unix socket:[%u]): a bound socket whose "
					"connection is not accepted yet and holds data; not "
					"supported yet",
					pid, c->fds[0], c->ino);
		c->shutdown = k->shutdown;
		for (int j = 0; j < c->nfds; j++)
			if (cloexec_of(pid, c->fds[j], &c->cloexec[j]) < 0)
				return log_fail(&ctx->log, -EIO,
						"pid %d fd %d: cannot read its fdinfo", pid,
						c->fds[j]);
		c->copy = puppet_getfd(&sw->t->pup, c->fds[0]);
		if (c->copy < 0 || (c->flags = fcntl(c->copy, F_GETFL)) < 0 ||
		    unix_opts_read(c->copy, &c->opts, &filter) < 0)
			return log_fail(&ctx->log, c->copy < 0 ? c->copy : -errno,
					"pid %d fd %d (unix socket:[%u]): cannot read it", pid,
					c->fds[0], c->ino);
		if (filter)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (unix socket:[%u]): an eBPF socket filter is "
					"attached (SO_ATTACH_BPF); not supported yet",
					pid, c->fds[0], c->ino);
	}
	return 0;
}

/* A channel to pass fds into a task: a socketpair made in it (remote),
 * one end copied out (*ret_chan). */
static int task_channel(struct puppet *p, int remote[2], int *ret_chan)
{
	int sv[2] = {-1, -1};
	uint64_t a = puppet_scratch_put(p, 0, sv, sizeof(sv));
	if (!a)
		return -EFAULT;
	long r = puppet_syscall(p, SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a);
	if (r < 0)
		return (int)r;
	if (puppet_read(p, a, sv, sizeof(sv)) < 0)
		return -EFAULT;
	remote[0] = sv[0];
	remote[1] = sv[1];
	*ret_chan = puppet_getfd(p, sv[1]);
	return *ret_chan < 0 ? *ret_chan : 0;
}

static int swap_channel(struct swap *sw)
{
	return task_channel(&sw->t->pup, sw->remote, &sw->chan);
}

static int swap_address(struct swap *sw)
{
	const struct usk *l = sw->l;
	if (!l->namelen)
		return -EINVAL;
	if (l->name[0] == 0) {
		sw->alen = unix_mkaddr(&sw->addr, l->name, l->namelen);
		return 0;
	}
	sw->opath = ioctl(sw->lcopy, SIOCUNIXFILE);
	if (sw->opath < 0)
		return -errno;
	sw->alen = unix_opath_addr(&sw->addr, sw->opath);
	return 0;
}

/* Takes every pending connection, reading what each holds. */
static int swap_take(struct swap *sw)
{
	for (size_t i = 0; i < sw->n; i++) {
		struct swap_client *c = &sw->c[i];
		struct pollfd pfd = {.fd = sw->lcopy, .events = POLLIN};
		if (poll(&pfd, 1, 0) != 1)
			return -EAGAIN;
		c->accepted = accept4(sw->lcopy, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c->accepted < 0)
			return -errno;
		sw->ntaken++;
		/* the embryo's end is unix_shut if its client unix_shut its own or is closed */
		uint8_t sh = !c->ino || (c->shutdown & SEND_SHUTDOWN) ? RCV_SHUTDOWN : 0;
		int r = unix_peek_queue(c->accepted, sw->l->type, sh, true, &c->q);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Puts connection i back: a new client, connected, sent what the old one
 * had sent, and put in the task in place of the old one. */
static int swap_put(struct swap *sw, struct swap_client *c, struct capture *cap)
{
	/* in the listener's namespace: its abstract name is there */
	_cleanup_close_ int s =
	    unix_socket_as(unix_reg(sw->ctx), sw->l, sw->l->type | SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct stat st;
	int r = s < 0 ? -errno : 0;

	if (r == 0)
		r = c->ino ? unix_opts_apply(s, &c->opts) : unix_set_buf(s, true, BIG_SNDBUF);
	if (r == 0 && connect(s, (struct sockaddr *)&sw->addr, sw->alen) < 0)
		r = -errno;
	for (size_t i = 0; r == 0 && i < c->q.n; i++)
		r = unix_send(s, c->q.v[i], c->q.rights[i], NULL, 0,
			      sw->l->type == SOCK_STREAM ? UNIX_SEND_STREAM : 0);
	if (r < 0 || !c->ino)
		return r;
	if ((r = unix_opts_finish(s, &c->opts)) < 0 || (r = unix_shut(s, c->shutdown)) < 0)
		return r;
	if (fcntl(s, F_SETFL, c->flags) < 0 || fstat(s, &st) < 0)
		return -errno;
	cap->client = (uint32_t)st.st_ino;
	for (int j = 0; j < c->nfds; j++) {
		r = puppet_install_fd(&sw->t->pup, sw->chan, sw->remote[0], s, c->fds[j],
				      c->cloexec[j]);
		if (r < 0)
			return r;
	}
	return 0;
}

static void swap_free(struct swap *sw)
{
	for (size_t i = 0; sw->c && i < sw->n; i++) {
		if (sw->c[i].copy >= 0)
			close(sw->c[i].copy);
		if (sw->c[i].accepted >= 0)
			close(sw->c[i].accepted);
		unix_msgs_free(&sw->c[i].q);
		unix_opts_free(&sw->c[i].opts);
	}
	free(sw->c);
	for (int i = 0; i < 2; i++)
		if (sw->remote[i] >= 0)
			puppet_syscall(&sw->t->pup, SYS_close, sw->remote[i]);
	if (sw->lcopy >= 0)
		close(sw->lcopy);
	if (sw->opath >= 0)
		close(sw->opath);
	if (sw->chan >= 0)
		close(sw->chan);
}

static int swap_requeue(struct swap *sw, struct unix_obj *reg)
{
	struct capture *caps = realloc(reg->caps, (reg->ncaps + sw->n) * sizeof(*caps));
	int err = 0;
	if (!caps)
		return -ENOMEM;
	reg->caps = caps;
	/* all that were taken, even after a failure: each one lost is one too many */
	for (size_t i = 0; i < sw->ntaken; i++) {
		struct swap_client *c = &sw->c[i];
		struct capture *cap = &reg->caps[reg->ncaps];
		*cap = (struct capture){.listener = sw->l->ino};
		int r = swap_put(sw, c, cap);
		if (r < 0) {
			err = err ? err : r;
			log_error(&sw->ctx->log,
				  "pid %d fd %d (unix listener socket:[%u]): cannot put pending "
				  "connection %zu back after reading it: %s; it is lost",
				  sw->t->pid, sw->lfd, sw->l->ino, i, strerror(-r));
			continue;
		}
		cap->q = c->q;
		c->q = (struct unix_msgs){0};
		reg->ncaps++;
	}
	return err;
}

static int swap_listener(struct ckpt_ctx *ctx, struct task *t, struct unix_obj *reg,
			 const struct usk *l, int lfd, const struct sockfd *fds, size_t nfds)
{
	struct swap sw = {.ctx = ctx,
			  .t = t,
			  .l = l,
			  .lfd = lfd,
			  .n = l->nicons,
			  .lcopy = -1,
			  .opath = -1,
			  .chan = -1,
			  .remote = {-1, -1}};
	int r;

	if (l->nicons > PENDING_MAX)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (unix listener socket:[%u]): %u pending connections",
				t->pid, lfd, l->ino, l->nicons);
	sw.c = calloc(sw.n, sizeof(*sw.c));
	if (!sw.c)
		return -ENOMEM;
	for (size_t i = 0; i < sw.n; i++)
		sw.c[i].copy = sw.c[i].accepted = -1;
	r = swap_gather(&sw, &reg->tab, fds, nfds);
	if (r == 0 && (sw.lcopy = puppet_getfd(&t->pup, lfd)) < 0)
		r = sw.lcopy;
	if (r == 0)
		r = swap_address(&sw);
	if (r == 0)
		r = swap_channel(&sw);
	if (r < 0 && ctx->log.errors == 0)
		r = log_fail(&ctx->log, r,
			     "pid %d fd %d (unix listener socket:[%u]): cannot prepare to read its "
			     "pending connections: %s",
			     t->pid, lfd, l->ino, strerror(-r));
	if (r == 0) {
		log_info(&ctx->log, "pid %d fd %d: reading the %zu connections pending on it",
			 t->pid, lfd, sw.n);
		r = swap_take(&sw);
		if (r < 0)
			log_error(
			    &ctx->log,
			    "pid %d fd %d (unix listener socket:[%u]): cannot read its pending "
			    "connections: %s",
			    t->pid, lfd, l->ino, strerror(-r));
		int e = swap_requeue(&sw, reg);
		r = r < 0 ? r : e;
	}
	swap_free(&sw);
	return r;
}

int unix_collect(struct ckpt_ctx *ctx, struct task *t)
{
	_cleanup_free_ struct sockfd *fds = NULL;
	_cleanup_free_ uint32_t *done = NULL;
	struct unix_obj *reg;
	size_t n = 0, ndone = 0;
	int r = task_unix_fds(ctx, t, &fds, &n);

	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot list its sockets: %s", t->pid,
				strerror(-r));
	if (!n)
		return 0;
	if ((r = unix_make_reg(ctx, &reg)) < 0)
		return r;
	done = calloc(n, sizeof(*done));
	if (!done)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct usk *l = unix_table_find(&reg->tab, fds[i].ino);
		bool seen = false;
		for (size_t j = 0; j < ndone; j++)
			seen |= done[j] == fds[i].ino;
		if (seen || !l || l->state != K_LISTEN || !unix_swap_needed(&reg->tab, l))
			continue;
		done[ndone++] = l->ino;
		r = swap_listener(ctx, t, reg, l, fds[i].fd, fds, n);
		if (r < 0)
			return r;
	}
	if (!ndone)
		return 0;
	r = unix_table_again(reg);
	return r < 0 ? log_fail(&ctx->log, r, "cannot list the unix sockets (sock_diag): %s",
				strerror(-r))
		     : 0;
}

/* --- fds in flight ----------------------------------------------------------
 *
 * The peek of a queue installs in ckpt a copy of every fd its messages
 * carry (SCM_RIGHTS). Each is saved as the objref of its open file, made
 * like the open files of any fd: it is lent to the task that holds the
 * socket (passed in at a number above every fd the task had), where
 * fdtable_claim() names its kind and that kind's fd_collect collects it,
 * so that kcmp finds the open file a task holds too (a pipe end, a file
 * at its offset...), and kinds that read an object through the task that
 * holds it (a pipe's data at collect_end, a queue's messages at dump) read
 * it there. Lent fds stay until unix_finish takes them out again, after
 * the dump or a failure, before the tasks are released.
 *
 * Refused: kinds whose objects are tied to a task's fd numbers (epoll) or
 * that cannot be given back by fd_get; a file in flight holding a flock
 * or OFD lock (it would be taken again through an fd no task has); a unix
 * socket in flight whose own queues hold fds in flight (cycles).
 */


static int task_max_fd(pid_t pid, int *ret)
{
	_cleanup_free_ int *fds = NULL;
	size_t n;
	int r = fdtable_list(pid, &fds, &n);
	if (r < 0)
		return r;
	*ret = n ? fds[n - 1] : -1;
	return 0;
}

/* Moves the task's fd to base or above. */
static long move_up(struct puppet *p, int fd, int base)
{
	long r = puppet_syscall(p, SYS_fcntl, fd, F_DUPFD_CLOEXEC, base);
	puppet_syscall(p, SYS_close, fd);
	return r;
}

/* The lending record of t, made (with its channel) on first use. */
static int lent_of(struct unix_obj *reg, struct task *t, struct lent **ret)
{
	for (size_t i = 0; i < reg->nlent; i++) {
		if (reg->lent[i].t == t) {
			*ret = &reg->lent[i];
			return 0;
		}
	}
	struct lent *v = realloc(reg->lent, (reg->nlent + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	reg->lent = v;
	struct lent *l = &v[reg->nlent++];
	*l = (struct lent){.t = t, .chan = -1, .remote = {-1, -1}};
	int max = -1, r = task_max_fd(t->pid, &max);
	if (r < 0)
		return r;
	l->base = max + 1;
	if ((r = task_channel(&t->pup, l->remote, &l->chan)) < 0)
		return r;
	for (int i = 0; i < 2; i++) {
		long m = move_up(&t->pup, l->remote[i], l->base);
		l->remote[i] = (int)m;
		if (m < 0)
			return (int)m;
	}
	*ret = l;
	return 0;
}

/* Lends ckpt's fd to t: *ret_fd is its number there. */
static int lend(struct unix_obj *reg, struct task *t, int fd, int *ret_fd)
{
	struct lent *l = NULL;
	int r = lent_of(reg, t, &l);
	if (r < 0)
		return r;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		int *v = realloc(l->fds, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->fds = v;
		l->cap = cap;
	}
	int tmp = puppet_send_fd(&t->pup, l->chan, l->remote[0], fd);
	if (tmp < 0)
		return tmp;
	long m = move_up(&t->pup, tmp, l->base);
	if (m < 0)
		return (int)m;
	l->fds[l->n++] = (int)m;
	*ret_fd = (int)m;
	return 0;
}

/* Takes every lent fd and channel out of the tasks again. */
void unix_finish(struct ckpt_ctx *ctx)
{
	struct unix_obj *reg = unix_reg(ctx);
	for (size_t i = 0; reg && i < reg->nlent; i++) {
		struct lent *l = &reg->lent[i];
		for (size_t j = 0; l->t->pup.held && j < l->n; j++)
			puppet_syscall(&l->t->pup, SYS_close, l->fds[j]);
		for (int j = 0; j < 2; j++)
			if (l->t->pup.held && l->remote[j] >= 0)
				puppet_syscall(&l->t->pup, SYS_close, l->remote[j]);
		if (l->chan >= 0)
			close(l->chan);
		free(l->fds);
	}
	if (reg) {
		free(reg->lent);
		reg->lent = NULL;
		reg->nlent = 0;
	}
}

/* Does the fdinfo of pid's fd list a lock of the open file (flock, OFD)? */
static bool file_locked(pid_t pid, int fd)
{
	_cleanup_free_ char *text = NULL;
	char name[32];
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	if (proc_read(pid, name, &text, NULL) < 0)
		return true;
	for (char *l = strstr(text, "lock:"); l; l = strstr(l + 5, "lock:")) {
		char *end = strchr(l, '\n');
		size_t n = end ? (size_t)(end - l) : strlen(l);
		if (memmem(l, n, "FLOCK", 5) || memmem(l, n, "OFDLCK", 6))
			return true;
	}
	return false;
}

/* "queued message i", or message i of pending connection pend (>= 0) */
static void where_of(char *buf, size_t len, size_t i, long pend)
{
	if (pend < 0)
		snprintf(buf, len, "queued message %zu", i);
	else
		snprintf(buf, len, "message %zu of pending connection %ld", i, pend);
}

/*
 * A kind refused a lent fd, naming the task and the lent fd's number: the
 * error shown first (errbuf) is prefixed with which fd in flight it is,
 * and the same is logged.
 */
static int lent_fail(struct ckpt_ctx *ctx, int errors, int r, const struct unix_obj *u,
		     const char *where, const char *path, int lfd)
{
	char what[512], first[1024];
	struct ckpt_log *log = &ctx->log;
	snprintf(what, sizeof(what),
		 "pid %d fd %d (unix %s socket:[%llu]): %s carries %s (lent to the task at fd %d "
		 "to be saved)",
		 u->pid, u->fd, unix_type_name(u->e.type), (unsigned long long)u->e.ino, where,
		 path, lfd);
	bool named = errors == 0 && log->errors > 0 && log->errbuf && log->errbuf_len;
	if (named)
		snprintf(first, sizeof(first), "%s", log->errbuf);
	log_error(log, "%s, which cannot be saved (see above)", what);
	if (named)
		snprintf(log->errbuf, log->errbuf_len, "%s: %s", what, first);
	return r;
}

/* Collects fd (ckpt's copy of an fd in flight in u, in where) into *ret_id. */
static int collect_right(struct ckpt_ctx *ctx, struct task *t, struct unix_obj *reg,
			 struct unix_obj *u, const char *where, int fd, uint32_t *ret_id)
{
	_cleanup_free_ struct fd_info *fi = malloc(sizeof(*fi));
	int lfd = -1, k, r, errors = ctx->log.errors;

	if (!fi)
		return -ENOMEM;
	if ((r = lend(reg, t, fd, &lfd)) < 0)
		return log_fail(&ctx->log, r,
				"pid %d fd %d (unix socket:[%llu]): cannot pass an fd of %s into "
				"the task to save it: %s",
				u->pid, u->fd, (unsigned long long)u->e.ino, where, strerror(-r));
	if ((r = fdtable_inspect_fd(ctx, t, lfd, fi)) < 0)
		return r;
	log_debug(&ctx->log, "pid %d fd %d: %s carries %s, lent at fd %d", u->pid, u->fd, where,
		  fi->path, lfd);
	r = fdtable_claim(ctx, fi, &k);
	if (r < 0)
		return lent_fail(ctx, errors, r, u, where, fi->path, lfd);
	if (k == KIND_epoll)
		return REFUSE(ctx, u,
			      "%s carries %s; an epoll instance in flight is not supported (its "
			      "watches are keyed by the fd numbers of the task that added them, "
			      "which ckpt can give back only in a task's own fd table)",
			      where, fi->path);
	if (!kinds[k].ops->fd_get)
		return REFUSE(ctx, u, "%s carries %s; %s in flight is not supported", where,
			      fi->path, kinds[k].name);
	if (file_locked(t->pid, lfd))
		return REFUSE(ctx, u,
			      "%s carries %s, which holds a flock or OFD lock; a lock on an "
			      "fd in flight is not supported",
			      where, fi->path);
	reg->depth++;
	r = fdtable_collect_file(ctx, k, t, fi, ret_id);
	reg->depth--;
	struct obj *o = r == 0 && k == KIND_unix ? objhash_find(&ctx->objs, *ret_id) : NULL;
	if (r == -ELOOP || (o && ((struct unix_obj *)o->ptr)->carries))
		return REFUSE(ctx, u,
			      "%s carries %s, a unix socket whose queue holds fds in flight "
			      "itself; not supported",
			      where, fi->path);
	if (r < 0)
		return lent_fail(ctx, errors, r, u, where, fi->path, lfd);
	return 0;
}

/* The fds in flight of the messages of q into their fds (objrefs). */
int unix_collect_rights(struct ckpt_ctx *ctx, struct task *t, struct unix_obj *reg,
			  struct unix_obj *u, struct unix_msgs *q, long pend)
{
	char where[96];
	for (size_t i = 0; q->rights && i < q->n; i++) {
		const int *fds = q->rights[i];
		UnixMsg *m = q->v[i];
		if (!fds || fds[0] <= 0)
			continue;
		if (!(m->fds = calloc((size_t)fds[0], sizeof(*m->fds))))
			return -ENOMEM;
		where_of(where, sizeof(where), i, pend);
		for (int j = 0; j < fds[0]; j++) {
			int r = collect_right(ctx, t, reg, u, where, fds[1 + j], &m->fds[j]);
			if (r < 0)
				return r;
			m->n_fds++;
		}
	}
	return 0;
}

/*
 * The credentials of q's messages as the image holds them: a sender of
 * the tree by its pid in the image. Where the receiver shows them
 * (SO_PASSCRED, SO_PASSPIDFD: shown), a sender ckpt cannot speak for at
 * restart is refused: one that has exited, or one outside a container.
 */
int unix_fix_creds(struct ckpt_ctx *ctx, struct unix_obj *u, struct unix_msgs *q, bool shown,
		     long pend)
{
	for (size_t i = 0; i < q->n; i++) {
		UnixMsg *m = q->v[i];
		if (!m->has_pid)
			continue;
		struct task *s = ctx_find_task(ctx, (pid_t)m->pid);
		if (s) {
			m->pid = (uint32_t)s->vpid;
			continue;
		}
		bool gone = kill((pid_t)m->pid, 0) < 0 && errno == ESRCH;
		if (!shown || (!gone && !ctx->container))
			continue;
		char where[96];
		where_of(where, sizeof(where), i, pend);
		return REFUSE(ctx, u,
			      "%s carries the credentials (SCM_CREDENTIALS, shown by SO_PASSCRED) "
			      "of pid %u, %s; ckpt cannot reproduce them",
			      where, m->pid,
			      gone ? "which has exited" : "a process outside the container");
	}
	return 0;
}

