/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: a plain process tree (not a container) with a task in a
 * namespace that is not ckpt's (or, for uts, not its root's). A subtree is
 * restarted in the restarting ckpt's namespaces (but for a new uts
 * namespace of its root's), where this one would be lost. argv[1] picks
 * the task and the namespace:
 *   uts     the root unshares CLONE_NEWUTS and sets its hostname (that
 *           alone is restored), then a child unshares CLONE_NEWUTS again;
 *   mnt     the root unshares CLONE_NEWNS (restored too), then a child
 *           unshares CLONE_NEWNS again;
 *   child   a child unshares CLONE_NEWIPC;
 *   thread  a second thread unshares CLONE_NEWUTS;
 *   pidc    the root unshares CLONE_NEWPID and forks nothing since;
 *   pidinit a child made by clone(CLONE_NEWPID), the init of a new pid
 *           namespace (as chromium's zygote): refused for the namespace it
 *           is in, not as a task that forked nothing since;
 *   user    a child unshares CLONE_NEWUSER;
 *   pivot   the root unshares CLONE_NEWNS and pivot_roots into a tmpfs of
 *           its own (the old root stays mounted under it, with the test
 *           directory its working directory still is in): a root
 *           directory that is not ckpt's, which only a container may have.
 * The runner expects the checkpoint to fail naming the task and the
 * namespace; the tree lives on, and after the wake each task is still in
 * its namespace (the root's hostname, the thread's or child's inode, the
 * root's next child pid 1 of a new pid namespace).
 */
#include "lib.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int ready[2], done[2];
static ino_t own; /* the thread's or child's namespace, as it made it */

static ino_t ns_ino(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		fail("stat %s: %m", path);
	return st.st_ino;
}

static void *thread_main(void *arg)
{
	(void)arg;
	if (unshare(CLONE_NEWUTS) < 0)
		fail("thread: unshare(CLONE_NEWUTS): %m");
	own = ns_ino("/proc/thread-self/ns/uts");
	if (write(ready[1], "t", 1) != 1)
		fail("thread: write: %m");
	char ch;
	if (read(done[0], &ch, 1) != 1)
		fail("thread: read: %m");
	expect(ns_ino("/proc/thread-self/ns/uts") == own, "the thread left its uts namespace");
	return NULL;
}

/* the child: in its own namespace until the root's byte on done; its exit
 * status says whether it still was */
static void child_main(int flag, const char *name)
{
	char path[64], ch;
	/* the root's death (a failed test) ends the read below */
	close(done[1]);
	if (unshare(flag) < 0)
		_exit(2);
	snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	ino_t mine = ns_ino(path);
	if (write(ready[1], "c", 1) != 1 || read(done[0], &ch, 1) != 1)
		_exit(3);
	_exit(ns_ino(path) == mine ? 0 : 4);
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "uts";
	pthread_t th;
	pid_t child = 0;
	char ch;
	if (pipe(ready) || pipe(done))
		fail("pipe: %m");
	if (!strcmp(how, "uts")) {
		if (unshare(CLONE_NEWUTS) < 0 || sethostname("refused", 7) < 0)
			fail("unshare(CLONE_NEWUTS), sethostname: %m");
		child = fork();
		if (child < 0)
			fail("fork: %m");
		if (child == 0)
			child_main(CLONE_NEWUTS, "uts");
		if (read(ready[0], &ch, 1) != 1)
			fail("the child did not unshare");
	} else if (!strcmp(how, "mnt")) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			fail("unshare(CLONE_NEWNS), mount: %m");
		child = fork();
		if (child < 0)
			fail("fork: %m");
		if (child == 0)
			child_main(CLONE_NEWNS, "mnt");
		if (read(ready[0], &ch, 1) != 1)
			fail("the child did not unshare");
	} else if (!strcmp(how, "pivot")) {
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			fail("unshare(CLONE_NEWNS), mount: %m");
		if (mkdir("newroot", 0755) < 0 || mount("pivot", "newroot", "tmpfs", 0, NULL) < 0 ||
		    mkdir("newroot/old", 0755) < 0 ||
		    syscall(SYS_pivot_root, "newroot", "newroot/old") < 0)
			fail("tmpfs and pivot_root: %m");
		struct stat st;
		expect(stat("/old", &st) == 0, "no /old after pivot_root: %m");
		/* the test directory's path names nothing from the new root:
		 * "ready" goes where the working directory still is */
		unsetenv("CKPT_TEST_DIR");
	} else if (!strcmp(how, "pidc")) {
		if (unshare(CLONE_NEWPID) < 0)
			fail("unshare(CLONE_NEWPID): %m");
	} else if (!strcmp(how, "pidinit")) {
		/* as chromium makes its zygote: clone(CLONE_NEWPID), the
		 * root's own children's namespace stays ckpt's */
		child = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
		if (child < 0)
			fail("fork: %m");
		if (child == 0) {
			close(done[1]); /* the root's death ends the read */
			if (write(ready[1], "c", 1) != 1 || read(done[0], &ch, 1) != 1)
				_exit(3);
			_exit(getpid() == 1 ? 0 : 4);
		}
		if (read(ready[0], &ch, 1) != 1)
			fail("the child did not start");
	} else if (!strcmp(how, "thread")) {
		if (pthread_create(&th, NULL, thread_main, NULL))
			fail("pthread_create");
		if (read(ready[0], &ch, 1) != 1)
			fail("the thread did not unshare");
	} else if (!strcmp(how, "child") || !strcmp(how, "user")) {
		child = fork();
		if (child < 0)
			fail("fork: %m");
		if (child == 0)
			child_main(how[0] == 'c' ? CLONE_NEWIPC : CLONE_NEWUSER,
				   how[0] == 'c' ? "ipc" : "user");
		if (read(ready[0], &ch, 1) != 1)
			fail("the child did not unshare");
	} else {
		fail("unknown case %s", how);
	}

	test_ready();
	test_wait();

	if (!strcmp(how, "uts")) {
		char name[64] = "";
		gethostname(name, sizeof(name));
		expect(!strcmp(name, "refused"), "hostname is %s, not refused", name);
		int st;
		if (write(done[1], "x", 1) != 1 || waitpid(child, &st, 0) != child)
			fail("child: write or wait: %m");
		expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	} else if (!strcmp(how, "pivot")) {
		struct stat st;
		expect(stat("/old", &st) == 0 && S_ISDIR(st.st_mode),
		       "/ is not the tmpfs it pivoted into (no /old)");
	} else if (!strcmp(how, "pidc")) {
		/* a child is the init of the new namespace */
		int st;
		pid_t c = fork();
		if (c == 0)
			_exit(getpid() == 1 ? 0 : 5);
		expect(c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st),
		       "the child is not pid 1 of a new pid namespace (status %#x)", st);
	} else if (!strcmp(how, "thread")) {
		if (write(done[1], "x", 1) != 1 || pthread_join(th, NULL))
			fail("thread: write or join: %m");
	} else {
		int st;
		if (write(done[1], "x", 1) != 1 || waitpid(child, &st, 0) != child)
			fail("child: write or wait: %m");
		expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	}
	pass();
}
