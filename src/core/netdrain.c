/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Step "hold out" of a checkpoint: the tree's TCP listeners emptied of
 * the connections the kernel has queued for them, before the freeze.
 *
 * A connection in a listener's accept queue cannot be restored (no kernel
 * interface adds one to a queue: DESIGN.md, "Inet sockets"), so a listener
 * frozen with one is refused. A busy server has one at any instant: its
 * clients go on connecting while ckpt seizes it, and every connection
 * made between the server's stop and the network lock waits in the queue.
 * So before the seize, while the tree runs, the first SYN of every new
 * client of the tree's listening ports is dropped (an nftables table of
 * its own, removed by the guardian if ckpt dies); the clients retransmit
 * it, as they would under the network lock. Then ckpt waits, at most
 * HOLD_OUT_MS, until the program has accepted what was queued and no
 * handshake of those ports is half made (a request socket whose final ACK
 * would queue one more). From then on no listener's queue can grow; the
 * seize freezes the tree and the network lock, which drops everything to
 * those ports, replaces this table (ckpt_netlock_lock, then
 * ckpt_netlock_unhold). A program that does not accept in time is
 * refused at collect as before, its queue named.
 *
 * Only the root's network namespace is looked at; a listener's queue in
 * another namespace of the tree is refused as before. When that namespace
 * is not ckpt's (ckpt run --net), every listener in it is taken as the
 * tree's, without a walk of its fds.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/ctx.h"
#include "core/netlock.h"
#include "core/sequence.h"
#include "net/diag.h"
#include "net/lock.h"
#include "puppet/puppet.h"
#include "util/cleanup.h"
#include "util/proc.h"

#define HOLD_OUT_MS    1000u
#define HOLD_OUT_PORTS 64u /* listening ports held out at most; more: none are */

struct listener {
	unsigned long ino;
	uint16_t port;
	uint32_t queued; /* its accept queue */
	bool tree;	 /* a socket of the tree's */
};

struct listeners {
	struct listener v[HOLD_OUT_PORTS * 4];
	size_t n;
	bool more; /* the namespace has more listeners than v holds */
};

static int add_listener(const struct inet_diag_msg *m, void *arg)
{
	struct listeners *ls = arg;
	if (ls->n == sizeof(ls->v) / sizeof(ls->v[0])) {
		ls->more = true;
		return 0;
	}
	ls->v[ls->n++] = (struct listener){
	    .ino = m->idiag_inode, .port = ntohs(m->id.idiag_sport), .queued = m->idiag_rqueue};
	return 0;
}

/* Every listener of the namespace (both families). */
static int list_listeners(int fd, struct listeners *ls)
{
	ls->n = 0;
	ls->more = false;
	int r = tcp_diag_dump(fd, AF_INET, 1u << TCP_LISTEN, add_listener, ls);
	return r < 0 ? r : tcp_diag_dump(fd, AF_INET6, 1u << TCP_LISTEN, add_listener, ls);
}

/* Marks the listeners whose inode a fd of pid is; false if pid is gone. */
static void mark_fds(pid_t pid, struct listeners *ls, size_t *found)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while (*found < ls->n && (e = readdir(d))) {
		char link[64];
		ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		unsigned long ino;
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			continue;
		for (size_t i = 0; i < ls->n; i++)
			if (ls->v[i].ino == ino && !ls->v[i].tree) {
				ls->v[i].tree = true;
				(*found)++;
			}
	}
}

/* Appends the children of every thread of pid to *kids (n, cap). */
static int add_children(pid_t pid, pid_t **kids, size_t *n, size_t *cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[96], text[4096];
		snprintf(p, sizeof(p), "/proc/%d/task/%.16s/children", pid, e->d_name);
		_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t len = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
		if (len <= 0)
			continue;
		text[len] = '\0';
		for (char *s = text, *end; *s; s = end) {
			long c = strtol(s, &end, 10);
			if (end == s)
				break;
			if (*n == *cap) {
				size_t nc = *cap ? 2 * *cap : 64;
				pid_t *v = realloc(*kids, nc * sizeof(*v));
				if (!v)
					return -ENOMEM;
				*kids = v;
				*cap = nc;
			}
			(*kids)[(*n)++] = (pid_t)c;
		}
	}
	return 0;
}

/* Marks the listeners that belong to the tree of root (it runs: a process
 * that comes or goes meanwhile is seen or not, which at worst leaves a
 * queue for collect to refuse). The number marked. */
static int mark_tree(pid_t root, struct listeners *ls)
{
	_cleanup_free_ pid_t *pids = malloc(sizeof(*pids));
	size_t n = 1, cap = 1, found = 0;
	if (!pids)
		return -ENOMEM;
	pids[0] = root;
	for (size_t i = 0; i < n && found < ls->n; i++) {
		mark_fds(pids[i], ls, &found);
		int r = add_children(pids[i], &pids, &n, &cap);
		if (r < 0)
			return r;
	}
	return (int)found;
}

