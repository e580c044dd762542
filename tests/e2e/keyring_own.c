/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Keyrings of a process's own, as a systemd service or a login has them:
 * it joins a new anonymous session keyring, links its user keyring into
 * it (as pam_keyinit does), adds two user keys to it (one of 3,000 random
 * bytes with NULs in them, one of 16 bytes given group 100 and narrower
 * permissions, like systemd's invocation_id), makes a process keyring with
 * a key of its own, then forks a child, which shares the session keyring.
 * After the restart both find the keys by their descriptions, with their
 * payloads, owners and permissions; the session keyring is a new
 * anonymous one ("_ses"), the same for parent and child, and still links
 * the user keyring; the child has no process keyring (not inherited by a
 * fork).
 */
#include "lib.h"

#include <errno.h>
#include <linux/keyctl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PERM_ID 0x3f010000u /* possessor all, user view */

static long keyctl(long op, long a2, long a3, long a4)
{
	return syscall(SYS_keyctl, op, a2, a3, a4, 0);
}

static long add_key(const char *desc, const void *data, size_t len, long ring)
{
	return syscall(SYS_add_key, "user", desc, data, len, ring);
}

static uint8_t big[3000];
static const char id16[16] = "0123456789abcdef";

/* key desc found from ring (search, as a program looks it up) with
 * payload want of len, group gid, permissions perm (0: not checked) */
static void check_key(const char *who, long ring, const char *desc, const void *want, size_t len,
		      unsigned gid, unsigned perm)
{
	long id = keyctl(KEYCTL_SEARCH, ring, (long)"user", (long)desc);
	if (id < 0) {
		test_failf("%s: key %s not found: %m", who, desc);
		return;
	}
	char buf[4096];
	long n = keyctl(KEYCTL_READ, id, (long)buf, sizeof(buf));
	if (n != (long)len || memcmp(buf, want, len) != 0)
		test_failf("%s: key %s: payload of %ld bytes, not the %zu it had", who, desc, n,
			   len);
	char d[512];
	n = keyctl(KEYCTL_DESCRIBE, id, (long)d, sizeof(d));
	unsigned u, g, p;
	if (n < 0 || sscanf(d, "user;%u;%u;%x;", &u, &g, &p) != 3)
		test_failf("%s: key %s: describe: %s", who, desc, n < 0 ? strerror(errno) : d);
	else if (u != 0 || g != gid || (perm && p != perm))
		test_failf("%s: key %s: %u:%u perm %08x, not 0:%u %08x", who, desc, u, g, p, gid,
			   perm);
}

/* the session keyring: anonymous, links the user keyring, holds both keys */
static long check_session(const char *who)
{
	long ses = keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0, 0);
	char d[256];
	if (ses < 0 || keyctl(KEYCTL_DESCRIBE, ses, (long)d, sizeof(d)) < 0)
		fail("%s: no session keyring: %m", who);
	const char *name = strrchr(d, ';');
	if (!name || strcmp(name + 1, "_ses") != 0)
		test_failf("%s: session keyring %s, not an anonymous one", who, d);
	long user = keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0, 0);
	int32_t ids[64];
	long n = keyctl(KEYCTL_READ, ses, (long)ids, sizeof(ids));
	bool linked = false;
	for (long i = 0; i < n / 4; i++)
		linked = linked || ids[i] == user;
	if (n != 3 * 4 || !linked)
		test_failf("%s: the session keyring holds %ld entries (%s the user keyring), "
			   "not 3 with it",
			   who, n / 4, linked ? "with" : "without");
	check_key(who, KEY_SPEC_SESSION_KEYRING, "ckpt-test:big", big, sizeof(big), 0, 0);
	check_key(who, KEY_SPEC_SESSION_KEYRING, "invocation_id", id16, sizeof(id16), 100, PERM_ID);
	return ses;
}

int main(void)
{
	test_fill_random(big, sizeof(big), 47);
	big[10] = big[2000] = 0;
	if (keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0) < 0)
		fail("KEYCTL_JOIN_SESSION_KEYRING: %m");
	if (keyctl(KEYCTL_LINK, KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING, 0) < 0)
		fail("KEYCTL_LINK: %m");
	if (add_key("ckpt-test:big", big, sizeof(big), KEY_SPEC_SESSION_KEYRING) < 0)
		fail("add_key: %m");
	long inv = add_key("invocation_id", id16, sizeof(id16), KEY_SPEC_SESSION_KEYRING);
	if (inv < 0 || keyctl(KEYCTL_CHOWN, inv, -1, 100) < 0 ||
	    keyctl(KEYCTL_SETPERM, inv, PERM_ID, 0) < 0)
		fail("invocation_id: %m");
	if (add_key("proc-key", "own", 3, KEY_SPEC_PROCESS_KEYRING) < 0)
		fail("add_key to the process keyring: %m");

	long *child_ses =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int *child_fails = (int *)(child_ses + 1);
	if (child_ses == MAP_FAILED)
		fail("mmap: %m");
	int go[2];
	if (pipe(go) < 0)
		fail("pipe: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		char c;
		close(go[1]);
		while (read(go[0], &c, 1) < 0)
			;
		*child_ses = check_session("child");
		if (keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 0, 0) >= 0)
			test_failf("child: has a process keyring");
		*child_fails = test_failures();
		_exit(0);
	}
	close(go[0]);

	test_ready();
	test_wait();

	long ses = check_session("parent");
	check_key("parent", KEY_SPEC_PROCESS_KEYRING, "proc-key", "own", 3, 0, 0);
	if (write(go[1], "g", 1) != 1)
		fail("write: %m");
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st))
		fail("the child did not exit");
	if (*child_fails)
		test_failf("the child saw %d failures", *child_fails);
	if (*child_ses != ses)
		test_failf("the child's session keyring is %ld, the parent's %ld", *child_ses, ses);
	pass();
}
