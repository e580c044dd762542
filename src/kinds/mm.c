/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The address space: every VMA, the mm fields, and the pages that cannot be
 * had from elsewhere.
 *
 * Each vma belongs to the kind that claims it (kinds.h, vma_claim, asked
 * in vma_prio order; its id is VmaEntry.owner): mm itself for anonymous
 * memory and the kernel's own mappings, and for instance file_reg, memfd
 * and sysv for the others. The owner fills the VmaEntry at checkpoint and
 * maps it at restart; mm keeps what is common to all (the VmFlags it
 * refuses, madvise, mlock, final protections) and names no other kind.
 *
 * Which pages are saved (PAGEMAP_SCAN): of private mappings, pages that are
 * present or swapped, not the shared zero page, and not file pages (so of a
 * private file mapping only the pages the process wrote); of shared
 * anonymous mappings, every page; of shared file mappings, none (the file
 * holds them). They go to the page store (img/pages.h), which drops the
 * pages whose content is all zero and writes MM_PAGES records: one per
 * chunk of ckpt's copy buffer, the vmas of a process sharing them (a record
 * ends where the read method changes, see mm_read and read_as).
 *
 * Restore, in the puppet: unmap all it had from ckpt but the vDSO group and
 * the scratch area; move [vvar], [vvar_vclock] and [vdso] together to their
 * saved addresses; have every VMA mapped by its owner (writable while
 * its pages are written);
 * write the pages; set the final protections; PR_SET_MM_MAP.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <linux/userfaultfd.h>
#include <unistd.h>

#include "core/ctx.h"
#include "img/pages.h"
#include "kinds/fdtable.h"
#include "kinds/file-reg.h"
#include "kinds/memfd.h"
#include "kinds/mm.h"
#include "kinds/mm-rst.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"
#include "util/kernel.h"
#include "util/pagemap-scan.h"

_Static_assert(MM_ENTRY == MM_REC_ENTRY && MM_PAGES == MM_REC_PAGES && MM_TRACK == MM_REC_TRACK,
	       "mm.h's record types");
#define VSYSCALL_ADDR 0xffffffffff600000ull

struct mm_ckpt {
	MmEntry e;
	VmaEntry *vma;          /* array of e.n_vmas, e.vmas points into it */
	uint64_t *auxv;
	uint64_t **inherited;   /* per vma: its run list (mm-cow.c), to free */
	struct shmem_index *shmem_done; /* the root's: shmem pages in the image (shmem_seen) */
	int brk_call;           /* the probe: brk(0) */
	int *aio_call;          /* per vma of an AIO ring: io_getevents(ring, 0, 0): has it a context? */
	struct mm_dirty *dirty; /* incremental checkpoints (mm-dirty.c) */
};

static int mm_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct mm_ckpt *m = task_state(t, KIND_mm, sizeof(*m));
	(void)ctx;
	if (!m)
		return -ENOMEM;
	m->brk_call = task_probe_call(t, PUPPET_CALL(SYS_brk, 0));
	for (size_t i = 0; i < t->vmas.n; i++) {
		if (!mm_aio_claim(&t->vmas.v[i]))
			continue;
		if (!m->aio_call && !(m->aio_call = calloc(t->vmas.n, sizeof(*m->aio_call))))
			return -ENOMEM;
		m->aio_call[i] = task_probe_call(
			t, PUPPET_CALL(SYS_io_getevents, t->vmas.v[i].start, 0, 0, 0, 0));
	}
	return 0;
}


/* --- checkpoint ------------------------------------------------------ */

static bool needs_pages(const VmaEntry *v)
{
	return v->kind == VMA_KIND__VMA_ANON || (v->kind == VMA_KIND__VMA_FILE && !v->shared);
}

/* The vma is mm's own: anonymous memory, the vDSO group, [vsyscall]. */
static bool mm_vma_claim(const struct proc_vma *pv)
{
	const char *p = pv->path;
	return !p[0] || p[0] == '[' || (pv->shared && pv->deleted && !strcmp(p, "/dev/zero")) ||
	       mm_huge_claim(pv) || mm_aio_claim(pv);
}

/* The mappings the kernel makes itself, moved or left as they are. */
static const struct {
	const char *name;
	VmaKind kind;
} special[] = {
	{ "[vsyscall]", VMA_KIND__VMA_VSYSCALL },
	{ "[vdso]", VMA_KIND__VMA_VDSO },
	{ "[vvar]", VMA_KIND__VMA_VVAR },
	{ "[vvar_vclock]", VMA_KIND__VMA_VVAR_VCLOCK },
};

static int special_index(const char *path)
{
	for (size_t i = 0; i < ARRAY_SIZE(special); i++)
		if (!strcmp(path, special[i].name))
			return (int)i;
	return -1;
}

static int mm_vma_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
			  VmaEntry *v)
{
	const char *p = pv->path;
	int sp = special_index(p);

	if (sp >= 0) {
		v->kind = special[sp].kind;
		return 0;
	}
	if (mm_aio_claim(pv)) { /* mm-aio.c */
		const struct mm_ckpt *m = t->kstate[KIND_mm];
		long alive = m->aio_call ? task_probe_ret(t, m->aio_call[pv - t->vmas.v]) : -ENOENT;
		if (alive == 0)
			return mm_aio_collect(ctx, t, pv, v);
		if (alive != -EINVAL)
			return log_fail(&ctx->log, (int)alive,
					"pid %d vma %llx: cannot tell whether its AIO context exists: %s",
					t->pid, (unsigned long long)pv->start, strerror((int)-alive));
		/* the ring of a context of its parent's, copied by fork: memory
		 * without a context, kept as shared memory with its contents */
		log_info(&ctx->log, "pid %d vma %llx: an AIO ring without its context (its "
			 "parent's, inherited by fork): restored as plain shared memory",
			 t->pid, (unsigned long long)pv->start);
	}
	v->kind = VMA_KIND__VMA_ANON;
	if (p[0] == '[' && strcmp(p, "[heap]") && strcmp(p, "[stack]") && strncmp(p, "[anon:", 6) &&
	    strncmp(p, "[anon_shmem:", 12))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d vma %llx-%llx (%s): this special mapping is not supported",
				t->pid, (unsigned long long)pv->start, (unsigned long long)pv->end, p);
	if (p[0] == '/') { /* shared anonymous: "/dev/zero (deleted)" */
		v->has_shmem_id = true;
		v->shmem_id = pv->ino;
	}
	return 0;
}

void mm_vma_link(const struct proc_vma *pv, char *buf, size_t size)
{
	snprintf(buf, size, "map_files/%llx-%llx", (unsigned long long)pv->start,
		 (unsigned long long)pv->end);
}

int mm_vma_flags(const struct proc_vma *pv)
{
	return pv->shared && (pv->vmflags & VMF_MW) ? O_RDWR : O_RDONLY;
}

/* The kinds of memory areas in the order they claim: lowest vma_prio first. */
static size_t vma_kinds(enum kind out[KIND_MAX])
{
	size_t n = 0;
	for (int k = 0; k < KIND_MAX; k++) {
		const struct kind_ops *o = kinds[k].ops;
		if (!o->vma_claim || !o->vma_collect)
			continue;
		size_t i = n++;
		for (; i > 0 && kinds[out[i - 1]].ops->vma_prio > o->vma_prio; i--)
			out[i] = out[i - 1];
		out[i] = (enum kind)k;
	}
	return n;
}

/* What no kind can save, whoever would claim the vma. */
static int refuse_vma(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
		      VmaEntry *v)
{
	const char *p = pv->path;
	if (pv->vmflags & (VMF_IO | VMF_PF))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d vma %llx-%llx (%s): device (I/O or PFN) mappings cannot be saved",
				t->pid, (unsigned long long)pv->start, (unsigned long long)pv->end, p);
	/* VmFlags ckpt has no bit for: lock-on-fault is kept, the rest refused
	 * (mseal'd "sl", userfaultfd minor "ui", anything newer) */
	for (const char *f = pv->unknown_flags; *f; f += f[2] ? 3 : 2) {
		if (!strncmp(f, "lf", 2)) {
			v->has_lock_onfault = v->lock_onfault = true;
			continue;
		}
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d vma %llx-%llx (%s): VmFlags '%.2s'%s cannot be saved",
				t->pid, (unsigned long long)pv->start, (unsigned long long)pv->end, p,
				f, !strncmp(f, "sl", 2) ? " (sealed with mseal)" : "");
	}
	if ((pv->vmflags & VMF_UM) ||
	    ((pv->vmflags & VMF_UW) && !mm_dirty_tracked(mm_dirty_of(t))))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d vma %llx-%llx: userfaultfd-registered memory is not supported yet",
				t->pid, (unsigned long long)pv->start, (unsigned long long)pv->end);
	return 0;
}

/* The first kind (by vma_prio) that claims the vma collects it. */
static int classify(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, VmaEntry *v,
		    const enum kind *order, size_t norder)
{
	/* the kernel's own mappings have VmFlags (pf, io) refused elsewhere */
	int r = special_index(pv->path) < 0 ? refuse_vma(ctx, t, pv, v) : 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < norder; i++) {
		const struct kind_ops *o = kinds[order[i]].ops;
		if (!o->vma_claim(pv))
			continue;
		v->has_owner = true;
		v->owner = kinds[order[i]].id;
		return o->vma_collect(ctx, t, pv, v);
	}
	return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d vma %llx-%llx (%s): no kind saves it",
			t->pid, (unsigned long long)pv->start, (unsigned long long)pv->end,
			pv->path);
}

static int mm_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct mm_ckpt *m = task_state(t, KIND_mm, sizeof(*m));
	size_t n = t->vmas.n;
	enum kind order[KIND_MAX];
	size_t norder = vma_kinds(order);
	int r;

	if (!m)
		return -ENOMEM;
	r = mm_dirty_collect(ctx, t, &m->dirty);
	if (r < 0)
		return r;
	mm_entry__init(&m->e);
	m->vma = calloc(n ? n : 1, sizeof(*m->vma));
	m->e.vmas = calloc(n ? n : 1, sizeof(*m->e.vmas));
	if (!m->vma || !m->e.vmas)
		return -ENOMEM;
	int refused = 0; /* the first refusal; the other mappings are looked at too */
	for (size_t i = 0; i < n; i++) {
		const struct proc_vma *pv = &t->vmas.v[i];
		VmaEntry *v = &m->vma[i];
		vma_entry__init(v);
		v->start = pv->start;
		v->end = pv->end;
		v->pgoff = pv->pgoff;
		v->prot = pv->prot;
		v->shared = pv->shared;
		v->has_vmflags = true;
		v->vmflags = pv->vmflags;
		v->name = pv->path;
		r = classify(ctx, t, pv, v, order, norder);
		if (r >= 0)
			r = mm_huge_collect(ctx, t, pv, v);
		if (log_gathers(&ctx->log, r)) {
			refused = refused ? refused : r;
			continue;
		}
		if (r < 0)
			return r;
		m->e.vmas[m->e.n_vmas++] = v;
	}
	if (refused)
		return refused;

	const struct proc_stat *st = &t->stat;
	m->e.start_code = st->start_code;
	m->e.end_code = st->end_code;
	m->e.start_data = st->start_data;
	m->e.end_data = st->end_data;
	m->e.start_brk = st->start_brk;
	m->e.start_stack = st->start_stack;
	m->e.arg_start = st->arg_start;
	m->e.arg_end = st->arg_end;
	m->e.env_start = st->env_start;
	m->e.env_end = st->env_end;

	long brk = task_probe_ret(t, m->brk_call);
	if (brk < 0)
		return log_fail(&ctx->log, (int)brk, "pid %d: cannot read brk: %s", t->pid,
				strerror((int)-brk));
	m->e.brk = (uint64_t)brk;
	if ((r = mm_lockall_read(ctx, t, &m->e)) < 0)
		return r;

	char *auxv = NULL;
	size_t len;
	r = proc_read(t->pid, "auxv", &auxv, &len);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read auxv: %s", t->pid, strerror(-r));
	m->auxv = (uint64_t *)auxv;
	m->e.n_auxv = len / sizeof(uint64_t);
	m->e.auxv = m->auxv;

	/* a program whose file was deleted since (upgraded, a build's output
	 * removed): its contents saved as a deleted file's, as its mappings */
	char exe[64], target[4096];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", t->pid);
	ssize_t tlen = readlink(exe, target, sizeof(target) - 1);
	target[tlen > 0 ? tlen : 0] = '\0';
	m->e.has_exe_file_id = true;
	if (tlen > 10 && !strcmp(target + tlen - 10, " (deleted)"))
		return memfd_collect_path(ctx, t, "exe", O_RDONLY, "exe", &m->e.exe_file_id);
	/* the link read once (file_reg_collect_path reads it again, and says
	 * why when it cannot) */
	struct stat est;
	if (tlen > 0 && stat(exe, &est) == 0)
		return file_reg_collect_named(ctx, t, target, &est, O_RDONLY, "exe",
					      &m->e.exe_file_id);
	return file_reg_collect_path(ctx, t, "exe", O_RDONLY, "exe", &m->e.exe_file_id);
}

