/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef CKPT_MM_H
#define CKPT_MM_H

struct rst_ctx;
struct rst_task;

/*
 * The region at rst_ctx.scratch_addr, free in every image: the puppet's
 * scratch area at its start, the vDSO passing through its second half.
 */
#define MM_SCRATCH_REGION (1u << 20)

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

struct ckpt_ctx;
struct ckpt_log;
struct task;
struct img_record;
struct MmEntry;
struct VmaEntry;

/*
 * At checkpoint, the pages of a process by one PAGEMAP_SCAN over its
 * private vmas' span [start, end) (mm.c): the regions that are present or
 * swapped, in address order, with their categories (PAGE_IS_PRESENT,
 * _SWAPPED, _FILE, _PFNZERO); n == 0 and ok false if the scan failed.
 */
struct page_region;
struct mm_pages_map {
	bool ok;
	struct page_region *r;
	size_t n, cap;
	/* the address ranges scanned, in order ([start, end) pairs): the
	 * vmas the dirty tracking scans are left out */
	uint64_t *span;
	size_t nspan;
};
/* The index of the first region of m that ends after addr. */
size_t mm_map_first(const struct mm_pages_map *m, uint64_t addr);
/* m holds the pages of [start, end) (one of its spans covers it). */
bool mm_map_covers(const struct mm_pages_map *m, uint64_t start, uint64_t end);
void mm_map_free(struct mm_pages_map *m);

/*
 * mm-cow.c. At checkpoint: marks the vmas of t (entry e) that share pages
 * copy-on-write with its parent (entry pe); ret_bufs[i] gets the run list
 * of vma i to free. pm: t's pagemap, open; map: its pages (or NULL, or not
 * ok: each vma scanned).
 */
int mm_cow_find(struct ckpt_ctx *ctx, struct task *t, struct MmEntry *e,
		const struct MmEntry *pe, pid_t parent, uint64_t **ret_bufs, int pm,
		const struct mm_pages_map *map) __attribute__((warn_unused_result));
/* The page at addr of v is the parent's (inherited): not saved here. */
bool mm_cow_skip(const struct VmaEntry *v, uint64_t addr);
/* -EINVAL if v's inherited runs are not valid. */
int mm_cow_validate(const struct VmaEntry *v);

struct proc_vma;
struct rst_ctx;

/*
 * For the kinds of file mappings (file_reg, memfd): at checkpoint, the
 * "map_files/START-END" link of pv and the open flags a mapping like pv
 * needs; at restart, vma_map and vma_check of a file mapping whose
 * VmaEntry.file_id is an object fdtable_local_fd() resolves.
 */
void mm_vma_link(const struct proc_vma *pv, char *buf, size_t size);
int mm_vma_flags(const struct proc_vma *pv);
int mm_map_file(struct rst_ctx *ctx, struct rst_task *t, const struct VmaEntry *v)
	__attribute__((warn_unused_result));
int mm_check_file_vmas(struct rst_ctx *ctx, struct rst_task *t, const struct MmEntry *e,
		       uint32_t owner) __attribute__((warn_unused_result));

/* Restart: t keeps memory from its fork (it must be forked by its parent,
 * after the parent's memory is restored). */
bool mm_inherits(const struct rst_task *t);

/* The records of mm (mm.c, mm-dirty.c, mm-chain.c). */
#define MM_REC_ENTRY 0x301u     /* REC_TYPE(KID_mm, 1): the MmEntry */
#define MM_REC_PAGES 0x304u     /* a page store record (img/pages.h) */
#define MM_REC_TRACK 0x305u     /* MmTrack: incremental checkpoints */

/*
 * mm-dirty.c: incremental checkpoints, the checkpoint side. A task's
 * tracking (a userfaultfd in write-protect async mode and a memfd that
 * names it, both left in the task at high fds) is found at collect; at
 * dump it is set up (CKPT_TRACK, or a parent), the vmas it covers are
 * scanned by mm_dirty_scan() (the pages written since the parent only, when
 * the task is saved incrementally), and mm_dirty_end() writes MM_REC_TRACK.
 */
