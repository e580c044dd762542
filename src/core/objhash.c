/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "core/objhash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t hash64(uint64_t x, size_t nbuckets)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x & (nbuckets - 1);
}

int objhash_init(struct objhash *h)
{
	*h = (struct objhash){ .nbuckets = 256, .next_id = 1 };
	h->by_key = calloc(h->nbuckets, sizeof(*h->by_key));
	h->by_id = calloc(h->nbuckets, sizeof(*h->by_id));
	h->index = calloc(1, sizeof(*h->index));
	if (!h->by_key || !h->by_id || !h->index) {
		free(h->by_key);
		free(h->by_id);
		free(h->index);
		*h = (struct objhash){ 0 };
		return -ENOMEM;
	}
	return 0;
}

static int grow(struct objhash *h)
{
	size_t n = h->nbuckets * 2;
	struct obj **bk = calloc(n, sizeof(*bk)), **bi = calloc(n, sizeof(*bi));
	if (!bk || !bi) {
		free(bk);
		free(bi);
		return -ENOMEM;
	}
	for (size_t i = 0; i < h->nbuckets; i++) {
		for (struct obj *o = h->by_key[i], *next; o; o = next) {
			next = o->next_key;
			size_t b = hash64(o->key ^ (uint64_t)o->kind << 56, n);
			o->next_key = bk[b];
			bk[b] = o;
		}
		for (struct obj *o = h->by_id[i], *next; o; o = next) {
			next = o->next_id;
			size_t b = hash64(o->id, n);
			o->next_id = bi[b];
			bi[b] = o;
		}
	}
	free(h->by_key);
	free(h->by_id);
	h->by_key = bk;
	h->by_id = bi;
	h->nbuckets = n;
	return 0;
}

int objhash_add(struct objhash *h, int kind, uint64_t key, uint32_t id, void *ptr,
		struct obj **ret)
{
	struct obj *o;

	if (!h->by_key)
		return -EINVAL;
	if (id == UINT32_MAX)
		return -ERANGE; /* next_id must stay representable */
	if (id) {
		if (objhash_get(h, id, kind, &o) != -ENOENT)
			return -EEXIST;
	} else if (h->next_id == UINT32_MAX) {
		return -EOVERFLOW;
	} else {
		id = h->next_id;
	}
	if (id >= h->next_id)
		h->next_id = id + 1;
	if (h->count >= h->nbuckets && grow(h) < 0)
		return -ENOMEM;
	struct objhash_index *x = h->index;
	if (x->n == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 256;
		struct obj **v = realloc(x->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	if (x->n && x->v[x->n - 1]->id > id)
		x->sorted = false;
	else if (!x->n)
		x->sorted = true;
	x->v[x->n++] = o;
	*o = (struct obj){ .id = id, .kind = kind, .key = key, .ptr = ptr };
	size_t bk = hash64(key ^ (uint64_t)kind << 56, h->nbuckets);
	size_t bi = hash64(id, h->nbuckets);
	o->next_key = h->by_key[bk];
	h->by_key[bk] = o;
	o->next_id = h->by_id[bi];
	h->by_id[bi] = o;
	h->count++;
	if (ret)
		*ret = o;
	return 0;
}

struct obj *objhash_next_key(const struct objhash *h, const struct obj *prev, int kind,
			     uint64_t key)
{
	struct obj *o;

	if (!h->by_key)
		return NULL;
	o = prev ? prev->next_key : h->by_key[hash64(key ^ (uint64_t)kind << 56, h->nbuckets)];
	for (; o; o = o->next_key)
		if (o->kind == kind && o->key == key)
			return o;
	return NULL;
}

int objhash_get(const struct objhash *h, uint32_t id, int kind, struct obj **ret)
{
	if (!h->by_id)
		return -ENOENT;
	for (struct obj *o = h->by_id[hash64(id, h->nbuckets)]; o; o = o->next_id) {
		if (o->id != id)
			continue;
		if (o->kind != kind)
			return -EINVAL;
		*ret = o;
		return 0;
	}
	return -ENOENT;
}

struct obj *objhash_find(const struct objhash *h, uint32_t id)
{
	if (!h->by_id)
		return NULL;
	for (struct obj *o = h->by_id[hash64(id, h->nbuckets)]; o; o = o->next_id)
		if (o->id == id)
			return o;
	return NULL;
}

void objhash_free(struct objhash *h, void (*release)(int kind, void *ptr))
{
	if (!h->by_id)
		return;
	for (size_t i = 0; i < h->nbuckets; i++) {
		for (struct obj *o = h->by_id[i], *next; o; o = next) {
			next = o->next_id;
			if (release)
				release(o->kind, o->ptr);
			free(o);
		}
	}
	free(h->by_key);
	free(h->by_id);
	free(h->index->v);
	free(h->index);
	*h = (struct objhash){ 0 };
}

static int by_id(const void *a, const void *b)
{
	uint32_t x = (*(struct obj *const *)a)->id, y = (*(struct obj *const *)b)->id;
	return x < y ? -1 : x > y;
}

/* Position of the first object with an id above prev's (0 for NULL). */
static size_t index_after(const struct objhash *h, const struct obj *prev)
{
	struct objhash_index *x = h->index;
	size_t lo = 0, hi = x->n;

	if (!x->sorted) {
		if (x->n) /* an empty index may have no array: qsort must not see NULL */
			qsort(x->v, x->n, sizeof(*x->v), by_id);
		x->sorted = true;
	}
	if (!prev)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->v[mid]->id <= prev->id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct obj *objhash_next_of(const struct objhash *h, int kind, const struct obj *prev)
{
	if (!h->index)
		return NULL;
	for (size_t i = index_after(h, prev); i < h->index->n; i++)
		if (h->index->v[i]->kind == kind)
			return h->index->v[i];
	return NULL;
}

struct obj *objhash_next(const struct objhash *h, const struct obj *prev)
{
	if (!h->index)
		return NULL;
	size_t i = index_after(h, prev);
	return i < h->index->n ? h->index->v[i] : NULL;
}