/*
 * The page store's reader: the pages of one vma, whose readability it
 * knows. process_vm_readv pins pages, which unshares what a tree shares
 * copy-on-write (the kernel copies the page): only for a lone task;
 * /proc/PID/mem otherwise, and for what process_vm_readv did not take.
 */
struct mm_read {
	struct ckpt_ctx *ctx;
	struct task *t;
	bool readable;
	/* a pre-copy round: the task runs again, and its /proc/PID/mem (-1:
	 * gone) is read; a page that cannot be read (unmapped since, the
	 * task gone) is sent as zeros: it is not in a tracked vma at the next
	 * round, so that round sends it again or the image does not have it.
	 * Only that page: an extent can span two vmas, and the pages of the
	 * one still there, write-protected when listed, are left to this
	 * image by the next round (zeros there lost them: e2e
	 * mig2_precopy_remap) */
	bool live;
	int live_fd;
	uint64_t gone; /* bytes of it that could not be read */
	/* record pw->records holds pages restart --lazy writes itself (read_as) */
	bool eager;
	uint64_t eager_rec;
	/* the pages the pre-copy took that are the image's (mm-dirty.c) */
	const struct mm_pre_task *pre;
};

static int read_task(struct mm_read *rd, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	struct iovec remote[1024]; /* IOV_MAX */

	/* many extents (the written pages of an incremental image) go in
	 * batches of IOV_MAX, not one /proc/PID/mem read each */
	while (rd->readable && rd->ctx->ntasks == 1 && n) {
		size_t k = MIN(n, ARRAY_SIZE(remote));
		uint64_t bytes = 0;
		for (size_t i = 0; i < k; i++) {
			remote[i] = (struct iovec){ (void *)(uintptr_t)x[i].off, x[i].len };
			bytes += x[i].len;
		}
		struct iovec local = { .iov_base = dst, .iov_len = bytes };
		if (process_vm_readv(rd->t->pid, &local, 1, remote, k, 0) != (ssize_t)bytes)
			break;
		x += k;
		n -= k;
		dst += bytes;
	}
	for (size_t i = 0; i < n; i++) {
		if (rd->live) {
			rd->gone += proc_mem_read_gone(rd->live_fd, x[i].off, x[i].len, dst);
			dst += x[i].len;
			continue;
		}
		int r = puppet_read(&rd->t->pup, x[i].off, dst, x[i].len);
		if (r < 0)
			return log_fail(&rd->ctx->log, r, "pid %d: cannot read memory at %llx: %s",
					rd->t->pid, (unsigned long long)x[i].off, strerror(-r));
		dst += x[i].len;
	}
	return 0;
}

static int mm_read(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	struct mm_read *rd = arg;
	bool got;
	/* extents with no page from the copies are read in one batch */
	if (!rd->pre || (n && mm_pre_fill(rd->pre, x[0].off, x[n - 1].off + x[n - 1].len, NULL,
					  &got) == x[n - 1].off + x[n - 1].len - x[0].off && !got))
		return read_task(rd, x, n, dst);
	for (size_t i = 0; i < n; i++) {
		for (uint64_t a = x[i].off, end = a + x[i].len; a < end;) {
			uint64_t k = mm_pre_fill(rd->pre, a, end, dst, &got);
			int r = got ? 0 : read_task(rd, &(struct pages_extent){ .off = a, .len = k }, 1, dst);
			if (r < 0)
				return r;
			a += k;
			dst += k;
		}
	}
	return 0;
}

static int pages_fail(struct ckpt_ctx *ctx, const struct pages_writer *pw, int r)
{
	if (r < 0 && !pw->read_failed)
		return log_fail(&ctx->log, r, "cannot write pages to the image: %s", strerror(-r));
	return r;
}

/* The pages of [start, end) that are not the parent's. */
static int add_own_runs(struct pages_writer *pw, const VmaEntry *v, uint64_t start, uint64_t end)
{
	uint64_t run = start;
	for (uint64_t a = start; a < end; a += PAGE) {
		if (!mm_cow_skip(v, a))
			continue;
		int r = a > run ? pages_add(pw, run, a - run) : 0;
		if (r < 0)
			return r;
		run = a + PAGE;
	}
	return run < end ? pages_add(pw, run, end - run) : 0;
}

/*
 * restart --lazy gives the private anonymous vmas (not hugetlb) but the
 * small ones (MM_LAZY_SMALL) to its server and writes the pages of every
 * other vma itself, once it has
 * checked the checksum of their whole record, before the tree runs. So a
 * large private anonymous vma starts a record of its own after such pages,
 * and such pages one after more than LAZY_CUT of others: that check stays
 * small. (A 4 GiB memhog's first record held its data page, its heap and
 * the first 8 MiB of its memory: ckpt read and summed all 8 MiB.)
 */
#define LAZY_CUT (1ull << 20)

static int lazy_cut(struct pages_writer *pw, const VmaEntry *v)
{
	struct mm_read *rd = pw->arg;
	bool lazy = mm_lazy_vma(v) && v->end - v->start > MM_LAZY_SMALL;
	bool held = rd->eager && rd->eager_rec == pw->records && pw->queued;
	bool cut = lazy ? held && v->end - v->start > LAZY_CUT : !held && pw->queued > LAZY_CUT;
	int r = cut ? pages_flush(pw) : 0;
	if (!lazy) {
		rd->eager = true;
		rd->eager_rec = pw->records;
	}
	return r;
}

/*
 * The pages queued next are v's: the pages of a record are read with one
 * method (mm_read: process_vm_readv only for a lone process's readable
 * vmas), so what is queued is written first if v's method differs. A tree's
 * vmas otherwise share records: a record per vma was a write and a pad to
 * the next page per vma (most of step "dump" for a tree of small processes).
 */
static int read_as(struct ckpt_ctx *ctx, struct pages_writer *pw, const VmaEntry *v)
{
	struct mm_read *rd = pw->arg;
	bool readable = v->prot & PROT_READ;
	int r = 0;
	if (rd->readable != readable) {
		r = ctx->ntasks == 1 ? pages_flush(pw) : 0;
		rd->readable = readable;
	}
	return r < 0 ? r : lazy_cut(pw, v);
}

size_t mm_map_first(const struct mm_pages_map *m, uint64_t addr)
{
	return pm_region_first(m->r, m->n, addr);
}

/* A vma whose pages the process's one scan gives (scan_vma, mm-cow.c). */
static bool map_scanned(const VmaEntry *v)
{
	return needs_pages(v) && !v->shared && !v->has_huge_page;
}

bool mm_map_covers(const struct mm_pages_map *m, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = m->ok ? m->nspan / 2 : 0;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->span[2 * mid + 1] < end)
			lo = mid + 1;
		else
			hi = mid;
	}
	return m->ok && lo < m->nspan / 2 && m->span[2 * lo] <= start;
}

void mm_map_free(struct mm_pages_map *m)
{
	free(m->r);
	free(m->span);
	*m = (struct mm_pages_map){0};
}

/* The spans map_pages scans: its private vmas and what lies between them,
 * but not the vmas the dirty tracking may scan itself (d; one it does not
 * in the end, unregistered, or inherited from the parent, is scanned on
 * its own). */
static int map_spans(const MmEntry *e, const struct mm_dirty *d, struct mm_pages_map *m)
{
	bool open = false;
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		if (mm_dirty_may_cover(d, v)) {
			open = false;
			continue;
		}
		if (!map_scanned(v))
			continue;
		if (open) {
			m->span[m->nspan - 1] = v->end;
			continue;
		}
		if (!m->span && !(m->span = calloc(2 * e->n_vmas, sizeof(*m->span))))
			return -ENOMEM;
		m->span[m->nspan++] = v->start;
		m->span[m->nspan++] = v->end;
		open = true;
	}
	return 0;
}

/*
 * t's present or swapped pages in the spans of its private vmas (what lies
 * between two of them too), by a PAGEMAP_SCAN a span with their
 * categories, where the pages of each vma were a scan of their own, and
 * again for the copy-on-write comparison with the parent (system calls are
 * dear on this paravirtualized machine: a tree of small processes spent
 * more time on them than on their pages). A vma the dirty tracking scans
 * (d) is left out: that scan lists its pages (a walk of the page tables of
 * 1 GiB took 14 ms, twice in an incremental checkpoint). The map is left
 * not ok if a scan fails: each vma is scanned on its own then.
 */
static void map_pages(int pagemap, const MmEntry *e, const struct mm_dirty *d,
		      struct mm_pages_map *m)
{
	*m = (struct mm_pages_map){0};
	if (map_spans(e, d, m) < 0)
		goto fail;
	for (size_t s = 0; s < m->nspan; s += 2) {
		struct pm_scan sc;
		pm_scan_start(&sc, pagemap,
			      &(struct pm_scan_arg){
				  .start = m->span[s],
				  .end = m->span[s + 1],
				  .category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
				  .return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_FILE |
						 PAGE_IS_PFNZERO,
			      },
			      NULL, 0);
		for (;;) {
			if (m->n == m->cap) {
				size_t cap = m->cap ? m->cap * 2 : 256;
				struct page_region *nr = realloc(m->r, cap * sizeof(*nr));
				if (!nr)
					goto fail;
				m->r = nr;
				m->cap = cap;
			}
			/* straight into the map, as many as it has room for */
			long n = pm_scan_call(&sc, m->r + m->n, m->cap - m->n);
			if (n < 0)
				goto fail;
			m->n += (size_t)n;
			if (sc.done)
				break;
		}
		if (pm_scan_pos(&sc) < m->span[s + 1]) /* stuck */
			goto fail;
	}
	m->ok = m->nspan > 0;
	return;
fail:
	mm_map_free(m);
}

/* Gives the pages of v that must be saved to the page store. */
static int scan_vma(struct ckpt_ctx *ctx, struct task *t, int pagemap, const VmaEntry *v,
		    struct pages_writer *pw, const struct mm_pages_map *map)
{
	int r = 0;
	/* private, not hugetlb: the pages there and not the zero page, nor
	 * file pages (what the loop below asks the kernel), from the map. A
	 * vma with none of them (a thread stack's guard page) does not change
	 * the read method (read_as): 1,000 threads' stacks and guards made
	 * 1,000 records, each a write and a pad */
	if (map_scanned(v) && mm_map_covers(map, v->start, v->end)) {
		bool as = false;
		for (size_t i = mm_map_first(map, v->start);
		     r >= 0 && i < map->n && map->r[i].start < v->end; i++) {
			const struct page_region *g = &map->r[i];
			uint64_t a = MAX(g->start, v->start), b = MIN(g->end, v->end);
			if (g->categories & (PAGE_IS_PFNZERO | PAGE_IS_FILE))
				continue;
			if (!as && (r = read_as(ctx, pw, v)) < 0)
				break;
			as = true;
			r = v->inherit ? add_own_runs(pw, v, a, b) : pages_add(pw, a, b - a);
		}
		return pages_fail(ctx, pw, r);
	}
	if ((r = read_as(ctx, pw, v)) < 0)
		return pages_fail(ctx, pw, r);
	/* shared anonymous: every page, zero ones dropped (a page may be in
	 * another task's page tables only; hugetlb too, whose pages the
	 * mapping reserved) */
	if (v->shared)
		return pages_fail(ctx, pw, pages_add(pw, v->start, v->end - v->start));
	/* private hugetlb: the pages there, file or anonymous (one never
	 * touched is not read: that would take a huge page from the pool) */
	uint64_t excl = v->has_huge_page ? 0 : PAGE_IS_PFNZERO | PAGE_IS_FILE;

	struct page_region regs[512];
	struct pm_scan s;
	pm_scan_start(&s, pagemap,
		      &(struct pm_scan_arg){
			  .start = v->start,
			  .end = v->end,
			  .category_inverted = excl,
			  .category_mask = excl,
			  .category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			  .return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		      },
		      regs, ARRAY_SIZE(regs));
	for (const struct page_region *g; (g = pm_scan_next(&s));) {
		r = v->inherit ? add_own_runs(pw, v, g->start, g->end)
			       : pages_add(pw, g->start, g->end - g->start);
		if (r < 0)
			return pages_fail(ctx, pw, r);
	}
	if (s.err < 0)
		return log_fail(&ctx->log, s.err, "pid %d: PAGEMAP_SCAN of %llx-%llx: %s", t->pid,
				(unsigned long long)pm_scan_pos(&s), (unsigned long long)v->end,
				strerror(-s.err));
	return 0;
}

/*
 * The pages of shmem objects (shared anonymous memory) already in the image,
 * in the order mm dumps them (tasks in order, each one's vmas in order): for
 * each object, the union of the object ranges (pgoff, bytes) of the vmas
 * dumped so far, merged and sorted. A vma inside that union has its pages
 * written already: the restart fills the object through the earlier vmas
 * before it maps this one. Kept in the root's state, begun again at each
 * dump of the root. Asking every earlier vma instead was quadratic: 40,000
 * vmas of one shared mapping (every other page mprotect'ed) took 2.4 s.
 */
struct shmem_range {
	uint64_t start, end;
};

struct shmem_done {
	uint64_t id;
	struct shmem_range *v; /* sorted, disjoint, not touching */
	size_t n, cap;
};

struct shmem_index {
	struct shmem_done *v; /* sorted by id */
	size_t n, cap;
};

