/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unix-domain sockets (AF_UNIX: stream, dgram, seqpacket).
 *
 * A socket has exactly one open file, so one object per socket, found by
 * its inode, holds everything: type, state, bound name, options, file
 * flags, shutdown bits and the receive queue. Peers are linked by inode
 * (UNIX_DIAG_PEER), so the two ends of a connection may belong to
 * different tasks.
 *
 * Checkpoint. What the kernel says of every unix socket of the network
 * namespace is read once (NETLINK_SOCK_DIAG: name, VFS inode, peer,
 * pending connections, queue lengths, shutdown) into a table kept in the
 * objhash under key 0. Each socket is then read through a copy of its fd
 * (pidfd_getfd): options with getsockopt, the bound file with SIOCUNIXFILE,
 * the receive queue with recvmsg(MSG_PEEK) walked by SO_PEEK_OFF (see
 * unix-sk.h): one message per datagram, the sender's name and credentials
 * kept. The fds a queued message carries (SCM_RIGHTS) are saved as the
 * objrefs of their open files, collected by their own kinds through the
 * task (see "fds in flight" below); a sender of the tree is saved by its
 * pid in the image.
 *
 * Connections not yet accepted hold their data in an "embryo" socket that
 * has no file and cannot be peeked. When one of them holds data (or its
 * client has been closed), ckpt accepts every pending connection of that
 * listener itself, reads what each holds, and at once puts an equivalent
 * connection back in its place, in order: a new client socket with the
 * same options, connected by ckpt, sent the same data, installed in the
 * task at every fd of the old client (new inode). This happens in collect,
 * before fdtable lists the fds, whether or not the checkpoint then
 * succeeds.
 *
 * Restart, on ckpt's side, in phases. prepare (before any process):
 * check the links, create the sockets (options set, send buffers raised
 * for the refill), bind the names, listen, make the connections
 * (socketpair, or connect to the restored listener or to a stand-in
 * bound to the accepted side's name, and accept). restore of the first
 * task (its pid now exists, for the credentials of the messages it sent):
 * connect the pending clients in order and send their data, refill the
 * receive queues from the peer side (dgram: from the socket bound to the
 * sender's name, or an unnamed one), each message with the fds it carried
 * (every kind has prepared its objects by then: fd_get gives them) and
 * its credentials, connect the dgram sockets, then put
 * back buffer sizes, SO_PASS*, SO_PEEK_OFF, backlog, shutdown bits and
 * O_NONBLOCK. fdtable then passes the sockets in.
 *
 * Refused: peers (or pending connections, or listeners) outside the
 * image (but see --external unix and --detach-clients below), out-of-band data, socket filters, other network namespaces; fds
 * in flight of a kind tied to a task's fd numbers (epoll) or of no kind,
 * files in flight holding a flock or OFD lock, unix sockets in flight that
 * hold fds in flight themselves; credentials a receiver shows (SO_PASSCRED)
 * of a sender that has exited or is outside a container (restart sends the
 * credentials of such a receiver's messages exactly, or fails). Not
 * reproduced: SO_PEERCRED (ckpt made the connections), a pending error
 * (SO_ERROR cannot be read without clearing it).
 */
#include <dirent.h>
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
#include "kinds/fdtable.h"
#include "kinds/unix-sk.h"
#include "unix.pb-c.h"
#include "util/cleanup.h"

enum { UNIX_SK_ENTRY = REC_TYPE(KID_unix, 1) };

/* states in the image */
enum {
	UNIX_ST_CLOSED, /* not connected (dgram: may have a peer) */
	UNIX_ST_LISTEN,
	UNIX_ST_CONNECTED, /* stream/seqpacket: peer, or 0 if it was closed */
	UNIX_ST_PENDING,   /* stream/seqpacket: waiting in listener's queue */
	UNIX_ST_MAX,
};
#define PENDING_MAX 4096u
#define TIMEO_MAX   (1000000ull * 86400 * 365 * 100)

/* --- checkpoint ------------------------------------------------------------ */

/* What the swap read from the connections pending on a listener. */
struct capture {
	uint32_t listener, client; /* client: the new client's inode, 0 if closed */
	struct unix_msgs q;
};

/* fds lent to a task for the time of the checkpoint (see "fds in flight") */
struct lent {
	struct task *t;
	int chan;      /* ckpt's end of a socketpair made in the task */
	int remote[2]; /* the pair's ends in the task */
	int base;      /* lent fds go at base and above: above every fd it had */
	int *fds;
	size_t n, cap;
};

/* checkpoint object: the table (key 0) or one socket */
struct unix_obj {
	bool is_reg;
	struct unix_table tab; /* is_reg */
	struct capture *caps;
	size_t ncaps;
	struct lent *lent; /* is_reg: per task */
	size_t nlent;
	int depth;	/* is_reg: > 0 while an fd in flight is collected */
	bool carries;	/* a socket whose queues hold fds in flight */
	bool in_flight; /* collected as an fd in flight (fd is a lent one) */
	UnixSkEntry e;
	UnixOpts opts;
	struct unix_msgs queue;
	UnixPending *pend, **ppend;
	struct unix_msgs *pendq;
	size_t npend;
	uint8_t name[NAME_BUF];
	uint8_t ext[NAME_BUF]; /* external: the name it is connected to again */
	char *path;
	pid_t pid;
	int fd;
};

struct sockfd {
	int fd;
	uint32_t ino;
};

static bool unix_fd_claim(const struct fd_info *fi)
{
	char path[64], proto[32];
	if (!S_ISSOCK(fi->st.st_mode))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", fi->pid, fi->fd);
	ssize_t n = getxattr(path, "system.sockprotoname", proto, sizeof(proto));
	return n >= 4 && !memcmp(proto, "UNIX", 4);
}

/* The unix sockets among pid's fds. */
static int task_unix_fds(pid_t pid, struct sockfd **ret, size_t *ret_n)
{
	char path[64], link[64];
	struct sockfd *v = NULL;
	size_t n = 0, cap = 0;
	unsigned long ino;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		struct fd_info fi = {.pid = pid, .fd = atoi(de->d_name)};
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fi.fd);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l < 0)
			continue;
		link[l] = 0;
		fi.st.st_mode = S_IFSOCK;
		if (sscanf(link, "socket:[%lu]", &ino) != 1 || !unix_fd_claim(&fi))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			struct sockfd *nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = (struct sockfd){.fd = fi.fd, .ino = (uint32_t)ino};
	}
	closedir(d);
	*ret = v;
	*ret_n = n;
	return 0;
}

