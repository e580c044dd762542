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
	if (!h->by_key || !h->by_id) {
		free(h->by_key);
		free(h->by_id);
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
	if (id) {
		if (objhash_get(h, id, kind, &o) != -ENOENT)
			return -EEXIST;
	} else {
		id = h->next_id;
	}
	if (id >= h->next_id)
		h->next_id = id + 1;
	if (h->count >= h->nbuckets && grow(h) < 0)
		return -ENOMEM;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
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
	*h = (struct objhash){ 0 };
}

struct obj *objhash_next_of(const struct objhash *h, int kind, const struct obj *prev)
{
	for (uint32_t id = prev ? prev->id + 1 : 1; id < h->next_id; id++) {
		struct obj *o = objhash_find(h, id);
		if (o && o->kind == kind)
			return o;
	}
	return NULL;
}
