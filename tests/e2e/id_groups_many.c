/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * 300 supplementary groups, as a user of a large directory has them (a
 * login through sssd or winbind): /proc/PID/status lists all of them on
 * one line, where ckpt's parser keeps 256; the other 44 were lost without
 * a word. After restore getgroups() gives the same 300, in their order.
 */
#include "lib.h"

#include <grp.h>
#include <string.h>
#include <unistd.h>

#define N 300

static gid_t want[N];

static void check(const char *when)
{
	gid_t got[N + 8];
	int n = getgroups(N + 8, got);
	expect(n == N, "%s: %d supplementary groups, not %d", when, n, N);
	for (int i = 0; i < N && i < n; i++)
		if (got[i] != want[i]) {
			test_failf("%s: group %d is %u, not %u", when, i, got[i], want[i]);
			break;
		}
}

int main(void)
{
	for (int i = 0; i < N; i++)
		want[i] = (gid_t)(20000 + 7 * i);
	if (setgroups(N, want))
		skip("setgroups of %d groups: %m", N);
	check("before the checkpoint");
	if (test_failures())
		fail("the groups are not as set before the checkpoint");

	test_ready();
	test_wait();

	check("after restore");
	pass();
}
