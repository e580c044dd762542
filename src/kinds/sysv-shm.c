/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV shared memory segments (see sysv.c for the kind as a whole) and
 * their attachments. A vma that maps a segment ("/SYSV%08x (deleted)",
 * shared) is claimed by the kind (vma_claim) and saved as a VMA_SYSV_SHM
 * with the segment's shmid; the segment itself (contents included) is
 * made before mm restores the first task, and attached by an injected
 * shmat at the vma's address (vma_map). An attachment is whole: a run of
 * vmas of one segment from offset 0 to its end (several when parts were
 * mprotect'ed), the first one made by shmat.
 *
 * A segment is read through an attachment of ckpt's (SHM_RDONLY): the
 * pages mincore shows (every page if any shm of the namespace is swapped
 * out) go to the page store (img/pages.h), which drops the all-zero ones,
 * as SYSV_SHM_PAGES records tagged with the shmid, after the segment's
 * SYSV_SHM record. At restart they are copied into ckpt's attachment of
 * the new segment.
 *
 * A hugetlb segment (SHM_HUGETLB, on hugetlbfs) keeps its page size
 * (SysvShmEntry.huge_page, the KernelPageSize of an attachment) and is
 * made again with SHM_HUGETLB and that size (SHM_HUGE_<log2>); its
 * attachments and pages are whole huge pages. Its contents are read with
 * pread from ckpt's attachment's file (/proc/self/map_files): hugetlbfs
 * reads a page that was never faulted in as zeros without allocating it,
 * where reading through the mapping would take a huge page from the pool
 * (and fault with SIGBUS for a SHM_NORESERVE segment when none is free);
 * mincore sees a hugetlb page only in the caller's own page tables. Filled
 * at restart through ckpt's attachment, as other segments, which takes
 * the huge pages from the pool: a restart without free ones fails naming
 * the segment.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/mm.h"
#include "kinds/sysv.h"
#include "util/cleanup.h"

static bool vma_is_shm(const struct proc_vma *pv)
{
	const char *p = pv->path;
	return pv->shared && pv->deleted && strlen(p) == 13 && !strncmp(p, "/SYSV", 5) &&
	       strspn(p + 5, "0123456789abcdef") == 8;
}

static struct shm_seg *find_seg(struct sysv_ckpt *s, int id)
{
	for (size_t i = 0; i < s->nshm; i++)
		if (s->shm[i].perm.id == id)
			return &s->shm[i];
	return NULL;
}

static int add_seg(struct sysv_ckpt *s, int id, const struct shmid_ds *ds)
{
	struct shm_seg *n = realloc(s->shm, (s->nshm + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	s->shm = n;
	struct shm_seg *g = &s->shm[s->nshm++];
	*g = (struct shm_seg){.nattch = ds->shm_nattch, .cpid = ds->shm_cpid, .lpid = ds->shm_lpid};
	sysv_shm_entry__init(&g->e);
	sysv_perm_of(&g->perm, &ds->shm_perm, id);
	g->e.size = ds->shm_segsz;
	g->e.has_removed = g->e.removed = (ds->shm_perm.mode & SHM_DEST) != 0;
	g->e.has_locked = g->e.locked = (ds->shm_perm.mode & SHM_LOCKED) != 0;
	return 0;
}

#ifndef SHM_HUGE_SHIFT
#define SHM_HUGE_SHIFT 26
#endif

/* What the segment's attachments and pages are a multiple of. */
static uint64_t seg_align(const SysvShmEntry *e)
{
	return e->has_huge_page ? e->huge_page : PAGE;
}

/* A hugetlb segment's page size (bytes, smaps' KernelPageSize) into g,
 * or its refusal. */
static int set_huge(struct ckpt_ctx *ctx, struct shm_seg *g, uint64_t page_kb)
{
	uint64_t page = page_kb * 1024;
	const char *no = mm_huge_refusal(page);
	if (no)
		return log_fail(&ctx->log, -EOPNOTSUPP, "shm id %d: %s", g->perm.id, no);
	g->e.has_huge_page = true;
	g->e.huge_page = page;
	return 0;
}

/* Attaches segment g in ckpt a moment: is it of hugetlbfs? */
static int check_hugetlb(struct ckpt_ctx *ctx, struct shm_seg *g)
{
	int id = g->perm.id;
	void *a = shmat(id, NULL, SHM_RDONLY);
	if (a == (void *)-1)
		return log_fail(&ctx->log, -errno, "shm id %d: cannot attach it to read it: %s", id,
				strerror(errno));
	_cleanup_free_ char *text = NULL;
	struct proc_vmas v = {0};
	int r = proc_read(0, "smaps", &text, NULL);
	if (r >= 0)
		r = proc_parse_smaps(text, &v);
	bool huge = false, found = false;
	uint64_t page_kb = 0;
	for (size_t i = 0; r >= 0 && i < v.n; i++)
		if (v.v[i].start == (uint64_t)(uintptr_t)a) {
			found = true;
			huge = v.v[i].vmflags & VMF_HT;
			page_kb = v.v[i].page_kb;
		}
	proc_vmas_free(&v);
	shmdt(a);
	if (r < 0 || !found)
		return log_fail(&ctx->log, r < 0 ? r : -ENOENT,
				"shm id %d: cannot find ckpt's own attachment of it", id);
	return huge ? set_huge(ctx, g, page_kb) : 0;
}

int sysv_list_shm(struct sysv_ckpt *s)
{
	struct ckpt_ctx *ctx = s->ctx;
	struct shm_info info;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)&info);
	if (max < 0)
		return log_fail(&ctx->log, -errno, "cannot list SysV shm segments: %s",
				strerror(errno));
	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		int id = shmctl(idx, SHM_STAT_ANY, &ds);
		if (id < 0 && (errno == EINVAL || errno == EIDRM))
			continue;
		if (id < 0)
			return log_fail(&ctx->log, -errno, "cannot read shm index %d: %s", idx,
					strerror(errno));
		int r = add_seg(s, id, &ds);
		if (r >= 0)
			r = check_hugetlb(ctx, &s->shm[s->nshm - 1]);
		if (r < 0)
			return r;
		if (s->rmid_forced && !ds.shm_nattch)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "shm id %d (key %#x): not attached, with kernel.shm_rmid_forced "
			    "set: it lives as long as its creator, which cannot be restored",
			    id, ds.shm_perm.__key);
	}
	return 0;
}