struct pending {
	const struct listeners *ls;
	uint32_t queued, half; /* accepted not yet; handshakes half made */
};

static int count_queued(const struct inet_diag_msg *m, void *arg)
{
	struct pending *p = arg;
	for (size_t i = 0; i < p->ls->n; i++) {
		const struct listener *l = &p->ls->v[i];
		if (!l->tree || l->port != ntohs(m->id.idiag_sport))
			continue;
		if (m->idiag_state != TCP_LISTEN) {
			p->half++; /* a handshake to one of the tree's ports */
			break;
		}
		if (m->idiag_inode == l->ino) {
			p->queued += m->idiag_rqueue;
			break;
		}
	}
	return 0;
}

/* What the tree's listeners still hold: queued and half made. */
static int pending_of(int fd, const struct listeners *ls, struct pending *p)
{
	*p = (struct pending){.ls = ls};
	/* TCP_SYN_RECV asks for the request sockets too (TCP_NEW_SYN_RECV) */
	uint32_t states = (1u << TCP_LISTEN) | (1u << TCP_SYN_RECV);
	int r = tcp_diag_dump(fd, AF_INET, states, count_queued, p);
	return r < 0 ? r : tcp_diag_dump(fd, AF_INET6, states, count_queued, p);
}

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The table that holds new clients out, installed with its removal in the
 * guardian's hands first. */
static int hold_ports(struct ckpt_ctx *ctx, int ns, const struct listeners *ls,
		      struct netlock **ret)
{
	char name[NETLOCK_NAME_MAX];
	struct netlock *nl = NULL;
	netlock_name(name, sizeof(name));
	int r = netlock_new(ns, name, &nl);
	for (size_t i = 0; r >= 0 && i < ls->n; i++)
		if (ls->v[i].tree)
			r = netlock_add_syn_port(nl, ls->v[i].port);
	if (r >= 0)
		r = ckpt_netlock_arm(ctx->guard, nl);
	if (r >= 0)
		r = netlock_install(nl);
	if (r < 0) {
		log_debug(&ctx->log, "pid %d: new connections cannot be held out (%s): %s",
			  ctx->pid, strerror(-r),
			  nl && netlock_error(nl)[0] ? netlock_error(nl) : "");
		netlock_free(nl);
		return r;
	}
	*ret = nl;
	return 0;
}

int ckpt_netlock_hold(struct ckpt_ctx *ctx)
{
	/* left out anyway; a pre-copy round touches no socket */
	if (ctx->flags & (CKPT_SKIP_IN_FLIGHT | CKPT_PRECOPY))
		return 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", ctx->pid);
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return 0; /* the seize says why */
	_cleanup_close_ int fd = netns_socket(ns, AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG);
	_cleanup_free_ struct listeners *ls = calloc(1, sizeof(*ls));
	if (fd < 0 || !ls || list_listeners(fd, ls) < 0 || !ls->n)
		return 0; /* nothing to hold out, or no way to: collect refuses a queue */
	/* a namespace of the tree's own (ckpt run --net): its listeners are
	 * the tree's, no walk of its fds (10,000 links read: 0.05-0.15 s) */
	int found = 0;
	if (!proc_same_netns(ctx->pid)) {
		for (size_t i = 0; i < ls->n; i++)
			ls->v[i].tree = true;
		found = (int)ls->n;
	} else {
		found = mark_tree(ctx->pid, ls);
	}
	if (found <= 0 || ls->more)
		return found < 0 ? found : 0;

	struct pending p;
	uint64_t t_hold = ms_now();
	if (hold_ports(ctx, ns, ls, &ctx->netlock_hold) < 0 || pending_of(fd, ls, &p) < 0)
		return 0;
	uint64_t t0 = ms_now(), start = p.queued;
	log_debug(&ctx->log,
		  "pid %d: new clients of %d listener(s) held out in %llu ms, %u "
		  "connection(s) queued, %u half made",
		  ctx->pid, found, (unsigned long long)(t0 - t_hold), p.queued, p.half);
	struct timespec tick = {.tv_nsec = 500000};
	while ((p.queued || p.half) && ms_now() - t0 < HOLD_OUT_MS) {
		nanosleep(&tick, NULL);
		if (tick.tv_nsec < 8000000)
			tick.tv_nsec *= 2;
		if (pending_of(fd, ls, &p) < 0)
			break;
	}
	if (p.queued || p.half)
		log_info(&ctx->log,
			 "pid %d: its listeners still hold %u connection(s) not accepted "
			 "and %u half made after %u ms with new clients held out",
			 ctx->pid, p.queued, p.half, HOLD_OUT_MS);
	else if (start)
		log_info(&ctx->log,
			 "pid %d: new clients held out, the %llu connection(s) its "
			 "listeners had queued were accepted in %llu ms",
			 ctx->pid, (unsigned long long)start, (unsigned long long)(ms_now() - t0));
	return 0;
}

void ckpt_netlock_unhold(struct ckpt_ctx *ctx)
{
	netlock_free(TAKE_PTR(ctx->netlock_hold));
}