static void shmem_index_free(struct shmem_index *x)
{
	for (size_t i = 0; x && i < x->n; i++)
		free(x->v[i].v);
	free(x ? x->v : NULL);
	free(x);
}

/* The object's entry, made if need be (NULL: no memory). */
static struct shmem_done *shmem_done_of(struct shmem_index *x, uint64_t id)
{
	size_t lo = 0, hi = x->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->v[mid].id == id)
			return &x->v[mid];
		if (x->v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (x->n == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 8;
		struct shmem_done *v = realloc(x->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		x->v = v;
		x->cap = cap;
	}
	memmove(x->v + lo + 1, x->v + lo, (x->n - lo) * sizeof(*x->v));
	x->v[lo] = (struct shmem_done){ .id = id };
	x->n++;
	return &x->v[lo];
}

/* The first range of d that ends after a (d->n if none). */
static size_t range_after(const struct shmem_done *d, uint64_t a)
{
	size_t lo = 0, hi = d->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->v[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* [a, b) added to d's union; -ENOMEM. */
static int range_add(struct shmem_done *d, uint64_t a, uint64_t b)
{
	/* the ranges [a, b) overlaps or touches: d->v[i..j) */
	size_t i = range_after(d, a);
	if (i > 0 && d->v[i - 1].end == a)
		i--;
	size_t j = i;
	while (j < d->n && d->v[j].start <= b)
		j++;
	if (j == i) { /* none: a new range at i */
		if (d->n == d->cap) {
			size_t cap = d->cap ? 2 * d->cap : 8;
			struct shmem_range *v = realloc(d->v, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			d->v = v;
			d->cap = cap;
		}
		memmove(d->v + i + 1, d->v + i, (d->n - i) * sizeof(*d->v));
		d->n++;
	} else { /* merged into the first of them, the others removed */
		a = MIN(a, d->v[i].start);
		b = MAX(b, d->v[j - 1].end);
		memmove(d->v + i + 1, d->v + j, (d->n - j) * sizeof(*d->v));
		d->n -= j - i - 1;
	}
	d->v[i] = (struct shmem_range){ a, b };
	return 0;
}

/*
 * Vma i of t maps a part of a shmem object whose pages are in the image
 * already (see struct shmem_index); if not, its range is added, as its
 * pages are written next. A failure to note it (no memory) only costs its
 * pages written twice.
 */
static bool shmem_seen(struct ckpt_ctx *ctx, struct task *t, size_t i)
{
	const MmEntry *e = &((struct mm_ckpt *)t->kstate[KIND_mm])->e;
	const VmaEntry *v = e->vmas[i];
	struct mm_ckpt *root = ctx->tasks[0].kstate[KIND_mm];
	if (!v->shared || !v->has_shmem_id || !root)
		return false;
	if (!root->shmem_done && !(root->shmem_done = calloc(1, sizeof(*root->shmem_done))))
		return false;
	struct shmem_done *d = shmem_done_of(root->shmem_done, v->shmem_id);
	uint64_t a = v->pgoff, b = v->pgoff + (v->end - v->start);
	if (!d)
		return false;
	size_t k = range_after(d, a);
	if (k < d->n && d->v[k].start <= a && d->v[k].end >= b)
		return true;
	(void)range_add(d, a, b);
	return false;
}

/*
 * The pages t still shares with its parent since fork, when restart will
 * fork t from that parent (same session, or t leads its own, and no table
 * shared with a sibling: see tree.c).
 */
static int find_inherited(struct ckpt_ctx *ctx, struct task *t, struct mm_ckpt *m, int pagemap,
			  const struct mm_pages_map *map)
{
	struct task *p = ctx_find_task(ctx, t->stat.ppid);
	if (!p || p == t || p->zombie || !p->kstate[KIND_mm] || (t->vsid != t->vpid && t->vsid != p->vsid))
		return 0;
	/* forked by the sibling whose fd table or fs it shares */
	if ((t->files_with && t->files_with != p->pid) || (t->fs_with && t->fs_with != p->pid))
		return 0;
	m->inherited = calloc(m->e.n_vmas ? m->e.n_vmas : 1, sizeof(*m->inherited));
	if (!m->inherited)
		return -ENOMEM;
	return mm_cow_find(ctx, t, &m->e, &((struct mm_ckpt *)p->kstate[KIND_mm])->e, p->pid,
			   m->inherited, pagemap, map);
}

static int mm_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct mm_ckpt *m = t->kstate[KIND_mm];
	char path[64];
	int r;

	if (t == &ctx->tasks[0]) { /* a dump (or a pre-copy round's) begins */
		shmem_index_free(m->shmem_done);
		m->shmem_done = NULL;
	}
	snprintf(path, sizeof(path), "/proc/%d/pagemap", t->pid);
	_cleanup_close_ int pagemap = open(path, O_RDONLY | O_CLOEXEC);
	if (pagemap < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot open pagemap: %s", t->pid,
				strerror(errno));
	struct mm_pages_map map;
	/* a pre-copy round reads no pages now; a tracked vma is scanned apart */
	if (!(ctx->flags & CKPT_PRECOPY))
		map_pages(pagemap, &m->e, m->dirty, &map);
	else
		map = (struct mm_pages_map){ 0 };
	r = find_inherited(ctx, t, m, pagemap, &map);
	if (r >= 0)
		r = ctx_write_msg(ctx, MM_ENTRY, &m->e.base);
	if (r < 0) {
		mm_map_free(&map);
		return r;
	}
	struct mm_read rd = { .ctx = ctx, .t = t, .pre = mm_dirty_pre(m->dirty) };
	struct pages_writer pw;
	r = ctx_pages_writer(ctx, &pw, MM_PAGES, 0, mm_read, &rd);
	if (r < 0) {
		mm_map_free(&map);
		return r;
	}
	/* records written (and compressed, with --compress) by threads while
	 * the next is read; not on one CPU: no buf2 */
	if (ctx->buf2 && (r = pages_writer_async(&pw, ctx->buf2)) < 0) {
		pages_writer_release(&pw);
		return r;
	}
	/* a pre-copy round: the tracked vmas' pages noted, read at dump_live */
	bool live = ctx->flags & CKPT_PRECOPY;
	r = mm_dirty_begin(ctx, t, m->dirty, &m->e);
	for (size_t i = 0; r >= 0 && i < m->e.n_vmas; i++) {
		if (!needs_pages(m->e.vmas[i]) || shmem_seen(ctx, t, i))
			continue;
		if (!mm_dirty_covers(m->dirty, i)) {
			if (!live)
				r = scan_vma(ctx, t, pagemap, m->e.vmas[i], &pw, &map);
			continue;
		}
		r = read_as(ctx, &pw, m->e.vmas[i]);
		if (r >= 0)
			r = mm_dirty_scan(ctx, t, m->dirty, pagemap, i, m->e.vmas[i],
					  live ? NULL : &pw);
		r = pages_fail(ctx, &pw, r);
	}
	if (r >= 0)
		r = pages_fail(ctx, &pw, pages_flush(&pw));
	/* the last record written before anything else is */
	int s = pages_sync(&pw);
	if (r >= 0 && s < 0)
		r = pages_fail(ctx, &pw, s);
	ctx->mem_bytes += pw.bytes;
	pages_writer_release(&pw);
	mm_map_free(&map);
	return r < 0 || live ? r : mm_dirty_end(ctx, t, m->dirty);
}

/* A pre-copy round, the tree running: the pages mm_dump noted. */
static int mm_dump_live(struct ckpt_ctx *ctx, struct task *t)
{
	struct mm_ckpt *m = t->kstate[KIND_mm];
	const uint64_t *runs;
	char path[64];
	if (!m)
		return 0;
	size_t n = mm_dirty_live_runs(m->dirty, &runs);
	snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
	_cleanup_close_ int mem = open(path, O_RDONLY | O_CLOEXEC);
	struct mm_read rd = { .ctx = ctx, .t = t, .readable = true, .live = true, .live_fd = mem };
	struct pages_writer pw;
	int r = ctx_pages_writer(ctx, &pw, MM_PAGES, 0, mm_read, &rd);
	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i + 1 < n; i += 2)
		r = pages_add(&pw, runs[i], runs[i + 1]);
	if (r >= 0)
		r = pages_flush(&pw);
	r = pages_fail(ctx, &pw, r);
	ctx->mem_bytes += pw.bytes;
	pages_writer_release(&pw);
	if (rd.gone)
		log_info(&ctx->log, "pid %d: %llu KiB of its memory unmapped since this round "
			 "listed it, sent as zeros", t->pid, (unsigned long long)(rd.gone >> 10));
	return r < 0 ? r : mm_dirty_end(ctx, t, m->dirty);
}

/* --- restart: load and validate -------------------------------------- */

static bool is_special(const VmaEntry *v)
{
	return v->kind == VMA_KIND__VMA_VDSO || v->kind == VMA_KIND__VMA_VVAR ||
	       v->kind == VMA_KIND__VMA_VVAR_VCLOCK || v->kind == VMA_KIND__VMA_VSYSCALL;
}

/* The ops of the kind that maps v (checked at load: it has vma_map). */
static const struct kind_ops *vma_owner(const VmaEntry *v)
{
	const struct kind_info *ki = v->has_owner && v->owner && v->owner <= 0xffffff
					     ? kind_by_rec(REC_TYPE(v->owner, 0), NULL)
					     : NULL;
	return ki && ki->ops->vma_map ? ki->ops : NULL;
}

static int validate_vmas(struct rst_ctx *ctx, const struct img_record *rec, const MmEntry *e)
{
	uint64_t prev_end = 0;
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		bool vsys = v->kind == VMA_KIND__VMA_VSYSCALL;
		if (v->start >= v->end || (v->start | v->end) % PAGE || v->start < prev_end ||
		    (!vsys && v->end > TASK_SIZE_MAX) || (vsys && v->start != VSYSCALL_ADDR) ||
		    (v->prot & ~(uint32_t)(PROT_READ | PROT_WRITE | PROT_EXEC)) ||
		    v->kind > VMA_KIND__VMA_AIO || v->pgoff % PAGE || mm_aio_valid(v) < 0)
			return log_fail(&ctx->log, -EINVAL,
					"record %u (mm): vma %zu (%llx-%llx) is not valid", rec->index,
					i, (unsigned long long)v->start, (unsigned long long)v->end);
		if (!is_special(v) && !vma_owner(v))
			return log_fail(&ctx->log, -EINVAL,
					"record %u (mm): vma %llx: no kind of this ckpt maps it",
					rec->index, (unsigned long long)v->start);
		if (v->kind == VMA_KIND__VMA_FILE && !v->has_file_id)
			return log_fail(&ctx->log, -EINVAL,
					"record %u (mm): file vma %llx has no file", rec->index,
					(unsigned long long)v->start);
		if (mm_huge_valid(v) < 0)
			return log_fail(&ctx->log, -EINVAL,
					"record %u (mm): vma %llx: its huge page size is not valid",
					rec->index, (unsigned long long)v->start);
		if (v->has_huge_page) {
			char what[48];
			snprintf(what, sizeof(what), "vma %llx", (unsigned long long)v->start);
			int r = mm_huge_avail(&ctx->log, v->huge_page, what);
			if (r < 0)
				return r;
		}
		if (mm_cow_validate(v) < 0)
			return log_fail(&ctx->log, -EINVAL,
					"record %u (mm): vma %llx: its pages shared with the parent "
					"are not valid",
					rec->index, (unsigned long long)v->start);
		prev_end = v->end;
	}
	return 0;
}

/* The index of the vma holding addr, or -1. */
static ssize_t vma_index(const MmEntry *e, uint64_t addr)
{
	size_t lo = 0, hi = e->n_vmas;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const VmaEntry *v = e->vmas[mid];
		if (addr < v->start)
			hi = mid;
		else if (addr >= v->end)
			lo = mid + 1;
		else
			return (ssize_t)mid;
	}
	return -1;
}

static const VmaEntry *vma_of(const MmEntry *e, uint64_t addr)
{
	ssize_t i = vma_index(e, addr);
	return i < 0 ? NULL : e->vmas[i];
}

/* A page store record of the task: whole pages, inside vmas that hold pages. */
/* An eager restart: the record's checksum is checked by the worker that
 * writes its pages (mm_pages_checked_late), recorded in m->checks. */