/* --- checkpoint: the tasks' attachments -------------------------------- */

static int vma_fail(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, int r,
		    const char *why)
{
	return log_fail(&ctx->log, r, "pid %d vma %llx-%llx (%s): %s", t->pid,
			(unsigned long long)pv->start, (unsigned long long)pv->end, pv->path, why);
}

/* The segment pv maps; in the host's namespace, found on first sight. */
static int seg_of(struct ckpt_ctx *ctx, struct sysv_ckpt *s, struct task *t,
		  const struct proc_vma *pv, struct shm_seg **ret)
{
	int id = (int)pv->ino; /* a SysV shm file's inode number is its shmid */
	*ret = find_seg(s, id);
	if (*ret || s->own_ns) {
		if (!*ret)
			return vma_fail(ctx, t, pv, -EOPNOTSUPP,
					"its segment is not in the container's ipc namespace");
		return 0;
	}
	struct shmid_ds ds;
	if (shmctl(id, IPC_STAT, &ds) < 0)
		return log_fail(&ctx->log, -errno,
				"pid %d vma %llx (%s): cannot read shm id %d: %s", t->pid,
				(unsigned long long)pv->start, pv->path, id, strerror(errno));
	int r = add_seg(s, id, &ds);
	if (r < 0)
		return r;
	*ret = &s->shm[s->nshm - 1];
	return pv->vmflags & VMF_HT ? set_huge(ctx, *ret, pv->page_kb) : 0;
}

/* One attachment: vmas i.. of t, the first at offset 0; returns the
 * index after its last vma. */