static bool same_netns(pid_t pid)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	return stat("/proc/self/ns/net", &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

static struct unix_obj *get_reg(struct ckpt_ctx *ctx)
{
	struct obj *o = objhash_next_key(&ctx->objs, NULL, KIND_unix, 0);
	return o ? o->ptr : NULL;
}

static int make_reg(struct ckpt_ctx *ctx, struct unix_obj **ret)
{
	struct unix_obj *u = get_reg(ctx);
	if (u) {
		*ret = u;
		return 0;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->is_reg = true;
	int r = unix_table_dump(&u->tab);
	if (r < 0) {
		unix_table_free(&u->tab);
		free(u);
		return log_fail(&ctx->log, r, "cannot list the unix sockets (sock_diag): %s",
				strerror(-r));
	}
	r = objhash_add(&ctx->objs, KIND_unix, 0, 0, u, NULL);
	if (r < 0) {
		unix_table_free(&u->tab);
		free(u);
		return r;
	}
	*ret = u;
	return 0;
}

static struct unix_obj *find_obj(struct ckpt_ctx *ctx, uint64_t ino, uint32_t *ret_id)
{
	struct obj *o = ino ? objhash_next_key(&ctx->objs, NULL, KIND_unix, ino) : NULL;
	if (o && ret_id)
		*ret_id = o->id;
	return o ? o->ptr : NULL;
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
static bool swap_needed(const struct unix_table *tab, const struct usk *l)
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
	_cleanup_close_ int s = socket(AF_UNIX, sw->l->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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

static int unix_collect(struct ckpt_ctx *ctx, struct task *t)
{
	_cleanup_free_ struct sockfd *fds = NULL;
	_cleanup_free_ uint32_t *done = NULL;
	struct unix_obj *reg;
	size_t n = 0, ndone = 0;
	int r = task_unix_fds(t->pid, &fds, &n);

	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot list its sockets: %s", t->pid,
				strerror(-r));
	if (!n)
		return 0;
	if (!same_netns(t->pid))
		return log_fail(
		    &ctx->log, -EOPNOTSUPP,
		    "pid %d fd %d (unix socket:[%u]): in another network namespace than "
		    "ckpt's; not supported yet",
		    t->pid, fds[0].fd, fds[0].ino);
	if ((r = make_reg(ctx, &reg)) < 0)
		return r;
	done = calloc(n, sizeof(*done));
	if (!done)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct usk *l = unix_table_find(&reg->tab, fds[i].ino);
		bool seen = false;
		for (size_t j = 0; j < ndone; j++)
			seen |= done[j] == fds[i].ino;
		if (seen || !l || l->state != K_LISTEN || !swap_needed(&reg->tab, l))
			continue;
		done[ndone++] = l->ino;
		r = swap_listener(ctx, t, reg, l, fds[i].fd, fds, n);
		if (r < 0)
			return r;
	}
	if (!ndone)
		return 0;
	unix_table_free(&reg->tab);
	r = unix_table_dump(&reg->tab);
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

#define REFUSE(ctx, u, fmt, ...)                                                                   \
	log_fail(&(ctx)->log, -EOPNOTSUPP, "pid %d fd %d (unix %s socket:[%llu]%s): " fmt,         \
		 (u)->pid, (u)->fd, unix_type_name((u)->e.type), (unsigned long long)(u)->e.ino,   \
		 (u)->in_flight ? ", in flight" : "", ##__VA_ARGS__)

static int task_max_fd(pid_t pid, int *ret)
{
	char path[64];
	int max = -1;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));)
		if (de->d_name[0] != '.')
			max = MAX(max, atoi(de->d_name));
	closedir(d);
	*ret = max;
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
static void unix_finish(struct ckpt_ctx *ctx)
{
	struct unix_obj *reg = get_reg(ctx);
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
	if (k == KIND_epoll || !kinds[k].ops->fd_get)
		return REFUSE(ctx, u, "%s carries %s; %s in flight is not supported", where,
			      fi->path, kinds[k].name);
	if (file_locked(t->pid, lfd))
		return REFUSE(ctx, u,
			      "%s carries %s, which holds a flock or OFD lock; a lock on an "
			      "fd in flight is not supported",
			      where, fi->path);
	reg->depth++;
	r = kinds[k].ops->fd_collect(ctx, t, fi, ret_id);
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
static int collect_rights(struct ckpt_ctx *ctx, struct task *t, struct unix_obj *reg,
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
static int fix_creds(struct ckpt_ctx *ctx, struct unix_obj *u, struct unix_msgs *q, bool shown,
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

/* --- collecting one socket --------------------------------------------- */

/* The bound name, and for a path name the file's path, mode and owner. */
static int read_name(struct ckpt_ctx *ctx, const struct fd_info *fi, int copy, const struct usk *k,
		     struct unix_obj *u)
{
	char buf[PATH_MAX + 16], link[64];
	struct stat st;

	if (!k->namelen)
		return 0;
	memcpy(u->name, k->name, k->namelen);
	u->e.has_name = true;
	u->e.name.data = u->name;
	u->e.name.len = k->namelen;
	if (k->name[0] == 0)
		return 0;
	const char *name = (const char *)u->name; /* NUL-terminated by the kernel */
	_cleanup_close_ int opath = ioctl(copy, SIOCUNIXFILE);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", opath);
	ssize_t n = opath >= 0 ? readlink(link, buf, sizeof(buf) - 1) : -1;
	if (n < 0 || fstat(opath, &st) < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (unix socket bound to %s): cannot find its file: %m",
				fi->pid, fi->fd, name);
	buf[n] = 0;
	const char *del = " (deleted)";
	size_t dl = strlen(del);
	if ((size_t)n > dl && !strcmp(buf + n - dl, del) && st.st_nlink == 0) {
		buf[n - dl] = 0;
		u->e.has_path_gone = u->e.path_gone = true;
	}
	size_t pl = strlen(buf), nl = strlen(name);
	if (name[0] != '/' && (pl <= nl || buf[pl - nl - 1] != '/' || strcmp(buf + pl - nl, name)))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (unix socket bound to %s): a relative name ckpt "
				"cannot place (its file is %s)",
				fi->pid, fi->fd, name, buf);
	u->path = strdup(buf);
	if (!u->path)
		return -ENOMEM;
	u->e.path = u->path;
	u->e.has_path_mode = u->e.has_path_uid = u->e.has_path_gid = true;
	u->e.path_mode = st.st_mode & 07777;
	u->e.path_uid = st.st_uid;
	u->e.path_gid = st.st_gid;
	return 0;
}

/* State, peer, listener, pending connections. */
static int read_state(struct ckpt_ctx *ctx, const struct fd_info *fi, const struct unix_obj *reg,
		      const struct usk *k, struct unix_obj *u)
{
	UnixSkEntry *e = &u->e;
	if (k->state == K_LISTEN && k->type != SOCK_DGRAM) {
		e->state = UNIX_ST_LISTEN;
		e->has_backlog = true;
		e->backlog = k->wqlen; /* sk_max_ack_backlog */
		if (k->nicons > PENDING_MAX)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d fd %d (%s): %u pending connections", fi->pid,
					fi->fd, fi->path, k->nicons);
		return 0;
	}
	if (k->type == SOCK_DGRAM) {
		e->state = UNIX_ST_CLOSED;
		e->has_peer = k->has_peer;
		e->peer = k->peer;
		return 0;
	}
	if (k->state == K_CLOSE) {
		e->state = UNIX_ST_CLOSED;
		return 0;
	}
	if (k->state != K_ESTABLISHED)
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d fd %d (%s): in state %u", fi->pid,
				fi->fd, fi->path, k->state);
	const struct usk *l = k->peer ? NULL : unix_table_listener_of(&reg->tab, k->ino);
	e->state = l ? UNIX_ST_PENDING : UNIX_ST_CONNECTED;
	e->has_listener = l != NULL;
	e->listener = l ? l->ino : 0;
	e->has_peer = !l;
	e->peer = k->peer;
	return 0;
}

/* A listener's pending connections, with what the swap read of them. */
static int read_pending(struct unix_obj *reg, const struct usk *k, struct unix_obj *u)
{
	if (u->e.state != UNIX_ST_LISTEN || !k->nicons)
		return 0;
	u->pend = calloc(k->nicons, sizeof(*u->pend));
	u->ppend = calloc(k->nicons, sizeof(*u->ppend));
	u->pendq = calloc(k->nicons, sizeof(*u->pendq));
	if (!u->pend || !u->ppend || !u->pendq)
		return -ENOMEM;
	size_t ci = 0;
	for (uint32_t i = 0; i < k->nicons; i++) {
		UnixPending *p = &u->pend[i];
		unix_pending__init(p);
		p->client = k->icons[i];
		while (ci < reg->ncaps && reg->caps[ci].listener != k->ino)
			ci++;
		if (ci < reg->ncaps) { /* read by the swap, in the same order */
			struct capture *c = &reg->caps[ci++];
			if (c->client != k->icons[i])
				return -ESTALE;
			u->pendq[i] = c->q;
			c->q = (struct unix_msgs){0};
			p->n_queue = u->pendq[i].n;
			p->queue = u->pendq[i].v;
		}
		u->ppend[i] = p;
	}
	u->npend = k->nicons;
	u->e.n_pending = k->nicons;
	u->e.pending = u->ppend;
	return 0;
}

/* The receive queue; its fds in flight are kept (keep) for collect_rights. */
static int read_queue(struct ckpt_ctx *ctx, const struct fd_info *fi, int copy, const struct usk *k,
		      struct unix_obj *u, bool keep)
{
	uint32_t st = u->e.state;
	if (st == UNIX_ST_LISTEN || (k->type != SOCK_DGRAM && st == UNIX_ST_CLOSED))
		return 0;
	int r = unix_peek_queue(copy, k->type, k->shutdown, keep, &u->queue);
	if (r == -ENOBUFS)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a queued message carries more control data "
				"than ckpt reads (fds in flight would be lost); not supported",
				fi->pid, fi->fd, fi->path);
	if (r == -EBADMSG)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): its queue holds out-of-band data or more than "
				"a peek shows; not supported yet",
				fi->pid, fi->fd, fi->path);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (%s): cannot read its queue: %s",
				fi->pid, fi->fd, fi->path, r == -EFBIG ? "too big" : strerror(-r));
	u->e.n_queue = u->queue.n;
	u->e.queue = u->queue.v;
	return 0;
}

static void unix_free_obj(void *ptr);

/* Credentials and fds in flight of the queues read: a socket collected as
 * an fd in flight itself (depth > 0) may have none (-ELOOP, logged by the
 * socket that carries it). */
