/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Securebits with a lock, kept by a process that has no CAP_SETPCAP left.
 * Starting as root the program sets SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
 * SECBIT_KEEP_CAPS, leaves uid 0 (setresuid 1000), keeps permitted
 * {CHOWN, NET_BIND_SERVICE}, effective {CHOWN}, inheritable and ambient
 * {NET_BIND_SERVICE}, then clears keepcaps (PR_SET_KEEPCAPS 0, which needs
 * no privilege). After restore by root: the same securebits (the lock
 * included: NOROOT cannot be cleared), keepcaps off, the same sets.
 */
#include "lib.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BIT(c)	  (1u << (c))
#define WANT_BITS (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED)

static void check(const char *when)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	uid_t r, e, s;

	getresuid(&r, &e, &s);
	expect(r == 1000 && e == 1000 && s == 1000, "%s: uids %u/%u/%u", when, r, e, s);
	expect(prctl(PR_GET_SECUREBITS) == WANT_BITS, "%s: securebits %#x, want %#x", when,
	       prctl(PR_GET_SECUREBITS), WANT_BITS);
	expect(prctl(PR_GET_KEEPCAPS) == 0, "%s: keepcaps is set", when);
	if (syscall(SYS_capget, &h, d))
		fail("capget: %m");
	expect(d[0].permitted == (BIT(CAP_CHOWN) | BIT(CAP_NET_BIND_SERVICE)) &&
		   d[0].effective == BIT(CAP_CHOWN) &&
		   d[0].inheritable == BIT(CAP_NET_BIND_SERVICE) && !d[1].permitted &&
		   !d[1].effective && !d[1].inheritable,
	       "%s: caps prm %#x eff %#x inh %#x", when, d[0].permitted, d[0].effective,
	       d[0].inheritable);
	expect(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_NET_BIND_SERVICE, 0, 0) == 1,
	       "%s: NET_BIND_SERVICE is not ambient", when);
	/* the lock holds: even the attempt is refused */
	expect(prctl(PR_SET_SECUREBITS, 0) == -1, "%s: securebits could be cleared", when);
}

int main(void)
{
	if (getuid() != 0)
		skip("needs root");
	const char *dir = getenv("CKPT_TEST_DIR");
	if (dir && chmod(dir, 0777))
		fail("chmod: %m");
	if (prctl(PR_SET_SECUREBITS, WANT_BITS | SECBIT_KEEP_CAPS))
		fail("PR_SET_SECUREBITS: %m");
	if (setresuid(1000, 1000, 1000))
		fail("setresuid: %m");
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	d[0].permitted = BIT(CAP_CHOWN) | BIT(CAP_NET_BIND_SERVICE);
	d[0].effective = BIT(CAP_CHOWN);
	d[0].inheritable = BIT(CAP_NET_BIND_SERVICE);
	if (syscall(SYS_capset, &h, d))
		fail("capset: %m");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0))
		fail("ambient raise: %m");
	if (prctl(PR_SET_KEEPCAPS, 0))
		fail("PR_SET_KEEPCAPS 0: %m");
	check("before");
	if (test_failures())
		fail("not as set before the checkpoint");

	test_ready();
	test_wait();

	check("after");
	pass();
}