static int note_attachment(struct ckpt_ctx *ctx, struct sysv_ckpt *s, struct task *t, size_t i,
			   size_t *ret_next)
{
	const struct proc_vma *v = t->vmas.v, *pv = &v[i];
	struct shm_seg *g;
	int r = seg_of(ctx, s, t, pv, &g);
	if (r < 0)
		return r;
	if (pv->pgoff)
		return vma_fail(ctx, t, pv, -EOPNOTSUPP,
				"a part of a SysV shm attachment whose start is unmapped; not "
				"supported");
	uint64_t want = ALIGN_UP(g->e.size, seg_align(&g->e)), end = pv->start;
	size_t j = i;
	while (j < t->vmas.n && vma_is_shm(&v[j]) && v[j].ino == pv->ino &&
	       v[j].start == end && v[j].pgoff == end - pv->start && end - pv->start < want)
		end = v[j++].end;
	if (end - pv->start != want)
		return vma_fail(ctx, t, pv, -EOPNOTSUPP,
				"maps only a part of its SysV shm segment (partly unmapped or "
				"moved); not supported");
	unsigned long key = strtoul(pv->path + 5, NULL, 16);
	if (g->e.removed && !g->key_seen) /* a removed segment reads key 0 */
		g->perm.key = (int32_t)key;
	g->key_seen = true;
	g->seen += j - i;
	*ret_next = j;
	return 0;
}

/* The task's attachments, each whole, in the segments of s. */
int sysv_shm_collect(struct ckpt_ctx *ctx, struct sysv_ckpt *s, struct task *t)
{
	for (size_t i = 0; i < t->vmas.n;) {
		if (!vma_is_shm(&t->vmas.v[i])) {
			i++;
			continue;
		}
		int r = note_attachment(ctx, s, t, i, &i);
		if (r < 0)
			return r;
	}
	return 0;
}

bool sysv_shm_attached(const struct task *t)
{
	for (size_t i = 0; i < t->vmas.n; i++)
		if (vma_is_shm(&t->vmas.v[i]))
			return true;
	return false;
}

bool sysv_vma_claim(const struct proc_vma *pv)
{
	return vma_is_shm(pv);
}

int sysv_vma_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv, VmaEntry *v)
{
	struct sysv_ckpt *s = ctx->tasks[0].kstate[KIND_sysv];
	if (!s || !find_seg(s, (int)pv->ino))
		return vma_fail(ctx, t, pv, -EOPNOTSUPP,
				"a SysV shm segment that was not collected");
	v->kind = VMA_KIND__VMA_SYSV_SHM;
	v->has_shm_id = true;
	v->shm_id = (int32_t)pv->ino;
	return 0;
}

/* Every attachment of each segment is in the image's tasks. */
int sysv_shm_collect_end(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	for (size_t i = 0; i < s->nshm; i++) {
		const struct shm_seg *g = &s->shm[i];
		if (g->seen < g->nattch)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "shm id %d (key %#x): attached %llu times, %zu of them in the "
			    "image; the others are outside it",
			    g->perm.id, g->perm.key, (unsigned long long)g->nattch, g->seen);
	}
	return 0;
}

/* Host: a segment not attached now, made or last attached by the tree. */
int sysv_shm_host_used(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	struct shm_info shi;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)&shi);
	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		int id = shmctl(idx, SHM_STAT_ANY, &ds);
		pid_t who = id < 0				  ? 0
			    : sysv_pid_in_image(ctx, ds.shm_cpid) ? ds.shm_cpid
								  : ds.shm_lpid;
		if (id >= 0 && !find_seg(s, id) && sysv_pid_in_image(ctx, who))
			return sysv_refuse_used(ctx, who,
						"shm segment (made or last attached by it, not "
						"attached now)",
						id, ds.shm_perm.__key);
	}
	return 0;
}

/* --- checkpoint: after --kill ------------------------------------------ */

/*
 * The tree is gone. A host segment of the image that was not removed
 * would outlive it (PostgreSQL's interlock segment), keeping its id and
 * key from a restart on this host. collect_end found every attachment of
 * each one in the image's tasks, so nothing else uses it: it is removed,
 * if it is still the segment saved (key, size, creator) and nothing has
 * attached it since. A removed one went with its last attachment.
 */