static int check_later(const struct img_record *rec, struct mm_rst *m, struct pages_chunk *c)
{
	if (m->nchecks % 64 == 0) {
		struct pages_check **n = realloc(m->checks, (m->nchecks + 64) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		m->checks = n;
	}
	struct pages_check *k = malloc(sizeof(*k));
	if (!k)
		return -ENOMEM;
	*k = (struct pages_check){ .data = rec->data, .len = rec->len, .crc = rec->data_crc,
				   .index = rec->index, .offset = rec->offset };
	m->checks[m->nchecks++] = k;
	c->check = k;
	return 0;
}

static int load_pages(struct rst_ctx *ctx, const struct img_record *rec, struct mm_rst *m)
{
	struct pages_chunk c;
	int r = (ctx->flags & RESTART_LAZY) ? mm_lazy_parse(ctx, m, rec, &c) : pages_parse(rec, &c);
	if (r >= 0 && ctx->r.crc_later == MM_PAGES && !(ctx->flags & RESTART_LAZY))
		r = check_later(rec, m, &c);
	if (r < 0 || (r = pages_set_add(&m->pages, &c, 0, TASK_SIZE_MAX)) < 0)
		return log_fail(&ctx->log, r, "record %u (mm/pages): %s", rec->index,
				pages_strerror(r));
	for (size_t i = 0; i < c.n; i++) {
		uint64_t a = c.x[i].off, end = a + c.x[i].len;
		/* a run may go on across adjacent vmas, each of which holds pages */
		for (uint64_t at = a; at < end;) {
			const VmaEntry *v = vma_of(m->e, at);
			if (a % PAGE || c.x[i].len % PAGE || !v || !needs_pages(v))
				return log_fail(&ctx->log, -EINVAL,
						"record %u (mm/pages): pages at %llx (%llu bytes) lie "
						"outside any vma that holds pages",
						rec->index, (unsigned long long)a,
						(unsigned long long)c.x[i].len);
			at = v->end;
		}
	}
	ctx->mem_bytes += c.bytes;
	return 0;
}

static int mm_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	int r;

	if (!m && !(m = t->kstate[KIND_mm] = calloc(1, sizeof(*m))))
		return -ENOMEM;
	switch (rec->type) {
	case MM_ENTRY:
		if (m->e)
			return log_fail(&ctx->log, -EINVAL, "record %u: second mm of pid %d",
					rec->index, t->pid);
		m->e = rctx_unpack(ctx, rec, &mm_entry__descriptor);
		if (!m->e)
			return -EINVAL;
		if (!mm_lockall_ok(m->e))
			return log_fail(&ctx->log, -EINVAL, "record %u: pid %d: mlockall flags %#x are "
					"not valid", rec->index, t->pid, m->e->mlockall);
		return validate_vmas(ctx, rec, m->e);
	case MM_PAGES:
		if (!m->e)
			return log_fail(&ctx->log, -EINVAL, "record %u: pages before their mm",
					rec->index);
		return load_pages(ctx, rec, m);
	case MM_TRACK:
		if (!m->e)
			return log_fail(&ctx->log, -EINVAL, "record %u: tracking before its mm",
					rec->index);
		return mm_chain_load(ctx, t, m->e, rec, &m->chain);
	default:
		r = -EINVAL;
		return log_fail(&ctx->log, r, "record %u: unknown mm subtype %u", rec->index,
				REC_SUB(rec->type));
	}
}

static int bad_check(struct rst_ctx *ctx, const struct rst_task *t, const struct pages_check *k)
{
	return log_fail(&ctx->log, -EBADMSG, "record %u at offset %llu (mm/pages of pid %d): data "
			"checksum mismatch: the image is damaged", k->index,
			(unsigned long long)k->offset, t->pid);
}

/* Step "load", an eager restart of an image without a key: the data
 * checksums of page records are left to the workers that write their
 * pages (pages_set_apply), so that the image is read once, not twice. */
void mm_pages_checked_late(struct rst_ctx *ctx)
{
	ctx->r.crc_later = MM_PAGES;
}

int mm_check_loaded(struct rst_ctx *ctx, struct rst_task *t)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	if (!m || !m->e)
		return log_fail(&ctx->log, -EINVAL, "image has no address space for pid %d", t->pid);
	for (int k = 0; k < KIND_MAX; k++) {
		int r = kinds[k].ops->vma_check ? kinds[k].ops->vma_check(ctx, t, m->e) : 0;
		if (r < 0)
			return r;
	}
	if (!m->chain)
		return 0;
	/* an incremental image: the pages its parents have, merged with its
	 * own, which are cut and copied: checked whole first */
	for (size_t i = 0; i < m->nchecks; i++)
		if (pages_check_run(m->checks[i]) < 0)
			return bad_check(ctx, t, m->checks[i]);
	return mm_chain_resolve(ctx, t, m->e, m->chain, &m->pages);
}

/* mm's own vmas are anonymous memory, or the vDSO group and [vsyscall]. */
static int mm_vma_check(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
{
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		if (v->has_owner && v->owner == KID_mm && v->kind != VMA_KIND__VMA_ANON &&
		    v->kind != VMA_KIND__VMA_AIO && !is_special(v))
			return log_fail(&ctx->log, -EINVAL,
					"image: pid %d vma %llx: not anonymous memory", t->pid,
					(unsigned long long)v->start);
	}
	return 0;
}

int mm_check_file_vmas(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e, uint32_t owner)
{
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		if (v->has_owner && v->owner == owner &&
		    (v->kind != VMA_KIND__VMA_FILE || !v->has_file_id))
			return log_fail(&ctx->log, -EINVAL,
					"image: pid %d vma %llx: not a file mapping", t->pid,
					(unsigned long long)v->start);
	}
	return 0;
}

/* --- restart: free address ranges ------------------------------------ */

struct range {
	uint64_t start, end;
};

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The lowest free range of len bytes at or above 4 GiB, avoiding all of r. */
static uint64_t find_gap(struct range *r, size_t n, uint64_t len)
{
	uint64_t at = 1ull << 32;
	qsort(r, n, sizeof(*r), cmp_range);
	for (size_t i = 0; i < n; i++) {
		if (r[i].end <= at)
			continue;
		if (r[i].start >= at + len)
			break;
		at = ALIGN_UP(r[i].end, PAGE);
	}
	return at + len <= TASK_SIZE_MAX ? at : 0;
}

static int self_ranges(struct range **ret, size_t *n, size_t *cap)
{
	_cleanup_free_ char *text = NULL;
	struct proc_vmas v = { 0 };
	int r = proc_read(0, "maps", &text, NULL);
	if (r < 0 || (r = proc_parse_smaps(text, &v)) < 0)
		return r;
	for (size_t i = 0; i < v.n; i++) {
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 64;
			struct range *nr = realloc(*ret, *cap * sizeof(**ret));
			if (!nr) {
				proc_vmas_free(&v);
				return -ENOMEM;
			}
			*ret = nr;
		}
		(*ret)[(*n)++] = (struct range){ v.v[i].start, v.v[i].end };
	}
	proc_vmas_free(&v);
	return 0;
}

/*
 * Chooses the scratch address: free in every task's image and in ckpt
 * itself (a puppet starts as a copy of ckpt), with room around it for
 * moving the vDSO through.
 */
static int mm_prepare(struct rst_ctx *ctx)
{
	_cleanup_free_ struct range *r = NULL;
	size_t n = 0, cap = 0;

	int e = self_ranges(&r, &n, &cap);
	if (e < 0)
		return e;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		struct mm_rst *m = ctx->tasks[i].kstate[KIND_mm];
		for (size_t j = 0; m && m->e && j < m->e->n_vmas; j++) {
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				struct range *nr = realloc(r, cap * sizeof(*r));
				if (!nr)
					return -ENOMEM;
				r = nr;
			}
			r[n++] = (struct range){ m->e->vmas[j]->start, m->e->vmas[j]->end };
		}
	}
	ctx->scratch_addr = find_gap(r, n, MM_SCRATCH_REGION);
	if (!ctx->scratch_addr)
		return log_fail(&ctx->log, -ENOMEM, "no free address range for ckpt's scratch area");
	return (ctx->flags & RESTART_LAZY) ? mm_lazy_start(ctx) : 0;
}

/* --- restart: rebuild ------------------------------------------------ */

static long inject(struct rst_ctx *ctx, struct rst_task *t, const char *what, long r)
{
	return rst_check(ctx, t, r, what);
}

static uint32_t initial_prot(const VmaEntry *v)
{
	/* writable while its pages are written; shared file maps get none; a
	 * private vma that was never writable (no VM_ACCOUNT, "ac", nor
	 * MAP_NORESERVE) has no pages of its own: mapped as it was, so that it
	 * stays unaccounted ("ac" would show in its VmFlags) */
	bool never_written = v->vmflags && !v->shared && !(v->vmflags & (VMF_AC | VMF_NR)) &&
			     !v->has_huge_page; /* hugetlb has no "ac" */
	return needs_pages(v) && !never_written ? v->prot | PROT_READ | PROT_WRITE : v->prot;
}

bool mm_inherits(const struct rst_task *t)
{
	const struct mm_rst *m = t->kstate[KIND_mm];
	for (size_t i = 0; m && m->e && i < m->e->n_vmas; i++)
		if (m->e->vmas[i]->inherit)
			return true;
	return false;
}

/*
 * The calls that map a task's vmas (mmap, mprotect and madvise of the vmas
 * kept from the fork, the madvise bits), queued while mm_restore walks the
 * vmas and run as batches of PUPPET_BATCH_MAX: one stop of the task for
 * each batch instead of one per call. Each call keeps its vma, for the
 * message if it fails.
 */
enum vma_call_check { VC_MMAP, VC_FAIL, VC_WARN, VC_IGNORE };
struct vma_calls {
	struct puppet_call c[PUPPET_BATCH_MAX];
	const VmaEntry *v[PUPPET_BATCH_MAX];
	uint8_t check[PUPPET_BATCH_MAX];
	const char *what[PUPPET_BATCH_MAX];
	size_t n;
	/* the vDSO's mremaps are queued: where its syscall is once they ran */
	uint64_t new_ip;
};

static int vma_calls_flush(struct rst_ctx *ctx, struct rst_task *t)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	struct vma_calls *q = m ? m->calls : NULL;
	if (!q || !q->n)
		return 0;
	int r = puppet_syscalls(&t->pup, q->c, q->n), first = 0;
	if (q->new_ip && r == 0) { /* run from the stub: the vDSO has moved */
		t->pup.syscall_ip = q->new_ip;
		q->new_ip = 0;
	}
	for (size_t i = 0; i < q->n && first == 0; i++) {
		const VmaEntry *v = q->v[i];
		long ret = r < 0 ? r : q->c[i].ret;
		if (q->check[i] == VC_MMAP && ret < 0 && ret > -4096)
			first = log_fail(&ctx->log, (int)ret,
					 "pid %d vma %llx-%llx (%s): mmap failed: %s", t->pid,
					 (unsigned long long)v->start, (unsigned long long)v->end,
					 v->name ? v->name : "", strerror((int)-ret));
		else if (q->check[i] == VC_MMAP && (uint64_t)ret != v->start)
			first = log_fail(&ctx->log, -EEXIST, "pid %d vma %llx: mapped at %lx instead",
					 t->pid, (unsigned long long)v->start, ret);
		else if (q->check[i] == VC_FAIL && ret < 0)
			first = (int)inject(ctx, t, q->what[i], ret);
		else if (q->check[i] == VC_WARN && ret < 0)
			log_warn(&ctx->log, "pid %d vma %llx: %s failed: %s", t->pid,
				 (unsigned long long)v->start, q->what[i], strerror((int)-ret));
	}
	q->n = 0;
	return first;
}

/* Queues c (or, with no queue, runs it now: its result) */
static long vma_call(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v,
		     struct puppet_call c, enum vma_call_check check, const char *what)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	struct vma_calls *q = m ? m->calls : NULL;
	if (!q)
		return puppet_syscall6(&t->pup, c.nr, c.a[0], c.a[1], c.a[2], c.a[3], c.a[4],
				       c.a[5]);
	if (q->n == PUPPET_BATCH_MAX) {
		int r = vma_calls_flush(ctx, t);
		if (r < 0)
			return r;
	}
	q->c[q->n] = c;
	q->v[q->n] = v;
	q->check[q->n] = (uint8_t)check;
	q->what[q->n++] = what;
	return check == VC_MMAP ? (long)v->start : 0;
}

/* calls (munmap, mprotect) gathered into batches of injected calls */
struct unmaps {
	struct puppet_call c[PUPPET_BATCH_MAX];
	size_t n;
};

static long unmaps_flush(struct puppet *p, struct unmaps *u)
{
	int r = u->n ? puppet_syscalls(p, u->c, u->n) : 0;
	for (size_t i = 0; r == 0 && i < u->n; i++)
		if (u->c[i].ret < 0)
			r = (int)u->c[i].ret;
	u->n = 0;
	return r;
}

static long unmaps_add(struct puppet *p, struct unmaps *u, uint64_t start, uint64_t len)
{
	long r = u->n == PUPPET_BATCH_MAX ? unmaps_flush(p, u) : 0;
	if (r == 0)
		u->c[u->n++] = PUPPET_CALL(SYS_munmap, start, len);
	return r;
}

/*
 * The ranges to unmap, merged: a run grows over the holes between ckpt's
 * vmas (nothing is mapped there while the puppet is held; munmap skips
 * them) and is cut at every range that is kept (the vDSO group, the
 * scratch area, a vma kept from the fork), so that the puppet unmaps a
 * copy of ckpt with a few munmaps, not one per vma (each a flush of the
 * TLB, dear on these virtual machines: about 30 of them took 1 to 2 ms
 * of the restart of one process).
 */
struct unmap_run {
	uint64_t start, end; /* end == 0: none open */
};

static void run_add(struct unmap_run *run, uint64_t start, uint64_t end)
{
	if (!run->end)
		run->start = start;
	run->end = end;
}

static long run_cut(struct puppet *p, struct unmaps *u, struct unmap_run *run)
{
	long r = run->end ? unmaps_add(p, u, run->start, run->end - run->start) : 0;
	run->end = 0;
	return r;
}

