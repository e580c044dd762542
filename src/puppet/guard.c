/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The guardian (see guard.h). It is forked from ckpt, possibly from a
 * program with threads (the library), so it allocates only with mmap and
 * calls nothing that takes a lock another thread may have held at fork.
 */
#include "puppet/guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "puppet/puppet.h"

/* ---- ckpt's side ---- */

static int send_all(int fd, const struct msghdr *msg, size_t len)
{
	for (;;) {
		ssize_t n = sendmsg(fd, msg, MSG_NOSIGNAL);
		if (n == (ssize_t)len)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? -errno : -EIO;
	}
}

long guard_send(struct puppet *p, struct guard_req *req, const void *in, size_t inlen)
{
	struct iovec siov[2] = { { req, sizeof(*req) }, { (void *)in, inlen } };
	struct msghdr smsg = { .msg_iov = siov, .msg_iovlen = in && inlen ? 2 : 1 };

	CKPT_FAULT(CKPT_FAULT_REQUEST);
	req->pid = p->pid;
	free(p->peek_shared); /* good until the next request only */
	p->peek_shared = NULL;
	int r = send_all(p->guard->fd, &smsg, sizeof(*req) + (in ? inlen : 0));
	return r == -EPIPE || r == -ECONNRESET ? -EPIPE : r;
}