struct mm_dirty;
int mm_dirty_collect(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty **ret)
	__attribute__((warn_unused_result));
/* The task has ckpt's tracking: its vmas' VmFlags "uw" are ckpt's. */
bool mm_dirty_tracked(const struct mm_dirty *d);
/* fd of t is ckpt's tracking (its own or inherited by fork): not saved. */
bool mm_dirty_skip_fd(const struct task *t, int fd);
int mm_dirty_begin(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d,
		   const struct MmEntry *e) __attribute__((warn_unused_result));
/* Vma i is scanned by mm_dirty_scan (it is tracked). */
bool mm_dirty_covers(const struct mm_dirty *d, size_t i);
/* Before mm_dirty_begin: v may be scanned by mm_dirty_scan (it is of a
 * kind tracked, in a task tracked; whether it is registered is known after). */
bool mm_dirty_may_cover(const struct mm_dirty *d, const struct VmaEntry *v);
struct pages_writer;
int mm_dirty_scan(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d, int pagemap,
		  size_t i, const struct VmaEntry *v, struct pages_writer *pw)
	__attribute__((warn_unused_result));
int mm_dirty_end(struct ckpt_ctx *ctx, struct task *t, struct mm_dirty *d)
	__attribute__((warn_unused_result));
/* A pre-copy round (CKPT_PRECOPY): mm_dirty_scan() given no writer notes
 * the pages to save (address, length, ...) for mm's dump_live, which reads
 * them once the tree runs again. */
size_t mm_dirty_live_runs(const struct mm_dirty *d, const uint64_t **ret);
/* ckpt_untrack: t's tracking fds closed (t held); 1 if it had some. */
int mm_dirty_untrack(struct ckpt_ctx *ctx, struct task *t) __attribute__((warn_unused_result));
void mm_dirty_free(struct mm_dirty *d);
/*
 * The pre-copy of a checkpoint with a parent (step "pre-copy", the tree
 * running): the pages each tracked process wrote since the parent, copied
 * into ckpt (ctx->mm_pre); under the freeze only what was written since is
 * read (mm-dirty.c tells how the image stays consistent). mm_pre_end:
 * freed, and with failed the tracking of a process whose frozen scan did
 * not begin put back as it was.
 */
