/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Shared anonymous memory: 2 MiB of MAP_SHARED|MAP_ANONYMOUS random data,
 * and a second mapping of the same pages made with mremap(old_size = 0).
 * After restore: contents intact, both mappings rw-s, the two still share
 * their pages (a write through one is seen through the other), and the
 * mapping can be duplicated again (mremap(0) works only on shared ones).
 */
#include "lib.h"

#include <string.h>
#include <sys/mman.h>

#define LEN (2ul << 20)

static void check_perms(const char *what, void *p)
{
	struct test_map m;
	if (test_find_map((uintptr_t)p, &m)) {
		test_failf("%s: no mapping at %p", what, p);
		return;
	}
	expect(m.start == (uintptr_t)p && m.end == (uintptr_t)p + LEN, "%s: mapping is %lx-%lx",
	       what, (unsigned long)m.start, (unsigned long)m.end);
	expect(!strcmp(m.perms, "rw-s"), "%s: perms %s, want rw-s", what, m.perms);
}

int main(void)
{
	unsigned char *p = test_mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	test_fill_random(p, LEN, 0x54a7ed);
	const uint64_t h = test_hash(p, LEN, 0);
	unsigned char *alias = mremap(p, 0, LEN, MREMAP_MAYMOVE);
	if (alias == MAP_FAILED)
		fail("mremap(0): %m");
	if (test_hash(alias, LEN, 0) != h)
		fail("alias differs before checkpoint");

	test_ready();
	test_wait();

	check_perms("first", p);
	check_perms("alias", alias);
	expect(test_hash(p, LEN, 0) == h, "contents differ");
	expect(test_hash(alias, LEN, 0) == h, "alias contents differ");
	unsigned char old0 = p[100], old1 = alias[LEN - 1];
	p[100] = (unsigned char)~old0;
	expect(alias[100] == (unsigned char)~old0, "write through first not seen in alias");
	alias[LEN - 1] = (unsigned char)~old1;
	expect(p[LEN - 1] == (unsigned char)~old1, "write through alias not seen in first");
	p[100] = old0;
	p[LEN - 1] = old1;
	unsigned char *again = mremap(p, 0, LEN, MREMAP_MAYMOVE);
	if (again == MAP_FAILED) {
		test_failf("mremap(0) after restore: %m (mapping no longer shared?)");
	} else {
		expect(test_hash(again, LEN, 0) == h, "new alias differs");
		munmap(again, LEN);
	}
	pass();
}