void sysv_after_kill(struct ckpt_ctx *ctx)
{
	struct sysv_ckpt *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_sysv] : NULL;
	if (!s || s->own_ns) /* a container's go with its namespace */
		return;
	for (size_t i = 0; i < s->nshm; i++) {
		const struct shm_seg *g = &s->shm[i];
		struct shmid_ds ds;
		if (g->e.removed || shmctl(g->perm.id, IPC_STAT, &ds) < 0)
			continue;
		if (ds.shm_perm.__key != g->perm.key || ds.shm_segsz != g->e.size ||
		    ds.shm_cpid != g->cpid) {
			log_warn(&ctx->log,
				 "shm id %d: not the segment saved any more; left as it is",
				 g->perm.id);
		} else if (ds.shm_nattch) {
			log_warn(&ctx->log,
				 "shm id %d (key %#x): attached %lu time(s) since the checkpoint; "
				 "left in place, a restart on this host needs it removed",
				 g->perm.id, g->perm.key, (unsigned long)ds.shm_nattch);
		} else if (shmctl(g->perm.id, IPC_RMID, NULL) < 0) {
			log_warn(&ctx->log, "shm id %d (key %#x): cannot remove it: %s", g->perm.id,
				 g->perm.key, strerror(errno));
		} else {
			log_info(&ctx->log, "shm id %d (key %#x): removed, the image holds it",
				 g->perm.id, g->perm.key);
		}
	}
}

/* --- checkpoint: dump ---------------------------------------------------- */

/* The page store's reader: ckpt's attachment of the segment. */
static int read_seg(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	const uint8_t *a = arg;
	for (size_t i = 0; i < n; i++) {
		memcpy(dst, a + x[i].off, x[i].len);
		dst += x[i].len;
	}
	return 0;
}

/* The page store's reader of a hugetlb segment: its file. */
static int pread_seg(void *arg, const struct pages_extent *x, size_t n, uint8_t *dst)
{
	int fd = *(const int *)arg;
	for (size_t i = 0; i < n; i++) {
		for (uint64_t done = 0; done < x[i].len;) {
			ssize_t k =
			    pread(fd, dst + done, x[i].len - done, (off_t)(x[i].off + done));
			if (k <= 0)
				return k < 0 ? -errno : -EIO;
			done += (uint64_t)k;
		}
		dst += x[i].len;
	}
	return 0;
}

/* The pages of hugetlb segment g, read from its file: every huge page
 * (the page store drops the zero ones, and a page never faulted in reads
 * as zeros without being allocated). */
static int dump_huge_pages(struct ckpt_ctx *ctx, const struct shm_seg *g)
{
	uint64_t len = ALIGN_UP(g->e.size, g->e.huge_page);
	char path[64];
	uint8_t *a = shmat(g->perm.id, NULL, SHM_RDONLY);
	if (a == (void *)-1)
		return log_fail(&ctx->log, -errno, "shm id %d: cannot attach it to read it: %s",
				g->perm.id, strerror(errno));
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)a,
		 (unsigned long)(a + len));
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	int r = fd < 0 ? -errno : 0;
	shmdt(a);
	if (r < 0)
		return log_fail(&ctx->log, r, "shm id %d: cannot open its hugetlb file: %s",
				g->perm.id, strerror(-r));
	struct pages_writer pw;
	r = ctx_pages_writer(ctx, &pw, SYSV_SHM_PAGES, (uint64_t)g->perm.id, pread_seg, &fd);
	if (r < 0)
		return r;
	for (uint64_t off = 0; r >= 0 && off < len; off += g->e.huge_page)
		r = pages_add(&pw, off, g->e.huge_page);
	if (r >= 0)
		r = pages_flush(&pw);
	pages_writer_release(&pw);
	if (r < 0)
		return log_fail(&ctx->log, r, "shm id %d: cannot write its pages to the image: %s",
				g->perm.id, strerror(-r));
	return 0;
}

/* The pages of segment g that exist, to the page store. */
static int dump_pages(struct ckpt_ctx *ctx, const struct shm_seg *g, bool swapped)
{
	if (g->e.has_huge_page)
		return dump_huge_pages(ctx, g);
	uint64_t len = ALIGN_UP(g->e.size, PAGE);
	size_t np = len / PAGE;
	_cleanup_free_ unsigned char *vec = malloc(np ? np : 1);
	uint8_t *a = shmat(g->perm.id, NULL, SHM_RDONLY);
	struct pages_writer pw;
	int r;

	if (a == (void *)-1)
		return log_fail(&ctx->log, -errno, "shm id %d: cannot attach it to read it: %s",
				g->perm.id, strerror(errno));
	r = vec ? ctx_pages_writer(ctx, &pw, SYSV_SHM_PAGES, (uint64_t)g->perm.id, read_seg, a)
		: -ENOMEM;
	if (r < 0) {
		shmdt(a);
		return r;
	}
	/* mincore sees what is in memory; a swapped-out page only by reading */
	if (swapped || mincore(a, len, vec) < 0)
		memset(vec, 1, np);
	for (size_t p = 0; r >= 0 && p < np; p++)
		if (vec[p] & 1)
			r = pages_add(&pw, p * PAGE, PAGE);
	if (r >= 0)
		r = pages_flush(&pw);
	pages_writer_release(&pw);
	shmdt(a);
	if (r < 0)
		return log_fail(&ctx->log, r, "shm id %d: cannot write its pages to the image: %s",
				g->perm.id, strerror(-r));
	return 0;
}

