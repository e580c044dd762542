/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memory for checkpoint --compress: 24 MiB of anonymous memory filled with
 * text-like records (words and numbers, as a heap of strings would hold),
 * 4 MiB of random bytes (which compression must leave as they are), and a
 * memfd of 4 MiB of text, not mapped (its contents are saved as a file's).
 * After restore every byte is as it was.
 */
#include "lib.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1ul << 20)

/* deterministic text: "user=7741 name=beta status=ok score=12\n" ... */
static void fill_text(char *p, size_t len, uint64_t seed)
{
	static const char *names[] = { "alpha", "beta", "gamma", "delta", "omicron", "sigma" };
	static const char *status[] = { "ok", "failed", "pending" };
	uint64_t st = seed;
	size_t at = 0;
	char line[96];
	while (at < len) {
		uint64_t r = test_splitmix(&st);
		int n = snprintf(line, sizeof(line), "user=%llu name=%s status=%s score=%u\n",
				 (unsigned long long)(r % 100000), names[(r >> 20) % 6],
				 status[(r >> 30) % 3], (unsigned)((r >> 40) % 1000));
		size_t k = (size_t)n < len - at ? (size_t)n : len - at;
		memcpy(p + at, line, k);
		at += k;
	}
}

int main(void)
{
	const int rw = PROT_READ | PROT_WRITE, fl = MAP_PRIVATE | MAP_ANONYMOUS;
	const size_t text_len = 24 * MiB, rnd_len = 4 * MiB, mfd_len = 4 * MiB;
	char *text = test_mmap(NULL, text_len, rw, fl, -1, 0);
	unsigned char *rnd = test_mmap(NULL, rnd_len, rw, fl, -1, 0);
	char *buf = test_mmap(NULL, mfd_len, rw, fl, -1, 0);

	fill_text(text, text_len, 0x7e57);
	test_fill_random(rnd, rnd_len, 0x5eed77);
	fill_text(buf, mfd_len, 0xf11e);
	int mfd = memfd_create("zstd-text", 0);
	if (mfd < 0)
		fail("memfd_create: %m");
	if (write(mfd, buf, mfd_len) != (ssize_t)mfd_len)
		fail("write memfd: %m");
	const uint64_t text_hash = test_hash(text, text_len, 0);
	const uint64_t rnd_hash = test_hash(rnd, rnd_len, 0);
	const uint64_t mfd_hash = test_hash(buf, mfd_len, 0);
	memset(buf, 0, mfd_len);

	test_ready();
	test_wait();

	expect(test_hash(text, text_len, 0) == text_hash, "text region differs");
	expect(test_hash(rnd, rnd_len, 0) == rnd_hash, "random region differs");
	expect(pread(mfd, buf, mfd_len, 0) == (ssize_t)mfd_len, "memfd: short read");
	expect(test_hash(buf, mfd_len, 0) == mfd_hash, "memfd contents differ");
	/* and a fresh expectation, not only the hashes taken before */
	char *want = test_mmap(NULL, 64 * 1024, rw, fl, -1, 0);
	fill_text(want, 64 * 1024, 0x7e57);
	expect(!memcmp(want, text, 64 * 1024), "text region: its first 64 KiB are not the text");
	pass();
}
