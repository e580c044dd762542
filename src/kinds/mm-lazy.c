/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lazy restart (RESTART_LAZY, `ckpt restart --lazy`): a restored task's
 * private anonymous memory is filled on first touch and in the background
 * by the lazy server, a process of ckpt's that outlives the restart.
 *
 * At prepare (the image loaded and checked, nothing made yet) ckpt forks
 * the server, detached (its own session, not ckpt's child); the server
 * forks its guard. As each task's memory is restored, ckpt makes a
 * userfaultfd in the puppet (not UFFD_USER_MODE_ONLY: the kernel's own
 * reads of the memory, a write(2) from it, must be served too), takes it,
 * asks for the fork, remap, remove and unmap events, registers the private
 * anonymous vmas in MISSING mode, writes every other page itself and sends
 * the userfaultfd to the server. From then on the server answers faults
 * (UFFDIO_COPY of the image's bytes, UFFDIO_ZEROPAGE where the image has
 * none or the program dropped them) and copies the rest in the background;
 * when every process's pages are in and ckpt has said the restart is
 * complete, it tells the guard and both exit, which releases the
 * userfaultfds (the kernel unregisters the vmas).
 *
 * The guard holds a copy of every userfaultfd and the pids: if the server
 * ends before it is done (killed, a damaged page record), the faults block
 * instead of reading zeros (the kernel would unregister the vmas when the
 * last copy of a userfaultfd goes), and the guard SIGKILLs the restored
 * tasks and everything they forked. The memory of a process is never
 * silently wrong: it is whole, or the process is gone.
 *
 * Nothing of this state is global: ckpt's side is ctx->lazy; the server's
 * and the guard's live on their stacks and heaps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>
#include <unistd.h>

#include "core.pb-c.h"
#include "core/ctx.h"
#include "img/pages.h"
#include "kinds/mm-rst.h"
#include "kinds/mm.h"
#include "util/cleanup.h"
#include "util/fault.h"

#define LAZY_AROUND (64u << 10) /* what a fault brings in around its page */
#define LAZY_STEP (256u << 10) /* one background copy: a fault waits for it at most */
#define LAZY_EVENTS 64          /* messages read at once */
#define LAZY_FEATURES                                                              \
	(UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE | \
	 UFFD_FEATURE_EVENT_UNMAP)

/* ckpt -> server, and server -> guard; MSG_TAKEN: guard -> server -> ckpt,
 * the task's pid held by the guard (its MSG_PID answered); MSG_CANCEL:
 * server -> guard, the restart ended without its commit */
enum { MSG_TASK = 1, MSG_COMMIT, MSG_FD, MSG_PID, MSG_DONE, MSG_TAKEN, MSG_CANCEL };
struct lazy_msg {
	uint32_t type;
	uint32_t task;          /* MSG_TASK: index in ctx->tasks */
	int32_t pid;            /* MSG_TASK, MSG_PID */
	uint32_t nvmas;         /* MSG_TASK: bytes of "registered" flags that follow */
};

struct mm_lazy {
	int sock;               /* ckpt's end; -1 once closed */
	pid_t server;           /* the server */
	pid_t *unanswered;      /* tasks handed over, in order, whose MSG_TAKEN is due */
	size_t nunanswered, cap;
};

/* --- helpers of both sides ---------------------------------------------- */

static void populate(const void *p, uint64_t len);

/* Before r's first byte is used: a record the index found is the index's
 * (img_reader_verify); -EPROTO if not. */
static int check_late(struct mm_rec *r)
{
	int e = r->late ? img_reader_verify(r->late, r->index, r->offset) : 0;
	if (e < 0)
		return -EPROTO;
	r->late = NULL;
	return 0;
}

/* Why mm_lazy_check_rec() failed, as the server says it. */
static const char *damage_why(int e)
{
	return e == -EPROTO ? "a page record of the image is damaged (its frame, pad or table "
			      "is not what the image's index says)"
			    : "a page record of the image is damaged (data checksum mismatch)";
}

/* The same, as ckpt says it. */
static const char *damage(int e)
{
	return e == -EPROTO ? "its frame, pad or table is not what the image's index says"
			    : "data checksum mismatch";
}

/* The rest of r's checksum (from what check_step() did): 0, -EBADMSG,
 * -EPROTO (check_late). */
int mm_lazy_check_rec(struct mm_rec *r)
{
	int e = check_late(r);
	if (e < 0)
		return e;
	populate(r->data + r->checked, r->len - r->checked); /* one call, not a fault per page */
	r->part = img_crc32c(r->part, r->data + r->checked, r->len - r->checked);
	r->checked = r->len;
	return r->part == r->crc ? 0 : -EBADMSG;
}

/* The next LAZY_STEP bytes of r's checksum; 0, or -EBADMSG at its end. */
static int check_step(struct mm_rec *r)
{
	int e = check_late(r);
	if (e < 0)
		return e;
	uint64_t n = MIN((uint64_t)LAZY_STEP, r->len - r->checked);
	populate(r->data + r->checked, n);
	r->part = img_crc32c(r->part, r->data + r->checked, n);
	r->checked += n;
	if (r->checked < r->len)
		return 0;
	if (r->part != r->crc)
		return -EBADMSG;
	r->crc_ok = true;
	return 0;
}

static int send_msg(int sock, const struct lazy_msg *m, const void *extra, size_t len, int fd)
{
	struct iovec iov[2] = { { (void *)m, sizeof(*m) }, { (void *)extra, len } };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr h = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		h.msg_control = u.buf;
		h.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t k;
	while ((k = sendmsg(sock, &h, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return k < 0 ? -errno : 0;
}

/* One message into buf (size bytes); *fd gets a passed fd or -1. 0 at EOF. */
static ssize_t recv_msg(int sock, void *buf, size_t size, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { buf, size };
	struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	ssize_t k;
	*fd = -1;
	while ((k = recvmsg(sock, &h, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (k < 0)
		return -errno;
	struct cmsghdr *c = CMSG_FIRSTHDR(&h);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return k;
}

/* --- the guard ------------------------------------------------------------ */

/* A restored task, as the guard knows it: by a pidfd taken while it surely
 * was the task, so that a pid used again is never killed. */
struct known {
	pid_t pid;
	int pidfd;
};

/* Adds the children of every thread of pid to *set (n of cap). */
static void add_children(pid_t pid, pid_t **set, size_t *n, size_t *cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	_cleanup_closedir_ DIR *d = opendir(path);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p2[384], buf[4096];
		snprintf(p2, sizeof(p2), "/proc/%d/task/%s/children", pid, de->d_name);
		int fd = open(p2, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (k <= 0)
			continue;
		buf[k] = 0;
		for (char *s = buf, *e; *s; s = e) {
			long c = strtol(s, &e, 10);
			if (e == s)
				break;
			bool seen = false;
			for (size_t i = 0; i < *n && !seen; i++)
				seen = (*set)[i] == c;
			if (seen)
				continue;
			if (*n == *cap) {
				size_t nc = *cap * 2 + 16;
				pid_t *ns = realloc(*set, nc * sizeof(**set));
				if (!ns)
					return;
				*set = ns;
				*cap = nc;
			}
			(*set)[(*n)++] = (pid_t)c;
			kill((pid_t)c, SIGSTOP); /* forks no more */
		}
	}
}

/*
 * The server ended before it was done, or the restart without its commit:
 * every restored task, and what it forked, is stopped (it forks no more),
 * found, then killed. The userfaultfds are still held here meanwhile, so
 * no fault reads zeros.
 */
static void guard_kill(const struct known *k, size_t nk)
{
	pid_t *set = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < nk; i++) {
		if (syscall(SYS_pidfd_send_signal, k[i].pidfd, SIGSTOP, NULL, 0) < 0)
			continue; /* gone: its pid may be someone else's now */
		if (n == cap) {
			size_t nc = cap * 2 + 16;
			pid_t *ns = realloc(set, nc * sizeof(*set));
			if (!ns)
				break;
			set = ns;
			cap = nc;
		}
		set[n++] = k[i].pid;
	}
	for (size_t i = 0; i < n; i++) /* n grows as children are found */
		add_children(set[i], &set, &n, &cap);
	for (size_t i = 0; i < nk; i++)
		syscall(SYS_pidfd_send_signal, k[i].pidfd, SIGKILL, NULL, 0);
	for (size_t i = 0; i < n; i++)
		kill(set[i], SIGKILL);
	free(set);
}

static _Noreturn void guard(int sock, struct ckpt_log *log)
{
	struct known *set = NULL;
	size_t n = 0, cap = 0;
	prctl(PR_SET_NAME, "ckpt-lazy-guard");
	for (;;) {
		struct lazy_msg m;
		int fd;
		ssize_t k = recv_msg(sock, &m, sizeof(m), &fd);
		/* the fd (a userfaultfd) stays open until the guard exits */
		if (k == (ssize_t)sizeof(m) && m.type == MSG_DONE)
			_exit(0);
		/* ckpt failed the restart (and kills what it made: this is
		 * the same kill, done twice), or died after the release but
		 * before its commit: nobody else would, and the memory not
		 * in yet would read as zeros once the server is gone */
		if (k == (ssize_t)sizeof(m) && m.type == MSG_CANCEL) {
			guard_kill(set, n);
			_exit(0);
		}
		if (k == (ssize_t)sizeof(m) && m.type == MSG_PID) {
			if (n == cap) {
				size_t nc = cap * 2 + 16;
				struct known *ns = realloc(set, nc * sizeof(*set));
				if (ns) {
					set = ns;
					cap = nc;
				}
			}
			/* the task is stopped by ckpt until this is answered: it is
			 * the pid's */
			int pfd = (int)syscall(SYS_pidfd_open, m.pid, 0);
			if (n < cap && pfd >= 0)
				set[n++] = (struct known){ m.pid, pfd };
			struct lazy_msg taken = { .type = MSG_TAKEN, .pid = m.pid };
			send_msg(sock, &taken, NULL, 0, -1);
			continue;
		}
		if (k == (ssize_t)sizeof(m) || k == -EAGAIN)
			continue;
		/* EOF: the server is gone, not done */
		log_error(log, "the lazy server ended before all memory was in: the restored "
			  "processes are killed");
		guard_kill(set, n);
		_exit(1);
	}
}

/* --- the server: what it knows of each address space ---------------------- */

/* A stretch of owed pages: the bytes of chunk `chunk` of the task's page set
 * from off on (the chunk's plain bytes: a compressed one's once
 * decompressed), from bit on in owed[]. */
struct run {
	uint64_t addr;
	uint64_t npages;
	size_t bit;
	size_t chunk;
	uint64_t off;
};

struct lmm {
	int fd;                 /* the userfaultfd */
	pid_t pid;              /* 0 for one forked after the restart */
	pid_t from;             /* that one's: the restored process it comes from */
	struct mm_rst *mr;      /* its page set (a fork's: its parent's) */
	struct run *runs;       /* by address, not overlapping */
	size_t nruns;
	uint64_t *owed;         /* per page of the runs: the image's bytes still due */
	size_t nbits;
	uint64_t left;          /* owed pages */
	uint64_t gone;          /* owed when its process exited: never needed */
	size_t cursor;          /* the background fill's run */
};

struct retry {
	size_t mm;
	uint64_t addr;
};

/* A compressed chunk decompressed whole (pages.h), kept for the faults and
 * fill steps that follow: the fill reads a chunk front to back. */
#define LAZY_ZSLOTS 4
struct zslot {
	const struct pages_chunk *ch; /* NULL: empty */
	uint8_t *buf;
	size_t cap;
	uint64_t used;          /* the server's tick when last used */
};

struct server {
	struct rst_ctx *ctx;
	struct ckpt_log log;
	int ctl, guard;
	bool ctl_open, committed;
	struct lmm *mm;
	size_t n;
	struct retry *retry;
	size_t nretry;
	struct zslot z[LAZY_ZSLOTS];
	uint64_t tick, frames;  /* frames: compressed chunks decompressed */
	uint64_t filled, served, zeroed; /* pages */
	/* the first failure: where, and what it means */
	pid_t err_pid, err_from;
	uint64_t err_addr;
	const char *err_why;
};

static bool owed(const struct lmm *m, size_t bit)
{
	return m->owed[bit / 64] >> (bit % 64) & 1;
}

static void unowe(struct lmm *m, size_t bit)
{
	if (owed(m, bit)) {
		m->owed[bit / 64] &= ~(1ull << (bit % 64));
		m->left--;
	}
}

/* The run holding addr, or the first after it (nruns if none). */
static size_t run_at(const struct lmm *m, uint64_t addr)
{
	size_t lo = 0, hi = m->nruns;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->runs[mid].addr + m->runs[mid].npages * PAGE <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int add_run(struct lmm *m, size_t *cap, struct run r)
{
	if (m->nruns == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct run *nr = realloc(m->runs, nc * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		m->runs = nr;
		*cap = nc;
	}
	m->runs[m->nruns++] = r;
	return 0;
}

/*
 * The image's pages at p are mapped in here before they are read: the
 * server is a fork of ckpt, and a fork does not copy the page tables of a
 * file mapping, so each page would cost a fault, which is what bounds the
 * fill on a virtual machine (tens of microseconds each); one madvise maps
 * them all.
 */
static void populate(const void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(PAGE - 1);
	madvise((void *)a, (uintptr_t)p + len - a, MADV_POPULATE_READ);
}

/* The runs of task t's registered vmas (reg), from its page set. */
static int build_mm(struct lmm *m, struct mm_rst *mr, const uint8_t *reg)
{
	size_t cap = 0;
	const MmEntry *e = mr->e;
	*m = (struct lmm){ .fd = -1, .mr = mr };
	for (size_t c = 0; c < mr->pages.n; c++) {
		const struct pages_chunk *ch = &mr->pages.c[c];
		uint64_t off = 0;
		for (size_t i = 0; i < ch->n; i++) {
			uint64_t a = ch->x[i].off, end = a + ch->x[i].len;
			size_t v = 0;
			while (a < end) {
				while (v < e->n_vmas && e->vmas[v]->end <= a)
					v++;
				uint64_t stop = v < e->n_vmas ? MIN(end, e->vmas[v]->end) : end;
				bool in = v < e->n_vmas && e->vmas[v]->start <= a && reg[v];
				if (in && add_run(m, &cap, (struct run){ a, (stop - a) / PAGE, m->nbits,
									 c, off }) < 0)
					return -ENOMEM;
				if (in)
					m->nbits += (stop - a) / PAGE;
				off += stop - a;
				a = stop;
			}
		}
	}
	m->owed = calloc(m->nbits / 64 + 1, sizeof(uint64_t));
	if (!m->owed)
		return -ENOMEM;
	memset(m->owed, 0xff, m->nbits / 64 * sizeof(uint64_t));
	for (size_t b = m->nbits / 64 * 64; b < m->nbits; b++)
		m->owed[b / 64] |= 1ull << (b % 64);
	m->left = m->nbits;
	return 0;
}

static int copy_mm(struct lmm *dst, const struct lmm *src, int fd)
{
	*dst = *src;
	dst->fd = fd;
	dst->from = src->pid ? src->pid : src->from;
	dst->pid = 0;
	dst->runs = malloc((src->nruns ? src->nruns : 1) * sizeof(*src->runs));
	dst->owed = malloc((src->nbits / 64 + 1) * sizeof(uint64_t));
	if (!dst->runs || !dst->owed) {
		free(dst->runs);
		free(dst->owed);
		return -ENOMEM;
	}
	memcpy(dst->runs, src->runs, src->nruns * sizeof(*src->runs));
	memcpy(dst->owed, src->owed, (src->nbits / 64 + 1) * sizeof(uint64_t));
	return 0;
}

/* No page of [start, end) is owed any more (dropped, unmapped, moved over). */
static void unowe_range(struct lmm *m, uint64_t start, uint64_t end)
{
	for (size_t i = run_at(m, start); i < m->nruns && m->runs[i].addr < end; i++) {
		const struct run *r = &m->runs[i];
		uint64_t a = MAX(start, r->addr), b = MIN(end, r->addr + r->npages * PAGE);
		for (; a < b; a += PAGE)
			unowe(m, r->bit + (a - r->addr) / PAGE);
	}
}

/* Cuts the run holding addr in two there. */
static int split_at(struct lmm *m, uint64_t addr)
{
	size_t i = run_at(m, addr);
	if (i == m->nruns || m->runs[i].addr >= addr)
		return 0;
	struct run *nr = realloc(m->runs, (m->nruns + 1) * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	m->runs = nr;
	memmove(&nr[i + 2], &nr[i + 1], (m->nruns - i - 1) * sizeof(*nr));
	uint64_t k = (addr - nr[i].addr) / PAGE;
	nr[i + 1] = (struct run){ addr, nr[i].npages - k, nr[i].bit + k, nr[i].chunk,
				  nr[i].off + k * PAGE };
	nr[i].npages = k;
	m->nruns++;
	return 0;
}

static int cmp_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* mremap moved [from, from + len) to to: so do the pages still owed. */
static int remap(struct lmm *m, uint64_t from, uint64_t to, uint64_t len)
{
	int r;
	if ((r = split_at(m, to)) < 0 || (r = split_at(m, to + len)) < 0)
		return r;
	unowe_range(m, to, to + len);
	size_t w = 0;
	for (size_t i = 0; i < m->nruns; i++) /* what was at the target is gone */
		if (m->runs[i].addr < to || m->runs[i].addr >= to + len)
			m->runs[w++] = m->runs[i];
	m->nruns = w;
	if ((r = split_at(m, from)) < 0 || (r = split_at(m, from + len)) < 0)
		return r;
	for (size_t i = run_at(m, from); i < m->nruns && m->runs[i].addr < from + len; i++)
		m->runs[i].addr = m->runs[i].addr - from + to;
	qsort(m->runs, m->nruns, sizeof(*m->runs), cmp_run);
	m->cursor = 0;
	return 0;
}

/* --- the server: filling ------------------------------------------------- */


/* The plain bytes of compressed chunk ch: from the cache, or decompressed
 * whole into its least recently used slot. */
static int zcache_get(struct server *s, const struct pages_chunk *ch, const uint8_t **ret)
{
	struct zslot *z = &s->z[0];
	for (size_t i = 0; i < LAZY_ZSLOTS; i++) {
		if (s->z[i].ch == ch) {
			z = &s->z[i];
			goto found;
		}
		if (s->z[i].used < z->used)
			z = &s->z[i];
	}
	struct pages_chunk plain;
	z->ch = NULL;
	int r = pages_chunk_plain(ch, &z->buf, &z->cap, &plain);
	if (r < 0)
		return r == -EINVAL ? -EBADMSG : r;
	z->ch = ch;
	s->frames++;
found:
	z->used = ++s->tick;
	*ret = z->buf;
	return 0;
}

/*
 * The bytes of run r: its record's checksum checked the first time it is
 * used (the image was mapped without reading it), a compressed chunk
 * decompressed (its frame's content checksum checked by zstd).
 */
static int run_src(struct server *s, const struct lmm *m, const struct run *r,
		   const uint8_t **ret)
{
	const struct pages_chunk *ch = &m->mr->pages.c[r->chunk];
	struct mm_rec *rec = m->mr->recs ? &m->mr->recs[r->chunk] : NULL;
	const uint8_t *base = ch->data;
	if (rec && !rec->crc_ok) {
		int e = mm_lazy_check_rec(rec);
		if (e < 0) {
			s->err_why = damage_why(e);
			return -EBADMSG;
		}
		rec->crc_ok = true;
	}
	if (ch->z) {
		int e = zcache_get(s, ch, &base);
		if (e < 0) {
			s->err_why = e == -EBADMSG ? "its compressed pages do not decompress "
						     "(damaged or forged)" : NULL;
			return e;
		}
	}
	*ret = base + r->off;
	return 0;
}

/*
 * Copies the owed pages [a, b) of run ri (all owed) into m. 0, or -EAGAIN
 * (the address space is changing: an event is on its way), or -errno.
 */
static int fill(struct server *s, struct lmm *m, size_t ri, uint64_t a, uint64_t b)
{
	struct run *r = &m->runs[ri];
	const uint8_t *base;
	int err = run_src(s, m, r, &base);
	if (err < 0) {
		s->err_pid = m->pid;
		s->err_from = m->from;
		s->err_addr = a;
		return err;
	}
	const uint8_t *src = base + (a - r->addr);
	if (!m->mr->pages.c[r->chunk].z)
		populate(src, b - a);
	struct uffdio_copy c = { .dst = a, .src = (uint64_t)(uintptr_t)src, .len = b - a };
	err = ioctl(m->fd, UFFDIO_COPY, &c) < 0 ? -errno : 0;
	uint64_t done = c.copy > 0 ? (uint64_t)c.copy : 0;
	if (err == 0)
		done = b - a;
	for (uint64_t x = a; x < a + done; x += PAGE)
		unowe(m, r->bit + (x - r->addr) / PAGE);
	s->filled += done / PAGE;
	if (err == -EEXIST || err == -ENOENT) {
		/* there already (EEXIST), or no registered vma there any more (an
		 * unmap whose event is on its way): not owed */
		uint64_t x = a + done;
		unowe(m, r->bit + (x - r->addr) / PAGE);
		struct uffdio_range w = { x, PAGE };
		ioctl(m->fd, UFFDIO_WAKE, &w);
		return 0;
	}
	if (err == -ESRCH) { /* the address space is gone */
		m->gone += m->left;
		m->left = 0;
		return 0;
	}
	if (err < 0 && err != -EAGAIN) {
		s->err_pid = m->pid;
		s->err_from = m->from;
		s->err_addr = a + done;
	}
	return err;
}

static int zero_page(struct lmm *m, uint64_t page)
{
	struct uffdio_zeropage z = { .range = { page, PAGE } };
	int err = ioctl(m->fd, UFFDIO_ZEROPAGE, &z) < 0 ? -errno : 0;
	if (err == -EEXIST || err == -ENOENT) { /* there, or no vma: let it retry */
		struct uffdio_range w = { page, PAGE };
		ioctl(m->fd, UFFDIO_WAKE, &w);
		return 0;
	}
	if (err == -ESRCH) {
		m->gone += m->left;
		m->left = 0;
		return 0;
	}
	return err;
}

/* A fault at addr of s->mm[mi]: the image's pages around it, or a zero page. */
static int serve(struct server *s, size_t mi, uint64_t addr)
{
	struct lmm *m = &s->mm[mi];
	uint64_t page = addr & ~(PAGE - 1);
	for (int tries = 0; tries < 64; tries++) {
		size_t ri = run_at(m, page);
		const struct run *r = ri < m->nruns ? &m->runs[ri] : NULL;
		if (!r || r->addr > page || !owed(m, r->bit + (page - r->addr) / PAGE)) {
			s->zeroed++;
			return zero_page(m, page);
		}
		/* the owed pages of the aligned block around it, in one copy */
		uint64_t lo = MAX(r->addr, page & ~(uint64_t)(LAZY_AROUND - 1));
		uint64_t hi = MIN(r->addr + r->npages * PAGE, (page | (LAZY_AROUND - 1)) + 1);
		uint64_t a = page, b = page + PAGE;
		while (a > lo && owed(m, r->bit + (a - PAGE - r->addr) / PAGE))
			a -= PAGE;
		while (b < hi && owed(m, r->bit + (b - r->addr) / PAGE))
			b += PAGE;
		int err = fill(s, m, ri, a, b);
		if (err < 0)
			return err;
		s->served++;
	}
	return -EIO;
}

/* The event handlers' part of a fork: the child's userfaultfd, its pages
 * owed as the parent's are now (no copy into the parent succeeds between
 * the fork and this: the kernel answers EAGAIN until the event is read). */
static int add_child(struct server *s, size_t parent, int fd)
{
	struct lmm *nm = realloc(s->mm, (s->n + 1) * sizeof(*nm));
	if (!nm) {
		close(fd);
		return -ENOMEM;
	}
	s->mm = nm;
	int r = copy_mm(&s->mm[s->n], &s->mm[parent], fd);
	if (r < 0) {
		close(fd);
		return r;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	log_debug(&s->log, "a process forked: its memory is served too (%llu pages owed)",
		  (unsigned long long)s->mm[s->n].left);
	s->n++;
	struct lazy_msg g = { .type = MSG_FD };
	send_msg(s->guard, &g, NULL, 0, fd); /* held by the guard too */
	return 0;
}

static int add_retry(struct server *s, size_t mi, uint64_t addr)
{
	struct retry *nr = realloc(s->retry, (s->nretry + 1) * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	s->retry = nr;
	nr[s->nretry++] = (struct retry){ mi, addr };
	return 0;
}

static int on_msg(struct server *s, size_t mi, const struct uffd_msg *msg)
{
	struct lmm *m = &s->mm[mi];
	int r = 0;
	switch (msg->event) {
	case UFFD_EVENT_PAGEFAULT:
		r = serve(s, mi, msg->arg.pagefault.address);
		if (r == -EAGAIN)
			r = add_retry(s, mi, msg->arg.pagefault.address);
		break;
	case UFFD_EVENT_FORK:
		r = add_child(s, mi, (int)msg->arg.fork.ufd);
		break;
	case UFFD_EVENT_REMAP:
		log_debug(&s->log, "remap %llx -> %llx (%llu bytes), %llu pages owed",
			  (unsigned long long)msg->arg.remap.from, (unsigned long long)msg->arg.remap.to,
			  (unsigned long long)msg->arg.remap.len, (unsigned long long)m->left);
		r = remap(m, msg->arg.remap.from, msg->arg.remap.to, msg->arg.remap.len);
		break;
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		unowe_range(m, msg->arg.remove.start, msg->arg.remove.end);
		break;
	default:
		break;
	}
	return r;
}

static int read_events(struct server *s, size_t mi)
{
	struct uffd_msg msg[LAZY_EVENTS];
	for (;;) {
		ssize_t k = read(s->mm[mi].fd, msg, sizeof(msg));
		if (k < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		for (size_t i = 0; i < (size_t)k / sizeof(msg[0]); i++) {
			int r = on_msg(s, mi, &msg[i]);
			if (r < 0)
				return r;
		}
	}
}

/* One background copy: the next owed stretch of some address space. */
static int fill_step(struct server *s, size_t *next_mm)
{
	for (size_t tried = 0; tried < s->n; tried++) {
		size_t mi = (*next_mm + tried) % s->n;
		struct lmm *m = &s->mm[mi];
		for (; m->left && m->cursor < m->nruns; m->cursor++) {
			const struct run *r = &m->runs[m->cursor];
			size_t b = r->bit, end = r->bit + r->npages;
			while (b < end && !owed(m, b))
				b = (m->owed[b / 64] >> (b % 64)) ? b + 1 : ALIGN_UP(b + 1, 64);
			if (b >= end)
				continue;
			size_t e = b + 1;
			while (e < end && e - b < LAZY_STEP / PAGE && owed(m, e))
				e++;
			*next_mm = mi + 1;
			uint64_t a = r->addr + (b - r->bit) * PAGE;
			/* a record not checked yet is checked a step at a time
			 * first (8 MiB at once would hold a fault that long) */
			struct mm_rec *rec = m->mr->recs ? &m->mr->recs[r->chunk] : NULL;
			int ce = rec && !rec->crc_ok ? check_step(rec) : 0;
			if (ce < 0) {
				s->err_pid = m->pid;
				s->err_from = m->from;
				s->err_addr = a;
				s->err_why = damage_why(ce);
				return -EBADMSG;
			}
			if (rec && !rec->crc_ok)
				return 0;
			int err = fill(s, m, m->cursor, a, a + (e - b) * PAGE);
			return err == -EAGAIN ? 0 : err; /* EAGAIN: an event comes first */
		}
		if (m->left && m->cursor >= m->nruns)
			m->cursor = 0; /* a remap reordered the runs: once more */
	}
	return 0;
}

static bool work_left(const struct server *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->mm[i].left)
			return true;
	return false;
}

/* ckpt's message: a task's userfaultfd, the commit, or the end. */
static int on_ctl(struct server *s)
{
	uint8_t buf[sizeof(struct lazy_msg) + 65536];
	struct lazy_msg m;
	int fd;
	ssize_t k = recv_msg(s->ctl, buf, sizeof(buf), &fd);
	if (k == -EAGAIN)
		return 0;
	if (k <= 0) {
		s->ctl_open = false;
		return 0;
	}
	memcpy(&m, buf, MIN(sizeof(m), (size_t)k));
	if (m.type == MSG_COMMIT) {
		s->committed = true;
		return 0;
	}
	if (m.type != MSG_TASK || fd < 0 || m.task >= s->ctx->ntasks ||
	    (size_t)k != sizeof(m) + m.nvmas)
		return -EPROTO;
	CKPT_FAULT(CKPT_FAULT_LAZY_TASK);
	struct mm_rst *mr = s->ctx->tasks[m.task].kstate[KIND_mm];
	if (!mr || mr->e->n_vmas != m.nvmas)
		return -EPROTO;
	/* ckpt lets the task run only once the guard holds it: a server that
	 * died before (killed, out of memory) would otherwise leave it running
	 * with its userfaultfd closed, every page it owed read as zeros, and a
	 * guard that knew nothing to kill. The guard takes it while the server
	 * builds what it owes. */
	struct lazy_msg g = { .type = MSG_FD };
	int r = send_msg(s->guard, &g, NULL, 0, fd);
	g = (struct lazy_msg){ .type = MSG_PID, .pid = m.pid };
	if (r >= 0)
		r = send_msg(s->guard, &g, NULL, 0, -1);
	struct lmm *nm = r < 0 ? NULL : realloc(s->mm, (s->n + 1) * sizeof(*nm));
	if (r < 0 || !nm) {
		close(fd);
		return r < 0 ? r : -ENOMEM;
	}
	s->mm = nm;
	r = build_mm(&nm[s->n], mr, buf + sizeof(m));
	if (r < 0) {
		close(fd);
		return r;
	}
	nm[s->n].fd = fd;
	nm[s->n].pid = m.pid;
	s->n++;
	int gfd;
	ssize_t got = recv_msg(s->guard, &g, sizeof(g), &gfd);
	if (got != (ssize_t)sizeof(g) || g.type != MSG_TAKEN || g.pid != m.pid)
		return got < 0 ? (int)got : -EPROTO;
	g = (struct lazy_msg){ .type = MSG_TAKEN, .pid = m.pid };
	return send_msg(s->ctl, &g, NULL, 0, -1);
}

static int server_loop(struct server *s)
{
	size_t next_mm = 0;
	for (;;) {
		bool work = work_left(s);
		if (!s->ctl_open && (!s->committed || !work))
			return s->committed ? 0 : -ECANCELED;
		/* until the tree runs, faults only: a fault (the rseq registration,
		 * an injected call) never waits behind a background step, and
		 * ckpt has the CPU for the rest of the restart */
		bool fill_now = work && s->committed;
		_cleanup_free_ struct pollfd *pf = calloc(s->n + 1, sizeof(*pf));
		if (!pf)
			return -ENOMEM;
		size_t np = 0;
		if (s->ctl_open)
			pf[np++] = (struct pollfd){ .fd = s->ctl, .events = POLLIN };
		size_t first_mm = np;
		for (size_t i = 0; i < s->n; i++)
			pf[np++] = (struct pollfd){ .fd = s->mm[i].fd, .events = POLLIN };
		if (poll(pf, np, fill_now || s->nretry ? 0 : -1) < 0 && errno != EINTR)
			return -errno;
		int r = 0;
		size_t nmm = s->n; /* a fork adds one: polled next time */
		for (size_t i = 0; i < nmm && r >= 0; i++)
			if (pf[first_mm + i].revents & POLLIN)
				r = read_events(s, i);
		if (r >= 0 && first_mm && pf[0].revents)
			r = on_ctl(s);
		size_t n = s->nretry;
		struct retry *old = s->retry;
		s->retry = NULL;
		s->nretry = 0;
		for (size_t i = 0; i < n && r >= 0; i++) {
			r = serve(s, old[i].mm, old[i].addr);
			if (r == -EAGAIN)
				r = add_retry(s, old[i].mm, old[i].addr);
		}
		free(old);
		if (r >= 0 && fill_now)
			r = fill_step(s, &next_mm);
		if (r < 0)
			return r;
	}
}

/* Closes every fd but keep[0..n) (ascending); 0, 1 and 2 become /dev/null. */
static void keep_fds(const int *keep, size_t n)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++) {
		bool kept = false;
		for (size_t i = 0; i < n; i++)
			kept |= keep[i] == fd;
		if (!kept && null >= 0)
			dup2(null, fd);
	}
	if (null > 2)
		close(null);
	unsigned from = 3;
	for (size_t i = 0; i < n; i++) {
		if (keep[i] >= (int)from) {
			if (keep[i] > (int)from)
				syscall(SYS_close_range, from, keep[i] - 1, 0);
			from = (unsigned)keep[i] + 1;
		}
	}
	syscall(SYS_close_range, from, ~0u, 0);
}

static _Noreturn void server_main(struct rst_ctx *ctx, int ctl)
{
	struct server s = { .ctx = ctx, .ctl = ctl, .ctl_open = true, .guard = -1 };
	struct stat st;
	int logfd = ctx->log.fd >= 0 && fstat(ctx->log.fd, &st) == 0 && S_ISREG(st.st_mode)
			    ? ctx->log.fd : -1;
	int keep[2] = { MIN(ctl, logfd), MAX(ctl, logfd) };
	keep_fds(logfd < 0 ? &keep[1] : keep, logfd < 0 ? 1 : 2);
	log_init(&s.log, logfd, ctx->log.level, NULL, 0, "lazy");
	/* forked at "prepare", before ckpt goes to real time (sched.c) */
	log_debug(&s.log, "the server runs at scheduling policy %d, nice %d", sched_getscheduler(0),
		  getpriority(PRIO_PROCESS, 0));
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "ckpt-lazy");
	int gs[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, gs) < 0)
		_exit(1);
	pid_t g = fork();
	if (g == 0) {
		close(gs[0]);
		close(ctl);
		guard(gs[1], &s.log);
	}
	close(gs[1]);
	if (g < 0)
		_exit(1);
	s.guard = gs[0];
	int r = server_loop(&s);
	struct lazy_msg done = { .type = MSG_DONE };
	if (r == -ECANCELED) { /* no commit: the guard kills what was handed over */
		struct lazy_msg cancel = { .type = MSG_CANCEL };
		send_msg(s.guard, &cancel, NULL, 0, -1);
		_exit(1);
	}
	if (r < 0) {
		if (s.err_why)
			log_error(&s.log, "%s%d: its memory at %llx cannot be served: %s; the "
				  "restored processes are killed", s.err_pid ? "pid " : "a process "
				  "forked by pid ", s.err_pid ? s.err_pid : s.err_from, (unsigned long long)s.err_addr, s.err_why);
		else
			log_error(&s.log, "serving the restored memory failed%s; the restored "
				  "processes are killed: %s", s.err_addr ? " (at a page copy)" : "",
				  strerror(-r));
		_exit(1); /* the guard kills the tree */
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t gone = 0;
	for (size_t i = 0; i < s.n; i++)
		gone += s.mm[i].gone;
	/* a process that exited (or was killed) before its memory was in is
	 * not "all in": said, so that a log read after a crash does not mislead */
	char what[96] = "all pages in";
	if (gone)
		snprintf(what, sizeof(what), "done, %llu pages never copied (their process exited "
			 "first)", (unsigned long long)gone);
	log_info(&s.log, "%s: %llu pages copied in the background, %llu "
		 "faults served with the image's pages, %llu with zeros, %llu compressed "
		 "records decompressed; %.3f s of CPU", what,
		 (unsigned long long)s.filled, (unsigned long long)s.served,
		 (unsigned long long)s.zeroed, (unsigned long long)s.frames,
		 (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	send_msg(s.guard, &done, NULL, 0, -1);
	_exit(0);
}

/* --- ckpt's side ------------------------------------------------------------ */

int mm_lazy_image(struct rst_ctx *ctx)
{
	ctx->r.crc_later = MM_PAGES;
	return 0;
}

int mm_lazy_parse(struct rst_ctx *ctx, struct mm_rst *m, const struct img_record *rec,
		  struct pages_chunk *ret)
{
	/* the reader is sparse: the table is read with pread into memory of
	 * ckpt's (the server, a fork, has it too), the mapping not touched:
	 * the record's last 64 bytes as the reader kept them (the table of up
	 * to 2 extents), else its last page (up to 254), then the rest if it
	 * is longer. Only the table is kept, in
	 * an allocation of its size: a page per record would be hundreds of
	 * heap pages for 4 GiB, each written (a copy-on-write fault, the server
	 * being a fork) when it is freed */
	uint64_t page[IMG_PAGE_SIZE / 8];
	uint64_t got = MIN((uint64_t)IMG_PAGE_SIZE, rec->len), len;
	if (rec->len < sizeof(struct pages_head) || rec->len % 8)
		return -EINVAL;
	if (m->ntails % 64 == 0) {
		uint8_t **nt = realloc(m->tails, (m->ntails + 64) * sizeof(*nt));
		struct mm_rec *nr = realloc(m->recs, (m->ntails + 64) * sizeof(*nr));
		if (nt)
			m->tails = nt;
		if (nr)
			m->recs = nr;
		if (!nt || !nr)
			return -ENOMEM;
	}
	uint8_t *last = (uint8_t *)page;
	const uint8_t *end;
	size_t kept;
	int r = 0;
	/* a table of a few extents (a run of contiguous memory) is in the
	 * bytes the reader kept of the record's end, with the next frame */
	int in_index = img_reader_end(&ctx->r, rec, &end, &kept);
	if (in_index >= 0 && kept >= sizeof(struct pages_head) && kept % 8 == 0) {
		memcpy(last, end, kept);
		got = kept;
	} else {
		r = img_reader_pread(&ctx->r, rec->data + rec->len - got, last, got);
	}
	if (r >= 0)
		r = pages_table_len(rec, last + got - sizeof(struct pages_head), &len);
	if (r < 0)
		return r;
	if (len > got && got < MIN((uint64_t)IMG_PAGE_SIZE, rec->len)) { /* a longer table */
		got = MIN((uint64_t)IMG_PAGE_SIZE, rec->len);
		r = img_reader_pread(&ctx->r, rec->data + rec->len - got, last, got);
		if (r < 0)
			return r;
	}
	/* the index's bytes stay until the reader is closed (after the
	 * tasks), 8-aligned: the table is used where it is (no allocation
	 * per record, none to free); else malloc's alignment (16) is the 8
	 * pages_parse_tail() needs */
	bool own = !(in_index == 1 && got == kept && len <= got);
	uint8_t *tail = own ? malloc(len) : (uint8_t *)end + got - len;
	if (!tail)
		return -ENOMEM;
	if (own && len <= got)
		memcpy(tail, last + got - len, len);
	else if (own)
		r = img_reader_pread(&ctx->r, rec->data + rec->len - len, tail, len);
	if (r >= 0)
		r = pages_parse_tail(rec, tail, len, ret);
	if (r < 0) {
		if (own)
			free(tail);
		return r;
	}
	m->recs[m->ntails] = (struct mm_rec){.data = rec->data,
					     .len = rec->len,
					     .crc = rec->data_crc,
					     .late = rec->late ? &ctx->r : NULL,
					     .index = rec->index,
					     .offset = rec->offset};
	m->tails[m->ntails++] = own ? tail : NULL; /* NULL: the index's */
	return 0;
}

void mm_lazy_free(struct mm_rst *m)
{
	for (size_t i = 0; i < m->ntails; i++)
		free(m->tails[i]);
	free(m->tails);
	free(m->recs);
}

/* The vma of e holding addr (vmas are sorted), or -1. */
static ssize_t vma_idx(const MmEntry *e, uint64_t addr)
{
	size_t lo = 0, hi = e->n_vmas;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (addr < e->vmas[mid]->start)
			hi = mid;
		else if (addr >= e->vmas[mid]->end)
			lo = mid + 1;
		else
			return (ssize_t)mid;
	}
	return -1;
}

/* Has chunk ch a page outside the registered vmas (reg)? */
static bool has_eager(const MmEntry *e, const bool *reg, const struct pages_chunk *ch)
{
	for (size_t i = 0; i < ch->n; i++) {
		for (uint64_t a = ch->x[i].off, end = a + ch->x[i].len; a < end;) {
			ssize_t v = vma_idx(e, a);
			if (v < 0 || !reg[v])
				return true;
			a = e->vmas[v]->end;
		}
	}
	return false;
}

int mm_lazy_eager(struct rst_ctx *ctx, struct rst_task *t, const bool *reg,
		  struct pages_set *ret)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	struct pages_set s = { 0 };
	for (size_t c = 0; c < m->pages.n; c++) {
		const struct pages_chunk *ch = &m->pages.c[c];
		if (reg && !has_eager(m->e, reg, ch))
			continue;
		struct mm_rec *rec = m->recs ? &m->recs[c] : NULL;
		int r = rec && !rec->crc_ok ? mm_lazy_check_rec(rec) : 0;
		if (r < 0)
			r = log_fail(&ctx->log, -EBADMSG,
				     "pid %d: the image's pages at %llx are "
				     "damaged (%s)",
				     t->pid, (unsigned long long)ch->x[0].off, damage(r));
		else if (rec)
			rec->crc_ok = true;
		if (r >= 0 && (r = pages_set_add(&s, ch, 0, UINT64_MAX)) < 0)
			log_fail(&ctx->log, r, "pid %d: %s", t->pid, strerror(-r));
		if (r < 0) {
			pages_set_release(&s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

int mm_lazy_settle(struct rst_ctx *ctx, struct rst_task *t)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	for (size_t c = 0; m->recs && c < m->pages.n; c++) {
		int e = m->recs[c].crc_ok ? 0 : mm_lazy_check_rec(&m->recs[c]);
		if (e < 0)
			return log_fail(&ctx->log, -EBADMSG,
					"pid %d: the image's pages at %llx "
					"are damaged (%s)",
					t->pid, (unsigned long long)m->pages.c[c].x[0].off,
					damage(e));
	}
	free(m->recs);
	m->recs = NULL;
	return 0;
}

/*
 * The server is forked by a child of ckpt that calls setsid(), forks it
 * and exits, so that the server is in its own session and not ckpt's
 * child. That starter shares ckpt's memory and ckpt waits while it runs
 * (CLONE_VM | CLONE_VFORK, as posix_spawn does): it has no address space
 * of its own to copy, fault in and tear down, and the server is a fork
 * of ckpt's memory as before. Its stack is a buffer of ckpt's, which the
 * server, a fork of it, keeps as its own. The pid is left in ckpt's
 * memory (the starter shares it), so that ckpt need not wait for the
 * starter later; a fork that failed leaves -errno. (A CLONE_VM child has
 * no rseq area registered, nor then the server: nothing of it reads one.)
 */
struct starter {
	struct rst_ctx *ctx;
	int sock;
	pid_t server;
};

static int starter_main(void *arg)
{
	struct starter *a = arg;
	setsid(); /* out of ckpt's session; the server's parent exits now */
	pid_t s = fork();
	if (s == 0)
		server_main(a->ctx, a->sock);
	a->server = s < 0 ? -errno : s;
	return 0;
}

#define STARTER_STACK (64u << 10)

int mm_lazy_start(struct rst_ctx *ctx)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return log_fail(&ctx->log, -errno, "--lazy: cannot make a socket: %s",
				strerror(errno));
	ctx->lazy = malloc(sizeof(*ctx->lazy));
	if (!ctx->lazy) {
		close(sv[0]);
		close(sv[1]);
		return -ENOMEM;
	}
	struct starter a = { .ctx = ctx, .sock = sv[1], .server = -ECHILD };
	_Alignas(64) char stack[STARTER_STACK];
	pid_t x = clone(starter_main, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	int r = x < 0 ? -errno : 0;
	close(sv[1]);
	if (x > 0) /* it has exited: CLONE_VFORK resumes ckpt then */
		while (waitpid(x, NULL, 0) < 0 && errno == EINTR)
			;
	if (r == 0 && a.server < 0)
		r = a.server;
	if (r < 0) {
		close(sv[0]);
		free(ctx->lazy);
		ctx->lazy = NULL;
		return log_fail(&ctx->log, r, "--lazy: cannot start the lazy server: %s",
				strerror(-r));
	}
	*ctx->lazy = (struct mm_lazy){ .sock = sv[0], .server = a.server };
	log_info(&ctx->log, "lazy: memory is served by pid %d", a.server);
	return 0;
}

bool mm_lazy_vma(const VmaEntry *v)
{
	return v->kind == VMA_KIND__VMA_ANON && !v->shared && !v->has_huge_page;
}

int mm_lazy_uffd(struct rst_ctx *ctx, struct rst_task *t, int *ret_fd, bool **ret_reg)
{
	const MmEntry *e = ((struct mm_rst *)t->kstate[KIND_mm])->e;
	long rfd = puppet_syscall(&t->pup, SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (rfd < 0)
		return log_fail(&ctx->log, (int)rfd,
				"pid %d: --lazy needs a userfaultfd that serves the kernel's own "
				"accesses too (root, or vm.unprivileged_userfaultfd=1): %s",
				t->pid, strerror((int)-rfd));
	int fd = puppet_getfd(&t->pup, (int)rfd);
	puppet_syscall(&t->pup, SYS_close, rfd);
	if (fd < 0)
		return log_fail(&ctx->log, fd, "pid %d: cannot take its userfaultfd: %s", t->pid,
				strerror(-fd));
	struct uffdio_api api = { .api = UFFD_API, .features = LAZY_FEATURES };
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int r = -errno;
		close(fd);
		return log_fail(&ctx->log, r, "pid %d: --lazy needs userfaultfd's fork, remap, "
				"remove and unmap events (CAP_SYS_PTRACE): %s", t->pid, strerror(-r));
	}
	bool *reg = calloc(e->n_vmas ? e->n_vmas : 1, sizeof(*reg));
	if (!reg) {
		close(fd);
		return -ENOMEM;
	}
	uint64_t small = 0;
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		if (!mm_lazy_vma(v))
			continue; /* hugetlb: written now (mm-huge.c) */
		/* a small vma (the TLS, libc's bss, a small stack or heap) is
		 * written now too: each would be a fault served by the server
		 * as soon as the process runs */
		if (v->end - v->start <= MM_LAZY_SMALL &&
		    small + (v->end - v->start) <= MM_LAZY_SMALL_ALL) {
			small += v->end - v->start;
			continue;
		}
		struct uffdio_register rg = { .range = { v->start, v->end - v->start },
					      .mode = UFFDIO_REGISTER_MODE_MISSING };
		reg[i] = ioctl(fd, UFFDIO_REGISTER, &rg) == 0; /* else written now */
	}
	*ret_fd = fd;
	*ret_reg = reg;
	return 0;
}

/*
 * The pages a process touches first when it runs again, put in by ckpt
 * now rather than by the server on a fault (each fault a round trip to
 * the server, and on a busy machine a wait until it runs): for each
 * thread, the pages around its stack pointer (the frames it returns to;
 * below it, the red zone and a signal frame: the ping of the benchmark),
 * the page of its instruction pointer, of its TLS (fs base) and of each
 * other register that points into its memory. UFFDIO_COPY of the image's
 * bytes, UFFDIO_ZEROPAGE where the image has none. The server still owes
 * them: its copy there fails with EEXIST, which it takes as done. Best
 * effort: a page of a compressed record, or of a record too large to check
 * now or damaged, is left to the server (which reports the damage).
 */
#define WARM_BELOW (16u << 10) /* below the stack pointer */
#define WARM_ABOVE (8u << 10)  /* above it */
#define WARM_MAX 64            /* pages */
#define WARM_CHECK (1u << 20)  /* the largest record checked for it */

static size_t warm_add(uint64_t *pages, size_t n, uint64_t lo, uint64_t hi)
{
	for (uint64_t a = lo & ~(PAGE - 1); a < hi && n < WARM_MAX; a += PAGE)
		pages[n++] = a;
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The image's bytes of page a, in chunk c of m (in one of its extents);
 * NULL if they cannot be used now. */
static const uint8_t *warm_src(struct mm_rst *m, size_t c, uint64_t a)
{
	const struct pages_chunk *ch = &m->pages.c[c];
	struct mm_rec *rec = m->recs ? &m->recs[c] : NULL;
	if (!ch->data || ch->z ||
	    (rec && !rec->crc_ok && (rec->len > WARM_CHECK || mm_lazy_check_rec(rec) < 0)))
		return NULL;
	if (rec)
		rec->crc_ok = true;
	uint64_t off = 0;
	for (size_t i = 0; i < ch->n; off += ch->x[i++].len)
		if (a >= ch->x[i].off && a < ch->x[i].off + ch->x[i].len)
			return off + (a - ch->x[i].off) + PAGE <= ch->bytes
				       ? ch->data + off + (a - ch->x[i].off)
				       : NULL;
	return NULL;
}

void mm_lazy_warm(struct rst_ctx *ctx, struct rst_task *t, int fd, const bool *reg)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	const MmEntry *e = m->e;
	uint64_t pages[WARM_MAX];
	size_t n = 0;
	for (size_t k = 0; k <= t->nthreads; k++) {
		const struct rst_task *th = k ? &t->threads[k - 1] : t;
		const RegsEntry *r = th->kstate[KIND_regs];
		if (!r)
			continue;
		n = warm_add(pages, n, r->rsp > WARM_BELOW ? r->rsp - WARM_BELOW : 0,
			     r->rsp + WARM_ABOVE);
		n = warm_add(pages, n, r->fs_base, r->fs_base + PAGE); /* the TCB, rseq */
		const uint64_t one[] = { r->rip, r->rbx, r->rbp, r->r12, r->r13,
					 r->r14, r->r15, r->rdi, r->rsi, r->rdx, r->r10 };
		for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
			n = warm_add(pages, n, one[i], one[i] + 1);
	}
	qsort(pages, n, sizeof(pages[0]), cmp_u64);
	/* the image's pages among them: a pass over the chunks' extents */
	const uint8_t *src[WARM_MAX] = { 0 };
	bool in[WARM_MAX] = { 0 };
	for (size_t c = 0; c < m->pages.n; c++) {
		const struct pages_chunk *ch = &m->pages.c[c];
		for (size_t i = 0; i < ch->n; i++)
			for (size_t j = 0; j < n; j++)
				if (!in[j] && pages[j] >= ch->x[i].off &&
				    pages[j] < ch->x[i].off + ch->x[i].len) {
					in[j] = true;
					src[j] = warm_src(m, c, pages[j]);
				}
	}
	size_t copied = 0, zeroed = 0;
	for (size_t j = 0; j < n; j++) {
		if (j && pages[j] == pages[j - 1])
			continue;
		ssize_t v = vma_idx(e, pages[j]);
		if (v < 0 || !reg[v] || (in[j] && !src[j]))
			continue;
		if (src[j]) {
			struct uffdio_copy cp = { .dst = pages[j], .src = (uint64_t)(uintptr_t)src[j],
						  .len = PAGE };
			copied += ioctl(fd, UFFDIO_COPY, &cp) == 0;
		} else {
			struct uffdio_zeropage z = { .range = { pages[j], PAGE } };
			zeroed += ioctl(fd, UFFDIO_ZEROPAGE, &z) == 0;
		}
	}
	log_debug(&ctx->log, "pid %d: %zu pages put in before it runs, %zu zero pages", t->pid,
		  copied, zeroed);
}

/* The server's answer for the oldest task handed over (MSG_TAKEN): its pid
 * is held by the guard. */
static int take_answer(struct rst_ctx *ctx, int flags)
{
	struct mm_lazy *l = ctx->lazy;
	pid_t pid = l->unanswered[0];
	struct lazy_msg a;
	ssize_t k;
	while ((k = recv(l->sock, &a, sizeof(a), flags)) < 0 && errno == EINTR)
		;
	if (k < 0 && errno == EAGAIN)
		return -EAGAIN;
	if (k < 0)
		k = -errno;
	if (k != (ssize_t)sizeof(a) || a.type != MSG_TAKEN || a.pid != pid)
		return log_fail(&ctx->log, k < 0 ? (int)k : -EPIPE,
				"pid %d: the lazy server (pid %d) did not take its memory: %s", pid,
				l->server,
				k < 0 ? strerror((int)-k) : k == 0 ? "it has ended" : "a wrong answer");
	memmove(l->unanswered, l->unanswered + 1, --l->nunanswered * sizeof(pid_t));
	return 0;
}

/* At most this many tasks handed over without an answer: the server's
 * answers wait in ckpt's socket meanwhile. */
#define LAZY_UNANSWERED 32

int mm_lazy_give(struct rst_ctx *ctx, struct rst_task *t, int fd, const bool *reg)
{
	struct mm_lazy *l = ctx->lazy;
	const MmEntry *e = ((struct mm_rst *)t->kstate[KIND_mm])->e;
	_Static_assert(sizeof(bool) == 1, "registered flags are sent as bytes");
	int r = 0;
	/* answers already in, without waiting; one waited for if too many are due */
	while (l->nunanswered && (r = take_answer(ctx, MSG_DONTWAIT)) == 0)
		;
	while (r == -EAGAIN && l->nunanswered >= LAZY_UNANSWERED)
		r = take_answer(ctx, 0);
	if (r < 0 && r != -EAGAIN)
		return r;
	if (l->nunanswered == l->cap) {
		size_t cap = l->cap * 2 + 8;
		pid_t *n = realloc(l->unanswered, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		l->unanswered = n;
		l->cap = cap;
	}
	struct lazy_msg m = { .type = MSG_TASK, .task = (uint32_t)(t - ctx->tasks),
			      .pid = t->pup.pid, .nvmas = (uint32_t)e->n_vmas };
	r = e->n_vmas > 65536 ? -E2BIG : send_msg(l->sock, &m, reg, e->n_vmas, fd);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot hand its memory to the lazy server "
				"(pid %d): %s", t->pid, l->server, strerror(-r));
	/* not waited for here: the rest of the task's state is restored while
	 * the server and its guard take it (mm_lazy_taken) */
	l->unanswered[l->nunanswered++] = t->pup.pid;
	return 0;
}

int mm_lazy_taken(struct rst_ctx *ctx)
{
	int r = 0;
	while (r == 0 && ctx->lazy && ctx->lazy->nunanswered)
		r = take_answer(ctx, 0);
	return r;
}

static void lazy_end(struct rst_ctx *ctx, bool commit)
{
	if (!ctx->lazy)
		return;
	struct lazy_msg m = { .type = MSG_COMMIT };
	if (commit && send_msg(ctx->lazy->sock, &m, NULL, 0, -1) < 0)
		log_error(&ctx->log, "lazy server (pid %d) is gone: the restored processes are "
			  "killed by its guard", ctx->lazy->server);
	close(ctx->lazy->sock);
	free(ctx->lazy->unanswered);
	free(ctx->lazy);
	ctx->lazy = NULL;
}

void *mm_lazy_handover(struct rst_ctx *ctx)
{
	lazy_end(ctx, true);
	return NULL;
}

void mm_lazy_abort(struct rst_ctx *ctx)
{
	lazy_end(ctx, false);
}