/* Unmaps [start, end) but the vmas the task keeps from its fork (its
 * memory shared with its parent, and the vmas mark_kept found). */
static long unmap_but_inherited(struct puppet *p, struct unmaps *u, struct unmap_run *run,
				const MmEntry *e, const bool *kept, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < e->n_vmas && start < end; i++) {
		const VmaEntry *v = e->vmas[i];
		if (!(v->inherit || (kept && kept[i])) || v->end <= start || v->start >= end)
			continue;
		if (v->start > start)
			run_add(run, start, v->start);
		long r = run_cut(p, u, run); /* v is kept */
		if (r < 0)
			return r;
		start = v->end;
	}
	if (start < end)
		run_add(run, start, end);
	return 0;
}

/* The vmas written with a wider protection get theirs, by batches. */
static int final_prots(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
{
	const struct mm_rst *m = t->kstate[KIND_mm];
	struct unmaps u = { .n = 0 };
	long r = 0;
	if (m->calls) {
		/* queued, to run in one batch with what follows (PR_SET_MM_MAP) */
		for (size_t i = 0; r >= 0 && i < e->n_vmas; i++) {
			const VmaEntry *v = e->vmas[i];
			if ((v->kind == VMA_KIND__VMA_ANON || v->kind == VMA_KIND__VMA_FILE) &&
			    initial_prot(v) != v->prot && !(m->as_is && m->as_is[i]))
				r = vma_call(ctx, t, v,
					     PUPPET_CALL(SYS_mprotect, v->start, v->end - v->start,
							 v->prot),
					     VC_FAIL, "mprotect");
		}
		return (int)r;
	}
	for (size_t i = 0; r == 0 && i <= e->n_vmas; i++) {
		if (i == e->n_vmas || u.n == PUPPET_BATCH_MAX) {
			r = unmaps_flush(&t->pup, &u);
			if (i == e->n_vmas)
				break;
		}
		const VmaEntry *v = e->vmas[i];
		if ((v->kind != VMA_KIND__VMA_ANON && v->kind != VMA_KIND__VMA_FILE) ||
		    initial_prot(v) == v->prot || (m->as_is && m->as_is[i]))
			continue;
		u.c[u.n++] = PUPPET_CALL(SYS_mprotect, v->start, v->end - v->start, v->prot);
	}
	return (int)inject(ctx, t, "mprotect", r);
}

static int unmap_all_but_vdso(struct rst_ctx *ctx, struct rst_task *t, struct proc_vmas *cur)
{
	const MmEntry *e = ((struct mm_rst *)t->kstate[KIND_mm])->e;
	struct puppet *p = &t->pup;
	struct unmaps u = { .n = 0 };
	struct unmap_run run = { 0, 0 };
	const struct mm_rst *m = t->kstate[KIND_mm];
	long r = 0;
	/* cur is in address order (/proc/PID/maps) */
	for (size_t i = 0; r == 0 && i < cur->n; i++) {
		const struct proc_vma *v = &cur->v[i];
		if (!strcmp(v->path, "[vdso]") || !strcmp(v->path, "[vvar]") ||
		    !strcmp(v->path, "[vvar_vclock]") || !strcmp(v->path, "[vsyscall]") ||
		    (v->end > p->scratch &&
		     v->start < p->scratch + p->scratch_len + p->scratch_extra)) {
			r = run_cut(p, &u, &run); /* kept */
			continue;
		}
		r = unmap_but_inherited(p, &u, &run, e, m->kept, v->start, v->end);
	}
	if (r == 0)
		r = run_cut(p, &u, &run);
	if (r == 0 && m->calls && p->stub_ip) { /* run with the vmas' calls */
		for (size_t i = 0; r >= 0 && i < u.n; i++)
			r = vma_call(ctx, t, NULL, u.c[i], VC_FAIL, "munmap of ckpt's memory");
		return r < 0 ? (int)r : 0;
	}
	if (r == 0)
		r = unmaps_flush(p, &u);
	if (inject(ctx, t, "munmap of ckpt's memory", r) < 0)
		return (int)r;
	return 0;
}

/* Is v one of mark_as_is's (kept from the fork, nothing to change)? */
static bool kept_as_is(const struct mm_rst *m, const VmaEntry *v)
{
	for (size_t i = 0; m->as_is && i < m->e->n_vmas; i++)
		if (m->e->vmas[i] == v)
			return m->as_is[i];
	return false;
}

/*
 * Will [lo, hi) of a vma kept from the fork be written whole by the task's
 * own pages (write_pages, later)? Then what the parent has there need not
 * be dropped first (MADV_DONTNEED): each page written replaces the
 * parent's copy-on-write. Not with RESTART_LAZY, whose pages are not all
 * written by ckpt.
 */
static bool written_over(const struct rst_ctx *ctx, const struct mm_rst *m, uint64_t lo,
			 uint64_t hi)
{
	return !(ctx->flags & RESTART_LAZY) && pages_set_covers(&m->pages, lo, hi);
}

/*
 * A vma kept from the fork: writable while its own pages are written, and
 * what the parent has there but the task did not (pages outside the
 * inherited runs) dropped, so that it reads zero (the file, for a private
 * file mapping) until written.
 */
static int keep_inherited(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	static const char what[] = "keeping memory shared with the parent";
	const struct mm_rst *m = t->kstate[KIND_mm];
	long r =
	    kept_as_is(m, v)
		? 0
		: vma_call(ctx, t, v,
			   PUPPET_CALL(SYS_mprotect, v->start, v->end - v->start, initial_prot(v)),
			   VC_FAIL, what);
	uint64_t pos = v->start;
	for (size_t k = 0; r >= 0 && k <= v->n_inherited; k += 2) {
		uint64_t a = k < v->n_inherited ? v->inherited[k] : v->end;
		if (a > pos && !written_over(ctx, m, pos, a))
			r = vma_call(ctx, t, v, PUPPET_CALL(SYS_madvise, pos, a - pos, MADV_DONTNEED),
				     VC_FAIL, what);
		if (k < v->n_inherited)
			pos = a + v->inherited[k + 1] * PAGE;
	}
	return (int)inject(ctx, t, what, r);
}

static const struct proc_vma *cur_named(const struct proc_vmas *cur, const char *name)
{
	for (size_t i = 0; i < cur->n; i++)
		if (!strcmp(cur->v[i].path, name))
			return &cur->v[i];
	return NULL;
}

static int vdso_kind_of(const char *name)
{
	if (!strcmp(name, "[vvar]"))
		return VMA_KIND__VMA_VVAR;
	if (!strcmp(name, "[vvar_vclock]"))
		return VMA_KIND__VMA_VVAR_VCLOCK;
	return VMA_KIND__VMA_VDSO;
}

/* Moves the vDSO group of the puppet to where the image had it. */
static int move_vdso(struct rst_ctx *ctx, struct rst_task *t, const struct proc_vmas *cur)
{
	static const char *const names[] = { "[vvar]", "[vvar_vclock]", "[vdso]" };
	struct mm_rst *m = t->kstate[KIND_mm];
	struct puppet *p = &t->pup;
	const struct proc_vma *from[3] = { 0 };
	const VmaEntry *to[3] = { 0 };
	bool overlap = false;

	for (int i = 0; i < 3; i++) {
		from[i] = cur_named(cur, names[i]);
		for (size_t j = 0; j < m->e->n_vmas; j++)
			if ((int)m->e->vmas[j]->kind == vdso_kind_of(names[i]))
				to[i] = m->e->vmas[j];
	}
	for (int i = 0; i < 3; i++) {
		if (to[i] && (!from[i] || from[i]->end - from[i]->start != to[i]->end - to[i]->start))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: the vDSO layout (%s) differs from the checkpointed "
					"kernel's; restart on the same kernel",
					t->pid, names[i]);
	}
	/* what the process had unmapped itself (all of the group, or a part:
	 * valgrind's [vdso]) goes; the rest moves (none left: in place) */
	const struct proc_vma *drop[3] = { 0 };
	for (int i = 0; i < 3; i++)
		if (from[i] && !to[i]) {
			drop[i] = from[i];
			from[i] = NULL;
		}
	int dropped = mm_drop_vdso(ctx, t, drop, 3);
	if (dropped < 0)
		return dropped;
	/* already in place: a child forked from its parent's puppet, whose
	 * vDSO group was moved first (else, seen as overlapping itself, the
	 * group went to the free spot and back: 6 mremaps for nothing) */
	bool in_place = true;
	for (int i = 0; i < 3; i++)
		in_place = in_place && (!from[i] || from[i]->start == to[i]->start);
	if (in_place)
		return 0;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			if (from[i] && to[j] && from[i]->start < to[j]->end &&
			    to[j]->start < from[i]->end)
				overlap = true;

	/* moving through a spot free in both layouts when they overlap */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < 3; i++)
		if (from[i]) {
			lo = MIN(lo, from[i]->start);
			hi = MAX(hi, from[i]->end);
		}
	/* one batch when the task has the stub (the calls then run from it,
	 * not from the vDSO that moves); else one call at a time */
	struct puppet_call c[6];
	size_t nc = 0;
	uint64_t ip = p->syscall_ip;
	for (int pass = overlap ? 0 : 1; pass < 2; pass++) {
		for (int i = 0; i < 3; i++) {
			if (!from[i])
				continue;
			uint64_t src = pass == 1 && overlap
					       ? ctx->scratch_addr + MM_SCRATCH_REGION / 2 +
							 (from[i]->start - lo)
					       : from[i]->start;
			uint64_t dst = pass == 0 ? ctx->scratch_addr + MM_SCRATCH_REGION / 2 +
							   (from[i]->start - lo)
						 : to[i]->start;
			uint64_t len = from[i]->end - from[i]->start;
			if (src == dst)
				continue;
			if (i == 2) /* we execute from the vDSO: follow it */
				ip = ip - src + dst;
			c[nc++] = PUPPET_CALL(SYS_mremap, src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
					      dst);
			if (p->stub_ip)
				continue;
			long r = puppet_syscall(p, SYS_mremap, src, len, len,
						MREMAP_MAYMOVE | MREMAP_FIXED, dst);
			if (inject(ctx, t, "mremap of the vDSO", r) < 0)
				return (int)r;
			p->syscall_ip = ip;
		}
	}
	if (p->stub_ip && nc && m->calls) { /* run with the vmas' calls */
		for (size_t i = 0; i < nc; i++) {
			long r = vma_call(ctx, t, NULL, c[i], VC_FAIL, "mremap of the vDSO");
			if (r < 0)
				return (int)r;
		}
		m->calls->new_ip = ip;
	} else if (p->stub_ip && nc) {
		long r = puppet_syscalls(p, c, nc);
		for (size_t i = 0; r == 0 && i < nc; i++)
			r = c[i].ret < 0 ? c[i].ret : 0;
		if (inject(ctx, t, "mremap of the vDSO", r) < 0)
			return (int)r;
		p->syscall_ip = ip;
	}
	(void)hi;
	return 0;
}

#define SHMEM_KEY(ino) ((1ull << 63) | (ino))

static void close_remote_files(struct rst_task *t, struct remote_files *rf)
{
	struct puppet_call c[ARRAY_SIZE(rf->fd)];
	for (int i = 0; i < rf->n; i++)
		c[i] = PUPPET_CALL(SYS_close, rf->fd[i]);
	if (rf->n && puppet_syscalls(&t->pup, c, (size_t)rf->n) < 0) {
		/* the task is gone or cannot run calls: nothing to close */
	}
	rf->n = 0;
}

static int remote_cached(struct remote_files *rf, uint64_t key)
{
	for (int i = 0; i < rf->n; i++)
		if (rf->key[i] == key)
			return rf->fd[i];
	return -1;
}

static int remote_add(struct rst_ctx *ctx, struct rst_task *t, struct remote_files *rf,
		      uint64_t key, int local, const char *what)
{
	if (rf->n == (int)ARRAY_SIZE(rf->key)) { /* full: recycle, once queued maps ran */
		int r = vma_calls_flush(ctx, t);
		if (r < 0)
			return r;
		close_remote_files(t, rf);
	}
	int rfd = puppet_send_fd(&t->pup, ctx->ctl[0], ctx->ctl_remote, local);
	if (rfd < 0)
		return log_fail(&ctx->log, rfd, "pid %d: cannot pass %s to the new process: %s",
				t->pid, what, strerror(-rfd));
	rf->key[rf->n] = key;
	rf->fd[rf->n++] = rfd;
	return rfd;
}

static int remote_file(struct rst_ctx *ctx, struct rst_task *t, struct remote_files *rf,
		       uint32_t id)
{
	int local, rfd = remote_cached(rf, id);
	if (rfd >= 0)
		return rfd;
	int r = fdtable_local_fd(ctx, id, &local); /* a file_reg or memfd object */
	if (r < 0)
		return r;
	char what[320];
	snprintf(what, sizeof(what), "'%.300s'", file_reg_path(ctx, id));
	return remote_add(ctx, t, rf, id, local, what);
}

/* one shmem object of the image, made once, mapped by every task that has it */
struct shmem_robj {
	int fd;
};

static void mm_free_robj(void *ptr)
{
	struct shmem_robj *s = ptr;
	if (s && s->fd >= 0)
		close(s->fd);
	free(s);
}