static int read_rights(struct ckpt_ctx *ctx, struct task *t, struct unix_obj *reg,
		       const struct usk *k, struct unix_obj *u)
{
	bool shown = u->opts.passcred || u->opts.passpidfd;
	int r = fix_creds(ctx, u, &u->queue, shown, -1);
	u->carries = u->queue.has_rights;
	for (size_t i = 0; r == 0 && u->pendq && i < u->npend; i++) {
		r = fix_creds(ctx, u, &u->pendq[i], shown, (long)i);
		u->carries |= u->pendq[i].has_rights;
	}
	if (r < 0)
		return r;
	if (reg->depth > 0) {
		bool read = false; /* the swap read its pending connections */
		for (size_t i = 0; i < reg->ncaps; i++)
			read |= reg->caps[i].listener == k->ino;
		if (k->state == K_LISTEN && !read && swap_needed(&reg->tab, k))
			return REFUSE(ctx, u,
				      "a listener whose pending connections hold data, "
				      "held by no task; not supported");
		return u->carries ? -ELOOP : 0;
	}
	r = collect_rights(ctx, t, reg, u, &u->queue, -1);
	for (size_t i = 0; r == 0 && u->pendq && i < u->npend; i++)
		r = collect_rights(ctx, t, reg, u, &u->pendq[i], (long)i);
	return r;
}

static int read_socket(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
		       struct unix_obj *reg, const struct usk *k, struct unix_obj *u)
{
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fi->fd);
	bool filter = false;
	int r;

	if (copy < 0)
		return log_fail(&ctx->log, copy, "pid %d fd %d (%s): cannot take a copy: %s",
				fi->pid, fi->fd, fi->path, strerror(-copy));
	r = unix_opts_read(copy, &u->opts, &filter);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (%s): cannot read its options: %s",
				fi->pid, fi->fd, fi->path, strerror(-r));
	if (filter)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a socket filter is attached; not supported yet",
				fi->pid, fi->fd, fi->path);
	u->e.opts = &u->opts;
	if ((r = read_name(ctx, fi, copy, k, u)) < 0 || (r = read_state(ctx, fi, reg, k, u)) < 0 ||
	    (r = read_queue(ctx, fi, copy, k, u, reg->depth == 0)) < 0)
		return r;
	r = read_pending(reg, k, u);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d fd %d (%s): its pending connections changed",
				fi->pid, fi->fd, fi->path);
	return read_rights(ctx, t, reg, k, u);
}

static int unix_fd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   uint32_t *ret_id)
{
	uint32_t ino = (uint32_t)fi->st.st_ino;
	struct unix_obj *reg, *u;
	struct obj *o;
	int r;

	if (find_obj(ctx, ino, ret_id))
		return 0;
	if ((r = make_reg(ctx, &reg)) < 0)
		return r;
	const struct usk *k = unix_table_find(&reg->tab, ino);
	if (!k || (k->type != SOCK_STREAM && k->type != SOCK_DGRAM && k->type != SOCK_SEQPACKET))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (%s): a unix socket sock_diag does not show (%s)",
				fi->pid, fi->fd, fi->path,
				k ? "of an unknown type" : "another netns?");
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	unix_sk_entry__init(&u->e);
	u->e.ino = ino;
	u->e.type = k->type;
	u->e.flags = fi->fi.flags & O_NONBLOCK;
	u->e.has_shutdown = k->shutdown != 0;
	u->e.shutdown = k->shutdown & 3;
	u->pid = t->pid;
	u->fd = fi->fd;
	u->in_flight = reg->depth > 0;
	r = read_socket(ctx, t, fi, reg, k, u);
	if (r == 0)
		r = objhash_add(&ctx->objs, KIND_unix, ino, 0, u, &o);
	if (r < 0) {
		unix_free_obj(u);
		return r;
	}
	u->e.id = o->id;
	*ret_id = o->id;
	return 0;
}

/* An image socket bound to this name, or NULL. */
static struct unix_obj *obj_by_name(struct ckpt_ctx *ctx, uint32_t type, const uint8_t *name,
				    size_t len)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		struct unix_obj *u = o->ptr;
		if (!u->is_reg && u->e.type == type && u->e.has_name && u->e.name.len == len &&
		    !memcmp(u->e.name.data, name, len))
			return u;
	}
	return NULL;
}

/* --- peers outside the image (--external unix) -----------------------------
 *
 * A socket whose peer is outside the image can be saved as external when
 * that peer has a name to reach it by again: stream and seqpacket, the
 * listener outside the image its connection came from (the accepted side
 * shows the listener's name; a connection still waiting in its queue
 * names it too); dgram, the named socket it is connect()ed to. Restart
 * connects it anew to that name (the server sees a new client). A path
 * must be absolute and still lead to that listener or socket. What cannot
 * be made again is refused: data the outside peer sent that is still
 * queued (only that peer could send it again), data sent to a connection
 * the outside server has not accepted yet.
 */

/* "/path" or "@abstract" of sun_path bytes */
static const char *name_str(const uint8_t *name, size_t len, char *buf, size_t size)
{
	if (len && name[0] == 0)
		snprintf(buf, size, "@%.*s", (int)len - 1, (const char *)name + 1);
	else
		snprintf(buf, size, "%.*s", (int)len, (const char *)name);
	return buf;
}

/* Is the file at k's path name the socket k is bound to? */
static bool name_leads_to(const struct usk *k)
{
	struct stat s;
	if (!k->namelen || k->name[0] == 0)
		return true;
	return stat((const char *)k->name, &s) == 0 && S_ISSOCK(s.st_mode) && k->has_vfs &&
	       s.st_ino == k->vfs_ino && major(s.st_dev) == (k->vfs_dev >> 20) &&
	       minor(s.st_dev) == (k->vfs_dev & 0xfffff);
}

/* The listener outside the image bound to p's name (p: an accepted socket). */
static const struct usk *listener_of_name(struct ckpt_ctx *ctx, const struct unix_table *tab,
					  const struct usk *p)
{
	for (size_t i = 0; p->namelen && i < tab->n; i++) {
		const struct usk *l = &tab->v[i];
		if (l->state == K_LISTEN && l->type == p->type && l->namelen == p->namelen &&
		    !memcmp(l->name, p->name, p->namelen) && !find_obj(ctx, l->ino, NULL))
			return l;
	}
	return NULL;
}

/*
 * The socket outside the image whose name u's peer can be reached by
 * again, or NULL with why it cannot be.
 */
static const struct usk *ext_target(struct ckpt_ctx *ctx, struct unix_obj *u, char *why, size_t wl)
{
	const struct unix_table *tab = &get_reg(ctx)->tab;
	const UnixSkEntry *e = &u->e;
	const struct usk *k = unix_table_find(tab, (uint32_t)e->ino), *t = NULL;
	char nb[NAME_BUF + 2];

	if (e->state == UNIX_ST_PENDING) {
		t = unix_table_find(tab, (uint32_t)e->listener);
		if (k && k->wqlen) {
			snprintf(why, wl, "it sent %u bytes on a connection not accepted yet",
				 k->wqlen);
			return NULL;
		}
	} else if (e->type == SOCK_DGRAM) {
		t = unix_table_find(tab, (uint32_t)e->peer);
	} else {
		const struct usk *p = unix_table_find(tab, (uint32_t)e->peer);
		t = p ? listener_of_name(ctx, tab, p) : NULL;
		if (p && !t) {
			snprintf(why, wl, "it has no name of a listener to connect to again%s",
				 p->namelen ? "" : " (unnamed)");
			return NULL;
		}
	}
	if (!t || !t->namelen) {
		snprintf(why, wl, "it has no name to connect to again");
		return NULL;
	}
	name_str(t->name, t->namelen, nb, sizeof(nb));
	if (t->name[0] != 0 && t->name[0] != '/') {
		snprintf(why, wl, "its name %s is relative: ckpt cannot tell where it is", nb);
		return NULL;
	}
	if (!name_leads_to(t)) {
		snprintf(why, wl, "its name %s no longer leads to it", nb);
		return NULL;
	}
	return t;
}

/* Queued data of u that only its outside peer t could send again. */
static int ext_queue(struct ckpt_ctx *ctx, struct unix_obj *u, const struct usk *t)
{
	char nb[NAME_BUF + 2];
	name_str(t->name, t->namelen, nb, sizeof(nb));
	if (u->e.type != SOCK_DGRAM && u->e.n_queue)
		return REFUSE(ctx, u,
			      "its receive queue holds %zu bytes from its peer outside the "
			      "image (%s); a new connection cannot have them",
			      u->queue.bytes, nb);
	for (size_t i = 0; i < u->e.n_queue; i++) {
		const UnixMsg *m = u->e.queue[i];
		if (m->has_from && m->from.len == t->namelen &&
		    !memcmp(m->from.data, t->name, t->namelen))
			return REFUSE(ctx, u,
				      "queued message %zu is from its peer outside the image "
				      "(%s), which ckpt cannot send as",
				      i, nb);
	}
	return 0;
}

/* A peer outside the image (socket:[peer], or the listener the connection
 * waits on): saved as external with CKPT_EXT_UNIX if it can be, else
 * refused saying whether and how --external unix would do. */
