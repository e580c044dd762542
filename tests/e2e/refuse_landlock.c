/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a process sandboxed by Landlock (no file may be made or
 * written by path but beneath its test directory), or with argv[1]
 * "thread" only one of its threads; "caps": as root without CAP_SYS_PTRACE
 * (the reference ckpt compares it with has no capability, so the kernel's
 * capability check passes and Landlock's is what refuses the look).
 * Nothing shows a domain, and a restart would run the program unconfined;
 * ckpt finds it by a kcmp the task may not make of a process of its own
 * uid outside its domain. The runner expects the checkpoint to fail
 * naming the pid (or the thread); the sandbox still holds after it.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void sandbox(void)
{
	struct landlock_ruleset_attr attr = {
	    .handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG,
	};
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0) {
		if (errno == ENOSYS || errno == EOPNOTSUPP)
			skip("no Landlock here: %m");
		fail("landlock_create_ruleset: %m");
	}
	struct landlock_path_beneath_attr here = {
	    .allowed_access = attr.handled_access_fs,
	    .parent_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC),
	};
	if (here.parent_fd < 0 ||
	    syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &here, 0) < 0)
		fail("landlock_add_rule: %m");
	close(here.parent_fd);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail("PR_SET_NO_NEW_PRIVS: %m");
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		fail("landlock_restrict_self: %m");
	close(rs);
}

/* may this thread make a file outside its test directory? */
static bool can_make(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/ckpt-landlock-%d-%ld", getpid(), syscall(SYS_gettid));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	return fd >= 0;
}

static volatile int thread_state; /* 1 sandboxed, 2 asked to check, 3 could make */

static void *thread_main(void *arg)
{
	(void)arg;
	sandbox();
	thread_state = 1;
	while (thread_state != 2)
		usleep(1000);
	thread_state = can_make() ? 3 : 4;
	return NULL;
}

int main(int argc, char **argv)
{
	bool thread = argc > 1 && strcmp(argv[1], "thread") == 0;
	if (argc > 1 && strcmp(argv[1], "caps") == 0) {
		struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct d[2];
		if (getuid() != 0)
			skip("needs root");
		if (prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE) || syscall(SYS_capget, &h, d))
			fail("dropping CAP_SYS_PTRACE: %m");
		d[0].permitted &= ~(1u << CAP_SYS_PTRACE);
		d[0].effective &= ~(1u << CAP_SYS_PTRACE);
		if (syscall(SYS_capset, &h, d))
			fail("capset: %m");
	}
	pthread_t th;
	if (thread) {
		if (pthread_create(&th, NULL, thread_main, NULL) != 0)
			fail("pthread_create");
		while (thread_state != 1)
			usleep(1000);
	} else {
		sandbox();
	}

	test_ready();
	test_wait();

	if (thread) {
		thread_state = 2;
		pthread_join(th, NULL);
		expect(thread_state == 4, "the thread made a file: its sandbox is gone");
		expect(can_make(), "the main thread, never sandboxed, cannot make a file");
	} else {
		expect(!can_make(), "made a file: the sandbox is gone");
	}
	pass();
}