int mm_mapping_fd(struct rst_ctx *ctx, void *m, uint64_t size, int *ret_fd)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)m,
		 (unsigned long)m + size);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	int err = errno;
	munmap(m, size);
	if (fd < 0)
		return log_fail(&ctx->log, -err, "cannot open shared memory through map_files: %s",
				strerror(err));
	*ret_fd = fd;
	return 0;
}

/* A shmem object of size bytes, as MAP_SHARED|MAP_ANONYMOUS makes one
 * ("/dev/zero (deleted)"), by an fd of ckpt's. */
static int make_zero_fd(struct rst_ctx *ctx, uint64_t size, int *ret_fd)
{
	_cleanup_close_ int zero = open("/dev/zero", O_RDWR | O_CLOEXEC);
	if (zero < 0)
		return log_fail(&ctx->log, -errno, "cannot open /dev/zero: %s", strerror(errno));
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, zero, 0);
	if (m == MAP_FAILED)
		return log_fail(&ctx->log, -errno, "cannot make a shared memory object of %llu bytes: %s",
				(unsigned long long)size, strerror(errno));
	return mm_mapping_fd(ctx, m, size, ret_fd);
}

static int make_shmem(struct rst_ctx *ctx, uint64_t ino, uint64_t size, struct shmem_robj **ret)
{
	uint64_t huge = 0;

	for (size_t t = 0; t < ctx->ntasks; t++) {
		const struct mm_rst *m = ctx->tasks[t].kstate[KIND_mm];
		for (size_t i = 0; m && m->e && i < m->e->n_vmas; i++) {
			const VmaEntry *v = m->e->vmas[i];
			if (v->kind == VMA_KIND__VMA_ANON && v->shared && v->has_shmem_id &&
			    v->shmem_id == ino) {
				size = MAX(size, v->pgoff + (v->end - v->start));
				huge = v->has_huge_page ? v->huge_page : huge;
			}
		}
	}
	int fd = -1; /* hugetlb: mm-huge.c */
	int r = huge ? mm_huge_make_shared(ctx, size, huge, &fd) : make_zero_fd(ctx, size, &fd);
	if (r < 0)
		return r;
	struct shmem_robj *s = malloc(sizeof(*s));
	if (!s || objhash_add(&ctx->objs, KIND_mm, ino, 0, s, NULL) < 0) {
		free(s);
		close(fd);
		return -ENOMEM;
	}
	s->fd = fd;
	*ret = s;
	return 0;
}

/*
 * Shared anonymous memory is one shmem object however many vmas and tasks
 * map it: ckpt makes the object once (a MAP_SHARED mapping of /dev/zero,
 * as the kernel does for MAP_SHARED|MAP_ANONYMOUS, so it still reads
 * "/dev/zero (deleted)"), takes an fd to it through map_files and maps
 * that fd at every vma of the object, in every task.
 */
static int remote_shmem(struct rst_ctx *ctx, struct rst_task *t, struct remote_files *rf,
			uint64_t ino)
{
	int rfd = remote_cached(rf, SHMEM_KEY(ino));
	struct obj *o = objhash_next_key(&ctx->objs, NULL, KIND_mm, ino);
	struct shmem_robj *s = o ? o->ptr : NULL;

	if (rfd >= 0)
		return rfd;
	if (!s) {
		int r = make_shmem(ctx, ino, 0, &s);
		if (r < 0)
			return r;
	}
	return remote_add(ctx, t, rf, SHMEM_KEY(ino), s->fd, "shared memory");
}


int mm_shmem_fd(struct rst_ctx *ctx, uint64_t ino, uint64_t size, int *ret_fd)
{
	struct obj *o = objhash_next_key(&ctx->objs, NULL, KIND_mm, ino);
	struct shmem_robj *s = o ? o->ptr : NULL;
	int r = s ? 0 : make_shmem(ctx, ino, size ? size : 4096, &s);
	if (r >= 0)
		*ret_fd = s->fd;
	return r;
}