static int check_external(struct ckpt_ctx *ctx, struct unix_obj *u, const char *what, uint64_t ino)
{
	char why[256], nb[NAME_BUF + 2];
	const struct usk *t = ext_target(ctx, u, why, sizeof(why));
	bool ext = ctx->flags & CKPT_EXT_UNIX;

	if (!t)
		return REFUSE(ctx, u, "peer outside the image (%s socket:[%llu]): %s%s", what,
			      (unsigned long long)ino, why,
			      ext ? ", so not even --external unix can save it" : "");
	name_str(t->name, t->namelen, nb, sizeof(nb));
	if (!ext)
		return REFUSE(ctx, u,
			      "peer outside the image (%s socket:[%llu]), bound to %s; "
			      "--external unix would connect it again to that name at restart",
			      what, (unsigned long long)ino, nb);
	int r = ext_queue(ctx, u, t);
	if (r < 0)
		return r;
	memcpy(u->ext, t->name, t->namelen);
	u->e.has_external = true;
	u->e.external.data = u->ext;
	u->e.external.len = t->namelen;
	u->e.has_peer = u->e.has_listener = false;
	u->e.peer = u->e.listener = 0;
	if (u->e.state == UNIX_ST_PENDING)
		u->e.state = UNIX_ST_CONNECTED; /* a new connection, pending or not */
	log_info(&ctx->log,
		 "pid %d fd %d (unix socket:[%llu]): its peer is outside the image: "
		 "external, connected again to %s at restart",
		 u->pid, u->fd, (unsigned long long)u->e.ino, nb);
	return 0;
}

/* dgram: can every queued message be sent again by a socket of the image? */
static int check_dgram(struct ckpt_ctx *ctx, struct unix_obj *u)
{
	struct unix_obj *p = u->e.has_peer ? find_obj(ctx, u->e.peer, NULL) : NULL;
	bool pair =
	    p && p->e.has_peer && p->e.peer == u->e.ino && (!u->e.has_name || !p->e.has_name);

	if (u->e.has_peer && u->e.peer && !p) {
		int r = check_external(ctx, u, "dgram", u->e.peer);
		if (r < 0)
			return r;
	}
	if (p && !pair && !p->e.has_name)
		return REFUSE(ctx, u, "connected to an unnamed socket that is not its peer");
	for (size_t i = 0; i < u->e.n_queue; i++) {
		const UnixMsg *m = u->e.queue[i];
		if (pair) {
			bool same = m->has_from
					? p->e.has_name && p->e.name.len == m->from.len &&
					      !memcmp(p->e.name.data, m->from.data, m->from.len)
					: !p->e.has_name;
			if (!same)
				return REFUSE(ctx, u, "a queued message is not from its peer");
			continue;
		}
		if (!u->e.has_name)
			return REFUSE(ctx, u, "an unnamed socket holding queued messages");
		if (m->has_from && m->from.data[0] &&
		    !obj_by_name(ctx, SOCK_DGRAM, m->from.data, m->from.len))
			return REFUSE(ctx, u,
				      "a queued message from %.*s, a socket not in the image",
				      (int)m->from.len, (const char *)m->from.data);
	}
	return 0;
}

/* --- clients outside the image (--detach-clients) -------------------------
 *
 * A connection accepted by a listener of the image whose client is outside
 * (a tmux or screen client attached to a server of the image) has no name
 * to connect back to. With CKPT_DETACH_CLIENTS it is saved as a
 * connection whose peer has closed: restart accepts it from its listener
 * with a stand-in client that sends what was queued and closes, so the
 * server reads the client's last data, then EOF, as when a client goes.
 */

/* The listener of the image u was accepted from (bound to u's name), or NULL. */
static const struct unix_obj *own_listener(struct ckpt_ctx *ctx, const struct unix_obj *u)
{
	const UnixSkEntry *e = &u->e;
	for (struct obj *o = NULL; e->has_name && (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		const struct unix_obj *l = o->ptr;
		if (!l->is_reg && l->e.state == UNIX_ST_LISTEN && l->e.type == e->type &&
		    l->e.has_name && l->e.name.len == e->name.len &&
		    !memcmp(l->e.name.data, e->name.data, e->name.len))
			return l;
	}
	return NULL;
}

static int detach_client(struct ckpt_ctx *ctx, struct unix_obj *u, const struct unix_obj *l)
{
	char nb[NAME_BUF + 2];
	uint64_t peer = u->e.peer;
	name_str(l->e.name.data, l->e.name.len, nb, sizeof(nb));
	if (!(ctx->flags & CKPT_DETACH_CLIENTS))
		return REFUSE(ctx, u,
			      "peer outside the image (%s socket:[%llu]): a client of the "
			      "image's listener %s, which has no name to connect back to; "
			      "--detach-clients restores the connection as closed by the client",
			      unix_type_name(u->e.type), (unsigned long long)peer, nb);
	u->e.peer = 0;
	log_info(&ctx->log,
		 "pid %d fd %d (unix socket:[%llu]): its client (socket:[%llu]) is outside the "
		 "image: detached, the connection comes back closed by the client",
		 u->pid, u->fd, (unsigned long long)u->e.ino, (unsigned long long)peer);
	return 0;
}

static int check_peers(struct ckpt_ctx *ctx, struct unix_obj *u)
{
	const UnixSkEntry *e = &u->e;
	if (e->type == SOCK_DGRAM)
		return check_dgram(ctx, u);
	if (e->state == UNIX_ST_CONNECTED && e->peer && !find_obj(ctx, e->peer, NULL)) {
		const struct unix_obj *l = own_listener(ctx, u);
		return l ? detach_client(ctx, u, l)
			 : check_external(ctx, u, unix_type_name(e->type), e->peer);
	}
	if (e->state == UNIX_ST_PENDING && !find_obj(ctx, e->listener, NULL))
		return check_external(ctx, u, "waiting on listener", e->listener);
	for (size_t i = 0; i < e->n_pending; i++)
		if (e->pending[i]->client && !find_obj(ctx, e->pending[i]->client, NULL))
			return REFUSE(ctx, u,
				      "peer outside the image (pending connection from "
				      "socket:[%llu])",
				      (unsigned long long)e->pending[i]->client);
	return 0;
}

static int unix_collect_end(struct ckpt_ctx *ctx)
{
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		if (((struct unix_obj *)o->ptr)->is_reg)
			continue;
		int r = check_peers(ctx, o->ptr);
		if (r < 0)
			return r;
	}
	return 0;
}

static int unix_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		if (o->dumped)
			continue;
		struct unix_obj *u = o->ptr;
		o->dumped = true;
		if (u->is_reg)
			continue;
		int r = ctx_write_msg(ctx, UNIX_SK_ENTRY, &u->e.base);
		if (r < 0)
			return r;
	}
	return 0;
}

static void unix_free_obj(void *ptr)
{
	struct unix_obj *u = ptr;
	if (!u)
		return;
	unix_table_free(&u->tab);
	for (size_t i = 0; i < u->nlent; i++) {
		if (u->lent[i].chan >= 0)
			close(u->lent[i].chan);
		free(u->lent[i].fds);
	}
	free(u->lent);
	for (size_t i = 0; i < u->ncaps; i++)
		unix_msgs_free(&u->caps[i].q);
	free(u->caps);
	unix_msgs_free(&u->queue);
	for (size_t i = 0; u->pendq && i < u->npend; i++)
		unix_msgs_free(&u->pendq[i]);
	free(u->pendq);
	free(u->pend);
	free(u->ppend);
	free(u->path);
	free(u);
}

/* --- restart: load ------------------------------------------------------------- */

struct unix_robj {
	UnixSkEntry *e;
	int fd;	      /* ckpt's socket */
	int tmp_peer; /* a stand-in for a closed peer, until the queue is filled */
	int opath;    /* O_PATH fd of its bound file */
	struct unix_robj *peer, *listener;
	bool pair; /* dgram: made by socketpair with its peer */
	bool made; /* bind made the file made_dev/made_ino at its path */
	dev_t made_dev;
	ino_t made_ino;
};

static bool valid_msgs(UnixMsg **v, size_t n, uint32_t type, size_t *bytes)
{
	if (n > MSGS_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		*bytes += v[i]->data.len;
		if (v[i]->has_from &&
		    (type != SOCK_DGRAM || !v[i]->from.len || v[i]->from.len > SUN_LEN_MAX))
			return false;
		if (v[i]->n_fds > RIGHTS_MAX)
			return false;
		for (size_t j = 0; j < v[i]->n_fds; j++)
			if (!v[i]->fds[j])
				return false;
	}
	return *bytes <= QUEUE_MAX;
}

