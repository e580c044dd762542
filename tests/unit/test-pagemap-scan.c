/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util/pagemap-scan.c over this process's own pagemap: every region of a
 * scan given once and in order, however small the buffer (each call going
 * on from where the last stopped), a max_pages kept for the whole scan, a
 * limit of pages a call, the
 * regions left where the caller put them (pm_scan_call), a failure's
 * error and position.
 */
#include "util/pagemap-scan.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG  4096ul
#define NPG 64

static char *area;
static int pagemap = -1;

/* every third page written (present), the others never touched */
static void setup(void)
{
	area = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(area != MAP_FAILED);
	for (size_t i = 0; i < NPG; i += 3)
		area[i * PG] = 1;
	pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	CHECK(pagemap >= 0);
}

static struct pm_scan_arg present(uint64_t max_pages)
{
	return (struct pm_scan_arg){
	    .start = (uintptr_t)area,
	    .end = (uintptr_t)area + NPG * PG,
	    .max_pages = max_pages,
	    .category_mask = PAGE_IS_PRESENT,
	    .return_mask = PAGE_IS_PRESENT,
	};
}

TEST(every_region_in_order)
{
	/* a buffer of 1, 2, 7 and 64 regions: 22, 11, 4 and 1 calls at least */
	static const size_t lens[] = {1, 2, 7, 64};
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		struct page_region buf[64];
		struct pm_scan s;
		size_t k = 0;
		struct pm_scan_arg a = present(0);
		pm_scan_start(&s, pagemap, &a, buf, lens[l]);
		for (const struct page_region *g; (g = pm_scan_next(&s)); k++) {
			CHECK_EQ(g->start, (uintptr_t)area + 3 * k * PG);
			CHECK_EQ(g->end - g->start, PG);
			CHECK(g->categories & PAGE_IS_PRESENT);
		}
		CHECK_EQ(s.err, 0);
		CHECK_EQ(k, (NPG + 2) / 3);
		CHECK_EQ(pm_scan_pos(&s), (uintptr_t)area + NPG * PG);
	}
}

TEST(max_pages_for_the_whole_scan)
{
	struct page_region buf[2];
	struct pm_scan s;
	size_t k = 0;
	struct pm_scan_arg a = present(5);
	pm_scan_start(&s, pagemap, &a, buf, 2);
	for (const struct page_region *g; (g = pm_scan_next(&s)); k++)
		CHECK_EQ(g->start, (uintptr_t)area + 3 * k * PG);
	CHECK_EQ(s.err, 0);
	CHECK_EQ(k, 5);
	CHECK(pm_scan_pos(&s) < (uintptr_t)area + NPG * PG);
}

TEST(pages_per_call)
{
	/* one page a call: every region still, one a call; with a max_pages
	 * of 5 and 2 a call: 5 regions in 3 calls */
	struct page_region buf[64];
	struct pm_scan s;
	size_t k = 0;
	struct pm_scan_arg a = present(0);
	pm_scan_start(&s, pagemap, &a, buf, 64);
	s.call_pages = 1;
	for (const struct page_region *g; (g = pm_scan_next(&s)); k++)
		CHECK_EQ(g->start, (uintptr_t)area + 3 * k * PG);
	CHECK_EQ(s.err, 0);
	CHECK_EQ(k, (NPG + 2) / 3);
	CHECK(s.calls >= k);
	k = 0;
	a = present(5);
	pm_scan_start(&s, pagemap, &a, buf, 64);
	s.call_pages = 2;
	for (const struct page_region *g; (g = pm_scan_next(&s)); k++)
		CHECK_EQ(g->start, (uintptr_t)area + 3 * k * PG);
	CHECK_EQ(k, 5);
	CHECK_EQ(s.calls, 3);
}

TEST(call_into_the_callers_array)
{
	struct page_region all[NPG];
	size_t n = 0;
	struct pm_scan s;
	struct pm_scan_arg a = present(0);
	pm_scan_start(&s, pagemap, &a, NULL, 0);
	while (!s.done) {
		long got = pm_scan_call(&s, all + n, 3 < NPG - n ? 3 : NPG - n);
		CHECK(got >= 0);
		if (got < 0)
			break;
		n += (size_t)got;
	}
	CHECK_EQ(pm_scan_call(&s, all + n, 1), 0);
	CHECK_EQ(n, (NPG + 2) / 3);
	for (size_t i = 0; i < n; i++)
		CHECK_EQ(all[i].start, (uintptr_t)area + 3 * i * PG);
}

TEST(empty_range)
{
	struct page_region buf[4];
	struct pm_scan s;
	struct pm_scan_arg a = present(0);
	a.end = a.start;
	pm_scan_start(&s, pagemap, &a, buf, 4);
	CHECK(pm_scan_next(&s) == NULL);
	CHECK_EQ(s.err, 0);
}

TEST(failure)
{
	struct page_region buf[4];
	struct pm_scan s;
	struct pm_scan_arg a = present(0);
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	pm_scan_start(&s, fd, &a, buf, 4);
	CHECK(pm_scan_next(&s) == NULL);
	CHECK(s.err < 0);
	CHECK_EQ(pm_scan_pos(&s), (uintptr_t)area);
	CHECK(pm_scan_next(&s) == NULL); /* and stays so */
	close(fd);
}

int main(void)
{
	setup();
	RUN(every_region_in_order);
	RUN(max_pages_for_the_whole_scan);
	RUN(pages_per_call);
	RUN(call_into_the_callers_array);
	RUN(empty_range);
	RUN(failure);
	return unit_done();
}