static int do_mmap(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v, long fd, long off,
		   int flags)
{
	long r;

	flags |= (v->shared ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED_NOREPLACE;
	if (v->vmflags & VMF_GD)
		flags |= MAP_GROWSDOWN;
	if (v->vmflags & VMF_DP)
		flags = (flags & ~(MAP_SHARED | MAP_PRIVATE)) | MAP_DROPPABLE;
	r = vma_call(ctx, t, v,
		     PUPPET_CALL(SYS_mmap, v->start, v->end - v->start, initial_prot(v), flags, fd,
				 off),
		     VC_MMAP, "mmap");
	if (r < 0 && r > -4096)
		return log_fail(&ctx->log, (int)r, "pid %d vma %llx-%llx (%s): mmap failed: %s",
				t->pid, (unsigned long long)v->start, (unsigned long long)v->end,
				v->name ? v->name : "", strerror((int)-r));
	if ((uint64_t)r != v->start)
		return log_fail(&ctx->log, -EEXIST, "pid %d vma %llx: mapped at %lx instead",
				t->pid, (unsigned long long)v->start, r);
	return 0;
}

int mm_map_file(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	if (v->inherit) /* a private file mapping kept from the fork (mm-cow.c) */
		return keep_inherited(ctx, t, v);
	int fd = remote_file(ctx, t, &m->rf, v->file_id);
	return fd < 0 ? fd : do_mmap(ctx, t, v, fd, (long)v->pgoff, 0);
}

/* mm's own vmas: anonymous memory, private or shared, or kept from the fork */
static int mm_vma_map(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	struct mm_rst *m = t->kstate[KIND_mm];

	if (v->kind == VMA_KIND__VMA_AIO) { /* mm-aio.c, injected now: the queue first */
		int r = vma_calls_flush(ctx, t);
		return r < 0 ? r : mm_aio_map(ctx, t, v);
	}
	if (v->kind != VMA_KIND__VMA_ANON) /* the vDSO group is moved, not mapped */
		return 0;
	if (v->inherit)
		return keep_inherited(ctx, t, v);
	if (v->shared && v->has_shmem_id) {
		int fd = remote_shmem(ctx, t, &m->rf, v->shmem_id);
		return fd < 0 ? fd : do_mmap(ctx, t, v, fd, (long)v->pgoff, 0);
	}
	return do_mmap(ctx, t, v, -1, 0,
		       MAP_ANONYMOUS | (v->vmflags & VMF_NR ? MAP_NORESERVE : 0) |
			       mm_huge_map_flags(v));
}

/* madvise bits that shape how memory behaves, applied before pages are written */
/* mlock'ed and MAP_LOCKED vmas, once their pages are in (VmFlags "lo"; "lf"
 * for MLOCK_ONFAULT, which locks only the pages that are there) */
/* Has a vma lock_vmas locks? */
static bool has_locked(const MmEntry *e)
{
	for (size_t i = 0; i < e->n_vmas; i++)
		if ((e->vmas[i]->kind == VMA_KIND__VMA_ANON ||
		     e->vmas[i]->kind == VMA_KIND__VMA_FILE) &&
		    (e->vmas[i]->vmflags & VMF_LO))
			return true;
	return false;
}

static int lock_vmas(struct rst_ctx *ctx, struct rst_task *t)
{
	const struct mm_rst *m = t->kstate[KIND_mm];
	for (size_t i = 0; i < m->e->n_vmas; i++) {
		const VmaEntry *v = m->e->vmas[i];
		if ((v->kind != VMA_KIND__VMA_ANON && v->kind != VMA_KIND__VMA_FILE) ||
		    !(v->vmflags & VMF_LO))
			continue;
		long e = puppet_syscall(&t->pup, SYS_mlock2, v->start, v->end - v->start,
					v->lock_onfault ? MLOCK_ONFAULT : 0);
		if (e < 0)
			return log_fail(&ctx->log, (int)e, "pid %d vma %llx-%llx: cannot lock it in "
					"memory (mlock): %s", t->pid, (unsigned long long)v->start,
					(unsigned long long)v->end, strerror((int)-e));
	}
	return 0;
}

static int advise_vma(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	static const struct {
		uint32_t flag;
		int advice;
		const char *name;
	} adv[] = {
		{ VMF_HG, MADV_HUGEPAGE, "MADV_HUGEPAGE" },
		{ VMF_NH, MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE" },
		{ VMF_DC, MADV_DONTFORK, "MADV_DONTFORK" },
		{ VMF_DD, MADV_DONTDUMP, "MADV_DONTDUMP" },
		{ VMF_WF, MADV_WIPEONFORK, "MADV_WIPEONFORK" },
		{ VMF_MG, MADV_MERGEABLE, "MADV_MERGEABLE" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(adv); i++) {
		if (!(v->vmflags & adv[i].flag))
			continue;
		long r = vma_call(ctx, t, v,
				  PUPPET_CALL(SYS_madvise, v->start, v->end - v->start,
					      adv[i].advice),
				  VC_WARN, adv[i].name);
		if (r < 0)
			log_warn(&ctx->log, "pid %d vma %llx: %s failed: %s", t->pid,
				 (unsigned long long)v->start, adv[i].name, strerror((int)-r));
	}
	if (v->name && (!strncmp(v->name, "[anon:", 6) || !strncmp(v->name, "[anon_shmem:", 12))) {
		int r = vma_calls_flush(ctx, t); /* the name goes where a queued call may look */
		if (r < 0)
			return r;
		const char *n = strchr(v->name, ':') + 1;
		char name[80];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(n, "]"), n);
		uint64_t addr = puppet_scratch_put(&t->pup, 0, name, strlen(name) + 1);
		long e = !addr
			     ? -EFAULT
			     : puppet_syscall(&t->pup, SYS_prctl, PR_SET_VMA, PR_SET_VMA_ANON_NAME,
					      v->start, v->end - v->start, addr);
		if (e < 0) /* not lost without a word */
			return log_fail(&ctx->log, (int)e,
					"pid %d vma %llx: cannot give it its name '%s': %s", t->pid,
					(unsigned long long)v->start, name, strerror((int)-e));
	}
	return 0;
}

/*
 * Filling fresh anonymous memory with process_vm_writev costs a page fault
 * and a page clear per page. UFFDIO_COPY allocates each page with its
 * contents instead: ckpt makes a userfaultfd in the puppet, takes it with
 * pidfd_getfd, registers the private anonymous vmas, copies, unregisters.
 * Without userfaultfd, process_vm_writev does it all.
 */
struct uffd {
	int fd;
	bool *reg;              /* per vma: registered */
	bool lazy;              /* RESTART_LAZY: registered pages are the server's */
};

static void uffd_close(struct rst_task *t, struct uffd *u)
{
	const MmEntry *e = ((struct mm_rst *)t->kstate[KIND_mm])->e;
	for (size_t i = 0; u->fd >= 0 && u->reg && i < e->n_vmas; i++) {
		if (!u->reg[i])
			continue;
		struct uffdio_range r = { e->vmas[i]->start, e->vmas[i]->end - e->vmas[i]->start };
		ioctl(u->fd, UFFDIO_UNREGISTER, &r);
	}
	if (u->fd >= 0)
		close(u->fd);
	free(u->reg);
	*u = (struct uffd){ .fd = -1 };
}

/* Below this many bytes of private pages, a task's pages go by
 * process_vm_writev: the faults and clears it costs (about a microsecond a
 * page) are less than the userfaultfd's two injected calls in a small
 * process (a tree of idle ones) */
#define UFFD_MIN_BYTES (1ull << 20)
/* nor a vma with fewer: its UFFDIO_REGISTER and UNREGISTER cost more than
 * the faults (a thread's stack of a page or two, 1,000 of them) */
#define UFFD_VMA_MIN_BYTES (64ull << 10)

/* The vmas worth a userfaultfd (anonymous, private, not huge, with at
 * least UFFD_VMA_MIN_BYTES of pages in s), in want[]; their bytes. */
static uint64_t uffd_worth(const MmEntry *e, const struct pages_set *s, bool *want)
{
	uint64_t *bytes = calloc(e->n_vmas ? e->n_vmas : 1, sizeof(*bytes)), sum = 0;
	if (!bytes)
		return 0;
	for (size_t c = 0; c < s->n; c++)
		for (uint32_t i = 0; i < s->c[c].n; i++) {
			uint64_t a = s->c[c].x[i].off, b = a + s->c[c].x[i].len;
			ssize_t idx;
			while (a < b && (idx = vma_index(e, a)) >= 0) {
				uint64_t end = MIN(b, e->vmas[idx]->end);
				bytes[idx] += end - a;
				a = end;
			}
		}
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		want[i] = v->kind == VMA_KIND__VMA_ANON && !v->shared && !v->has_huge_page &&
			  !mm_thp_fill(v) && bytes[i] >= UFFD_VMA_MIN_BYTES;
		sum += want[i] ? bytes[i] : 0;
	}
	free(bytes);
	return sum;
}

static void uffd_open(struct rst_ctx *ctx, struct rst_task *t, struct uffd *u)
{
	const struct mm_rst *m = t->kstate[KIND_mm];
	const MmEntry *e = m->e;
	*u = (struct uffd){ .fd = -1 };
	bool *want = calloc(e->n_vmas ? e->n_vmas : 1, sizeof(*want));
	if (!want || uffd_worth(e, &m->pages, want) < UFFD_MIN_BYTES) {
		free(want);
		return;
	}
	long rfd = puppet_syscall(&t->pup, SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (rfd < 0)
		rfd = puppet_syscall(&t->pup, SYS_userfaultfd,
				     O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (rfd < 0) {
		log_debug(&ctx->log, "pid %d: no userfaultfd (%s); pages go by process_vm_writev",
			  t->pid, strerror((int)-rfd));
		free(want);
		return;
	}
	u->fd = puppet_getfd(&t->pup, (int)rfd);
	puppet_syscall(&t->pup, SYS_close, rfd);
	struct uffdio_api api = { .api = UFFD_API };
	u->reg = calloc(e->n_vmas ? e->n_vmas : 1, sizeof(*u->reg));
	if (u->fd < 0 || !u->reg || ioctl(u->fd, UFFDIO_API, &api) < 0) {
		free(want);
		uffd_close(t, u);
		return;
	}
	for (size_t i = 0; i < e->n_vmas; i++) {
		const VmaEntry *v = e->vmas[i];
		if (!want[i])
			continue;
		struct uffdio_register reg = {
			.range = { v->start, v->end - v->start },
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};
		u->reg[i] = ioctl(u->fd, UFFDIO_REGISTER, &reg) == 0;
	}
	free(want);
}

/*
 * Copies len bytes to addr, inside one vma, with UFFDIO_COPY; 0 if done,
 * -errno if not. A vma where it fails is unregistered first, so that the
 * fallback's writes never fault into a userfaultfd nobody serves.
 */
static int uffd_copy(const MmEntry *e, struct uffd *u, ssize_t idx, uint64_t addr,
		     const uint8_t *src, uint64_t len)
{
	if (idx < 0 || u->fd < 0 || !u->reg[idx])
		return -ENOTSUP;
	if (u->lazy) /* filled on first touch by the lazy server */
		return 0;
	struct uffdio_copy c = { .dst = addr, .src = (uint64_t)(uintptr_t)src, .len = len };
	if (ioctl(u->fd, UFFDIO_COPY, &c) == 0 || (errno == EAGAIN && c.copy == (int64_t)len))
		return 0;
	int err = -errno;
	struct uffdio_range r = { e->vmas[idx]->start, e->vmas[idx]->end - e->vmas[idx]->start };
	ioctl(u->fd, UFFDIO_UNREGISTER, &r);
	u->reg[idx] = false;
	return err;
}

/* Writes pages with process_vm_writev, /proc/PID/mem for what it did not take. */
static int writev_pages(struct rst_task *t, const struct iovec *remote, size_t n,
			const uint8_t *src, uint64_t bytes, uint64_t *ret_addr)
{
	struct iovec local = { .iov_base = (void *)src, .iov_len = bytes };
	if (process_vm_writev(t->pup.pid, &local, 1, remote, n, 0) == (ssize_t)bytes)
		return 0;
	uint64_t off = 0;
	for (size_t k = 0; k < n; k++) {
		int r = puppet_write(&t->pup, (uint64_t)(uintptr_t)remote[k].iov_base, src + off,
				     remote[k].iov_len);
		if (r < 0) {
			*ret_addr = (uint64_t)(uintptr_t)remote[k].iov_base;
			return r;
		}
		off += remote[k].iov_len;
	}
	return 0;
}

/* What the page store hands chunks to (two threads may share a task's). */
struct page_job {
	struct progress *progress;
	struct rst_task *t;
	const MmEntry *e;
	struct uffd *u;
};

static int write_chunk(void *arg, const struct pages_chunk *ch, uint64_t *ret_addr)
{
	const struct page_job *j = arg;
	const MmEntry *e = j->e;
	struct iovec remote[256];
	const uint8_t *src = ch->data;
	size_t n = 0;
	uint64_t bytes = 0;
	int r = 0;

	for (size_t i = 0; i < ch->n && r >= 0; i++) {
		uint64_t addr = ch->x[i].off, end = addr + ch->x[i].len;
		/* piece by piece, one vma each: a run may span registered and
		 * unregistered vmas */
		while (addr < end && r >= 0) {
			ssize_t idx = vma_index(e, addr);
			uint64_t len = idx < 0 ? end - addr : MIN(end, e->vmas[idx]->end) - addr;
			if (uffd_copy(e, j->u, idx, addr, src + bytes, len) == 0) {
				/* done; what was gathered before goes out first */
				if (n)
					r = writev_pages(j->t, remote, n, src, bytes, ret_addr);
				src += bytes + len;
				n = 0;
				bytes = 0;
				addr += len;
				continue;
			}
			remote[n].iov_base = (void *)(uintptr_t)addr;
			remote[n++].iov_len = len;
			bytes += len;
			addr += len;
			if (n == ARRAY_SIZE(remote)) {
				r = writev_pages(j->t, remote, n, src, bytes, ret_addr);
				src += bytes;
				n = 0;
				bytes = 0;
			}
		}
	}
	if (n && r >= 0)
		r = writev_pages(j->t, remote, n, src, bytes, ret_addr);
	if (r >= 0)
		progress_add(j->progress, ch->bytes);
	return r;
}

/*
 * The huge pages of the MADV_HUGEPAGE vmas (mm_thp_fill) that hold pages
 * of s, faulted in at once: MADV_POPULATE_WRITE of each run of 2 MiB
 * blocks with pages, one injected call per run, before process_vm_writev
 * fills them. Only blocks with pages, so that memory the original never
 * touched stays out. A failure is not one: the writes fault them in.
 */
static void thp_populate(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e,
			 const struct pages_set *s)
{
	uint64_t lo = 0, hi = 0;
	for (size_t c = 0; c < s->n; c++) {
		for (uint32_t i = 0; i < s->c[c].n; i++) {
			const struct pages_extent *x = &s->c[c].x[i];
			ssize_t idx = vma_index(e, x->off);
			if (idx < 0 || !mm_thp_fill(e->vmas[idx]))
				continue;
			const VmaEntry *v = e->vmas[idx];
			uint64_t a = MAX(v->start, x->off & ~(MM_HUGE_2M - 1));
			uint64_t b = MIN(v->end, (x->off + x->len + MM_HUGE_2M - 1) & ~(MM_HUGE_2M - 1));
			if (a <= hi && hi) { /* the run goes on */
				hi = MAX(hi, b);
				continue;
			}
			if (hi)
				puppet_syscall(&t->pup, SYS_madvise, lo, hi - lo, MADV_POPULATE_WRITE);
			lo = a;
			hi = b;
		}
	}
	if (hi) {
		long r = puppet_syscall(&t->pup, SYS_madvise, lo, hi - lo, MADV_POPULATE_WRITE);
		if (r < 0)
			log_debug(&ctx->log, "pid %d: MADV_POPULATE_WRITE of %llx-%llx: %s", t->pid,
				  (unsigned long long)lo, (unsigned long long)hi, strerror((int)-r));
	}
}

/* Chunks are independent: two workers (the machine's cores) share them. */
static int write_pages(struct rst_ctx *ctx, struct rst_task *t)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	struct uffd u;
	uint64_t addr = 0;

	bool lazy = ctx->lazy && !m->eager;
	int r = 0;
	if (lazy) {
		u = (struct uffd){ .fd = -1, .lazy = true };
		r = mm_lazy_uffd(ctx, t, &u.fd, &u.reg);
		if (r < 0)
			return r;
	} else if (m->pages.bytes < UFFD_MIN_BYTES) {
		u = (struct uffd){ .fd = -1 }; /* process_vm_writev: cheaper than two injections */
	} else {
		uffd_open(ctx, t, &u);
	}
	struct page_job j = { .progress = &ctx->progress, .t = t, .e = m->e, .u = &u };
	/* with --lazy, ckpt writes only the chunks with pages outside the
	 * registered vmas (all of a task filled now: m->eager), their
	 * checksums checked first (not at load); the rest is the server's */
	struct pages_set eager = { 0 };
	bool checked_late = ctx->flags & RESTART_LAZY;
	if (checked_late)
		r = mm_lazy_eager(ctx, t, lazy ? u.reg : NULL, &eager);
	bool logged = r < 0;
	if (r >= 0 && !lazy)
		thp_populate(ctx, t, m->e, checked_late ? &eager : &m->pages);
	if (r >= 0)
		r = pages_set_apply(checked_late ? &eager : &m->pages, 2, write_chunk, &j, &addr);
	pages_set_release(&eager);
	if (lazy && r >= 0) {
		/* the server has it now: registered vmas stay registered */
		mm_lazy_warm(ctx, t, u.fd, u.reg);
		r = mm_lazy_give(ctx, t, u.fd, u.reg);
		free(u.reg);
		close(u.fd);
		if (r < 0)
			return r;
	} else if (lazy) {
		u.lazy = false;
		uffd_close(t, &u);
	} else {
		uffd_close(t, &u);
	}
	for (size_t i = 0; r == -EBADMSG && !logged && i < m->nchecks; i++)
		if (__atomic_load_n(&m->checks[i]->state, __ATOMIC_ACQUIRE) < 0)
			return bad_check(ctx, t, m->checks[i]);
	if (r < 0 && !logged)
		return log_fail(&ctx->log, r, "pid %d: cannot write pages at %llx: %s", t->pid,
				(unsigned long long)addr, pages_strerror(r));
	return r;
}

/*
 * The puppet's exe is ckpt's (or the library caller's). If the image's is
 * the same file, it stays: the kernel would refuse to replace an exe that
 * is still mapped, and it is.
 */
static bool same_exe(struct rst_ctx *ctx, struct rst_task *t, uint32_t id)
{
	char path[64];
	struct stat a, b;
	int fd;
	snprintf(path, sizeof(path), "/proc/%d/exe", t->pup.pid);
	/* a file_reg object, or memfd's for a deleted program */
	return fdtable_local_fd(ctx, id, &fd) == 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int set_mm_fields(struct rst_ctx *ctx, struct rst_task *t, struct remote_files *rf)
{
	const MmEntry *e = ((struct mm_rst *)t->kstate[KIND_mm])->e;
	struct puppet *p = &t->pup;
	struct prctl_mm_map map = {
		.start_code = e->start_code,
		.end_code = e->end_code,
		.start_data = e->start_data,
		.end_data = e->end_data,
		.start_brk = e->start_brk,
		.brk = e->brk,
		.start_stack = e->start_stack,
		.arg_start = e->arg_start,
		.arg_end = e->arg_end,
		.env_start = e->env_start,
		.env_end = e->env_end,
		.auxv_size = (uint32_t)(e->n_auxv * sizeof(uint64_t)),
		.exe_fd = (uint32_t)-1,
	};
	if (e->n_auxv > 128)
		return log_fail(&ctx->log, -EINVAL, "pid %d: auxv of %zu entries is too long",
				t->pid, e->n_auxv);
	if (e->has_exe_file_id && !same_exe(ctx, t, e->exe_file_id)) {
		int fd = remote_file(ctx, t, rf, e->exe_file_id);
		if (fd < 0)
			return fd;
		map.exe_fd = (uint32_t)fd;
	}
	uint64_t auxv = puppet_scratch_put(p, 2048, e->auxv, map.auxv_size);
	map.auxv = (__u64 *)(uintptr_t)auxv;
	uint64_t addr = puppet_scratch_put(p, 0, &map, sizeof(map));
	if (!auxv || !addr)
		return -EFAULT;
	/* queued (with the closes of the fds passed for the mappings, after) */
	long r = vma_call(ctx, t, NULL, PUPPET_CALL(SYS_prctl, PR_SET_MM, PR_SET_MM_MAP, addr,
						    sizeof(map), 0),
			  VC_FAIL, "prctl(PR_SET_MM_MAP)");
	if (inject(ctx, t, "prctl(PR_SET_MM_MAP)", r) < 0)
		return (int)r;
	return 0;
}

/*
 * The files and shared memory objects the task's vmas map, passed into it
 * all at once (puppet_send_fds) before the vmas are mapped, rather than
 * one injected recvmsg each. Best effort: what is not passed here is
 * passed by remote_file() as before, which also reports any failure.
 */
static void prefetch_files(struct rst_ctx *ctx, struct rst_task *t)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	struct remote_files *rf = &m->rf;
	int local[PUPPET_FDS_MAX], rfd[PUPPET_FDS_MAX];
	uint64_t key[PUPPET_FDS_MAX];
	size_t n = 0, room = MIN((size_t)PUPPET_FDS_MAX, ARRAY_SIZE(rf->key) - (size_t)rf->n);

	for (size_t i = 0; i < m->e->n_vmas && n < room; i++) {
		const VmaEntry *v = m->e->vmas[i];
		const struct kind_ops *o = is_special(v) ? NULL : vma_owner(v);
		uint64_t k;
		int fd = -1;
		if (!o || v->inherit || (m->kept && m->kept[i])) /* kept from the fork */
			continue;
		if (o->vma_map == mm_map_file && v->has_file_id) {
			k = v->file_id;
			if (fdtable_local_fd(ctx, v->file_id, &fd) < 0)
				continue;
		} else if (o->vma_map == mm_vma_map && v->kind == VMA_KIND__VMA_ANON && v->shared &&
			   v->has_shmem_id) {
			k = SHMEM_KEY(v->shmem_id);
			if (mm_shmem_fd(ctx, v->shmem_id, 0, &fd) < 0)
				continue;
		} else {
			continue;
		}
		bool dup = remote_cached(rf, k) >= 0;
		for (size_t j = 0; j < n && !dup; j++)
			dup = key[j] == k;
		if (dup)
			continue;
		key[n] = k;
		local[n++] = fd;
	}
	if (n < 2 || puppet_send_fds(&t->pup, ctx->ctl[0], ctx->ctl_remote, local, n, rfd) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		rf->key[rf->n] = key[i];
		rf->fd[rf->n++] = rfd[i];
	}
}

/* Would v and w (of two images) be mapped alike? */
static bool same_file_vma(const VmaEntry *v, const VmaEntry *w)
{
	return w && w->start == v->start && w->end == v->end && w->kind == v->kind &&
	       w->has_file_id && w->file_id == v->file_id && w->pgoff == v->pgoff &&
	       w->prot == v->prot && w->shared == v->shared && w->vmflags == v->vmflags &&
	       !w->inherit && !w->has_huge_page;
}

/*
 * The private file vmas a child has from its fork just as its image has
 * them, kept (m->kept): no unmap and mmap again, no fd passed for them.
 * Its parent's puppet, whose memory was restored before the fork (the
 * child keeps memory from it, mm_inherits), mapped the same file there
 * with the same offset, protection and VmFlags (not kept from the
 * grandparent's memory: its pages of its own are those of its image), and
 * the child's maps show the vma so. Only vmas without madvise bits, locks
 * or huge pages (nothing a fork does not copy or that the restore would
 * set apart). keep_forked drops the parent's pages in it, if any: it then
 * reads the file, as a new mapping does.
 */
static void mark_kept(struct rst_ctx *ctx, struct rst_task *t, const struct proc_vmas *cur)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	const uint32_t apart =
	    VMF_LO | VMF_HG | VMF_NH | VMF_DC | VMF_DD | VMF_WF | VMF_MG | VMF_GD | VMF_DP | VMF_SH;
	if (t->creator != t->parent || !mm_inherits(t) || !ctx->tasks[t->parent].mm_done)
		return;
	const struct mm_rst *pm = ctx->tasks[t->parent].kstate[KIND_mm];
	size_t j = 0;
	struct stat st;
	int stated = -1; /* the fd st is of: a file's vmas come one after another */
	for (size_t i = 0; pm && pm->e && i < m->e->n_vmas; i++) {
		const VmaEntry *v = m->e->vmas[i];
		if (v->kind != VMA_KIND__VMA_FILE || v->shared || v->inherit || !v->has_file_id ||
		    v->has_huge_page || (v->vmflags & apart) ||
		    vma_owner(v)->vma_map != mm_map_file ||
		    !same_file_vma(v, vma_of(pm->e, v->start)))
			continue;
		while (j < cur->n && cur->v[j].end <= v->start)
			j++;
		const struct proc_vma *c = j < cur->n ? &cur->v[j] : NULL;
		int fd;
		if (!c || c->start != v->start || c->end != v->end || c->pgoff != v->pgoff ||
		    c->prot != v->prot || c->shared || fdtable_local_fd(ctx, v->file_id, &fd) < 0)
			continue;
		if (fd != stated && fstat(fd, &st) < 0) {
			stated = -1;
			continue;
		}
		stated = fd;
		if (st.st_ino != c->ino || major(st.st_dev) != c->dev_major ||
		    minor(st.st_dev) != c->dev_minor)
			continue;
		if (!m->kept && !(m->kept = calloc(m->e->n_vmas, sizeof(*m->kept))))
			return;
		m->kept[i] = true;
	}
}

/* A vma of mark_kept's: writable while its pages are written, without the
 * parent's pages */
static int keep_forked(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	const struct mm_rst *pm = ctx->tasks[t->parent].kstate[KIND_mm];
	static const char what[] = "keeping a file mapping from the fork";
	long r = 0;
	const struct mm_rst *m = t->kstate[KIND_mm];
	if (initial_prot(v) != v->prot && !kept_as_is(m, v))
		r = vma_call(
		    ctx, t, v,
		    PUPPET_CALL(SYS_mprotect, v->start, v->end - v->start, initial_prot(v)),
		    VC_FAIL, what);
	if (r >= 0 && pages_set_has(&pm->pages, v->start, v->end) &&
	    !written_over(ctx, m, v->start, v->end))
		r = vma_call(ctx, t, v,
			     PUPPET_CALL(SYS_madvise, v->start, v->end - v->start, MADV_DONTNEED),
			     VC_FAIL, what);
	return (int)r;
}

/* Is [lo, hi) mapped in cur without a hole, all at protection prot? */
static bool cur_prot_is(const struct proc_vmas *cur, uint64_t lo, uint64_t hi, uint32_t prot)
{
	uint64_t pos = lo; /* cur is in address order */
	for (size_t j = 0; j < cur->n && pos < hi; j++) {
		const struct proc_vma *c = &cur->v[j];
		if (c->end <= pos)
			continue;
		if (c->start > pos || c->prot != prot)
			return false;
		pos = c->end;
	}
	return pos >= hi;
}

/*
 * A vma kept from the fork (inherited, or mark_kept's) that gets no page
 * of its own and that the child's maps already show at its protection is
 * left as it is: no mprotect to initial_prot for the writes, none back
 * after them (final_prots). Each of those two changes the page table
 * entries of pages the fork shares, and flushes the TLB: 20-50 us each in
 * this PVM guest, where the same mprotect that changes nothing takes 1 us.
 * A child of the 100-process tree had three such pairs (the RELRO pages
 * of its exe, libc and ld.so). Not with RESTART_LAZY (written_over).
 */
static void mark_as_is(struct rst_ctx *ctx, struct rst_task *t, const struct proc_vmas *cur)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	if (ctx->flags & RESTART_LAZY)
		return;
	for (size_t i = 0; i < m->e->n_vmas; i++) {
		const VmaEntry *v = m->e->vmas[i];
		if (!(v->inherit || (m->kept && m->kept[i])) ||
		    pages_set_has(&m->pages, v->start, v->end) ||
		    !cur_prot_is(cur, v->start, v->end, v->prot))
			continue;
		if (!m->as_is && !(m->as_is = calloc(m->e->n_vmas, sizeof(*m->as_is))))
			return;
		m->as_is[i] = true;
	}
}