int mm_pre_copy(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
/* Step "frozen scan", right after the seize: each pre-copied process's
 * frozen scan begun on a thread of its own (mm-dirty.c), for its dump. */
int mm_pre_freeze(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
void mm_pre_end(struct ckpt_ctx *ctx, bool failed);
struct mm_pre_task;
/* t's pre-copy, if its dump uses one */
const struct mm_pre_task *mm_dirty_pre(const struct mm_dirty *d);
/* For mm_read: the bytes from addr (< end) that come from the copy (*got:
 * copied to dst, if not NULL) or not (*got false: to read from the task). */
uint64_t mm_pre_fill(const struct mm_pre_task *p, uint64_t addr, uint64_t end, uint8_t *dst,
		     bool *got);
/* mm.c: t's tracking state, or NULL */
struct mm_dirty *mm_dirty_of(const struct task *t);

/*
 * mm-chain.c: incremental checkpoints, the restart side. MM_REC_TRACK is
 * loaded into *c; once the task is loaded, mm_chain_resolve() opens the
 * parent images the chain names, checks each one's id, and makes *pages
 * the pages of the whole chain, each from the newest image that has it.
 */
struct mm_chain;
struct pages_set;
int mm_chain_load(struct rst_ctx *ctx, struct rst_task *t, const struct MmEntry *e,
		  const struct img_record *rec, struct mm_chain **c)
	__attribute__((warn_unused_result));
int mm_chain_resolve(struct rst_ctx *ctx, struct rst_task *t, const struct MmEntry *e,
		     struct mm_chain *c, struct pages_set *pages) __attribute__((warn_unused_result));
void mm_chain_free(struct mm_chain *c);
/* inspect: the chain an image's MmTrack record (data, len) starts, one
 * parent a line, each checked (there, with the id recorded) */
void mm_chain_print(FILE *f, const uint8_t *data, size_t len);
/*
 * mm-vdso.c. Restart of a process that had unmapped its vDSO, or a part of
 * it: the puppet's mappings from[0..n) (NULL where kept or absent) are
 * unmapped; without [vdso], injected calls run from the scratch stub, and
 * once the memory is there, mm_vdso_refind() finds a syscall instruction
 * in the process's own code (a no-op if [vdso] is kept).
 */
int mm_drop_vdso(struct rst_ctx *ctx, struct rst_task *t, const struct proc_vma *const *from,
		 int n) __attribute__((warn_unused_result));
int mm_vdso_refind(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));
/* Restart: the most private page bytes any one process of the image has. */
uint64_t mm_largest_pages(const struct rst_ctx *ctx);

/* Restart: ckpt's fd of the shared anonymous memory object that was inode
 * ino at checkpoint (shmem_id), made (of size bytes at least) if no vma
 * has made it yet; owned by mm. */
int mm_shmem_fd(struct rst_ctx *ctx, uint64_t ino, uint64_t size, int *ret_fd)
	__attribute__((warn_unused_result));
/* ckpt's fd of the object its own shared mapping m (size bytes) maps,
 * opened through map_files; m is unmapped. */
int mm_mapping_fd(struct rst_ctx *ctx, void *m, uint64_t size, int *ret_fd)
	__attribute__((warn_unused_result));

/* mm-lockall.c: mlockall(MCL_FUTURE) seen at checkpoint (once the scratch
 * area is mapped), checked at load, called again at the end of restore. */
struct ckpt_ctx;
struct task;
int mm_lockall_read(struct ckpt_ctx *ctx, struct task *t, struct MmEntry *e)
	__attribute__((warn_unused_result));
bool mm_lockall_ok(const struct MmEntry *e);
int mm_lockall_restore(struct rst_ctx *ctx, struct rst_task *t, const struct MmEntry *e)
	__attribute__((warn_unused_result));
/*
 * mm-lazy.c: RESTART_LAZY. Private anonymous memory is filled on first
 * touch (userfaultfd) and in the background by a server process of ckpt's
 * that outlives the restart; DESIGN.md, "Lazy restart".
 */
struct mm_rst;
struct mm_rec;
struct img_record;
/* At load, before the records are checked: refuses what --lazy cannot
 * serve and leaves the page records' checksums for later. */
int mm_lazy_image(struct rst_ctx *ctx) __attribute__((warn_unused_result));
void mm_pages_checked_late(struct rst_ctx *ctx);
/* At load, instead of pages_parse(): one more page record of m, parsed
 * from its table read by pread (the image's mapping is not touched), its
 * checksum kept for the first use; the table is m's until mm_lazy_free(). */
struct pages_chunk;
int mm_lazy_parse(struct rst_ctx *ctx, struct mm_rst *m, const struct img_record *rec,
		  struct pages_chunk *ret) __attribute__((warn_unused_result));
/* Frees what mm_lazy_parse() kept in m. */
void mm_lazy_free(struct mm_rst *m);
/* -EBADMSG if the record's data is not what its checksum says. */
int mm_lazy_check_rec(struct mm_rec *r) __attribute__((warn_unused_result));
/* The chunks of t's page set that have pages outside the registered vmas
 * (reg: per vma; NULL: none is), which ckpt writes itself, their records'
 * checksums checked (a damaged one is refused here, logged); *ret to
 * release. */
struct pages_set;
int mm_lazy_eager(struct rst_ctx *ctx, struct rst_task *t, const bool *reg,
		  struct pages_set *ret) __attribute__((warn_unused_result));
/* t's page set is about to be rebuilt from its image and its parents'
 * (mm-chain.c): its own records' checksums are checked now, and the
 * server takes the rebuilt set as checked. */
int mm_lazy_settle(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));
/* At prepare: the server forked (ctx->lazy). */
int mm_lazy_start(struct rst_ctx *ctx) __attribute__((warn_unused_result));
/* A vma of the kind the lazy server fills: private anonymous, not hugetlb. */
bool mm_lazy_vma(const struct VmaEntry *v);
/* Such a vma of at most MM_LAZY_SMALL bytes is written by ckpt (up to
 * MM_LAZY_SMALL_ALL of them in all, in address order), not registered. */
