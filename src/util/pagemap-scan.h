/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The regions a PAGEMAP_SCAN request lists, one after the other, whatever
 * the number of calls it takes: each call fills the caller's buffer, and
 * the next one goes on from where the kernel stopped (walk_end), or from
 * the end of the last region the call gave if that is further (the kernel
 * once gave regions past its walk_end, which the next call gave again).
 *
 *	struct page_region buf[512];
 *	struct pm_scan s;
 *	pm_scan_start(&s, pagemap, &(struct pm_scan_arg){ .start = a, .end = b,
 *		      .category_mask = ..., .return_mask = ... }, buf, 512);
 *	for (const struct page_region *g; (g = pm_scan_next(&s));)
 *		...
 *	if (s.err < 0)
 *		... the call that failed was to begin at pm_scan_pos(&s)
 *
 * The request's size, vec and vec_len are the iterator's; its flags and
 * categories are kept for every call. A max_pages is for the whole scan
 * (the kernel's is per call): each call asks what is left of it, and the
 * scan ends when none is. call_pages, if set after pm_scan_start, ends
 * each call once it has listed that many pages: the kernel holds the
 * process's mmap lock for a whole call, and a call as long as the walk of
 * all its memory keeps an mmap or munmap of the process waiting that long.
 * The scan also ends if a call makes no progress (neither walk_end nor its
 * last region's end after its start); pm_scan_pos() is then before the end.
 * Nothing is logged; no state but the struct.
 */
#ifndef CKPT_PAGEMAP_SCAN_H
#define CKPT_PAGEMAP_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/kernel.h"

struct pm_scan {
	int fd;
	struct pm_scan_arg arg; /* the next call's; arg.start: where it begins */
	uint64_t pages_left;	/* with a max_pages: what is left of it */
	uint64_t call_pages;	/* at most this many pages a call (0: no limit) */
	size_t calls;		/* made so far */
	struct page_region *vec;
	size_t len;  /* the buffer's regions */
	size_t n, i; /* regions in the buffer, the next one given */
	bool done;   /* no call after the one in the buffer */
	int err;     /* -errno of a failed call, else 0 */
};

void pm_scan_start(struct pm_scan *s, int fd, const struct pm_scan_arg *req,
		   struct page_region *buf, size_t len);

/* One call into vec (len regions, at least one): how many it listed, 0
 * once the scan is over, -errno if this call failed (s->err). s->done: no
 * call is left to make. For a caller that keeps the regions where they are
 * (a growing array). */
long pm_scan_call(struct pm_scan *s, struct page_region *vec, size_t len);

/* The next region, or NULL at the end of the scan or on a failure (s->err);
 * the buffer given to pm_scan_start must hold one region at least. */
const struct page_region *pm_scan_next(struct pm_scan *s);

/* Where the scan is: the start of the next call (or of the failed one). */
/* The first of n regions, in order, that ends after addr (n if none). */
static inline size_t pm_region_first(const struct page_region *r, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static inline uint64_t pm_scan_pos(const struct pm_scan *s)
{
	return s->arg.start;
}

#endif
