/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A process in a cgroup the runner made (and moved it into after "ready"):
 *   cg_task PATH DIR [FILE=VALUE...] [thread=TPATH]
 * After restart, from inside: /proc/self/cgroup names PATH (as this
 * process's cgroup namespace shows it), and each limit FILE in the cgroup's
 * directory DIR (as the runner sees it) reads VALUE. With thread=TPATH a
 * second thread is started (its tid in the file "tid" before "ready", for
 * the runner to move it into a threaded cgroup), and after restart its
 * /proc/self/task/TID/cgroup names TPATH.
 */
#include "lib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile pid_t thread_tid;

static void *thread_main(void *arg)
{
	(void)arg;
	thread_tid = gettid();
	for (;;)
		pause();
	return NULL;
}

static void start_thread(void)
{
	pthread_t th;
	char path[4200], text[32];
	if (pthread_create(&th, NULL, thread_main, NULL))
		fail("pthread_create");
	while (!thread_tid)
		usleep(1000);
	snprintf(path, sizeof(path), "%s/tid", getenv("CKPT_TEST_DIR"));
	FILE *f = fopen(path, "w");
	int n = snprintf(text, sizeof(text), "%d\n", (int)thread_tid);
	if (!f || fwrite(text, 1, (size_t)n, f) != (size_t)n || fclose(f))
		fail("write %s: %m", path);
}

int main(int argc, char **argv)
{
	const char *tpath = NULL;
	if (argc < 3)
		fail("usage: cg_task PATH DIR [FILE=VALUE...] [thread=TPATH]");
	if (!strncmp(argv[argc - 1], "thread=", 7)) {
		tpath = argv[--argc] + 7;
		start_thread();
	}
	test_ready();
	test_wait();

	char buf[4096], want[4200];
	if (test_read_file("/proc/self/cgroup", buf, sizeof(buf)) < 0)
		fail("read /proc/self/cgroup: %m");
	snprintf(want, sizeof(want), "0::%s\n", argv[1]);
	const char *line = strstr(buf, "0::");
	expect(line && !strncmp(line, want, strlen(want)), "/proc/self/cgroup: %s, want %s", buf,
	       want);
	for (int i = 3; i < argc; i++) {
		char name[256], path[4600], value[256] = "";
		const char *eq = strchr(argv[i], '=');
		if (!eq)
			fail("bad limit %s", argv[i]);
		snprintf(name, sizeof(name), "%.*s", (int)(eq - argv[i]), argv[i]);
		snprintf(path, sizeof(path), "%s/%s", argv[2], name);
		ssize_t n = test_read_file(path, value, sizeof(value));
		if (n > 0 && value[n - 1] == '\n')
			value[n - 1] = '\0';
		expect(n > 0 && !strcmp(value, eq + 1), "%s is '%s', want '%s'", name, value,
		       eq + 1);
	}
	if (tpath) {
		char tfile[64];
		snprintf(tfile, sizeof(tfile), "/proc/self/task/%d/cgroup", (int)thread_tid);
		snprintf(want, sizeof(want), "0::%s\n", tpath);
		if (test_read_file(tfile, buf, sizeof(buf)) < 0)
			fail("read %s: %m", tfile);
		line = strstr(buf, "0::");
		expect(line && !strncmp(line, want, strlen(want)), "thread %d: %s, want %s",
		       (int)thread_tid, buf, want);
	}
	pass();
}