static bool valid_name(const UnixSkEntry *e)
{
	if (!e->has_name)
		return !e->path;
	if (!e->name.len || e->name.len > SUN_LEN_MAX + 1)
		return false;
	if (unix_name_abstract(&e->name))
		return e->name.len <= SUN_LEN_MAX && !e->path;
	/* a path: NUL-terminated, with its absolute file path */
	const char *n = (const char *)e->name.data;
	return n[e->name.len - 1] == 0 && strlen(n) == e->name.len - 1 && e->path &&
	       e->path[0] == '/' && strlen(e->path) < PATH_MAX;
}

static bool valid_opts(const UnixOpts *o)
{
	return o && o->sndbuf <= INT_MAX && o->rcvbuf <= INT_MAX &&
	       (!o->has_peek_off || o->peek_off >= -1) && (!o->has_rcvlowat || o->rcvlowat >= 0) &&
	       o->rcvtimeo_us < TIMEO_MAX && o->sndtimeo_us < TIMEO_MAX && o->priority <= INT_MAX;
}

/* external: a name as in name, a path absolute; stream and seqpacket:
 * connected, with nothing queued (only the outside peer could send it) */
static bool valid_external(const UnixSkEntry *e)
{
	const ProtobufCBinaryData *n = &e->external;
	if (!e->has_external)
		return true;
	if (!n->len || n->len > SUN_LEN_MAX || e->has_peer || e->has_listener)
		return false;
	if (e->type != SOCK_DGRAM && (e->state != UNIX_ST_CONNECTED || e->n_queue))
		return false;
	if (n->data[0] == 0)
		return n->len > 1;
	const char *p = (const char *)n->data;
	return p[0] == '/' && p[n->len - 1] == 0 && strlen(p) == n->len - 1;
}

static bool valid_entry(const UnixSkEntry *e)
{
	size_t bytes = 0;
	bool conn = e->type != SOCK_DGRAM;

	if (e->type != SOCK_STREAM && e->type != SOCK_DGRAM && e->type != SOCK_SEQPACKET)
		return false;
	if (e->state >= UNIX_ST_MAX || (!conn && e->state != UNIX_ST_CLOSED) || !e->ino ||
	    e->ino > UINT32_MAX || (e->flags & ~O_NONBLOCK) || e->shutdown > 3 ||
	    (conn && e->has_peer && e->peer == e->ino))
		return false;
	if (!valid_name(e) || !valid_opts(e->opts) || e->backlog > (1u << 20) ||
	    (e->state == UNIX_ST_LISTEN && !e->has_name))
		return false;
	if (e->has_listener != (e->state == UNIX_ST_PENDING) ||
	    (e->has_peer && conn && e->state != UNIX_ST_CONNECTED) ||
	    (e->state == UNIX_ST_CONNECTED && !e->has_peer && !e->has_external))
		return false;
	if (!valid_external(e))
		return false;
	if (e->n_queue && conn && e->state != UNIX_ST_CONNECTED)
		return false;
	if (!valid_msgs(e->queue, e->n_queue, e->type, &bytes))
		return false;
	if (e->n_pending && (e->state != UNIX_ST_LISTEN || e->n_pending > PENDING_MAX))
		return false;
	for (size_t i = 0; i < e->n_pending; i++) {
		size_t pb = 0;
		if (!valid_msgs(e->pending[i]->queue, e->pending[i]->n_queue, e->type, &pb))
			return false;
	}
	return true;
}

static int unix_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	(void)t;
	if (rec->type != UNIX_SK_ENTRY)
		return log_fail(&ctx->log, -EINVAL, "record %u: unknown unix subtype", rec->index);
	struct unix_robj *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->fd = u->tmp_peer = u->opath = -1;
	u->e = rctx_unpack(ctx, rec, &unix_sk_entry__descriptor);
	if (!u->e || !valid_entry(u->e)) {
		if (u->e)
			unix_sk_entry__free_unpacked(u->e, NULL);
		free(u);
		return log_fail(&ctx->log, -EINVAL, "record %u: unix socket entry is not valid",
				rec->index);
	}
	if (objhash_add(&ctx->objs, KIND_unix, u->e->ino, u->e->id, u, NULL) < 0) {
		uint32_t id = u->e->id;
		unix_sk_entry__free_unpacked(u->e, NULL);
		free(u);
		return log_fail(&ctx->log, -EINVAL, "record %u: object %u defined twice",
				rec->index, id);
	}
	return 0;
}

/* --- restart: prepare ---------------------------------------------------------- */

struct rst_unix {
	struct rst_ctx *ctx;
	struct unix_robj **v;
	size_t n;
	struct unix_table live; /* ckpt's namespace before anything was made */
	bool have_live;
	int anon; /* an unnamed dgram socket, to send as unnamed senders */
};

#define RFAIL(st, u, r, fmt, ...)                                                                  \
	log_fail(&(st)->ctx->log, (r), "unix %s socket:[%llu]: " fmt,                              \
		 unix_type_name((u)->e->type), (unsigned long long)(u)->e->ino, ##__VA_ARGS__)

static struct unix_robj *robj_by_ino(struct rst_unix *st, uint64_t ino)
{
	for (size_t i = 0; ino && i < st->n; i++)
		if (st->v[i]->e->ino == ino)
			return st->v[i];
	return NULL;
}

static bool same_name(const UnixSkEntry *a, const ProtobufCBinaryData *n)
{
	return a->has_name && a->name.len == n->len && !memcmp(a->name.data, n->data, n->len);
}

/* The listener of the image bound to u's name (u was accepted from it). */
static struct unix_robj *listener_named(struct rst_unix *st, const struct unix_robj *u)
{
	for (size_t i = 0; u && u->e->has_name && i < st->n; i++)
		if (st->v[i]->e->state == UNIX_ST_LISTEN && st->v[i]->e->type == u->e->type &&
		    st->v[i] != u && same_name(st->v[i]->e, &u->e->name))
			return st->v[i];
	return NULL;
}

static bool pending_has(const UnixSkEntry *l, uint64_t ino)
{
	int seen = 0;
	for (size_t i = 0; i < l->n_pending; i++)
		seen += l->pending[i]->client == ino;
	return seen == 1;
}

/* Resolves and checks the links between sockets: peers, listeners. */
static int link_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		const UnixSkEntry *e = u->e;
		if (robj_by_ino(st, e->ino) != u)
			return RFAIL(st, u, -EINVAL, "defined twice in the image");
		u->peer = e->has_peer ? robj_by_ino(st, e->peer) : NULL;
		u->listener = e->has_listener ? robj_by_ino(st, e->listener) : NULL;
		if (e->has_peer && e->peer && (!u->peer || u->peer->e->type != e->type))
			return RFAIL(st, u, -EINVAL, "its peer is not in the image");
		if (e->state == UNIX_ST_CONNECTED && u->peer &&
		    (u->peer->e->state != UNIX_ST_CONNECTED || u->peer->e->peer != e->ino))
			return RFAIL(st, u, -EINVAL, "its peer is not connected to it");
		if (e->state == UNIX_ST_PENDING &&
		    (!u->listener || u->listener->e->state != UNIX_ST_LISTEN ||
		     u->listener->e->type != e->type || !pending_has(u->listener->e, e->ino)))
			return RFAIL(st, u, -EINVAL, "its listener does not hold it");
		for (size_t j = 0; j < e->n_pending; j++) {
			struct unix_robj *c = robj_by_ino(st, e->pending[j]->client);
			if (e->pending[j]->client &&
			    (!c || c->e->state != UNIX_ST_PENDING || c->e->listener != e->ino))
				return RFAIL(st, u, -EINVAL, "pending connection %zu is not valid",
					     j);
		}
		if (e->type == SOCK_DGRAM && u->peer) {
			const UnixSkEntry *p = u->peer->e;
			u->pair = u->peer != u && p->has_peer && p->peer == e->ino &&
				  (!e->has_name || !p->has_name);
			if (!u->pair && !p->has_name)
				return RFAIL(st, u, -EINVAL, "connected to an unnamed socket");
		}
	}
	return 0;
}

/* Is a socket of ckpt's namespace (other than the ones being made) bound
 * to the file st? */
static bool path_in_use(struct rst_unix *st, const struct stat *s)
{
	if (!st->have_live) {
		if (unix_table_dump(&st->live) < 0)
			return true;
		st->have_live = true;
	}
	for (size_t i = 0; i < st->live.n; i++) {
		const struct usk *k = &st->live.v[i];
		if (k->has_vfs && k->vfs_ino == s->st_ino &&
		    (k->vfs_dev >> 20) == major(s->st_dev) &&
		    (k->vfs_dev & 0xfffff) == minor(s->st_dev))
			return true;
	}
	return false;
}

