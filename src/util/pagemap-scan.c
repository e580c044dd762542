/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A PAGEMAP_SCAN request's regions, over as many calls as it takes
 * (pagemap-scan.h). */
#include <errno.h>
#include <sys/ioctl.h>

#include "util/pagemap-scan.h"

#define PAGE_SIZE_ 4096ull

void pm_scan_start(struct pm_scan *s, int fd, const struct pm_scan_arg *req,
		   struct page_region *buf, size_t len)
{
	*s = (struct pm_scan){.fd = fd, .arg = *req, .vec = buf, .len = len};
	s->arg.size = sizeof(s->arg);
	s->pages_left = req->max_pages;
	s->done = s->arg.start >= s->arg.end;
}

long pm_scan_call(struct pm_scan *s, struct page_region *vec, size_t len)
{
	if (s->done || s->err)
		return 0;
	uint64_t pos = s->arg.start;
	s->arg.vec = (uint64_t)(uintptr_t)vec;
	s->arg.vec_len = len;
	/* the kernel's 0 is no limit; a scan with a max_pages ended when none
	 * was left of it */
	bool total = s->pages_left;
	s->arg.max_pages = s->pages_left;
	if (s->call_pages && (!total || s->call_pages < s->pages_left))
		s->arg.max_pages = s->call_pages;
	s->calls++;
	long n = ioctl(s->fd, PAGEMAP_SCAN, &s->arg);
	if (n < 0) {
		s->err = -errno;
		s->done = true;
		return s->err;
	}
	for (long k = 0; s->pages_left && k < n; k++) {
		uint64_t pages = (vec[k].end - vec[k].start) / PAGE_SIZE_;
		s->pages_left -= pages < s->pages_left ? pages : s->pages_left;
	}
	/* on from where the walk ended, or past the last region it gave if
	 * that is further: a scan of a process of some 1,500 regions (an ASan
	 * build's) gave 522 of them, up to the end asked for, with a walk_end
	 * below the last 10, which the next call gave again, out of order
	 * (mm's map then refused the checkpoint with EINVAL; Linux 6.18) */
	uint64_t end = s->arg.walk_end;
	if (n > 0 && vec[n - 1].end > end)
		end = vec[n - 1].end;
	if (end <= pos) { /* stuck: pm_scan_pos() stays before the end */
		s->done = true;
		return n;
	}
	s->arg.start = end;
	s->done = s->arg.start >= s->arg.end || (total && !s->pages_left);
	return n;
}

const struct page_region *pm_scan_next(struct pm_scan *s)
{
	while (s->i == s->n) {
		if (s->done)
			return NULL;
		long n = pm_scan_call(s, s->vec, s->len);
		if (n < 0)
			return NULL;
		s->n = (size_t)n;
		s->i = 0;
	}
	return &s->vec[s->i++];
}