/* Every segment with its pages, in the objects' namespace. */
int sysv_shm_dump(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	struct shm_info info;
	bool swapped = shmctl(0, SHM_INFO, (struct shmid_ds *)&info) < 0 || info.shm_swp;
	int r = 0;

	for (size_t i = 0; r >= 0 && i < s->nshm; i++) {
		struct shm_seg *g = &s->shm[i];
		g->e.perm = &g->perm;
		r = ctx_write_msg(ctx, SYSV_SHM, &g->e.base);
		if (r >= 0)
			r = dump_pages(ctx, g, swapped);
	}
	return r;
}

/* --- restart: load ------------------------------------------------------ */

static bool shm_valid(const struct sysv_rst *s, const SysvShmEntry *e)
{
	if (!sysv_perm_ok(e->perm) || !e->size || e->size > SHM_SIZE_MAX ||
	    s->nshm >= MAX_OBJECTS || (e->has_huge_page && !mm_huge_size_ok(e->huge_page)))
		return false;
	for (size_t i = 0; i < s->nshm; i++) {
		const SysvShmEntry *o = s->shm[i].e;
		if (o->perm->id == e->perm->id ||
		    (!e->removed && !o->removed && e->perm->key != IPC_PRIVATE &&
		     o->perm->key == e->perm->key))
			return false;
	}
	return true;
}

