/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Incremental checkpoints, the restart side: a process's pages from a
 * chain of images.
 *
 * An image made with a parent has, for each process saved incrementally,
 * an MmTrack record: the parent's id and path, and from_parent, the pages
 * whose contents are the parent's. Restart opens the parent at the path
 * recorded (it must be there, unchanged: its header's id must be the one
 * recorded), checks it whole, and takes from its page records what
 * from_parent asks; what the parent does not have itself it asks its own
 * parent for (the parent's from_parent), and so on up the chain. A page
 * that the newest image lists neither as its own nor as its parent's is
 * zero (not present at the checkpoint, or all zero). So each page comes
 * from the newest image that has it.
 *
 * The process's page set is then rebuilt: every run (the image's own and
 * the parents') a chunk of its own, in address order; the parents stay
 * mapped until the task's state is freed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ctx.h"
#include "img/pages.h"
#include "img/seal.h"
#include "kinds/mm.h"
#include "mm.pb-c.h"
#include "util/cleanup.h"

#define PAGE 4096ull
#define CHAIN_MAX 256 /* levels; more is refused (a loop) */

struct piece {
	uint64_t off, len;
	const uint8_t *src;
};

struct pieces {
	struct piece *p;
	size_t n, cap;
	uint64_t bytes;
};

struct mm_chain {
	MmTrack *track;         /* the image's own record */
	struct img_reader *r;   /* the parents, opened */
	size_t nr;
	uint8_t **plain;        /* decompressed chunks */
	size_t nplain;
	struct pages_extent *x; /* the rebuilt set's extents */
};

void mm_chain_free(struct mm_chain *c)
{
	if (!c)
		return;
	if (c->track)
		mm_track__free_unpacked(c->track, NULL);
	for (size_t i = 0; i < c->nr; i++)
		img_reader_close(&c->r[i]);
	free(c->r);
	for (size_t i = 0; i < c->nplain; i++)
		free(c->plain[i]);
	free(c->plain);
	free(c->x);
	free(c);
}

static const VmaEntry *vma_at(const MmEntry *e, uint64_t addr)
{
	for (size_t i = 0; i < e->n_vmas; i++)
		if (addr >= e->vmas[i]->start && addr < e->vmas[i]->end)
			return e->vmas[i];
	return NULL;
}

/* from_parent: pairs, ascending, whole pages, inside private anonymous vmas. */
static int check_from(const MmTrack *m, const MmEntry *e)
{
	uint64_t prev = 0;
	if (m->n_from_parent % 2 || (m->n_from_parent && !m->has_parent_id))
		return -EINVAL;
	if (m->has_parent_id && (m->parent_id.len != 16 || !m->parent_path))
		return -EINVAL;
	for (size_t i = 0; i < m->n_from_parent; i += 2) {
		uint64_t a = m->from_parent[i], len = m->from_parent[i + 1];
		if (!len || (a | len) % PAGE || a < prev || a + len < a)
			return -EINVAL;
		for (uint64_t at = a; e && at < a + len;) {
			const VmaEntry *v = vma_at(e, at);
			if (!v || v->kind != VMA_KIND__VMA_ANON || v->shared)
				return -EINVAL;
			at = v->end;
		}
		prev = a + len;
	}
	return 0;
}

int mm_chain_load(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e,
		  const struct img_record *rec, struct mm_chain **c)
{
	if (*c)
		return log_fail(&ctx->log, -EINVAL, "record %u: second tracking record of pid %d",
				rec->index, t->pid);
	if (!(*c = calloc(1, sizeof(**c))))
		return -ENOMEM;
	MmTrack *m = (*c)->track = rctx_unpack(ctx, rec, &mm_track__descriptor);
	if (!m)
		return -EINVAL;
	if (m->pid != (uint32_t)t->pid || check_from(m, e) < 0)
		return log_fail(&ctx->log, -EINVAL, "record %u (mm/track): pages of a parent image "
				"not valid for pid %d", rec->index, t->pid);
	if (m->live)
		return log_fail(&ctx->log, -EINVAL, "record %u (mm/track): the image of a pre-copy "
				"round holds only memory: it is a parent, it cannot be restarted",
				rec->index);
	return 0;
}

static int pieces_add(struct pieces *ps, uint64_t off, uint64_t len, const uint8_t *src)
{
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? 2 * ps->cap : 256;
		struct piece *n = realloc(ps->p, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		ps->p = n;
		ps->cap = cap;
	}
	ps->p[ps->n++] = (struct piece){ off, len, src };
	ps->bytes += len;
	return 0;
}

/* The runs of chunk ch, plain (a compressed one decompressed and kept in c). */
static int flatten(struct mm_chain *c, const struct pages_chunk *ch, struct pieces *ps)
{
	struct pages_chunk plain = *ch;
	if (ch->z) {
		uint8_t *buf = NULL, **pl;
		size_t cap = 0;
		int r = pages_chunk_plain(ch, &buf, &cap, &plain);
		if (r < 0 || !(pl = realloc(c->plain, (c->nplain + 1) * sizeof(*pl)))) {
			free(buf);
			return r < 0 ? r : -ENOMEM;
		}
		c->plain = pl;
		c->plain[c->nplain++] = buf;
	}
	const uint8_t *src = plain.data;
	for (uint32_t i = 0; i < plain.n; i++) {
		int r = pieces_add(ps, plain.x[i].off, plain.x[i].len, src);
		if (r < 0)
			return r;
		src += plain.x[i].len;
	}
	return 0;
}

/* out gets the parts of the runs of ps inside the extents w (pairs). */
static int take(const uint64_t *w, size_t nw, const struct pieces *ps, struct pieces *out)
{
	size_t i = 0, j = 0;
	while (i < nw && j < ps->n) {
		uint64_t a0 = w[i], a1 = w[i] + w[i + 1];
		const struct piece *p = &ps->p[j];
		uint64_t b0 = p->off, b1 = p->off + p->len;
		uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
		if (lo < hi) {
			int r = pieces_add(out, lo, hi - lo, p->src + (lo - b0));
			if (r < 0)
				return r;
		}
		if (a1 < b1)
			i += 2;
		else
			j++;
	}
	return 0;
}

/* *w (pairs) becomes its intersection with the extents f (pairs). */
static int narrow(uint64_t **w, size_t *nw, const uint64_t *f, size_t nf)
{
	uint64_t *out = malloc((*nw + nf + 2) * sizeof(*out));
	size_t n = 0, i = 0, j = 0;
	if (!out)
		return -ENOMEM;
	while (i < *nw && j < nf) {
		uint64_t a1 = (*w)[i] + (*w)[i + 1], b1 = f[j] + f[j + 1];
		uint64_t lo = (*w)[i] > f[j] ? (*w)[i] : f[j], hi = a1 < b1 ? a1 : b1;
		if (lo < hi) {
			out[n++] = lo;
			out[n++] = hi - lo;
		}
		if (a1 < b1)
			i += 2;
		else
			j += 2;
	}
	free(*w);
	*w = out;
	*nw = n;
	return 0;
}

/* Opens the parent at path, checks it whole and that its id is id. */
static int open_parent(struct rst_ctx *ctx, struct mm_chain *c, const char *path,
		       const uint8_t *id, struct img_reader **ret)
{
	struct img_error err = { 0 };
	struct img_reader *nr = realloc(c->r, (c->nr + 1) * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	c->r = nr;
	/* a pre-copy chain: its parents by id, plain, in the directory given */
	bool plain = (ctx->flags & RESTART_PLAIN_PARENTS) && !strchr(path, '/');
	_cleanup_close_ int dir = plain ? open(ctx->parents_dir, O_PATH | O_DIRECTORY | O_CLOEXEC)
					: AT_FDCWD;
	_cleanup_close_ int fd = plain && dir < 0 ? -1 : openat(dir, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return log_fail(&ctx->log, -errno, "parent image %s%s%s: cannot open: %s",
				plain ? ctx->parents_dir : "", plain ? "/" : "", path,
				strerror(errno));
	struct img_reader *r = &c->r[c->nr];
	/* a pre-copy round's copy was checked whole as it came in (ckpt_unseal)
	 * into the caller's directory: its frames are checked as they are
	 * read, its data checksums not again, and it is not read in first */
	int e = plain ? img_reader_open_lazy(r, fd, &err)
		      : img_reader_open_key(r, fd, ctx->key, IMG_KEY_BYTES, &err);
	if (e < 0)
		return log_fail(&ctx->log, e, "parent image %s: %s", path,
				err.reason[0] ? err.reason : strerror(-e));
	c->nr++;
	if (plain)
		r->validated = true;
	else
		e = img_reader_validate(r, &err);
	if (e < 0)
		return log_fail(&ctx->log, e, "parent image %s: record %lld: %s", path,
				(long long)err.index, err.reason);
	if (memcmp(r->hdr.image_id, id, 16))
		return log_fail(&ctx->log, -ESTALE, "parent image %s is not the parent this image "
				"was made from (its id differs: replaced or rewritten since)", path);
	*ret = r;
	return 0;
}

/* The pages of pid in parent r (its own records) into ps; its MmTrack. */
static int parent_pages(struct rst_ctx *ctx, struct mm_chain *c, struct img_reader *r,
			const char *path, pid_t pid, struct pieces *ps, MmTrack **ret)
{
	struct img_record rec;
	struct img_error err;
	int e;

	*ret = NULL;
	img_reader_rewind(r);
	while ((e = img_reader_next(r, &rec, &err)) == 0) {
		if (rec.type == MM_REC_ENTRY) {
			ps->n = 0;
			ps->bytes = 0;
		} else if (rec.type == MM_REC_PAGES) {
			struct pages_chunk ch;
			e = pages_parse(&rec, &ch);
			if (e < 0 || (e = flatten(c, &ch, ps)) < 0)
				return log_fail(&ctx->log, e, "parent image %s: record %u: %s", path,
						rec.index, pages_strerror(e));
		} else if (rec.type == MM_REC_TRACK) {
			MmTrack *m = mm_track__unpack(NULL, rec.len, rec.data);
			if (m && m->pid == (uint32_t)pid && check_from(m, NULL) == 0) {
				*ret = m;
				break;
			}
			if (m)
				mm_track__free_unpacked(m, NULL);
			ps->n = 0;
			ps->bytes = 0;
		}
	}
	if (!*ret)
		return log_fail(&ctx->log, -ENOENT, "parent image %s: has no tracked pages of pid %d",
				path, pid);
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* *pages becomes the runs of all, sorted, each a chunk. */
static int rebuild(struct rst_ctx *ctx, struct rst_task *t, struct mm_chain *c,
		   struct pieces *all, struct pages_set *pages)
{
	struct pages_set s = { 0 };
	qsort(all->p, all->n, sizeof(*all->p), cmp_piece);
	c->x = calloc(all->n ? all->n : 1, sizeof(*c->x));
	if (!c->x)
		return -ENOMEM;
	for (size_t i = 0; i < all->n; i++) {
		c->x[i] = (struct pages_extent){ all->p[i].off, all->p[i].len };
		struct pages_chunk ch = { .n = 1, .x = &c->x[i], .data = all->p[i].src,
					  .bytes = all->p[i].len };
		int r = pages_set_add(&s, &ch, 0, 0x7ffffffff000ull);
		if (r < 0) {
			pages_set_release(&s);
			return log_fail(&ctx->log, r, "pid %d: the pages of its image and its parents' "
					"overlap at %llx", t->pid, (unsigned long long)all->p[i].off);
		}
	}
	pages_set_release(pages);
	*pages = s;
	return 0;
}

int mm_chain_resolve(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e,
		     struct mm_chain *c, struct pages_set *pages)
{
	(void)e;
	const MmTrack *m = c->track;
	if (!m->n_from_parent)
		return 0;
	struct pieces all = { 0 }, ps = { 0 };
	_cleanup_free_ uint64_t *w = malloc(m->n_from_parent * sizeof(*w));
	size_t nw = m->n_from_parent;
	MmTrack *pm = NULL;
	int r = w ? 0 : -ENOMEM;

	if (w)
		memcpy(w, m->from_parent, nw * sizeof(*w));
	/* lazily, the image's own records were not checked at load: they are
	 * now, before the set is rebuilt of pieces of several images */
	if (r >= 0 && (ctx->flags & RESTART_LAZY))
		r = mm_lazy_settle(ctx, t);
	for (size_t i = 0; r >= 0 && i < pages->n; i++)
		r = flatten(c, &pages->c[i], &all);
	const char *path = m->parent_path;
	const uint8_t *id = m->parent_id.data;
	char *path_buf = NULL;
	uint8_t id_buf[16];
	for (size_t level = 0; r >= 0 && nw; level++) {
		struct img_reader *pr = NULL;
		if (level == CHAIN_MAX) {
			r = log_fail(&ctx->log, -ELOOP, "pid %d: more than %d parent images",
				     t->pid, CHAIN_MAX);
			break;
		}
		if ((r = open_parent(ctx, c, path, id, &pr)) < 0 ||
		    (r = parent_pages(ctx, c, pr, path, t->pid, &ps, &pm)) < 0)
			break;
		uint64_t before = all.bytes;
		r = take(w, nw, &ps, &all);
		log_debug(&ctx->log, "pid %d: %llu KiB from parent image %s", t->pid,
			  (unsigned long long)((all.bytes - before) >> 10), path);
		ctx->mem_bytes += all.bytes - before;
		if (r >= 0)
			r = narrow(&w, &nw, pm->from_parent, pm->n_from_parent);
		if (r >= 0 && nw && pm->has_parent_id) {
			free(path_buf);
			path_buf = strdup(pm->parent_path);
			memcpy(id_buf, pm->parent_id.data, sizeof(id_buf));
			path = path_buf;
			id = id_buf;
			r = path_buf ? 0 : -ENOMEM;
		}
		mm_track__free_unpacked(pm, NULL);
		pm = NULL;
		ps.n = 0;
		ps.bytes = 0;
	}
	if (r >= 0)
		r = rebuild(ctx, t, c, &all, pages);
	free(path_buf);
	free(all.p);
	free(ps.p);
	return r;
}

/* The first MmTrack of the image at path (checked to have id); NULL with why. */
static MmTrack *first_track(const char *path, const uint8_t *id, const char **why)
{
	struct img_reader r = { 0 };
	struct img_error err;
	struct img_record rec;
	MmTrack *m = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	*why = "missing";
	if (fd < 0 || img_reader_open(&r, fd, &err) < 0)
		return NULL;
	*why = "replaced: its id differs";
	if (!memcmp(r.hdr.image_id, id, 16)) {
		*why = "damaged";
		while (!m && img_reader_next(&r, &rec, &err) == 0)
			if (rec.type == MM_REC_TRACK)
				m = mm_track__unpack(NULL, rec.len, rec.data);
	}
	img_reader_close(&r);
	return m;
}

void mm_chain_print(FILE *f, const uint8_t *data, size_t len)
{
	MmTrack *m = mm_track__unpack(NULL, len, data);
	if (!m)
		return;
	if (!m->has_parent_id || m->parent_id.len != 16 || !m->parent_path) {
		fputs("incremental: writes tracked from this image on; no parent (whole)\n", f);
		mm_track__free_unpacked(m, NULL);
		return;
	}
	fprintf(f, "incremental: %" PRIu64 " KiB of pid %u left to its parents:\n",
		m->parent_bytes >> 10, m->pid);
	for (int level = 1; m && m->has_parent_id && level <= CHAIN_MAX; level++) {
		const char *why;
		MmTrack *p = m->parent_id.len == 16 && m->parent_path
				     ? first_track(m->parent_path, m->parent_id.data, &why)
				     : NULL;
		fprintf(f, "  parent %d: %s", level, m->parent_path ? m->parent_path : "?");
		if (!p)
			fprintf(f, " (%s)", why);
		else if (!p->has_parent_id)
			fputs(" (whole: the first of the chain)", f);
		fputc('\n', f);
		mm_track__free_unpacked(m, NULL);
		m = p;
	}
	if (m)
		mm_track__free_unpacked(m, NULL);
}