long guard_recv(struct puppet *p, const struct guard_req *req, void *out, size_t outlen)
{
	struct guard_rep rep;
	struct iovec iov[2] = { { &rep, sizeof(rep) }, { out, outlen } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = out ? 2 : 1 };
	ssize_t n;
	while ((n = recvmsg(p->guard->fd, &msg, MSG_TRUNC)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -errno;
	if (n < (ssize_t)sizeof(rep))
		return -EPIPE; /* the guardian is gone */
	p->held = rep.held;
	p->faulted |= rep.faulted;
	p->group_stopped = rep.group_stopped;
	p->event_msg = rep.event_msg;
	p->peek_shared_n = rep.shared_n;
	if (req->op == GUARD_SEIZE) {
		p->regs0 = rep.regs0;
		p->sigmask0 = rep.sigmask0;
		p->rseq_ret = rep.rseq_ret;
		memcpy(p->rseq, rep.rseq, sizeof(p->rseq));
		p->sud_ret = rep.sud_ret;
		memcpy(p->sud, rep.sud, sizeof(p->sud));
		p->xstate_len = out && rep.len <= outlen ? rep.len : 0;
	}
	if (req->op == GUARD_SCRATCH_MAP || req->op == GUARD_SCRATCH_UNMAP) {
		p->scratch = rep.scratch;
		p->scratch_len = rep.scratch_len;
		p->stub_ip = rep.stub_ip;
	}
	if (out && rep.len > outlen)
		return -EMSGSIZE;
	return rep.ret;
}

long guard_call_in(struct puppet *p, struct guard_req *req, const void *in, size_t inlen,
		   void *out, size_t outlen)
{
	long r = guard_send(p, req, in, inlen);
	return r < 0 ? r : guard_recv(p, req, out, outlen);
}

long guard_call(struct puppet *p, struct guard_req *req, void *out, size_t outlen)
{
	return guard_call_in(p, req, NULL, 0, out, outlen);
}

/* A message with no puppet (commit, done). */
static long guard_op(struct puppet_guard *g, uint32_t op)
{
	struct puppet p = { .guard = g, .held = true, .memfd = -1 };
	struct guard_req req = { .op = op };
	return guard_call(&p, &req, NULL, 0);
}

/* req and one fd (SCM_RIGHTS), then msg (len bytes) */
static int send_with_fd(struct puppet_guard *g, struct guard_req *req, int fd, const void *msg,
			size_t len)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm = { 0 };
	struct iovec iov[2] = { { req, sizeof(*req) }, { (void *)msg, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1, .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	CKPT_FAULT(CKPT_FAULT_REQUEST);
	ssize_t n;
	while ((n = sendmsg(g->fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errno == ECONNRESET ? -EPIPE : -errno;
	return 0;
}

/*
 * No reply is waited for (one was a wakeup of the guardian before every
 * release, about 1 ms on these machines): the pidfd is opened here, while
 * the task is held, and is the task's whenever the guardian reads it, also
 * after ckpt's death (the channel's messages come before its end of file).
 * A watch the guardian cannot keep kills the task at once and fails
 * puppet_guard_done().
 */
int puppet_guard_watch(struct puppet_guard *g, pid_t pid)
{
	if (!g)
		return 0;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -errno;
	struct guard_req req = { .op = GUARD_WATCH, .pid = pid };
	int r = send_with_fd(g, &req, fd, NULL, 0);
	close(fd);
	return r;
}

int puppet_guard_on_death(struct puppet_guard *g, enum guard_when when, int fd, const void *msg,
			  size_t len)
{
	if (!g)
		return 0;
	if (len > GUARD_UNDO_MAX)
		return -EMSGSIZE;
	struct guard_req req = { .op = GUARD_ON_DEATH, .a = { (int64_t)len, when } };
	int r = send_with_fd(g, &req, fd, msg, len);
	if (r < 0)
		return r;
	struct guard_rep rep;
	ssize_t n;
	while ((n = recv(g->fd, &rep, sizeof(rep), 0)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -errno;
	return n < (ssize_t)sizeof(rep) ? -EPIPE : (int)rep.ret;
}

int puppet_guard_commit(struct puppet_guard *g)
{
	return g ? (int)guard_op(g, GUARD_COMMIT) : 0;
}

int puppet_guard_done(struct puppet_guard *g)
{
	if (!g || g->fd < 0)
		return 0;
	int r = (int)guard_op(g, GUARD_DONE);
	close(g->fd);
	g->fd = -1;
	return r < 0 ? r : 0;
}

int puppet_guard_end(struct puppet_guard *g)
{
	if (!g)
		return 0;
	int r = puppet_guard_done(g);
	int status = 0;
	while (waitpid(g->pid, &status, 0) < 0 && errno == EINTR)
		;
	free(g);
	return r;
}

/* ---- the guardian ---- */

/* A bump allocator on mmap: nothing is freed before the guardian exits, and
 * what it gives is zero (fresh anonymous memory, never given twice). Its
 * chunks are mapped populated: one call for their pages, where each page
 * was a fault of its own (dear on these paravirtualized machines). They
 * start small and double, up to 1 MiB: a page first touched costs about
 * 30 us here (the host backs it then), and a first chunk of 1 MiB cost the
 * guardian of a restart, which keeps one pidfd, 8 ms of CPU, on one of the
 * two CPUs the restart itself runs on. */
struct arena {
	char *cur;
	size_t left, next; /* next: the size of the next chunk, 0 for the first */
};

#define ARENA_CHUNK_FIRST (16u << 10)
#define ARENA_CHUNK_MAX (1u << 20)

static void *arena_alloc(struct arena *a, size_t len)
{
	len = (len + 15) & ~(size_t)15;
	if (len > a->left) {
		size_t chunk = a->next ? a->next : ARENA_CHUNK_FIRST;
		a->next = chunk < ARENA_CHUNK_MAX ? 2 * chunk : chunk;
		if (len > chunk)
			chunk = (len + 4095) & ~(size_t)4095;
		void *m = mmap(NULL, chunk, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		a->cur = m;
		a->left = chunk;
	}
	void *r = a->cur;
	a->cur += len;
	a->left -= len;
	return r;
}

struct gtask {
	struct puppet p;
	int *fds; /* its fds when the scratch area was mapped, ascending */
	size_t nfds;
};

struct undo {
	int fd;
	bool committed; /* sent if ckpt dies after commit, else before */
	size_t len;
	char msg[GUARD_UNDO_MAX];
};

struct gstate {
	struct arena arena;
	struct undo undo[GUARD_UNDO_SLOTS]; /* sent if ckpt dies */
	size_t nundo;
	/* open addressing on the tid; the tasks themselves never move (a
	 * table of the tasks was copied whole at each growth: 2.7 MB touched
	 * for 1,000 threads, a tenth of the guardian's time) */
	struct gtask **tab;
	size_t cap, n;
	bool commit, done;
	int *watched; /* pidfds to kill if ckpt dies */
	size_t nwatched, capwatched;
	int watch_err; /* a watch not kept: GUARD_DONE's reply */
};

/* pidfd kept, to kill its task if ckpt dies; if it cannot be, the task is
 * killed now and GUARD_DONE's reply fails (puppet_guard_watch). Whether it
 * was kept (else the caller closes it). */
static bool watch(struct gstate *s, int pidfd)
{
	if (pidfd < 0) {
		s->watch_err = -EBADF;
		return false;
	}
	if (s->nwatched == s->capwatched) {
		size_t cap = s->capwatched ? 2 * s->capwatched : 256;
		int *v = arena_alloc(&s->arena, cap * sizeof(int));
		if (!v) {
			syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
			s->watch_err = -ENOMEM;
			return false;
		}
		if (s->nwatched)
			memcpy(v, s->watched, s->nwatched * sizeof(int));
		s->watched = v;
		s->capwatched = cap;
	}
	s->watched[s->nwatched++] = pidfd;
	return true;
}

static size_t slot_of(const struct gstate *s, pid_t pid)
{
	size_t i = ((size_t)pid * 2654435761u) & (s->cap - 1);
	while (s->tab[i] && s->tab[i]->p.pid != pid)
		i = (i + 1) & (s->cap - 1);
	return i;
}

static struct gtask *find(struct gstate *s, pid_t pid)
{
	return s->cap ? s->tab[slot_of(s, pid)] : NULL;
}

/* pid's task, new (or reset if it was there), zero but for its pid. */
static struct gtask *add(struct gstate *s, pid_t pid)
{
	if (2 * (s->n + 1) > s->cap) {
		struct gstate ns = { .cap = s->cap ? 2 * s->cap : 256 };
		/* zero already: the arena's memory is fresh mappings */
		ns.tab = arena_alloc(&s->arena, ns.cap * sizeof(*ns.tab));
		if (!ns.tab)
			return NULL;
		for (size_t i = 0; i < s->cap; i++)
			if (s->tab[i])
				ns.tab[slot_of(&ns, s->tab[i]->p.pid)] = s->tab[i];
		s->tab = ns.tab;
		s->cap = ns.cap;
	}
	struct gtask **slot = &s->tab[slot_of(s, pid)];
	if (*slot) {
		memset(*slot, 0, sizeof(**slot));
	} else {
		*slot = arena_alloc(&s->arena, sizeof(**slot)); /* zero */
		if (!*slot)
			return NULL;
		s->n++;
	}
	(*slot)->p.pid = pid;
	(*slot)->p.memfd = -1;
	return *slot;
}

/* The fd numbers of pid, ascending; count, or -errno. With out NULL, counts. */
static long list_fds(pid_t pid, int *out, size_t max)
{
	char path[64], buf[4096];
	size_t n = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return -errno;
	for (;;) {
		long got = syscall(SYS_getdents64, d, buf, sizeof(buf));
		if (got <= 0)
			break;
		for (long off = 0; off < got;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			off += de->d_reclen;
			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			if (out && n < max)
				out[n] = atoi(de->d_name);
			n++;
		}
	}
	close(d);
	return (long)n;
}

/* /proc lists fds in order: an insertion sort (qsort may malloc) */
static void sort_ints(int *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		int x = v[i];
		size_t j = i;
		for (; j > 0 && v[j - 1] > x; j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

static bool has_int(const int *v, size_t n, int x)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid] == x)
			return true;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Notes t's fds: those that appear later are ckpt's and closed on undo. */
static int snapshot_fds(struct gstate *s, struct gtask *t)
{
	/* one listing when they fit the first guess (most tasks), else again
	 * with room for what the listing counted */
	size_t room = 64;
	for (int attempt = 0; attempt < 4; attempt++) {
		int *v = arena_alloc(&s->arena, room * sizeof(int));
		if (!v)
			return -ENOMEM;
		long m = list_fds(t->p.pid, v, room);
		if (m < 0)
			return (int)m;
		if ((size_t)m <= room) {
			sort_ints(v, (size_t)m);
			t->fds = v;
			t->nfds = (size_t)m;
			return 0;
		}
		room = (size_t)m + 16;
	}
	return -EAGAIN;
}

/* Undoes what ckpt did to a held task and releases it. */
static void put_back(struct gstate *s, struct gtask *t)
{
	struct puppet *p = &t->p;
	if (!p->held)
		return;
	long n = p->scratch && t->fds ? list_fds(p->pid, NULL, 0) : 0;
	long room = n + 16;
	int *now = n > 0 ? arena_alloc(&s->arena, (size_t)room * sizeof(int)) : NULL;
	if (now)
		n = list_fds(p->pid, now, (size_t)room);
	for (long i = 0; now && i < n && i < room; i++)
		if (!has_int(t->fds, t->nfds, now[i]))
			puppet_syscall(p, SYS_close, now[i]);
	if (puppet_scratch_unmap(p) < 0)
		p->scratch = 0;
	puppet_release(p, p->group_stopped);
}

/* ckpt is gone (or done): every task it still held is put back or killed. */
static __attribute__((noreturn)) void finish(struct gstate *s)
{
	for (size_t i = 0; !s->done && i < s->nwatched; i++)
		syscall(SYS_pidfd_send_signal, s->watched[i], SIGKILL, NULL, 0);
	for (int pass = 0; pass < 2 && s->cap; pass++) {
		for (size_t i = 0; i < s->cap; i++) {
			struct gtask *t = s->tab[i];
			if (!t || !t->p.held)
				continue;
			if (s->commit)
				puppet_kill(&t->p);
			/* processes (with their scratch and fds) first, then threads */
			else if (pass == 0 ? t->p.scratch != 0 : true)
				put_back(s, t);
		}
	}
	/* the tasks run (or are dead): what ckpt set up around them goes */
	for (size_t i = 0; !s->done && i < s->nundo; i++)
		if (s->undo[i].committed == s->commit)
			send(s->undo[i].fd, s->undo[i].msg, s->undo[i].len, MSG_NOSIGNAL | MSG_DONTWAIT);
	_exit(0);
}

/*
 * GUARD_MANY_KILL: every killed task waited for, in whatever order they
 * die. The last thread of a pid namespace's init to exit waits
 * (zap_pid_ns_processes) until its traced sibling threads are reaped:
 * waited for in list order, that thread would hold the guardian for good.
 * Bounded (10 s): one not reaped by then is left to puppet_kill. done[i]:
 * in[i], held, is reaped.
 *
 * A killed thread is usually gone within tens of microseconds: looked for
 * again soon (50 us; a 500 us step made the kill of 1,000 threads, 16 a
 * request, 30 ms longer). A process takes longer (its exit_mmap: 0.2-0.4
 * ms for a small one here), and looks every 50 us would take the CPU from
 * the dying processes (the guardian is real-time, rtprio.c): a request of
 * processes only (procs: killed by a GUARD_MANY_KILL_START before; or no
 * task in it only waited for, in[i].sig 1) sleeps until a death's SIGCHLD
 * to their tracer instead. SIGCHLD is blocked here (pending until taken:
 * none is lost between a look and the wait), and a wait ends after 2 ms
 * anyway.
 */
static void reap_killed(struct gstate *s, const struct guard_many_req *in, size_t n, bool procs,
			bool *done)
{
	bool none_waited_only = true;
	for (size_t i = 0; i < n; i++)
		none_waited_only = none_waited_only && in[i].sig != 1;
	procs = procs || none_waited_only;
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (procs)
		sigprocmask(SIG_BLOCK, &chld, &old);
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += 10;
	for (int round = 0;; round++) {
		size_t left = 0;
		for (size_t i = 0; i < n; i++) {
			struct gtask *t = done[i] ? NULL : find(s, in[i].pid);
			if (!t || !t->p.held)
				continue;
			pid_t r = waitpid(t->p.pid, NULL, WNOHANG | __WALL);
			/* any report ends the wait, as in puppet_kill */
			if ((r < 0 && errno != EINTR) || r == t->p.pid)
				done[i] = true;
			else
				left++;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!left || now.tv_sec > end.tv_sec ||
		    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			break;
		struct timespec ts = {0, 2000000};
		if (procs)
			sigtimedwait(&chld, NULL, &ts);
		else
			usleep(round < 40 ? 50 : 500);
	}
	if (procs)
		sigprocmask(SIG_SETMASK, &old, NULL);
}

/* A seize whose stop is waited for GUARD_STOP_TIMEOUT_MS at most. */
static int seize_start(struct puppet *p, pid_t pid)
{
	int r = puppet_seize_start(p, pid);
	p->stop_timeout_ms = GUARD_STOP_TIMEOUT_MS;
	p->take_skip = PUPPET_TAKE_NO_MEM; /* its memory is ckpt's business */
	return r;
}

/* SIGALRM interrupts the guardian's waitpid (seize_start) and does nothing
 * else. */
static void on_alarm(int sig)
{
	(void)sig;
}

/* GUARD_MANY: the same thing done to n tasks, one record each in data. */
static void serve_many(struct gstate *s, const struct guard_req *req,
		       const struct guard_many_req *in, size_t n, struct guard_rep *rep,
		       uint8_t *data)
{
	uint8_t xstate[GUARD_XSTATE_MAX];
	int err[PUPPET_MANY_MAX];
	size_t off = 0;
	bool seize = req->a[1] == GUARD_MANY_SEIZE, start = req->a[1] == GUARD_MANY_START;
	bool started = seize && req->a[2] == 1; /* by a GUARD_MANY_START before */

	/* all added first: adding may move the table */
	for (size_t i = 0; (seize || start) && i < n; i++) {
		struct gtask *t = started ? find(s, in[i].pid) : NULL;
		err[i] = started ? (t && !t->p.held ? 0 : -ESRCH) : add(s, in[i].pid) ? 0 : -ENOMEM;
	}
	/* all interrupted, then each waited for: their stops overlap */
	for (size_t i = 0; (seize || start) && !started && i < n; i++)
		if (err[i] == 0)
			err[i] = seize_start(&find(s, in[i].pid)->p, in[i].pid);
	if (start) {
		for (size_t i = 0; i < n; i++) {
			struct guard_many_rep m = { .ret = err[i] };
			memcpy(data + i * sizeof(m), &m, sizeof(m));
		}
		rep->len = (uint32_t)(n * sizeof(struct guard_many_rep));
		rep->held = true;
		return;
	}
	/* threads of one process (a[3]): SIGTRAP's disposition read of the
	 * first; processes: of each */
	int trap = -1;
	bool one_process = req->a[3] == 1;
	for (size_t i = 0; seize && i < n; i++) {
		struct puppet *p = err[i] == 0 ? &find(s, in[i].pid)->p : NULL;
		if (p && trap >= 0) {
			p->take_skip |= PUPPET_TAKE_NO_TRAP;
			p->trap_ignored = trap;
		}
		if (p)
			err[i] = puppet_seize_finish(p);
		if (p && err[i] == 0 && trap < 0 && one_process)
			trap = p->trap_ignored;
	}
	/* all killed, then each waited for: their deaths overlap; a thread
	 * whose process an earlier entry killed (sig 1) is only waited for,
	 * and so is a task a GUARD_MANY_KILL_START killed */
	bool kill_start = req->a[1] == GUARD_MANY_KILL_START;
	for (size_t i = 0; (req->a[1] == GUARD_MANY_KILL || kill_start) && i < n; i++) {
		struct gtask *t = find(s, in[i].pid);
		if (t && t->p.held && in[i].sig != 1)
			kill(t->p.pid, SIGKILL);
	}
	bool reaped[PUPPET_MANY_MAX] = { 0 };
	if (req->a[1] == GUARD_MANY_KILL)
		reap_killed(s, in, n, req->a[2] == 1, reaped);
	for (size_t i = 0; i < n; i++) {
		struct gtask *t = find(s, in[i].pid);
		struct guard_many_rep m = { .ret = -ESRCH };
		size_t len = 0;
		if (t && seize) {
			m.ret = err[i];
			if (m.ret == 0) {
				puppet_forget(&t->p); /* its memory is ckpt's business */
				len = sizeof(xstate);
				if (puppet_get_xstate(&t->p, xstate, &len) < 0 ||
				    off + sizeof(m) + len > GUARD_DATA_MAX -
								    (n - i - 1) * sizeof(m))
					len = 0;
				m.rseq_ret = puppet_get_rseq(&t->p, m.rseq, sizeof(m.rseq));
				m.sud_ret = puppet_sud_config(&t->p, m.sud, sizeof(m.sud));
			}
		} else if (t && req->a[1] == GUARD_MANY_RELEASE) {
			m.ret = puppet_release(&t->p, in[i].sig);
		} else if (t && kill_start) {
			m.ret = t->p.held ? 0 : -ESRCH; /* still held: reaped later */
		} else if (t && reaped[i]) {
			t->p.held = false;
			puppet_forget(&t->p);
			m.ret = 0;
		} else if (t) {
			puppet_kill(&t->p);
			m.ret = 0;
		}
		if (t) {
			m.regs0 = t->p.regs0;
			m.sigmask0 = t->p.sigmask0;
			m.held = t->p.held;
			m.group_stopped = t->p.group_stopped;
		}
		m.xstate_len = (uint32_t)len;
		memcpy(data + off, &m, sizeof(m));
		off += sizeof(m);
		memcpy(data + off, xstate, len);
		off += (len + 7) & ~(size_t)7;
	}
	rep->len = (uint32_t)off;
	rep->held = true;
}

/* GUARD_BATCH_MANY: batches run side by side in many tasks. */
static void serve_batch_many(struct gstate *s, const struct guard_req *req, uint8_t *in,
			     size_t len, struct guard_rep *rep, uint8_t *data)
{
	struct puppet *ps[PUPPET_MANY_MAX];
	struct puppet_call *calls[PUPPET_MANY_MAX];
	size_t ns[PUPPET_MANY_MAX], np = (size_t)req->a[0], at = 0, out = 0;
	uint64_t tables[PUPPET_MANY_MAX];
	int err[PUPPET_MANY_MAX];

	rep->held = true;
	if (req->a[0] < 1 || np > PUPPET_MANY_MAX) {
		rep->ret = -EINVAL;
		return;
	}
	for (size_t i = 0; i < np; i++) {
		struct guard_bm_hdr h;
		if (at + sizeof(h) > len) {
			rep->ret = -EINVAL;
			return;
		}
		memcpy(&h, in + at, sizeof(h));
		at += sizeof(h);
		struct gtask *t = find(s, h.pid);
		if (!t || h.n > PUPPET_BATCH_MAX || at + h.n * sizeof(struct puppet_call) > len ||
		    out + sizeof(struct guard_bm_rep) + h.n * sizeof(int64_t) > GUARD_DATA_MAX) {
			rep->ret = t ? -EINVAL : -ESRCH;
			return;
		}
		ps[i] = &t->p;
		if (h.syscall_ip)
			t->p.syscall_ip = h.syscall_ip;
		if (!t->p.scratch) /* a thread uses its leader's stub */
			t->p.stub_ip = h.stub_ip;
		calls[i] = (struct puppet_call *)(in + at); /* aligned: the header is 32 bytes */
		ns[i] = h.n;
		tables[i] = h.table;
		at += h.n * sizeof(struct puppet_call);
		out += sizeof(struct guard_bm_rep) + h.n * sizeof(int64_t);
	}
	if (req->a[3] > 0 && (size_t)req->a[3] <= np) /* a test's (ckpt-fault) */
		ps[req->a[3] - 1]->fault_ip = (uint64_t)req->a[4];
	if (req->a[2] == 1) /* tasks of one memory */
		puppet_syscalls_many_vm(ps, calls, ns, tables, np, err);
	else
		puppet_syscalls_many(ps, calls, ns, tables, np, err);
	out = 0;
	for (size_t i = 0; i < np; i++) {
		struct guard_bm_rep r = {
		    .ret = err[i], .held = ps[i]->held, .faulted = ps[i]->faulted};
		memcpy(data + out, &r, sizeof(r));
		out += sizeof(r);
		for (size_t j = 0; j < ns[i]; j++) {
			int64_t v = calls[i][j].ret;
			memcpy(data + out, &v, sizeof(v));
			out += sizeof(v);
		}
	}
	rep->held = ps[0]->held;
	rep->len = (uint32_t)out;
}

/* serve_scratch_many's tasks, what is done for each before its map */
struct sm_tasks {
	struct gstate *s;
	struct gtask **t;
};

/* Its fds noted (put_back closes the others), its syscall_ip ckpt's */
static int sm_start(void *arg, size_t i)
{
	struct sm_tasks *g = arg;
	return g->t[i] ? snapshot_fds(g->s, g->t[i]) : -ESRCH;
}

/*
 * GUARD_SCRATCH_MANY: GUARD_SCRATCH_MAP of n tasks, one request for all,
 * their mmaps overlapping (puppet_scratch_map_stubs).
 */
static void serve_scratch_many(struct gstate *s, const struct guard_sm_req *in, size_t n,
			       struct guard_rep *rep, uint8_t *data)
{
	struct gtask *t[PUPPET_MANY_MAX];
	struct puppet *ps[PUPPET_MANY_MAX];
	struct puppet none = {.memfd = -1};
	size_t lens[PUPPET_MANY_MAX];
	int err[PUPPET_MANY_MAX];

	for (size_t i = 0; i < n; i++) {
		t[i] = find(s, in[i].pid);
		ps[i] = t[i] ? &t[i]->p : &none;
		lens[i] = (size_t)in[i].len;
		if (t[i] && in[i].syscall_ip)
			t[i]->p.syscall_ip = in[i].syscall_ip;
	}
	puppet_scratch_map_stubs(ps, lens, n, err, sm_start, &(struct sm_tasks){s, t});
	for (size_t i = 0; i < n; i++) {
		struct puppet *p = ps[i];
		struct guard_sm_rep m = {.ret = -ESRCH};
		if (t[i])
			m = (struct guard_sm_rep){.ret = err[i],
						  .scratch = p->scratch,
						  .scratch_len = p->scratch_len,
						  .stub_ip = p->stub_ip,
						  .held = p->held,
						  .faulted = p->faulted};
		memcpy(data + i * sizeof(m), &m, sizeof(m));
	}
	rep->len = (uint32_t)(n * sizeof(struct guard_sm_rep));
	rep->held = true;
}

static void serve(struct gstate *s, const struct guard_req *req, struct puppet_call *calls,
		  size_t ncalls, struct guard_rep *rep, void *data)
{
	struct gtask *t = req->op == GUARD_SEIZE ? add(s, req->pid) : find(s, req->pid);
	if (!t) {
		rep->ret = req->op == GUARD_SEIZE ? -ENOMEM : -ESRCH;
		return;
	}
	struct puppet *p = &t->p;
	if (req->syscall_ip)
		p->syscall_ip = req->syscall_ip;
	switch (req->op) {
	case GUARD_SEIZE: {
		rep->ret = seize_start(p, req->pid);
		if (rep->ret == 0)
			rep->ret = puppet_seize_finish(p);
		if (rep->ret < 0)
			break;
		puppet_forget(p); /* its memory is ckpt's business */
		/* what ckpt reads of every task anyway, with no request of its own */
		size_t len = GUARD_XSTATE_MAX;
		if (puppet_get_xstate(p, data, &len) == 0)
			rep->len = (uint32_t)len;
		rep->rseq_ret = puppet_get_rseq(p, rep->rseq, sizeof(rep->rseq));
		rep->sud_ret = puppet_sud_config(p, rep->sud, sizeof(rep->sud));
		break;
	}
	case GUARD_BATCH:
		/* a thread uses its leader's stub (its own puppet here has none) */
		if (!p->scratch)
			p->stub_ip = (uint64_t)req->a[1];
		p->fault_ip = (uint64_t)req->a[2]; /* a test's (ckpt-fault), or 0 */
		rep->ret = puppet_syscalls(p, calls, ncalls);
		for (size_t i = 0; i < ncalls; i++)
			((int64_t *)data)[i] = calls[i].ret;
		rep->len = (uint32_t)(ncalls * sizeof(int64_t));
		break;
	case GUARD_SYSCALL:
		rep->ret = puppet_syscall6(p, req->a[0], req->a[1], req->a[2], req->a[3], req->a[4],
					   req->a[5], req->a[6]);
		break;
	case GUARD_SCRATCH_MAP:
		rep->ret = snapshot_fds(s, t);
		if (rep->ret == 0)
			rep->ret = req->a[0] ? puppet_scratch_map(p, (uint64_t)req->a[0], (size_t)req->a[1])
					     : puppet_scratch_map_stub(p, (size_t)req->a[1]);
		break;
	case GUARD_SCRATCH_UNMAP:
		rep->ret = puppet_scratch_unmap(p);
		break;
	case GUARD_RELEASE:
		rep->ret = puppet_release(p, (int)req->a[0]);
		break;
	case GUARD_KILL:
		puppet_kill(p);
		rep->ret = 0;
		break;
	case GUARD_XSTATE: {
		size_t len = req->a[0] < GUARD_DATA_MAX ? (size_t)req->a[0] : GUARD_DATA_MAX;
		int r = puppet_get_xstate(p, data, &len);
		rep->ret = r < 0 ? r : (long)len;
		rep->len = r < 0 ? 0 : (uint32_t)len;
		break;
	}
	case GUARD_PEEKSIGINFO:
		rep->ret = puppet_peek_siginfo(p, (uint64_t)req->a[0], req->a[1] != 0, (int)req->a[2],
					       data);
		rep->len = rep->ret > 0 ? (uint32_t)rep->ret * 128 : 0;
		if (rep->ret >= 0 && !req->a[0] && !req->a[1]) {
			rep->shared_n = puppet_peek_siginfo(p, 0, true, GUARD_PEEK_MAX,
							    (char *)data + GUARD_PEEK_MAX * 128);
			if (rep->shared_n > 0)
				rep->len = (uint32_t)(GUARD_PEEK_MAX + rep->shared_n) * 128;
		}
		break;
	case GUARD_RSEQ: {
		size_t len = req->a[0] < 256 ? (size_t)req->a[0] : 256;
		rep->ret = puppet_get_rseq(p, data, len);
		rep->len = rep->ret > 0 ? (uint32_t)len : 0;
		break;
	}
	case GUARD_SECCOMP: {
		size_t len = (size_t)req->a[1];
		if (len > GUARD_DATA_MAX / 8)
			len = GUARD_DATA_MAX / 8;
		rep->ret = puppet_seccomp_filter(p, (int)req->a[0], len ? data : NULL, len);
		rep->len = len && rep->ret > 0 ? (uint32_t)rep->ret * 8 : 0;
		break;
	}
	case GUARD_SECCOMP_FLAGS:
		rep->ret = puppet_seccomp_flags(p, (int)req->a[0]);
		break;
	case GUARD_SUD:
		rep->ret = puppet_sud_config(p, data, GUARD_DATA_MAX);
		rep->len = rep->ret > 0 ? (uint32_t)rep->ret : 0;
		break;
	default:
		rep->ret = -EINVAL;
	}
	rep->held = p->held;
	rep->faulted = p->faulted;
	rep->group_stopped = p->group_stopped;
	rep->event_msg = p->event_msg;
	rep->regs0 = p->regs0;
	rep->sigmask0 = p->sigmask0;
	rep->scratch = p->scratch;
	rep->scratch_len = p->scratch_len;
	rep->stub_ip = p->stub_ip;
}

static __attribute__((noreturn)) void guardian(int fd)
{
	static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGTSTP,
				       SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2 };
	struct gstate s = { 0 };
	struct {
		struct guard_rep rep;
		char data[GUARD_DATA_MAX];
	} m;

	setsid();
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	prctl(PR_SET_NAME, "ckpt-guard", 0, 0, 0);
	if (fd != 3 && dup2(fd, 3) < 0)
		_exit(127);
	syscall(SYS_close_range, 0, 2, 0);
	syscall(SYS_close_range, 4, ~0u, 0);
	/* stdin, stdout and stderr on /dev/null: nothing of ckpt's is held */
	int null = open("/dev/null", O_RDWR);
	while (null >= 0 && null < 2)
		null = dup(null);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* no SA_RESTART: an alarm ends a wait for a stop (seize_start) */
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);

	for (;;) {
		struct {
			struct guard_req req;
			union {
				struct puppet_call calls[PUPPET_BATCH_MAX];
				struct guard_many_req many[PUPPET_MANY_MAX];
				char extra[GUARD_UNDO_MAX]; /* GUARD_ON_DEATH: the message */
				uint8_t bm[GUARD_BM_MAX]; /* GUARD_BATCH_MANY */
				struct guard_sm_req sm[PUPPET_MANY_MAX]; /* GUARD_SCRATCH_MANY */
			};
		} in;
		struct guard_req req;
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} cm;
		struct iovec iov = { &in, sizeof(in) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
				     .msg_controllen = sizeof(cm.buf) };
		ssize_t n = recvmsg(3, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			finish(&s);
		int rfd = -1;
		struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&rfd, CMSG_DATA(c), sizeof(int));
		req = in.req;
		memset(&m.rep, 0, sizeof(m.rep));
		size_t ncalls = req.op == GUARD_BATCH ? (size_t)req.a[0] : 0;
		size_t nmany = req.op == GUARD_MANY ? (size_t)req.a[0] : 0;
		size_t nsm = req.op == GUARD_SCRATCH_MANY ? (size_t)req.a[0] : 0;
		size_t nextra = req.op == GUARD_ON_DEATH && n > (ssize_t)sizeof(req)
					? (size_t)n - sizeof(req)
					: 0;
		if (req.op == GUARD_BATCH_MANY && req.a[1] >= 0 && req.a[1] <= (int64_t)GUARD_BM_MAX)
			nextra = (size_t)req.a[1];
		if (n < (ssize_t)sizeof(req) || (mh.msg_flags & MSG_TRUNC) ||
		    ncalls > PUPPET_BATCH_MAX || nmany > PUPPET_MANY_MAX || nsm > PUPPET_MANY_MAX ||
		    (req.op != GUARD_BATCH_MANY && nextra > GUARD_UNDO_MAX) ||
		    (size_t)n != sizeof(req) + ncalls * sizeof(in.calls[0]) +
				     nmany * sizeof(in.many[0]) + nsm * sizeof(in.sm[0]) + nextra)
			m.rep.ret = -EINVAL;
		else if (req.op == GUARD_ON_DEATH) {
			/* a message ready to send, and the socket to send it on */
			m.rep.held = true;
			m.rep.ret = rfd < 0 ? -EBADF : s.nundo == GUARD_UNDO_SLOTS ? -ENOSPC : 0;
			if (m.rep.ret == 0) {
				struct undo *u = &s.undo[s.nundo++];
				u->fd = rfd;
				u->committed = req.a[1] == GUARD_COMMITTED;
				u->len = nextra;
				memcpy(u->msg, in.extra, u->len);
				rfd = -1;
			}
		} else if (req.op == GUARD_BATCH_MANY) {
			serve_batch_many(&s, &req, in.bm, nextra, &m.rep, (uint8_t *)m.data);
		} else if (req.op == GUARD_SCRATCH_MANY) {
			serve_scratch_many(&s, in.sm, nsm, &m.rep, (uint8_t *)m.data);
		} else if (req.op == GUARD_MANY)
			serve_many(&s, &req, in.many, nmany, &m.rep, (uint8_t *)m.data);
		else if (req.op == GUARD_COMMIT) {
			s.commit = true;
			m.rep.held = true;
		} else if (req.op == GUARD_WATCH && n == (ssize_t)sizeof(req)) {
			if (!watch(&s, rfd) && rfd >= 0)
				close(rfd);
			continue; /* no reply: see puppet_guard_watch */
		} else if (req.op == GUARD_DONE) {
			s.done = true;
			m.rep.ret = s.watch_err;
			send(3, &m.rep, sizeof(m.rep), MSG_NOSIGNAL);
			finish(&s);
		} else
			serve(&s, &req, in.calls, ncalls, &m.rep, m.data);
		if (rfd >= 0)
			close(rfd);
		if (send(3, &m, sizeof(m.rep) + m.rep.len, MSG_NOSIGNAL) < 0)
			finish(&s);
	}
}

int puppet_guard_start(struct puppet_guard **ret)
{
	int sv[2];
	struct puppet_guard *g = malloc(sizeof(*g));
	if (!g)
		return -ENOMEM;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		free(g);
		return -errno;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(sv[0]);
		close(sv[1]);
		free(g);
		return e;
	}
	if (pid == 0)
		guardian(sv[1]);
	close(sv[1]);
	*g = (struct puppet_guard){ .fd = sv[0], .pid = pid };
	*ret = g;
	return 0;
}