int sysv_load_shm(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	SysvShmEntry *e = rctx_unpack(ctx, rec, &sysv_shm_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (!shm_valid(s, e)) {
		sysv_shm_entry__free_unpacked(e, NULL);
		return log_fail(
		    &ctx->log, -EINVAL,
		    "record %u (sysv/shm): segment is not valid or repeats an id or key",
		    rec->index);
	}
	char what[32];
	snprintf(what, sizeof(what), "shm id %d", e->perm->id);
	int r = e->has_huge_page ? mm_huge_avail(&ctx->log, e->huge_page, what) : 0;
	struct shm_rst *n = r < 0 ? NULL : realloc(s->shm, (s->nshm + 1) * sizeof(*n));
	if (!n) {
		sysv_shm_entry__free_unpacked(e, NULL);
		return r < 0 ? r : -ENOMEM;
	}
	s->shm = n;
	s->shm[s->nshm++] = (struct shm_rst){.e = e};
	return 0;
}

/* A page store record of the last segment: whole pages inside its size. */
int sysv_load_shm_pages(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	struct pages_chunk c;
	struct shm_rst *g = s->nshm ? &s->shm[s->nshm - 1] : NULL;
	int r = g ? pages_parse(rec, &c) : -EINVAL;
	bool ok = r >= 0 && c.tag == (uint64_t)g->e->perm->id;
	for (uint32_t i = 0; ok && i < c.n; i++)
		ok = c.x[i].off % PAGE == 0 && c.x[i].len % PAGE == 0;
	if (ok)
		r = pages_set_add(&g->pages, &c, 0, ALIGN_UP(g->e->size, seg_align(g->e)));
	if (!ok || r < 0)
		return log_fail(&ctx->log, r == -ENOMEM ? r : -EINVAL,
				"record %u (sysv/pages): damaged, out of order or outside its "
				"shm segment",
				rec->index);
	ctx->data_bytes += c.bytes;
	return 0;
}

static const struct shm_rst *find_rseg(const struct sysv_rst *s, int id)
{
	for (size_t i = 0; s && i < s->nshm; i++)
		if (s->shm[i].e->perm->id == id)
			return &s->shm[i];
	return NULL;
}

/* Every VMA_SYSV_SHM of e is sysv's, and part of a whole attachment of a
 * segment of the image; so is every vma sysv owns. */
int sysv_vma_check(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
{
	const struct sysv_rst *s = ctx->tasks[0].kstate[KIND_sysv];
	for (size_t i = 0; i < e->n_vmas;) {
		const VmaEntry *v = e->vmas[i];
		bool mine = v->has_owner && v->owner == KID_sysv;
		if (v->kind != VMA_KIND__VMA_SYSV_SHM && !mine) {
			i++;
			continue;
		}
		const struct shm_rst *g = v->has_shm_id && mine ? find_rseg(s, v->shm_id) : NULL;
		uint64_t want = g ? ALIGN_UP(g->e->size, seg_align(g->e)) : 0, at = v->start;
		size_t j = i;
		while (g && v->shared && v->has_vmflags && !v->pgoff && j < e->n_vmas) {
			const VmaEntry *w = e->vmas[j];
			if (w->kind != VMA_KIND__VMA_SYSV_SHM || !w->has_owner ||
			    w->owner != KID_sysv || !w->has_shm_id || w->shm_id != v->shm_id ||
			    w->start != at || w->pgoff != at - v->start || !w->shared ||
			    !w->has_vmflags || ((w->vmflags ^ v->vmflags) & VMF_MW) ||
			    w->has_huge_page != g->e->has_huge_page ||
			    (w->has_huge_page && w->huge_page != g->e->huge_page) ||
			    at - v->start >= want)
				break;
			at = w->end;
			j++;
		}
		if (!g || at - v->start != want)
			return log_fail(
			    &ctx->log, -EINVAL,
			    "image: pid %d vma %llx: not a whole attachment of a SysV shm "
			    "segment of the image",
			    t->pid, (unsigned long long)v->start);
		i = j;
	}
	return 0;
}

/* --- restart: make ------------------------------------------------------ */

/* The host's namespace: ids and keys must be free (the old ones are not
 * removed when the tree dies, unless IPC_RMID'd). */
int sysv_shm_check_free(struct rst_ctx *ctx, const struct sysv_rst *s)
{
	for (size_t i = 0; i < s->nshm; i++) {
		const SysvPerm *p = s->shm[i].e->perm;
		struct shmid_ds ds;
		if (shmctl(p->id, IPC_STAT, &ds) >= 0 || errno == EACCES)
			return log_fail(
			    &ctx->log, -EEXIST,
			    "shm id %d is in use in this ipc namespace (key %#x); remove it "
			    "(ipcrm -m %d) or restart where it is free",
			    p->id, p->key, p->id);
		int other = p->key != IPC_PRIVATE ? shmget(p->key, 0, 0) : -1;
		if (other >= 0 || (p->key != IPC_PRIVATE && errno == EACCES))
			return log_fail(
			    &ctx->log, -EEXIST,
			    "shm key %#x (of id %d) is taken by shm id %d; remove it (ipcrm "
			    "-M %#x) or restart where it is free",
			    p->key, p->id, other, p->key);
	}
	return 0;
}

static int get_shm(const struct getter *g, int key, int flags)
{
	return shmget(key, g->size, flags | g->flags);
}
static int rm_shm(int id)
{
	return shmctl(id, IPC_RMID, NULL);
}

static int put_extent(void *arg, uint64_t off, const uint8_t *src, uint64_t len)
{
	memcpy((uint8_t *)arg + off, src, len);
	return 0;
}

struct fill_job {
	void *addr;                /* the segment, attached in ckpt */
	struct progress *progress; /* restart's: these bytes count in it */
};

static int put_chunk(void *arg, const struct pages_chunk *c, uint64_t *ret_off)
{
	const struct fill_job *j = arg;
	*ret_off = c->x[0].off;
	int r = pages_chunk_each(c, put_extent, j->addr);
	if (r >= 0)
		progress_add(j->progress, c->bytes);
	return r;
}

int sysv_make_shm(struct rst_ctx *ctx, struct shm_rst *g)
{
	const SysvPerm *p = g->e->perm;
	struct getter get = {"shm", get_shm, rm_shm, g->e->size, 0};
	if (g->e->has_huge_page)
		get.flags = SHM_HUGETLB | (__builtin_ctzll(g->e->huge_page) << SHM_HUGE_SHIFT);
	uint64_t off;
	int r = sysv_make_obj(ctx, &get, p);
	if (r < 0)
		return r;
	g->made = true;
	void *a = shmat(p->id, NULL, 0);
	if (a == (void *)-1)
		return sysv_fail_id(ctx, "shm", p->id, "cannot attach it in ckpt");
	g->addr = a;
	/* the extents lie inside the segment: checked at load */
	struct fill_job j = { .addr = a, .progress = &ctx->progress };
	r = pages_set_apply(&g->pages, 2, put_chunk, &j, &off);
	if (r < 0)
		return log_fail(&ctx->log, r, "shm id %d: cannot write its pages near %llu: %s", p->id,
				(unsigned long long)off, pages_strerror(r));
	struct shmid_ds ds;
	if (shmctl(p->id, IPC_STAT, &ds) < 0)
		return sysv_fail_id(ctx, "shm", p->id, "IPC_STAT");
	sysv_set_perm(&ds.shm_perm, p);
	if (shmctl(p->id, IPC_SET, &ds) < 0)
		return sysv_fail_id(ctx, "shm", p->id, "IPC_SET");
	if (g->e->locked && shmctl(p->id, SHM_LOCK, NULL) < 0)
		return sysv_fail_id(ctx, "shm", p->id, "SHM_LOCK");
	if (g->e->removed && shmctl(p->id, IPC_RMID, NULL) < 0)
		return sysv_fail_id(ctx, "shm", p->id, "IPC_RMID");
	return 0;
}

/* Maps v in t (shmat for the first vma of an attachment), with its
 * protection and mlock. */
int sysv_vma_map(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
{
	bool ro = !(v->vmflags & VMF_MW);
	uint32_t prot = ro ? PROT_READ : PROT_READ | PROT_WRITE;
	struct puppet *p = &t->pup;
	long r;

	if (!v->pgoff) { /* the attachment's first vma: it maps all of it */
		r = puppet_syscall(p, SYS_shmat, v->shm_id, v->start, ro ? SHM_RDONLY : 0);
		if (r < 0 && r > -4096)
			return log_fail(&ctx->log, (int)r,
					"pid %d vma %llx: shmat of shm id %d: %s", t->pid,
					(unsigned long long)v->start, v->shm_id, strerror((int)-r));
		if ((uint64_t)r != v->start)
			return log_fail(&ctx->log, -EEXIST,
					"pid %d: shm id %d attached at %lx, not %llx", t->pid,
					v->shm_id, r, (unsigned long long)v->start);
	}
	if (v->prot != prot) {
		r = puppet_syscall(p, SYS_mprotect, v->start, v->end - v->start, v->prot);
		if (rst_check(ctx, t, r, "mprotect of a SysV shm attachment") < 0)
			return (int)r;
	}
	if (v->vmflags & VMF_LO)
		puppet_syscall(p, SYS_mlock, v->start, v->end - v->start);
	return 0;
}

/*
 * Every task restored, none running yet: ckpt's attachments go. ckpt held
 * each segment attached from its making (a removed one would be gone
 * without an attacher) until the tasks had theirs; held on to the
 * teardown, after the tree ran, a restored program counting shm_nattch
 * could see one attacher too many (e2e sysv_shm_host, once on a loaded
 * machine).
 */
void sysv_shm_detach(struct sysv_rst *s)
{
	for (size_t i = 0; i < s->nshm; i++) {
		if (s->shm[i].addr)
			shmdt(s->shm[i].addr);
		s->shm[i].addr = NULL;
	}
}

/* The restart is over: ckpt's attachments go, if still there; a failed one
 * (undo) removes the segments it made. */
void sysv_shm_release(struct sysv_rst *s, bool undo)
{
	for (size_t i = 0; i < s->nshm; i++) {
		struct shm_rst *g = &s->shm[i];
		if (undo && g->made)
			shmctl(g->e->perm->id, IPC_RMID, NULL);
		if (g->addr)
			shmdt(g->addr);
		pages_set_release(&g->pages);
		sysv_shm_entry__free_unpacked(g->e, NULL);
	}
	free(s->shm);
}
