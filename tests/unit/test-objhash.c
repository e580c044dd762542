/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "core/objhash.h"
#include "unit.h"

static int released;
static void count_release(int kind, void *ptr)
{
	(void)kind;
	free(ptr);
	released++;
}

TEST(add_get)
{
	struct objhash h;
	struct obj *o, *got;
	CHECK_EQ(objhash_init(&h), 0);
	CHECK_EQ(objhash_add(&h, 1, 100, 0, malloc(1), &o), 0);
	CHECK_EQ(o->id, 1);
	CHECK_EQ(objhash_add(&h, 2, 100, 0, malloc(1), &o), 0);
	CHECK_EQ(o->id, 2);
	CHECK_EQ(objhash_get(&h, 1, 1, &got), 0);
	CHECK_EQ(got->key, 100);
	/* the wrong kind is an error in the image, not a crash */
	CHECK_EQ(objhash_get(&h, 1, 2, &got), -EINVAL);
	CHECK_EQ(objhash_get(&h, 77, 1, &got), -ENOENT);
	/* ids given by an image: taken once */
	CHECK_EQ(objhash_add(&h, 1, 5, 40, malloc(1), &o), 0);
	CHECK_EQ(objhash_add(&h, 1, 5, 40, NULL, &o), -EEXIST);
	CHECK_EQ(objhash_add(&h, 1, 5, 0, malloc(1), &o), 0);
	CHECK_EQ(o->id, 41);
	released = 0;
	objhash_free(&h, count_release);
	CHECK_EQ(released, 4);
}

TEST(keys_and_growth)
{
	struct objhash h;
	CHECK_EQ(objhash_init(&h), 0);
	for (int i = 0; i < 5000; i++)
		CHECK_EQ(objhash_add(&h, i % 3, (uint64_t)(i % 50), 0, malloc(1), NULL), 0);
	int n = 0;
	for (struct obj *o = NULL; (o = objhash_next_key(&h, o, 1, 7));)
		n++;
	/* i % 50 == 7 and i % 3 == 1: i = 7 + 50k with k % 3 == 0 */
	int want = 0;
	for (int i = 0; i < 5000; i++)
		want += i % 50 == 7 && i % 3 == 1;
	CHECK_EQ(n, want);
	for (uint32_t id = 1; id <= 5000; id++) {
		struct obj *o;
		CHECK_EQ(objhash_get(&h, id, (int)((id - 1) % 3), &o), 0);
	}
	released = 0;
	objhash_free(&h, count_release);
	CHECK_EQ(released, 5000);
	/* a freed hash answers, it does not crash */
	struct obj *o;
	CHECK_EQ(objhash_get(&h, 1, 0, &o), -ENOENT);
	CHECK(objhash_next_key(&h, NULL, 0, 0) == NULL);
}

/* ids from an image: any value, any order; walks cost the objects, not the ids */
TEST(huge_ids)
{
	static const uint32_t ids[] = { 0xfffffffe, 7, 0x80000000, 3, 1, 0x10000 };
	struct objhash h;
	struct obj *o;
	CHECK_EQ(objhash_init(&h), 0);
	for (size_t i = 0; i < sizeof(ids) / sizeof(*ids); i++)
		CHECK_EQ(objhash_add(&h, (int)(i % 2), 0, ids[i], malloc(1), NULL), 0);
	CHECK_EQ(objhash_add(&h, 0, 0, 0xffffffff, NULL, NULL), -ERANGE);
	/* the next free id after 0xfffffffe would not fit */
	CHECK_EQ(objhash_add(&h, 0, 0, 0, NULL, NULL), -EOVERFLOW);
	uint32_t prev = 0;
	size_t n = 0;
	for (o = NULL; (o = objhash_next(&h, o)); n++) {
		CHECK(o->id > prev);
		prev = o->id;
	}
	CHECK_EQ(n, 6);
	n = 0;
	for (o = NULL; (o = objhash_next_of(&h, 1, o)); n++)
		CHECK_EQ(o->kind, 1);
	CHECK_EQ(n, 3); /* 7, 3, 0x10000 */
	/* an add during a walk: the walk goes on after prev, by id */
	o = objhash_next_of(&h, 0, NULL);
	CHECK_EQ(o->id, 1);
	CHECK_EQ(objhash_add(&h, 0, 0, 2, malloc(1), NULL), 0);
	o = objhash_next_of(&h, 0, o);
	CHECK_EQ(o->id, 2);
	released = 0;
	objhash_free(&h, count_release);
	CHECK_EQ(released, 7);
}

int main(void)
{
	RUN(add_get);
	RUN(keys_and_growth);
	RUN(huge_ids);
	return unit_done();
}