/* Makes room for binding at path: a stale socket file there is removed. */
static int clear_path(struct rst_unix *st, struct unix_robj *u, const char *path)
{
	struct stat s;
	if (lstat(path, &s) < 0)
		return errno == ENOENT ? 0 : RFAIL(st, u, -errno, "cannot look at %s: %m", path);
	if (!S_ISSOCK(s.st_mode))
		return RFAIL(st, u, -EEXIST, "%s exists and is not a socket", path);
	if (path_in_use(st, &s))
		return RFAIL(st, u, -EADDRINUSE, "%s is in use by a live socket", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return RFAIL(st, u, -errno, "cannot remove the stale socket file %s: %m", path);
	return 0;
}

/* bind(2) of a path name as it was given: a relative name from the
 * directory it was resolved in (ckpt's cwd moves there and back). */
static int bind_path(int s, const UnixSkEntry *e)
{
	struct sockaddr_un a;
	socklen_t alen = unix_mkaddr(&a, e->name.data, e->name.len - 1);
	const char *name = (const char *)e->name.data;
	if (name[0] == '/')
		return bind(s, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
	size_t dl = strlen(e->path) - strlen(name) - 1;
	_cleanup_free_ char *dir = strndup(e->path, dl ? dl : 1);
	if (!dir)
		return -ENOMEM;
	_cleanup_close_ int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0 || dfd < 0 || fchdir(dfd) < 0)
		return -errno;
	int r = bind(s, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
	if (fchdir(cwd) < 0)
		abort(); /* ckpt's own cwd is gone: nothing sane is left to do */
	return r;
}

/* Binds s to e's name; u is the socket it is for (messages, opath). */
static int bind_name(struct rst_unix *st, struct unix_robj *u, int s, const UnixSkEntry *e)
{
	if (!e->has_name)
		return 0;
	if (unix_name_abstract(&e->name)) {
		struct sockaddr_un a;
		socklen_t alen = unix_mkaddr(&a, e->name.data, e->name.len);
		if (bind(s, (struct sockaddr *)&a, alen) == 0)
			return 0;
		return RFAIL(st, u, -errno, "cannot bind the abstract name @%.*s: %m",
			     (int)e->name.len - 1, (const char *)e->name.data + 1);
	}
	int r = clear_path(st, u, e->path);
	if (r < 0)
		return r;
	r = bind_path(s, e);
	if (r < 0)
		return RFAIL(st, u, r, "cannot bind %s: %s", (const char *)e->name.data,
			     strerror(-r));
	struct stat made;
	if (lstat(e->path, &made) == 0) {
		u->made = true;
		u->made_dev = made.st_dev;
		u->made_ino = made.st_ino;
	}
	if (e->has_path_mode &&
	    (chmod(e->path, e->path_mode) < 0 || lchown(e->path, e->path_uid, e->path_gid) < 0))
		return RFAIL(st, u, -errno, "cannot set the mode and owner of %s: %m", e->path);
	return 0;
}

/* After bind: the O_PATH fd ckpt reaches it by; unlink if it was gone. */
static int after_bind(struct rst_unix *st, struct unix_robj *u, int s)
{
	if (!u->e->has_name || unix_name_abstract(&u->e->name))
		return 0;
	if (u->opath < 0)
		u->opath = ioctl(s, SIOCUNIXFILE);
	if (u->e->path_gone && unlink(u->e->path) < 0)
		return RFAIL(st, u, -errno, "cannot remove %s, unlinked at checkpoint: %m",
			     u->e->path);
	return 0;
}

static socklen_t robj_addr(const struct unix_robj *u, struct sockaddr_un *a)
{
	const UnixSkEntry *e = u->e;
	if (unix_name_abstract(&e->name))
		return unix_mkaddr(a, e->name.data, e->name.len);
	if (u->opath >= 0)
		return unix_opath_addr(a, u->opath);
	return unix_mkaddr(a, (const uint8_t *)e->path, strlen(e->path) + 1);
}

static int new_socket(struct rst_unix *st, struct unix_robj *u, int *ret)
{
	int s = socket(AF_UNIX, (int)u->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return RFAIL(st, u, -errno, "cannot make a socket: %m");
	int r = unix_opts_apply(s, u->e->opts);
	if (r < 0) {
		close(s);
		return RFAIL(st, u, r, "cannot set its options: %s", strerror(-r));
	}
	*ret = s;
	return 0;
}

/* Phase 1: every socket but the connected stream/seqpacket ones. */
static int create_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r, sv[2];
		if (u->fd >= 0 || u->e->state == UNIX_ST_CONNECTED)
			continue;
		if (!u->pair) {
			if ((r = new_socket(st, u, &u->fd)) < 0)
				return r;
			continue;
		}
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
			return RFAIL(st, u, -errno, "cannot make a socketpair: %m");
		u->fd = sv[0];
		u->peer->fd = sv[1];
		if ((r = unix_opts_apply(u->fd, u->e->opts)) < 0 ||
		    (r = unix_opts_apply(u->peer->fd, u->peer->e->opts)) < 0)
			return RFAIL(st, u, r, "cannot set its options: %s", strerror(-r));
	}
	return 0;
}

/* Phases 2 and 3: names, then listen. */
static int bind_all(struct rst_unix *st)
{
	/* names unlinked at checkpoint first: their path may be another's now */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < st->n; i++) {
			struct unix_robj *u = st->v[i];
			if (u->fd < 0 || !u->e->has_name || u->e->path_gone != (pass == 0))
				continue;
			/* an unlinked name where no one sees it; in place if
			 * ckpt may not make a mount namespace */
			int r = pass == 0 && !unix_name_abstract(&u->e->name)
					? unix_bind_hidden(u->fd, u->e, &u->opath)
					: -EPERM;
			if (r == -EPERM) {
				r = bind_name(st, u, u->fd, u->e);
				if (r == 0)
					r = after_bind(st, u, u->fd);
			} else if (r < 0)
				return RFAIL(st, u, r, "cannot bind %s (unlinked at checkpoint) in a "
					     "private mount namespace: %s", u->e->path, strerror(-r));
			if (r < 0)
				return r;
		}
	}
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int bl = (int)MAX(u->e->backlog, u->e->n_pending);
		if (u->e->state == UNIX_ST_LISTEN && listen(u->fd, bl) < 0)
			return RFAIL(st, u, -errno, "cannot listen: %m");
	}
	return 0;
}

static int connect_to(int s, const struct unix_robj *to)
{
	struct sockaddr_un a;
	socklen_t alen = robj_addr(to, &a);
	return connect(s, (struct sockaddr *)&a, alen) < 0 ? -errno : 0;
}

/* Connects c to listener l and accepts: *ret is the accepted socket. */
static int connect_accept(int c, int lfd, const struct unix_robj *l, int *ret)
{
	int r = connect_to(c, l);
	if (r < 0)
		return r;
	*ret = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	return *ret < 0 ? -errno : 0;
}

/* A stand-in listener bound to a's name (the listener a came from is
 * closed): made, connected to, and closed again. */
