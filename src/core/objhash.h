/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The object hash, after linux-cr's objhash: every object that tasks may
 * share (an open file, an mm, an fd table...) gets one objref (id) on first
 * sight, so that it is written once, before any record that refers to it,
 * and restored once and shared again.
 *
 * An object is found by (kind, key) - the key is a hint such as an inode
 * number, several objects may share one, and the caller tells them apart
 * (kcmp) - or by id. Looking an id up with the wrong kind is an error in
 * the image (-EINVAL), never a crash. ids start at 1 and are unique over
 * all kinds.
 *
 * At restart the ids come from the image, so any 32-bit value may appear:
 * nothing here costs more for a large id than for a small one. Walks in id
 * order (objhash_next_of, objhash_next) go through an index of the objects
 * sorted by id, sorted again on the first walk after an out-of-order add:
 * never loop from 1 to next_id.
 */
#ifndef CKPT_OBJHASH_H
#define CKPT_OBJHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct obj {
	uint32_t id;
	int kind;
	uint64_t key;
	void *ptr;              /* the kind's data; freed by the kind */
	bool dumped;            /* checkpoint: already written */
	struct obj *next_key;   /* chain of the key bucket */
	struct obj *next_id;    /* chain of the id bucket */
};

/* every object, sorted by id when sorted is true */
struct objhash_index {
	struct obj **v;
	size_t n, cap;
	bool sorted;
};

struct objhash {
	struct obj **by_key;
	struct obj **by_id;
	size_t nbuckets;        /* power of two */
	size_t count;
	uint32_t next_id;       /* for id 0 in objhash_add only: not a bound to loop to */
	struct objhash_index *index;
};

int objhash_init(struct objhash *h) __attribute__((warn_unused_result));
/* id 0: assign the next free one. -EEXIST if the id is taken. */
int objhash_add(struct objhash *h, int kind, uint64_t key, uint32_t id, void *ptr,
		struct obj **ret) __attribute__((warn_unused_result));
/* The first object of kind with key after prev (NULL: from the start). */
struct obj *objhash_next_key(const struct objhash *h, const struct obj *prev, int kind,
			     uint64_t key);
/* -ENOENT if there is no such id, -EINVAL if it is of another kind. */
int objhash_get(const struct objhash *h, uint32_t id, int kind, struct obj **ret)
	__attribute__((warn_unused_result));
/*
 * The object of kind with the next id after prev (NULL: the first), in id
 * order: for (struct obj *o = NULL; (o = objhash_next_of(h, kind, o));)
 */
struct obj *objhash_next_of(const struct objhash *h, int kind, const struct obj *prev);
/* The same over objects of every kind. */
struct obj *objhash_next(const struct objhash *h, const struct obj *prev);
/* The object with this id, whatever its kind, or NULL. */
struct obj *objhash_find(const struct objhash *h, uint32_t id);
/* Calls release(kind, ptr) for every object, then frees the hash. */
void objhash_free(struct objhash *h, void (*release)(int kind, void *ptr));

#endif
