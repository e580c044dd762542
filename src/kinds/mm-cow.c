/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private memory a child still shares copy-on-write with its parent since
 * fork. At checkpoint a page is shared when the parent and the child map
 * it at the same address to the same physical page (the PFN in
 * /proc/PID/pagemap, which root can read): such pages are the parent's,
 * saved once with it, and the child's vma records them as inherited. At
 * restart the child is forked by its parent after the parent's memory is
 * restored, keeps those vmas from the fork (the kernel shares the pages
 * again), drops what it did not have, and gets only its own pages written.
 *
 * Only where restart forks the child from its parent (not with
 * CLONE_PARENT: the child is in its parent's session or leads its own),
 * and only vmas the parent would pass on at fork (no MADV_DONTFORK or
 * MADV_WIPEONFORK).
 *
 * Private anonymous vmas and private file mappings (the same file at the
 * same offsets in both): of a file mapping only the pages written since it
 * was mapped (anonymous copies, not the file's page cache, which pagemap
 * marks PM_FILE and both map anyway) are the parent's. At restart the
 * child keeps such a vma from the fork; MADV_DONTNEED of the rest gives it
 * the file's pages again where it had them, and its own pages are written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/mm.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"
#include "util/kernel.h"
#include "util/pagemap-scan.h"

#define PAGE 4096ull
#define PFN_MASK ((1ull << 55) - 1)
#define PM_PRESENT (1ull << 63)
#define PM_FILE	   (1ull << 61) /* a file page or shared anonymous */
#define BLOCK 4096 /* pagemap entries read at a time */

/* Private memory whose pages a fork shares: anonymous, or of a file. */
static bool cow_kind(const VmaEntry *v)
{
	return (v->kind == VMA_KIND__VMA_ANON ||
		(v->kind == VMA_KIND__VMA_FILE && v->has_file_id)) &&
	       !v->shared;
}

/* The parent's vma that the child's v came from at fork, or NULL. */
static const VmaEntry *parent_vma(const MmEntry *pe, const VmaEntry *v)
{
	for (size_t i = 0; pe && i < pe->n_vmas; i++) {
		const VmaEntry *w = pe->vmas[i];
		if (w->start > v->start || v->end > w->end)
			continue;
		if (!cow_kind(w) || w->kind != v->kind || (w->vmflags & (VMF_DC | VMF_WF)))
			return NULL;
		if (w->kind == VMA_KIND__VMA_FILE &&
		    (w->file_id != v->file_id || w->pgoff + (v->start - w->start) != v->pgoff))
			return NULL;
		return w;
	}
	return NULL;
}

struct runs {
	uint64_t *v; /* address, pages, address, pages... */
	size_t n, cap;
};

static int add_page(struct runs *r, uint64_t addr)
{
	if (r->n && r->v[r->n - 2] + r->v[r->n - 1] * PAGE == addr) {
		r->v[r->n - 1]++;
		return 0;
	}
	if (r->n + 2 > r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		uint64_t *nv = realloc(r->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		r->v = nv;
		r->cap = cap;
	}
	r->v[r->n++] = addr;
	r->v[r->n++] = 1;
	return 0;
}

/* Pages of [start, end) that both map to the same physical page. */
static int shared_pages(int pm_child, int pm_parent, uint64_t start, uint64_t end,
			struct runs *out)
{
	static const size_t blk = BLOCK;
	_cleanup_free_ uint64_t *a = malloc(blk * 8), *b = malloc(blk * 8);
	if (!a || !b)
		return -ENOMEM;
	for (uint64_t pos = start; pos < end;) {
		size_t n = MIN(blk, (end - pos) / PAGE);
		off_t off = (off_t)(pos / PAGE * 8);
		if (pread(pm_child, a, n * 8, off) != (ssize_t)(n * 8) ||
		    pread(pm_parent, b, n * 8, off) != (ssize_t)(n * 8))
			return -EIO;
		for (size_t i = 0; i < n; i++) {
			bool same = (a[i] & PM_PRESENT) && (b[i] & PM_PRESENT) &&
				    !(a[i] & PM_FILE) && (a[i] & PFN_MASK) &&
				    (a[i] & PFN_MASK) == (b[i] & PFN_MASK);
			int r = same ? add_page(out, pos + i * PAGE) : 0;
			if (r < 0)
				return r;
		}
		pos += n * PAGE;
	}
	return 0;
}

/*
 * shared_pages over the parts of [start, end) where the child has present
 * anonymous pages (PAGEMAP_SCAN: present, not a file page), the only ones
 * it can share: a library's text, hundreds of page-cache pages, was read
 * from both pagemaps for none. The whole range if the scan fails.
 */
static int shared_anon_pages(int pm_child, int pm_parent, uint64_t start, uint64_t end,
			     const struct mm_pages_map *map, struct runs *out)
{
	if (map && mm_map_covers(map, start, end)) {
		for (size_t i = mm_map_first(map, start); i < map->n && map->r[i].start < end;
		     i++) {
			const struct page_region *g = &map->r[i];
			if (!(g->categories & PAGE_IS_PRESENT) || (g->categories & PAGE_IS_FILE))
				continue;
			int r = shared_pages(pm_child, pm_parent, MAX(g->start, start),
					     MIN(g->end, end), out);
			if (r < 0)
				return r;
		}
		return 0;
	}
	struct page_region regs[64];
	struct pm_scan s;
	pm_scan_start(&s, pm_child,
		      &(struct pm_scan_arg){
			  .start = start,
			  .end = end,
			  .category_inverted = PAGE_IS_FILE,
			  .category_mask = PAGE_IS_FILE | PAGE_IS_PRESENT,
			  .return_mask = PAGE_IS_PRESENT,
		      },
		      regs, ARRAY_SIZE(regs));
	for (const struct page_region *g; (g = pm_scan_next(&s));) {
		int r = shared_pages(pm_child, pm_parent, g->start, g->end, out);
		if (r < 0)
			return r;
	}
	return s.err < 0 ? shared_pages(pm_child, pm_parent, pm_scan_pos(&s), end, out) : 0;
}

static int open_pagemap(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int mm_cow_find(struct ckpt_ctx *ctx, struct task *t, MmEntry *e, const MmEntry *pe,
		pid_t parent, uint64_t **ret_bufs, int pmc, const struct mm_pages_map *map)
{
	uint64_t saved = 0;
	bool any = false;

	for (size_t i = 0; i < e->n_vmas && !any; i++)
		any = cow_kind(e->vmas[i]) && parent_vma(pe, e->vmas[i]);
	if (!any)
		return 0; /* nothing the parent could share */
	_cleanup_close_ int pmp = open_pagemap(parent);
	if (pmp < 0)
		return log_fail(&ctx->log, pmp, "pid %d: cannot open pagemap", t->pid);
	for (size_t i = 0; i < e->n_vmas; i++) {
		VmaEntry *v = e->vmas[i];
		struct runs r = { 0 };
		if (!cow_kind(v) || !parent_vma(pe, v))
			continue;
		int err = shared_anon_pages(pmc, pmp, v->start, v->end, map, &r);
		if (err < 0) {
			free(r.v);
			return log_fail(&ctx->log, err, "pid %d: cannot compare %llx-%llx with its "
					"parent's: %s", t->pid, (unsigned long long)v->start,
					(unsigned long long)v->end, strerror(-err));
		}
		if (!r.n)
			continue;
		/* a PFN of 0 means pagemap hides them (no CAP_SYS_ADMIN): none found */
		v->has_inherit = true;
		v->inherit = true;
		v->inherited = r.v;
		v->n_inherited = r.n;
		ret_bufs[i] = r.v;
		for (size_t k = 1; k < r.n; k += 2)
			saved += r.v[k];
	}
	if (saved)
		log_debug(&ctx->log, "pid %d: %llu pages shared with parent %d since fork", t->pid,
			  (unsigned long long)saved, parent);
	return 0;
}

bool mm_cow_skip(const VmaEntry *v, uint64_t addr)
{
	size_t lo = 0, hi = v->n_inherited / 2;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		uint64_t a = v->inherited[2 * mid], n = v->inherited[2 * mid + 1];
		if (addr < a)
			hi = mid;
		else if (addr >= a + n * PAGE)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

int mm_cow_validate(const VmaEntry *v)
{
	if (!v->inherit)
		return v->n_inherited ? -EINVAL : 0;
	if (!cow_kind(v) || v->n_inherited % 2)
		return -EINVAL;
	uint64_t prev = v->start;
	for (size_t k = 0; k < v->n_inherited; k += 2) {
		uint64_t a = v->inherited[k], n = v->inherited[k + 1];
		if (a % PAGE || a < prev || !n || n > (v->end - a) / PAGE)
			return -EINVAL;
		prev = a + n * PAGE;
	}
	return 0;
}