static int temp_listener(struct rst_unix *st, struct unix_robj *a, int c)
{
	_cleanup_close_ int l = socket(AF_UNIX, (int)a->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct unix_robj tl = {.e = a->e, .opath = -1};
	int r;

	if (l < 0)
		return RFAIL(st, a, -errno, "cannot make a socket: %m");
	if ((r = bind_name(st, a, l, a->e)) < 0)
		return r;
	if (listen(l, 1) < 0)
		return RFAIL(st, a, -errno, "cannot listen: %m");
	if (!unix_name_abstract(&a->e->name))
		tl.opath = ioctl(l, SIOCUNIXFILE);
	r = connect_accept(c, l, &tl, &a->fd);
	if (tl.opath >= 0)
		close(tl.opath);
	if (r < 0)
		return RFAIL(st, a, r, "cannot connect it: %s", strerror(-r));
	return after_bind(st, a, a->fd);
}

/* Phase 4: a connected pair. The side named like a listener (or named at
 * all) is the accepted one; the other connects; a closed peer is a
 * stand-in closed once the queue is filled. */
static int make_conn(struct rst_unix *st, struct unix_robj *x)
{
	struct unix_robj *y = x->peer, *a = x, *c = y, *l = listener_named(st, x);
	int cfd = -1, r;

	if (!l && (l = listener_named(st, y)))
		a = y, c = x;
	else if (!l && !x->e->has_name && y && y->e->has_name)
		a = y, c = x;
	if (!a->e->has_name) { /* neither has a name */
		int sv[2];
		if (socketpair(AF_UNIX, (int)x->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
			return RFAIL(st, x, -errno, "cannot make a socketpair: %m");
		x->fd = sv[0];
		*(y ? &y->fd : &x->tmp_peer) = sv[1];
		if ((r = unix_opts_apply(x->fd, x->e->opts)) == 0)
			r = y ? unix_opts_apply(y->fd, y->e->opts)
			      : unix_set_buf(sv[1], true, BIG_SNDBUF);
		return r < 0 ? RFAIL(st, x, r, "cannot set its options: %s", strerror(-r)) : 0;
	}
	if (c) {
		if ((r = new_socket(st, c, &c->fd)) < 0 ||
		    (r = bind_name(st, c, c->fd, c->e)) < 0 || (r = after_bind(st, c, c->fd)) < 0)
			return r;
		cfd = c->fd;
	} else {
		cfd = x->tmp_peer =
		    socket(AF_UNIX, (int)x->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (cfd < 0 || unix_set_buf(cfd, true, BIG_SNDBUF) < 0)
			return RFAIL(st, x, -errno, "cannot make a socket: %m");
	}
	if (l) {
		r = connect_accept(cfd, l->fd, l, &a->fd);
		if (r < 0)
			return RFAIL(st, a, r, "cannot connect it through its listener: %s",
				     strerror(-r));
		if (a->opath < 0)
			a->opath = l->opath >= 0 ? fcntl(l->opath, F_DUPFD_CLOEXEC, 0) : -1;
	} else if ((r = temp_listener(st, a, cfd)) < 0) {
		return r;
	}
	r = unix_opts_apply(a->fd, a->e->opts);
	return r < 0 ? RFAIL(st, a, r, "cannot set its options: %s", strerror(-r)) : 0;
}

/* Where u is in the image, for messages: "held by pid P fd F". */
static const char *holder(struct rst_unix *st, const struct unix_robj *u, char *buf, size_t len)
{
	snprintf(buf, len, "held by no task");
	for (size_t i = 0; i < st->ctx->nimage; i++) {
		int fd;
		if (fdtable_rst_fd_of(&st->ctx->tasks[i], u->e->id, &fd) == 0) {
			snprintf(buf, len, "held by pid %d fd %d", st->ctx->tasks[i].pid, fd);
			break;
		}
	}
	return buf;
}

/* connect(2) of s to u's external name; a full backlog is waited for a while. */
static int connect_external(int s, const UnixSkEntry *e)
{
	struct sockaddr_un a;
	socklen_t alen = unix_mkaddr(&a, e->external.data, e->external.len);
	for (int tries = 0;; tries++) {
		if (connect(s, (struct sockaddr *)&a, alen) == 0)
			return 0;
		if (errno != EAGAIN || tries == 200)
			return -errno;
		usleep(10000);
	}
}

static int external_fail(struct rst_unix *st, struct unix_robj *u, int r)
{
	char nb[NAME_BUF + 2], hb[64];
	return RFAIL(st, u, r,
		     "%s: cannot connect it again to %s, its peer outside the image (--external "
		     "unix): %s",
		     holder(st, u, hb, sizeof(hb)),
		     name_str(u->e->external.data, u->e->external.len, nb, sizeof(nb)),
		     strerror(-r));
}

/* Phase 5 of prepare: stream and seqpacket sockets whose peer was outside
 * the image connect anew to its name (the server sees a new client);
 * dgram ones see that the name is there (they connect after their queue
 * is refilled, phase 7). */
static int external_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r;
		if (!u->e->has_external)
			continue;
		if (u->e->type == SOCK_DGRAM) {
			_cleanup_close_ int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			if (probe < 0 || (r = connect_external(probe, u->e)) < 0)
				return external_fail(st, u, probe < 0 ? -errno : r);
			continue;
		}
		if ((r = new_socket(st, u, &u->fd)) < 0 ||
		    (r = bind_name(st, u, u->fd, u->e)) < 0 || (r = after_bind(st, u, u->fd)) < 0)
			return r;
		if ((r = connect_external(u->fd, u->e)) < 0)
			return external_fail(st, u, r);
	}
	return 0;
}

static int conn_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		if (u->e->state == UNIX_ST_CONNECTED && u->fd < 0 && !u->e->has_external) {
			int r = make_conn(st, u);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/*
 * Sends m again from s (to `to` if not NULL) with the fds it carries, as
 * ckpt holds their objects now (every object is prepared), and its
 * sender's credentials, a sender of the image by the pid it has now;
 * shown: the receiver shows credentials, which must then be exactly those.
 */
static int send_msg(struct rst_unix *st, int s, const UnixMsg *m, uint32_t type, bool shown,
		    const struct sockaddr_un *to, socklen_t tolen)
{
	int rights[1 + RIGHTS_MAX];
	UnixMsg c = *m;

	rights[0] = (int)m->n_fds;
	for (size_t i = 0; i < m->n_fds; i++) {
		int r = fdtable_local_fd(st->ctx, m->fds[i], &rights[1 + i]);
		if (r < 0)
			return r;
	}
	struct rst_task *t = m->has_pid ? tree_find(st->ctx, (pid_t)m->pid) : NULL;
	if (t && t->pup.pid > 0)
		c.pid = (uint32_t)t->pup.pid;
	unsigned fl = (type == SOCK_STREAM ? UNIX_SEND_STREAM : 0) | (shown ? UNIX_SEND_STRICT : 0);
	return unix_send(s, &c, m->n_fds ? rights : NULL, to, tolen, fl);
}

/* Does u show the credentials of what it receives? */
static bool shows_creds(const struct unix_robj *u)
{
	return u->e->opts->passcred || u->e->opts->passpidfd;
}

static int msg_fail(struct rst_unix *st, struct unix_robj *u, int r, const char *what, size_t i,
		    const UnixMsg *m)
{
	if ((r == -ESRCH || r == -EPERM) && m->has_pid)
		return RFAIL(st, u, r,
			     "cannot put %s %zu back with its credentials (pid %u uid %u gid %u, "
			     "shown by SO_PASSCRED): %s",
			     what, i, m->pid, m->uid, m->gid, strerror(-r));
	return RFAIL(st, u, r, "cannot put %s %zu back: %s%s", what, i, strerror(-r),
		     r == -EAGAIN ? " (more than net.unix.max_dgram_qlen?)" : "");
}

/* The messages v, sent again from s; u is the receiver. */
static int send_queue(struct rst_unix *st, struct unix_robj *u, int s, UnixMsg **v, size_t n,
		      bool shown, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		int r = send_msg(st, s, v[i], u->e->type, shown, NULL, 0);
		if (r < 0)
			return msg_fail(st, u, r, what, i, v[i]);
	}
	return 0;
}

/* Phase 5: the pending connections of each listener, in order. */
static int pending_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *l = st->v[i];
		for (size_t j = 0; j < l->e->n_pending; j++) {
			const UnixPending *p = l->e->pending[j];
			struct unix_robj *c = robj_by_ino(st, p->client);
			_cleanup_close_ int tmp = -1;
			int s = c ? c->fd : -1, r = 0;
			if (!c) { /* its client was closed: a stand-in, closed after */
				s = tmp = socket(AF_UNIX,
						 (int)l->e->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
				r = s < 0 ? -errno : unix_set_buf(s, true, BIG_SNDBUF);
			}
			if (r == 0)
				r = connect_to(s, l);
			if (r < 0)
				return RFAIL(st, l, r, "cannot remake pending connection %zu: %s",
					     j, strerror(-r));
			char what[64];
			snprintf(what, sizeof(what), "pending connection %zu's message", j);
			r = send_queue(st, l, s, p->queue, p->n_queue, shows_creds(l), what);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* The socket to send a datagram from, as the sender named in m. */
static int dgram_sender(struct rst_unix *st, struct unix_robj *u, const UnixMsg *m, int *ret,
			int *ret_tmp)
{
	*ret_tmp = -1;
	if (!m->has_from) {
		if (st->anon < 0) {
			st->anon = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
			if (st->anon < 0 || unix_set_buf(st->anon, true, BIG_SNDBUF) < 0)
				return RFAIL(st, u, -errno, "cannot make a socket: %m");
		}
		*ret = st->anon;
		return 0;
	}
	for (size_t i = 0; i < st->n; i++) {
		const UnixSkEntry *e = st->v[i]->e;
		if (e->type == SOCK_DGRAM && same_name(e, &m->from) && st->v[i]->fd >= 0) {
			*ret = st->v[i]->fd;
			return 0;
		}
	}
	if (m->from.data[0]) /* a path: refused at checkpoint */
		return RFAIL(st, u, -EINVAL, "a queued message from %.*s, not in the image",
			     (int)m->from.len, (const char *)m->from.data);
	/* an abstract sender since closed: a stand-in bound to its name */
	struct sockaddr_un a;
	socklen_t alen = unix_mkaddr(&a, m->from.data, m->from.len);
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0 || unix_set_buf(s, true, BIG_SNDBUF) < 0 ||
	    bind(s, (struct sockaddr *)&a, alen) < 0) {
		int e = -errno;
		if (s >= 0)
			close(s);
		return RFAIL(st, u, e, "cannot send as @%.*s: %s", (int)m->from.len - 1,
			     (const char *)m->from.data + 1, strerror(-e));
	}
	*ret = *ret_tmp = s;
	return 0;
}

static int fill_dgram(struct rst_unix *st, struct unix_robj *u)
{
	struct sockaddr_un to;
	if (!u->e->n_queue)
		return 0;
	if (!u->pair && !u->e->has_name)
		return RFAIL(st, u, -EINVAL, "an unnamed socket holding queued messages");
	socklen_t tolen = u->pair ? 0 : robj_addr(u, &to);
	for (size_t i = 0; i < u->e->n_queue; i++) {
		const UnixMsg *m = u->e->queue[i];
		int s = u->pair ? u->peer->fd : -1, tmp = -1, r = 0;
		if (!u->pair)
			r = dgram_sender(st, u, m, &s, &tmp);
		if (r < 0)
			return r;
		r = send_msg(st, s, m, SOCK_DGRAM, shows_creds(u), u->pair ? NULL : &to, tolen);
		if (tmp >= 0)
			close(tmp);
		if (r < 0)
			return msg_fail(st, u, r, "queued message", i, m);
	}
	return 0;
}

/* Phase 6: the receive queues, sent again from the peer's side. */
static int fill_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r = 0;
		if (u->e->type == SOCK_DGRAM) {
			r = fill_dgram(st, u);
		} else if (u->e->state == UNIX_ST_CONNECTED) {
			int from = u->peer ? u->peer->fd : u->tmp_peer;
			r = send_queue(st, u, from, u->e->queue, u->e->n_queue, shows_creds(u),
				       "queued message");
		}
		if (u->tmp_peer >= 0) { /* its peer was closed */
			close(u->tmp_peer);
			u->tmp_peer = -1;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Phase 7: dgram connect()s, once the queues are full. */
static int dgram_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r = 0;
		if (u->e->type != SOCK_DGRAM || u->pair || (!u->e->has_peer && !u->e->has_external))
			continue;
		if (u->e->has_external) {
			if ((r = connect_external(u->fd, u->e)) < 0)
				return external_fail(st, u, r);
			continue;
		}
		if (u->peer) {
			r = connect_to(u->fd, u->peer);
		} else { /* connected to a socket since closed */
			_cleanup_close_ int tmp = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			struct sockaddr_un a = {.sun_family = AF_UNIX};
			socklen_t alen = sizeof(sa_family_t);
			if (tmp < 0 || bind(tmp, (struct sockaddr *)&a, alen) < 0 ||
			    getsockname(tmp, (struct sockaddr *)&a, &(socklen_t){sizeof(a)}) < 0)
				r = -errno;
			alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 6);
			if (r == 0 && connect(u->fd, (struct sockaddr *)&a, alen) < 0)
				r = -errno;
		}
		if (r < 0)
			return RFAIL(st, u, r, "cannot connect it to its peer: %s", strerror(-r));
	}
	return 0;
}

/* Phase 8: buffer sizes, SO_PEEK_OFF, backlog, shutdown, O_NONBLOCK. */
static int finish_all(struct rst_unix *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		const UnixSkEntry *e = u->e;
		int r = unix_opts_finish(u->fd, e->opts);
		if (r == 0 && e->state == UNIX_ST_LISTEN && listen(u->fd, (int)e->backlog) < 0)
			r = -errno;
		if (r == 0)
			r = unix_shut(u->fd, e->shutdown);
		if (r == 0 && !(e->flags & O_NONBLOCK) &&
		    fcntl(u->fd, F_SETFL, fcntl(u->fd, F_GETFL) & ~O_NONBLOCK) < 0)
			r = -errno;
		if (r < 0)
			return RFAIL(st, u, r, "cannot set its final state: %s", strerror(-r));
		if (u->opath >= 0) {
			close(u->opath);
			u->opath = -1;
		}
	}
	return 0;
}

