/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Private anonymous memory: a few MiB of random data, a region never
 * touched, a region written and then zeroed, and a sparse region with every
 * seventh page touched. After restore every byte is as before, the
 * mappings are where they were with the same protection, and still writable.
 */
#include "lib.h"

#include <string.h>
#include <sys/mman.h>

#define MiB (1ul << 20)
#define PAGE 4096ul

struct region {
	const char *name;
	unsigned char *p;
	size_t len;
};

static int all_zero(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

static void check_map(const struct region *r)
{
	struct test_map m;
	if (test_find_map((uintptr_t)r->p, &m)) {
		test_failf("%s: no mapping at %p", r->name, (void *)r->p);
		return;
	}
	expect(m.start <= (uintptr_t)r->p && m.end >= (uintptr_t)r->p + r->len,
	       "%s: mapping %lx-%lx does not cover %p+%zu", r->name, (unsigned long)m.start,
	       (unsigned long)m.end, (void *)r->p, r->len);
	expect(!strcmp(m.perms, "rw-p"), "%s: perms %s, want rw-p", r->name, m.perms);
	expect(m.inode == 0, "%s: mapping has inode %lu (%s)", r->name, m.inode, m.path);
}

int main(void)
{
	const int rw = PROT_READ | PROT_WRITE, fl = MAP_PRIVATE | MAP_ANONYMOUS;
	struct region rnd = {"random", NULL, 4 * MiB};
	struct region untouched = {"untouched", NULL, 1 * MiB};
	struct region zero = {"zeroed", NULL, 1 * MiB};
	struct region sparse = {"sparse", NULL, 2 * MiB};

	rnd.p = test_mmap(NULL, rnd.len, rw, fl, -1, 0);
	untouched.p = test_mmap(NULL, untouched.len, rw, fl, -1, 0);
	zero.p = test_mmap(NULL, zero.len, rw, fl, -1, 0);
	sparse.p = test_mmap(NULL, sparse.len, rw, fl, -1, 0);

	test_fill_random(rnd.p, rnd.len, 0x5eed1234);
	const uint64_t rnd_hash = test_hash(rnd.p, rnd.len, 0);
	memset(zero.p, 0xa5, zero.len);
	memset(zero.p, 0, zero.len);
	for (size_t pg = 0; pg < sparse.len / PAGE; pg += 7)
		test_fill_random(sparse.p + pg * PAGE, PAGE, 1000 + pg);
	const uint64_t sparse_hash = test_hash(sparse.p, sparse.len, 0);

	test_ready();
	test_wait();

	expect(test_hash(rnd.p, rnd.len, 0) == rnd_hash, "random region checksum differs");
	expect(all_zero(untouched.p, untouched.len), "untouched region is not zero");
	expect(all_zero(zero.p, zero.len), "zeroed region is not zero");
	expect(test_hash(sparse.p, sparse.len, 0) == sparse_hash, "sparse region checksum differs");
	for (size_t pg = 0; pg < sparse.len / PAGE; pg++) {
		unsigned char want[PAGE];
		if (pg % 7 == 0)
			test_fill_random(want, PAGE, 1000 + pg);
		else
			memset(want, 0, PAGE);
		if (memcmp(want, sparse.p + pg * PAGE, PAGE)) {
			test_failf("sparse page %zu differs", pg);
			break;
		}
	}
	const struct region *all[] = {&rnd, &untouched, &zero, &sparse};
	for (int i = 0; i < 4; i++) {
		check_map(all[i]);
		memset(all[i]->p, 0x3c, all[i]->len); /* still writable */
	}
	pass();
}
