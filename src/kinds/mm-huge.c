/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hugetlb memory, a part of mm (and of memfd for hugetlb memfds).
 *
 * A vma whose VmFlags have "ht" is of hugetlbfs: MAP_HUGETLB anonymous
 * memory ("/anon_hugepage (deleted)", private or shared), a mapping of a
 * hugetlb memfd (MFD_HUGETLB), or a SysV SHM_HUGETLB segment (made again
 * with SHM_HUGETLB by sysv). Its page size is smaps' KernelPageSize, saved as
 * VmaEntry.huge_page. Any page size the kernel has is saved the same way
 * (mmap flags MAP_HUGE_<log2 of the size>); a restart on a machine that has
 * no huge pages of that size (no /sys/kernel/mm/hugepages/hugepages-NkB:
 * 1 GiB pages on x86 need the CPU flag pdpe1gb) fails at load, naming the
 * size. Only 2 MiB pages were tested: the machines here have no 1 GiB
 * pages (e2e mem_hugetlb_1g is skipped where /sys has none).
 *
 * Checkpoint: of a private mapping, the pages present (PAGEMAP_SCAN,
 * PRESENT or SWAPPED, with no exclusion of file pages: a private hugetlb
 * page may be either) are read like any other memory; a page never touched
 * is not saved (and not faulted in by the read, which would take a huge
 * page from the pool). Of a shared mapping, every page, as for shared
 * anonymous memory: a page another task touched is in its page tables
 * only (postgres' backends fill the postmaster's shared buffers); reading
 * faults the others in from the pages the mapping reserved, and the page
 * store drops them as zero.
 *
 * Restart: private anonymous hugetlb is mapped MAP_HUGETLB|MAP_HUGE_2MB;
 * shared anonymous hugetlb is one object made by ckpt (an anonymous
 * MAP_SHARED|MAP_HUGETLB mapping of its own, opened through map_files:
 * again "/anon_hugepage (deleted)") and mapped from that fd in every task
 * that had it. The pages are written with process_vm_writev, which faults
 * huge pages in from the pool: eagerly, also with restart --lazy (the
 * userfaultfd of the lazy server registers no hugetlb vma; a huge page is
 * filled whole anyway, so lazy filling would gain little). A restart
 * without free huge pages fails naming the vma (mmap: ENOMEM).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/mm.h"
#include "mm.pb-c.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

bool mm_huge_claim(const struct proc_vma *pv)
{
	return pv->deleted && !strcmp(pv->path, "/anon_hugepage");
}

bool mm_huge_size_ok(uint64_t page)
{
	/* a power of two above the base page; MAP_HUGE_* holds its log2 in
	 * 6 bits, and no architecture has pages above 16 GiB */
	return page > 4096 && page <= (1ull << 34) && !(page & (page - 1));
}

const char *mm_huge_refusal(uint64_t page)
{
	if (mm_huge_size_ok(page))
		return NULL;
	return "hugetlb memory of a page size that is not a power of two above 4 KiB: not "
	       "supported";
}

int mm_huge_avail(struct ckpt_log *log, uint64_t page, const char *what)
{
	char path[80];
	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%llukB",
		 (unsigned long long)(page >> 10));
	if (access(path, F_OK) == 0)
		return 0;
	return log_fail(log, -EOPNOTSUPP,
			"%s: hugetlb memory of %llu kB pages, and this machine has none (no %s%s)",
			what, (unsigned long long)(page >> 10), path,
			page == 1ull << 30 ? "; on x86, 1 GiB pages need the CPU flag pdpe1gb and "
					     "are reserved at boot or through its nr_hugepages"
					   : "");
}

int mm_huge_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, VmaEntry *v)
{
	if (!(pv->vmflags & VMF_HT))
		return 0;
	uint64_t page = pv->page_kb * 1024;
	const char *no = mm_huge_refusal(page);
	if (no)
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d vma %llx-%llx (%s): %s", t->pid,
				(unsigned long long)pv->start, (unsigned long long)pv->end,
				pv->path[0] ? pv->path : "anonymous", no);
	v->has_huge_page = true;
	v->huge_page = page;
	return 0;
}

int mm_huge_valid(const VmaEntry *v)
{
	if (!v->has_huge_page)
		return 0;
	if (!mm_huge_size_ok(v->huge_page) || (v->start | v->end | v->pgoff) % v->huge_page ||
	    (v->kind != VMA_KIND__VMA_ANON && v->kind != VMA_KIND__VMA_FILE &&
	     v->kind != VMA_KIND__VMA_SYSV_SHM))
		return -EINVAL;
	return 0;
}

int mm_huge_map_flags(const VmaEntry *v)
{
	if (!v->has_huge_page)
		return 0;
	return MAP_HUGETLB | (__builtin_ctzll(v->huge_page) << MAP_HUGE_SHIFT);
}

int mm_huge_make_shared(struct rst_ctx *ctx, uint64_t size, uint64_t page, int *ret_fd)
{
	size = (size + page - 1) / page * page;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB |
			   (__builtin_ctzll(page) << MAP_HUGE_SHIFT),
		       -1, 0);
	if (m == MAP_FAILED)
		return log_fail(&ctx->log, -errno,
				"cannot make shared hugetlb memory of %llu bytes: %s (free huge "
				"pages: see vm.nr_hugepages)",
				(unsigned long long)size, strerror(errno));
	return mm_mapping_fd(ctx, m, size, ret_fd);
}

bool mm_thp_fill(const VmaEntry *v)
{
	if (!(v->vmflags & VMF_HG))
		return false;
	char buf[128] = "";
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return !strstr(buf, "[never]") && n > 0;
}