/* Removes the socket file bind made for u, if it is still that file. */
static void unmake_file(const struct unix_robj *u)
{
	struct stat s;
	if (u->made && lstat(u->e->path, &s) == 0 && s.st_dev == u->made_dev &&
	    s.st_ino == u->made_ino)
		unlink(u->e->path);
}

typedef int (*phase_fn)(struct rst_unix *st);

/* Runs the phases over every socket of the image; on failure removes the
 * socket files made. */
static int run_phases(struct rst_ctx *ctx, const phase_fn *phases, size_t n)
{
	struct rst_unix st = {.ctx = ctx, .anon = -1};
	int r = 0;

	size_t count = 0;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));)
		count++;
	st.v = calloc(count + 1, sizeof(*st.v));
	if (!st.v)
		return -ENOMEM;
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));)
		st.v[st.n++] = o->ptr;
	for (size_t i = 0; st.n && r == 0 && i < n; i++)
		r = phases[i](&st);
	for (size_t i = 0; r < 0 && i < st.n; i++)
		unmake_file(st.v[i]);
	if (st.anon >= 0)
		close(st.anon);
	unix_table_free(&st.live);
	free(st.v);
	return r;
}

/* RESTART_VERIFY, a dry run beside the live original: names are checked,
 * not bound (the original holds them), nothing connects to anything (an
 * external peer would see a client); each socket is a bare one of its type,
 * for the fd tables. */
static int verify_all(struct rst_unix *st)
{
	char why[PATH_MAX + 128];
	for (size_t i = 0; i < st->n; i++) {
		struct unix_robj *u = st->v[i];
		int r = unix_name_bindable(u->e, why, sizeof(why));
		if (r < 0)
			return RFAIL(st, u, r, "%s", why);
		if (u->e->has_external && !unix_name_abstract(&u->e->external)) {
			struct stat s;
			const char *p = (const char *)u->e->external.data;
			if (stat(p, &s) < 0 || !S_ISSOCK(s.st_mode))
				return RFAIL(st, u, -ECONNREFUSED, "its peer outside the image, %s, "
					     "is not there", p);
		}
		if (u->fd < 0 && (r = new_socket(st, u, &u->fd)) < 0)
			return r;
	}
	return 0;
}

/* Before any process exists: the sockets, their names and connections. */
static int unix_prepare(struct rst_ctx *ctx)
{
	static const phase_fn phases[] = {link_all, create_all, bind_all, conn_all, external_all};
	static const phase_fn verify[] = {link_all, verify_all};
	if (ctx->flags & RESTART_VERIFY)
		return run_phases(ctx, verify, ARRAY_SIZE(verify));
	return run_phases(ctx, phases, ARRAY_SIZE(phases));
}

/* Once the processes exist (their pids are what queued messages name as
 * their senders): the queues, then the final state. */
static int unix_tree_ready(struct rst_ctx *ctx)
{
	static const phase_fn phases[] = {pending_all, fill_all, dgram_all, finish_all};
	if (ctx->flags & RESTART_VERIFY)
		return 0;
	return run_phases(ctx, phases, ARRAY_SIZE(phases));
}

static int unix_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd)
{
	struct unix_robj *u = robj;
	if (u->fd < 0)
		return log_fail(&ctx->log, -EINVAL, "unix socket:[%llu] was not made",
				(unsigned long long)u->e->ino);
	*ret_fd = u->fd;
	return 0;
}

static void unix_free_robj(void *ptr)
{
	struct unix_robj *u = ptr;
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	if (u->tmp_peer >= 0)
		close(u->tmp_peer);
	if (u->opath >= 0)
		close(u->opath);
	unix_sk_entry__free_unpacked(u->e, NULL);
	free(u);
}

/* Before --kill: could this caller bind the names again? (sockets held by t) */
static int unix_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	char why[PATH_MAX + 128];
	for (struct obj *o = NULL; (o = objhash_next_of(&ctx->objs, KIND_unix, o));) {
		struct unix_obj *u = o->ptr;
		if (u->is_reg || u->pid != t->pid)
			continue;
		int r = unix_name_bindable(&u->e, why, sizeof(why));
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d fd %d (unix socket:[%llu]): %s", t->pid,
					u->fd, (unsigned long long)u->e.ino, why);
	}
	return 0;
}

static const ProtobufCMessageDescriptor *unix_descriptor(uint32_t sub)
{
	return sub == REC_SUB(UNIX_SK_ENTRY) ? &unix_sk_entry__descriptor : NULL;
}

const struct kind_ops unix_ops = {
    .collect = unix_collect,
    .fd_claim = unix_fd_claim,
    .fd_collect = unix_fd_collect,
    .fd_get = unix_fd_get,
    .collect_end = unix_collect_end,
    .finish = unix_finish,
    .check_restore = unix_check_restore,
    .dump = unix_dump,
    .load = unix_load,
    .prepare = unix_prepare,
    .tree_ready = unix_tree_ready,
    .free_obj = unix_free_obj,
    .free_robj = unix_free_robj,
    .descriptor = unix_descriptor,
};