#define MM_LAZY_SMALL (256u << 10)
#define MM_LAZY_SMALL_ALL (1u << 20)
/* A userfaultfd of t's (ret_fd, ckpt's copy) with its private anonymous
 * vmas but the small ones registered (ret_reg: per vma, to free). */
int mm_lazy_uffd(struct rst_ctx *ctx, struct rst_task *t, int *ret_fd, bool **ret_reg)
	__attribute__((warn_unused_result));
/* Puts in now, through t's userfaultfd fd (reg: its registered vmas), the
 * pages its threads touch first when they run (their stack pointer's, ...):
 * best effort, never fails. */
void mm_lazy_warm(struct rst_ctx *ctx, struct rst_task *t, int fd, const bool *reg);
/* Hands t's userfaultfd and registered vmas to the server; its answer is
 * waited for by mm_lazy_taken. */
int mm_lazy_give(struct rst_ctx *ctx, struct rst_task *t, int fd, const bool *reg)
	__attribute__((warn_unused_result));
/* Every task handed over is held by the server's guard (restore_end op):
 * none may run before. */
int mm_lazy_taken(struct rst_ctx *ctx) __attribute__((warn_unused_result));
/* The tree runs: the server finishes on its own (handover op). */
void *mm_lazy_handover(struct rst_ctx *ctx);
/* The restart failed: the server and its guard end. */
void mm_lazy_abort(struct rst_ctx *ctx);

/*
 * mm-huge.c: hugetlb memory (VmaEntry.huge_page). mm claims anonymous
 * hugetlb ("/anon_hugepage (deleted)"); mm_huge_collect() sets huge_page
 * of a vma of hugetlbfs or refuses its page size; at restart, the extra
 * mmap flags of an anonymous one, and the object of a shared one.
 */
#define MM_HUGE_2M (2ull << 20)
bool mm_huge_claim(const struct proc_vma *pv);
/* A page size (bytes) hugetlb can have: a power of two above 4 KiB. */
bool mm_huge_size_ok(uint64_t page);
/* Why hugetlb memory of that page size (bytes) is refused, or NULL. */
const char *mm_huge_refusal(uint64_t page);
/* Restart: this machine has huge pages of that size, or -EOPNOTSUPP
 * logged for what ("pid 5 vma 7f0000000000", "shm id 3"). */
int mm_huge_avail(struct ckpt_log *log, uint64_t page, const char *what)
    __attribute__((warn_unused_result));
int mm_huge_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
		    struct VmaEntry *v) __attribute__((warn_unused_result));
int mm_huge_valid(const struct VmaEntry *v) __attribute__((warn_unused_result));
int mm_huge_map_flags(const struct VmaEntry *v);
int mm_huge_make_shared(struct rst_ctx *ctx, uint64_t size, uint64_t page, int *ret_fd)
	__attribute__((warn_unused_result));
/* An eager restart writes this vma's pages so that transparent huge pages
 * back it again: it had MADV_HUGEPAGE ("hg") and THP is not "never" here.
 * Its pages then go by process_vm_writev (the kernel's fault allocates a
 * huge page), not UFFDIO_COPY (which allocates 4 KiB pages). */
bool mm_thp_fill(const struct VmaEntry *v);

/*
 * mm-aio.c: AIO contexts (io_setup). mm claims their rings ("/[aio]
 * (deleted)") as VMA_AIO vmas with an AioRing; at restart each is made
 * by io_setup and moved to its address, its unreaped events put back.
 */
bool mm_aio_claim(const struct proc_vma *pv);
int mm_aio_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
		   struct VmaEntry *v) __attribute__((warn_unused_result));
void mm_aio_free(struct VmaEntry *v);
int mm_aio_valid(const struct VmaEntry *v) __attribute__((warn_unused_result));
int mm_aio_map(struct rst_ctx *ctx, struct rst_task *t, const struct VmaEntry *v)
	__attribute__((warn_unused_result));

/* After load: the task has a whole address space. */
int mm_check_loaded(struct rst_ctx *ctx, struct rst_task *t) __attribute__((warn_unused_result));

#endif
