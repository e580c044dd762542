/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The personality: PER_LINUX | ADDR_NO_RANDOMIZE | UNAME26. After restore
 * personality(0xffffffff) returns the same value, and UNAME26 is in
 * effect (uname() reports a "2.6.x" release).
 */
#include "lib.h"

#include <string.h>
#include <sys/personality.h>
#include <sys/utsname.h>

int main(void)
{
	const int want = PER_LINUX | ADDR_NO_RANDOMIZE | UNAME26;
	if (personality((unsigned long)want) < 0)
		fail("personality: %m");
	const int before = personality(0xffffffff);
	struct utsname u;
	uname(&u);
	if (before != want || strncmp(u.release, "2.6.", 4))
		fail("personality %#x, release %s before the checkpoint", before, u.release);

	test_ready();
	test_wait();

	int now = personality(0xffffffff);
	expect(now == before, "personality is %#x, was %#x", now, before);
	uname(&u);
	expect(!strncmp(u.release, "2.6.", 4), "UNAME26 not in effect: release %s", u.release);
	pass();
}
