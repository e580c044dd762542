/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fdobj.c: open files found by (kind, key) and kcmp, in one place. */
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/ctx.h"
#include "core/objhash.h"
#include "kinds/fdobj.h"
#include "unit.h"

/* a kind's object: its struct fdobj need not come first */
struct test_obj {
	int other;
	struct fdobj f;
};

static struct test_obj *add(struct objhash *h, int kind, uint64_t key, pid_t pid, int fd)
{
	struct test_obj *t = calloc(1, sizeof(*t));
	t->f = (struct fdobj){ .pid = pid, .fd = fd };
	if (objhash_add(h, kind, key, 0, t, NULL) < 0) {
		free(t);
		return NULL;
	}
	return t;
}

static void release(int kind, void *ptr)
{
	(void)kind;
	free(ptr);
}

TEST(find)
{
	struct ckpt_ctx ctx = { 0 };
	struct objhash *h = &ctx.objs;
	pid_t self = getpid();
	int p[2], q[2];
	const size_t off = offsetof(struct test_obj, f);

	CHECK_EQ(objhash_init(h), 0);
	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(pipe(q), 0);
	int dup0 = dup(p[0]);
	struct test_obj *none = add(h, 1, 7, self, -1); /* not an open file */
	struct test_obj *a = add(h, 1, 7, self, p[0]);
	struct test_obj *b = add(h, 1, 7, self, p[1]);
	CHECK(none && a && b);
	/* the same open file through another fd */
	struct obj *o = fdobj_find(&ctx, 1, 7, off, self, dup0);
	CHECK(o && o->ptr == a);
	o = fdobj_find(&ctx, 1, 7, off, self, p[1]);
	CHECK(o && o->ptr == b);
	/* another open file, another key, another kind: none */
	CHECK(!fdobj_find(&ctx, 1, 7, off, self, q[0]));
	CHECK(!fdobj_find(&ctx, 1, 8, off, self, p[0]));
	CHECK(!fdobj_find(&ctx, 2, 7, off, self, p[0]));
	CHECK(!fdobj_find(&ctx, 1, 7, off, self, -1));
	CHECK(fdobj_same(self, p[0], self, dup0));
	CHECK(!fdobj_same(self, p[0], self, q[0]));
	CHECK(!fdobj_same(self, -1, self, p[0]));
	objhash_free(h, release);
	fdobj_index_free(ctx.fdobj_index);
	close(dup0);
	for (int i = 0; i < 2; i++)
		close(p[i]), close(q[i]);
}

/* Many open files under one key (each open of /dev/null its own), found
 * or added one fd after the other as fdtable does, with dups among them:
 * each dup finds its original, each new open file none. */
TEST(find_many)
{
	enum { N = 300 };
	struct ckpt_ctx ctx = { 0 };
	pid_t self = getpid();
	const size_t off = offsetof(struct test_obj, f);
	int fds[N], dups[N / 3];
	struct test_obj *objs[N];

	CHECK_EQ(objhash_init(&ctx.objs), 0);
	for (int i = 0; i < N; i++) {
		fds[i] = open("/dev/null", O_RDONLY);
		CHECK(fds[i] >= 0);
		CHECK(!fdobj_find(&ctx, 1, 42, off, self, fds[i]));
		objs[i] = add(&ctx.objs, 1, 42, self, fds[i]);
		CHECK(objs[i] != NULL);
		if (i % 3 == 0) {
			dups[i / 3] = dup(fds[i / 2]);
			struct obj *o = fdobj_find(&ctx, 1, 42, off, self, dups[i / 3]);
			CHECK(o && o->ptr == objs[i / 2]);
		}
	}
	for (int i = 0; i < N; i++) {
		struct obj *o = fdobj_find(&ctx, 1, 42, off, self, fds[i]);
		CHECK(o && o->ptr == objs[i]);
	}
	objhash_free(&ctx.objs, release);
	fdobj_index_free(ctx.fdobj_index);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	for (int i = 0; i < N / 3; i++)
		close(dups[i]);
}

int main(void)
{
	RUN(find);
	RUN(find_many);
	return unit_done();
}
