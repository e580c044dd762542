/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A minimal unit-test harness: CHECK() records a failure with its line and
 * goes on; TEST(name) defines a case; RUN(name) runs it; unit_done() prints
 * "N passed, N failed" and returns the exit status.
 */
#ifndef CKPT_UNIT_H
#define CKPT_UNIT_H

#include <stdio.h>
#include <string.h>

struct unit_state {
	int passed, failed, case_failed;
};
static struct unit_state unit_;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                              \
			unit_.case_failed = 1;                                       \
		}                                                                    \
	} while (0)
#define CHECK_EQ(a, b)                                                                 \
	do {                                                                           \
		long long a_ = (long long)(a), b_ = (long long)(b);                    \
		if (a_ != b_) {                                                        \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, \
				__LINE__, #a, #b, a_, b_);                             \
			unit_.case_failed = 1;                                         \
		}                                                                      \
	} while (0)
#define CHECK_STR(a, b)                                                                \
	do {                                                                           \
		const char *a_ = (a), *b_ = (b);                                       \
		if (!a_ || !b_ || strcmp(a_, b_)) {                                    \
			fprintf(stderr, "%s:%d: %s == %s failed: '%s' != '%s'\n", __FILE__, \
				__LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
			unit_.case_failed = 1;                                         \
		}                                                                      \
	} while (0)

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                   \
	do {                                                        \
		unit_.case_failed = 0;                              \
		test_##name();                                      \
		if (unit_.case_failed) {                            \
			unit_.failed++;                             \
			fprintf(stderr, "FAIL %s\n", #name);        \
		} else {                                            \
			unit_.passed++;                             \
		}                                                   \
	} while (0)

static inline int unit_done(void)
{
	printf("%d passed, %d failed\n", unit_.passed, unit_.failed);
	return unit_.failed ? 1 : 0;
}

#endif