static int mm_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	struct mm_rst *m = t->kstate[KIND_mm];
	_cleanup_free_ char *text = NULL;
	struct proc_vmas cur = { 0 };
	int r;

	if (t->mm_done) /* restored early, before its children were forked */
		return 0;
	r = proc_read(t->pup.pid, "maps", &text, NULL);
	if (r < 0 || (r = proc_parse_smaps(text, &cur)) < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its maps", t->pid);
	/* the unmaps, the vDSO's move and the vmas' calls: one batch, mostly */
	_cleanup_free_ struct vma_calls *q = malloc(sizeof(*q));
	if (!q) {
		proc_vmas_free(&cur);
		return -ENOMEM;
	}
	q->n = 0;
	q->new_ip = 0;
	m->calls = q;
	mark_kept(ctx, t, &cur);
	mark_as_is(ctx, t, &cur);
	r = unmap_all_but_vdso(ctx, t, &cur);
	if (r >= 0)
		r = move_vdso(ctx, t, &cur);
	proc_vmas_free(&cur);
	if (r < 0)
		goto out;
	prefetch_files(ctx, t);
	for (size_t i = 0; i < m->e->n_vmas; i++) {
		const VmaEntry *v = m->e->vmas[i];
		if (is_special(v)) /* the vDSO group is moved, [vsyscall] is there */
			continue;
		if (m->kept && m->kept[i]) {
			r = keep_forked(ctx, t, v);
			if (r < 0)
				break;
			continue;
		}
		/* another kind's map (shmat) is injected now: what is queued first */
		const struct kind_ops *o = vma_owner(v);
		r = o->vma_map == mm_vma_map || o->vma_map == mm_map_file ? 0
									 : vma_calls_flush(ctx, t);
		if (r >= 0)
			r = o->vma_map(ctx, t, v);
		if (r >= 0)
			r = advise_vma(ctx, t, v);
		if (r < 0)
			break;
	}
	if (r >= 0)
		r = vma_calls_flush(ctx, t);
	m->calls = NULL;
	if (r < 0)
		goto out;
	r = write_pages(ctx, t);
	if (r >= 0)
		r = mm_vdso_refind(ctx, t);
	if (r < 0)
		goto out;
	/* the final protections, PR_SET_MM_MAP and the closes: one batch
	 * (the first two were one each), unless a lock comes between */
	m->calls = q;
	r = final_prots(ctx, t, m->e);
	if (r >= 0 && (m->e->has_mlockall || has_locked(m->e)))
		r = vma_calls_flush(ctx, t);
	if (r >= 0)
		r = lock_vmas(ctx, t);
	if (r >= 0)
		r = mm_lockall_restore(ctx, t, m->e);
	if (r < 0)
		goto out;
	r = set_mm_fields(ctx, t, &m->rf);
	for (int i = 0; r >= 0 && i < m->rf.n; i++)
		r = (int)vma_call(ctx, t, NULL, PUPPET_CALL(SYS_close, m->rf.fd[i]), VC_IGNORE, NULL);
	if (r >= 0) {
		m->rf.n = 0;
		r = vma_calls_flush(ctx, t);
	}
	t->mm_done = r >= 0;
out:
	m->calls = NULL;
	free(m->kept);
	m->kept = NULL;
	free(m->as_is);
	m->as_is = NULL;
	close_remote_files(t, &m->rf);
	return r;
}

/*
 * t keeps memory it shares copy-on-write with its parent since fork: the
 * parent's memory is restored before it forks t (mm-cow.c); SysV segments
 * it attaches are made by then (sysv's root_ready).
 */
static int mm_before_fork(struct rst_ctx *ctx, struct rst_task *t)
{
	if (!mm_inherits(t))
		return 0;
	struct rst_task *p = &ctx->tasks[t->parent];
	struct mm_rst *pm = p->kstate[KIND_mm];
	if (pm) /* filled before the fork: a child must not find it lazy */
		pm->eager = true;
	if (t->creator != t->parent)
		return log_fail(&ctx->log, -EINVAL,
				"pid %d: keeps memory from its parent %d but is not forked by it",
				t->pid, p->pid);
	int r = mm_restore(ctx, p);
	if (r < 0 && !ctx->log.errors)
		log_error(&ctx->log, "pid %d: restoring mm failed: %s", p->pid, strerror(-r));
	return r;
}

uint64_t mm_largest_pages(const struct rst_ctx *ctx)
{
	uint64_t max = 0;
	for (size_t i = 0; i < ctx->ntasks; i++) {
		const struct mm_rst *m = ctx->tasks[i].kstate[KIND_mm];
		max = m && m->pages.bytes > max ? m->pages.bytes : max;
	}
	return max;
}

static void mm_free_state(void *state)
{
	struct mm_ckpt *m = state;
	if (!m)
		return;
	for (size_t i = 0; m->inherited && i < m->e.n_vmas; i++)
		free(m->inherited[i]);
	for (size_t i = 0; m->vma && i < m->e.n_vmas; i++)
		mm_aio_free(m->e.vmas[i]);
	free(m->inherited);
	free(m->vma);
	free(m->aio_call);
	free(m->e.vmas);
	free(m->auxv);
	mm_dirty_free(m->dirty);
	shmem_index_free(m->shmem_done);
	free(m);
}

struct mm_dirty *mm_dirty_of(const struct task *t)
{
	const struct mm_ckpt *m = t->kstate[KIND_mm];
	return m ? m->dirty : NULL;
}

static void mm_free_rstate(void *state)
{
	struct mm_rst *m = state;
	if (!m)
		return;
	pages_set_release(&m->pages);
	for (size_t i = 0; i < m->nchecks; i++)
		free(m->checks[i]);
	free(m->checks);
	mm_chain_free(m->chain);
	mm_lazy_free(m);
	free(m->kept);
	free(m->as_is);
	if (m->e)
		mm_entry__free_unpacked(m->e, NULL);
	free(m);
}

static const ProtobufCMessageDescriptor *mm_descriptor(uint32_t sub)
{
	switch (sub) {
	case REC_SUB(MM_ENTRY):
		return &mm_entry__descriptor;
	case REC_SUB(MM_TRACK):
		return &mm_track__descriptor;
	default:
		return NULL;
	}
}

const struct kind_ops mm_ops = {
	.probe = mm_probe,
	.collect = mm_collect,
	.dump = mm_dump,
	.dump_live = mm_dump_live,
	.load = mm_load,
	.loaded = mm_check_loaded,
	.prepare = mm_prepare,
	.before_fork = mm_before_fork,
	.restore = mm_restore,
	.restore_end = mm_lazy_taken,
	.handover = mm_lazy_handover,
	.restore_abort = mm_lazy_abort,
	.free_state = mm_free_state,
	.free_rstate = mm_free_rstate,
	.free_robj = mm_free_robj,
	.descriptor = mm_descriptor,
	.vma_claim = mm_vma_claim,
	.vma_collect = mm_vma_collect,
	.vma_check = mm_vma_check,
	.vma_map = mm_vma_map,
	.vma_prio = 0, /* anonymous memory: names no other kind claims */
};
