/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * checkpoint --parent while the program writes (the pre-copy inside a
 * checkpoint, mm-dirty.c): after image 0 (--track) it rewrites its "still"
 * pages once, then writes its "busy" pages round and round, each with the
 * number of the write (seq, kept in the same tracked memory). The runner
 * makes image 1 (--parent image 0 --kill) with ckpt-fault, which stops
 * after the pre-copy until the program has seen "rewritten.pre" and written
 * every busy page once more (then "rewritten"): every busy page was copied
 * by the pre-copy and written again before the freeze. After the restart
 * each busy page must hold its last write by seq (a pre-copied copy used
 * for it would be an older one), each still page its second pattern.
 * Its "late" pages are written once, when it has seen "rewritten.pre":
 * after the pre-copy, before the freeze, never again; they must come from
 * the frozen process (found written by the scan at the freeze).
 * argv[1] "undo": once it has seen "rewritten.pre" it also opens a
 * userfaultfd of its own, which ckpt refuses at collect: image 1 fails
 * after its pre-copy and must put the tracking back (the pages it
 * protected written again); when "unblock" exists the program closes it
 * ("unblocked") and the runner makes image 2 (--parent image 0 --kill),
 * restarted: the still pages must come from image 2, not image 0, and so
 * must the late ones (image 1, without --kill, had write-protected them
 * at its freeze: its undo must put that back too).
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG 4096ul
#define NBUSY 256ul
#define NSTILL 256ul
#define NLATE 64ul
#define WORDS (PG / sizeof(uint64_t))

struct hdr {
	uint64_t seq;       /* writes done: busy page (s - 1) % NBUSY holds s */
	uint64_t rewritten; /* the seq at which "rewritten" was made, 0: not yet */
};

static void fill_page(uint64_t *p, uint64_t s)
{
	for (size_t k = 0; k < WORDS; k++)
		p[k] = s * 0x9e3779b97f4a7c15ull + k;
}

static bool page_is(const uint64_t *p, uint64_t s)
{
	for (size_t k = 0; k < WORDS; k++)
		if (p[k] != s * 0x9e3779b97f4a7c15ull + k)
			return false;
	return true;
}

static void made(const char *name)
{
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail("create %s: %m", name);
	close(fd);
}

int main(int argc, char **argv)
{
	bool undo = argc > 1 && !strcmp(argv[1], "undo");
	int blocker = -1; /* undo: the userfaultfd ckpt refuses */
	unsigned char *m = test_mmap(NULL, (1 + NBUSY + NSTILL + NLATE) * PG,
				     PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct hdr *h = (struct hdr *)m;
	uint64_t *busy = (uint64_t *)(m + PG), *still = (uint64_t *)(m + (1 + NBUSY) * PG);
	uint64_t *late = (uint64_t *)(m + (1 + NBUSY + NSTILL) * PG);

	for (size_t j = 0; j < NBUSY; j++)
		fill_page(busy + j * WORDS, 0);
	for (size_t i = 0; i < NSTILL; i++)
		fill_page(still + i * WORDS, 1000000 + i);
	for (size_t i = 0; i < NLATE; i++)
		fill_page(late + i * WORDS, 3000000 + i);
	test_ready();
	test_wait(); /* image 0 (--track) is made */
	test_woken = 0;

	for (size_t i = 0; i < NSTILL; i++)
		fill_page(still + i * WORDS, 2000000 + i);
	/* every busy page written once since image 0 before the runner goes on */
	for (uint64_t s = 1; s <= NBUSY; s++) {
		fill_page(busy + (s - 1) * WORDS, s);
		__atomic_store_n(&h->seq, s, __ATOMIC_RELEASE);
	}
	made("step1");
	uint64_t seen = 0; /* the seq at which rewritten.pre was seen */
	while (!test_woken) {
		uint64_t s = h->seq + 1;
		fill_page(busy + ((s - 1) % NBUSY) * WORDS, s);
		__atomic_store_n(&h->seq, s, __ATOMIC_RELEASE);
		if (!h->rewritten && !seen && s % 64 == 0 && access("rewritten.pre", F_OK) == 0) {
			seen = s;
			for (size_t i = 0; i < NLATE; i++)
				fill_page(late + i * WORDS, 4000000 + i);
			if (undo && (blocker = (int)syscall(SYS_userfaultfd, O_CLOEXEC)) < 0)
				fail("userfaultfd: %m");
		}
		if (!h->rewritten && seen && s == seen + NBUSY) {
			h->rewritten = s;
			made("rewritten");
		}
		if (blocker >= 0 && s % 64 == 0 && access("unblock", F_OK) == 0) {
			close(blocker);
			blocker = -1;
			made("unblocked");
		}
	}
	/* restarted (image 1), woken */
	test_check_common();
	expect(h->rewritten != 0, "the checkpoint did not wait for the pages written again");
	uint64_t seq = h->seq;
	for (size_t j = 0; j < NBUSY; j++) {
		/* the last s <= seq with (s - 1) % NBUSY == j, 0 if none */
		uint64_t s = seq > j ? seq - (seq - 1 - j) % NBUSY : 0;
		expect(page_is(busy + j * WORDS, s), "busy page %zu (seq %llu) is not write %llu", j,
		       (unsigned long long)seq, (unsigned long long)s);
	}
	for (size_t i = 0; i < NSTILL; i++)
		expect(page_is(still + i * WORDS, 2000000 + i), "still page %zu is not pattern 2", i);
	for (size_t i = 0; i < NLATE; i++)
		expect(page_is(late + i * WORDS, 4000000 + i), "late page %zu is not pattern 4", i);
	pass();
}
