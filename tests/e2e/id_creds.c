/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Credentials. Starting as root the program sets groups {10, 20},
 * gids 1001/1002/1003 (real/effective/saved), drops CAP_SYS_MODULE from the
 * bounding set, keeps capabilities across setresuid(1001, 1002, 1003), then
 * sets permitted {CHOWN, KILL, NET_BIND_SERVICE}, effective {CHOWN, KILL},
 * inheritable {NET_BIND_SERVICE} and raises NET_BIND_SERVICE in the ambient
 * set. After restore all of it is the same: getresuid/getresgid, fsuid,
 * fsgid, getgroups, capget, every bounding and ambient bit, keepcaps,
 * securebits, dumpable, and the Uid/Gid/Groups/Cap* lines of
 * /proc/self/status. With argv[1] "root" the uids stay 0 (a root daemon
 * with reduced capabilities, CAP_SYS_PTRACE dropped from the bounding
 * set too: ckpt's Landlock probe once took it for a sandboxed process).
 */
#include "lib.h"

#include <grp.h>
#include <stdbool.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BIT(c) (1u << (c))

struct creds {
	uid_t r, e, s, fs;
	gid_t rg, eg, sg, fsg;
	int ngroups;
	gid_t groups[64];
	struct __user_cap_data_struct cap[2];
	uint64_t bounding, ambient;
	int keepcaps, securebits, dumpable;
	char status[8][256];
};

static const char *const status_names[] = {"Uid",    "Gid",    "Groups", "CapInh",
					   "CapPrm", "CapEff", "CapBnd", "CapAmb"};

static void take(struct creds *c)
{
	memset(c, 0, sizeof(*c));
	getresuid(&c->r, &c->e, &c->s);
	getresgid(&c->rg, &c->eg, &c->sg);
	c->fs = (uid_t)setfsuid((uid_t)-1);
	c->fsg = (gid_t)setfsgid((gid_t)-1);
	c->ngroups = getgroups(64, c->groups);
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	if (syscall(SYS_capget, &h, c->cap))
		fail("capget: %m");
	char buf[16];
	int last = 40;
	if (test_read_file("/proc/sys/kernel/cap_last_cap", buf, sizeof(buf)) > 0)
		last = atoi(buf);
	for (int i = 0; i <= last; i++) {
		if (prctl(PR_CAPBSET_READ, i) == 1)
			c->bounding |= 1ull << i;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, i, 0, 0) == 1)
			c->ambient |= 1ull << i;
	}
	c->keepcaps = prctl(PR_GET_KEEPCAPS);
	c->securebits = prctl(PR_GET_SECUREBITS);
	c->dumpable = prctl(PR_GET_DUMPABLE);
	for (int i = 0; i < 8; i++)
		test_status_field(status_names[i], c->status[i], sizeof(c->status[i]));
}

int main(int argc, char **argv)
{
	bool root = argc > 1 && strcmp(argv[1], "root") == 0;
	if (getuid() != 0)
		skip("needs root");
	/* "ready" is created after the ids change: let uid 1002 write it */
	const char *dir = getenv("CKPT_TEST_DIR");
	if (dir && chmod(dir, 0777))
		fail("chmod: %m");
	const gid_t groups[] = {10, 20};
	if (setgroups(2, groups) || setresgid(1001, 1002, 1003))
		fail("setgroups/setresgid: %m");
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_MODULE) ||
	    (root && prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE)))
		fail("PR_CAPBSET_DROP: %m");
	if (prctl(PR_SET_KEEPCAPS, 1) || (!root && setresuid(1001, 1002, 1003)))
		fail("keepcaps/setresuid: %m");
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	d[0].permitted = BIT(CAP_CHOWN) | BIT(CAP_KILL) | BIT(CAP_NET_BIND_SERVICE);
	d[0].effective = BIT(CAP_CHOWN) | BIT(CAP_KILL);
	d[0].inheritable = BIT(CAP_NET_BIND_SERVICE);
	if (syscall(SYS_capset, &h, d))
		fail("capset: %m");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0))
		fail("ambient raise: %m");
	static struct creds before, after;
	take(&before);
	uid_t euid = root ? 0 : 1002;
	if (before.e != euid || before.fs != euid || before.ngroups != 2 ||
	    (root && (before.bounding & (1ull << CAP_SYS_PTRACE))) ||
	    before.cap[0].effective != (BIT(CAP_CHOWN) | BIT(CAP_KILL)) ||
	    (before.bounding & (1ull << CAP_SYS_MODULE)) ||
	    !(before.ambient & (1ull << CAP_NET_BIND_SERVICE)))
		fail("credentials not as set before the checkpoint");

	test_ready();
	test_wait();

	take(&after);
	expect(after.r == before.r && after.e == before.e && after.s == before.s,
	       "uids %u/%u/%u, were %u/%u/%u", after.r, after.e, after.s, before.r, before.e,
	       before.s);
	expect(after.rg == before.rg && after.eg == before.eg && after.sg == before.sg,
	       "gids %u/%u/%u, were %u/%u/%u", after.rg, after.eg, after.sg, before.rg,
	       before.eg, before.sg);
	expect(after.fs == before.fs && after.fsg == before.fsg, "fsuid/fsgid %u/%u, were %u/%u",
	       after.fs, after.fsg, before.fs, before.fsg);
	expect(after.ngroups == before.ngroups &&
		       !memcmp(after.groups, before.groups, sizeof(gid_t) * (size_t)before.ngroups),
	       "supplementary groups differ (%d groups, were %d)", after.ngroups, before.ngroups);
	for (int i = 0; i < 2; i++)
		expect(after.cap[i].effective == before.cap[i].effective &&
			       after.cap[i].permitted == before.cap[i].permitted &&
			       after.cap[i].inheritable == before.cap[i].inheritable,
		       "capabilities word %d: eff %#x prm %#x inh %#x, were %#x %#x %#x", i,
		       after.cap[i].effective, after.cap[i].permitted, after.cap[i].inheritable,
		       before.cap[i].effective, before.cap[i].permitted, before.cap[i].inheritable);
	expect(after.bounding == before.bounding, "bounding set %#llx, was %#llx",
	       (unsigned long long)after.bounding, (unsigned long long)before.bounding);
	expect(after.ambient == before.ambient, "ambient set %#llx, was %#llx",
	       (unsigned long long)after.ambient, (unsigned long long)before.ambient);
	expect(after.keepcaps == before.keepcaps, "keepcaps %d, was %d", after.keepcaps,
	       before.keepcaps);
	expect(after.securebits == before.securebits, "securebits %#x, was %#x", after.securebits,
	       before.securebits);
	expect(after.dumpable == before.dumpable, "dumpable %d, was %d", after.dumpable,
	       before.dumpable);
	for (int i = 0; i < 8; i++)
		expect(!strcmp(after.status[i], before.status[i]), "%s: '%s', was '%s'",
		       status_names[i], after.status[i], before.status[i]);
	pass();
}
