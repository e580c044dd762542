/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inotify watches on a directory and on a file in it, with wds 2 and 4
 * (1 and 3 were removed, their IN_IGNORED read), IN_NONBLOCK. After
 * restart fdinfo lists the same wds and masks; creating a file in the
 * directory gives IN_CREATE with the directory's wd and the name; writing
 * the file gives IN_MODIFY with its wd (the directory is left as it was, so
 * the image can be restored again); the next watch added gets wd 5.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_MASK  (IN_CREATE | IN_DELETE | IN_ONLYDIR)
#define FILE_MASK (IN_MODIFY | IN_CLOSE_WRITE | IN_EXCL_UNLINK)

static int in;

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		fail("create %s: %m", path);
	close(fd);
}

/* fdinfo's "wd:.. ino:.. sdev:.. mask:.." of every watch, in order */
static void watches(char *buf, size_t size)
{
	char path[64], text[8192];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", in);
	if (test_read_file(path, text, sizeof(text)) < 0)
		fail("read %s: %m", path);
	buf[0] = '\0';
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
		char *end = strstr(l, " ignored_mask");
		if (!strncmp(l, "inotify ", 8) && end) {
			*end = '\0';
			snprintf(buf + strlen(buf), size - strlen(buf), "%s;", l);
		}
	}
}

static void read_one(int wd, uint32_t mask, const char *name, const char *what)
{
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n = -1;
	for (int i = 0; i < 100 && (n = read(in, buf, sizeof(buf))) < 0 && errno == EAGAIN; i++)
		usleep(10000);
	const struct inotify_event *e = (const void *)buf;
	if (n < (ssize_t)sizeof(*e)) {
		test_failf("%s: no event (%zd, %m)", what, n);
		return;
	}
	expect(e->wd == wd && (e->mask & mask) == mask && n == (ssize_t)(sizeof(*e) + e->len),
	       "%s: event wd %d mask %#x (%zd bytes), want wd %d mask %#x", what, e->wd, e->mask, n,
	       wd, mask);
	expect(!name || (e->len && !strcmp(e->name, name)), "%s: name '%s', want '%s'", what,
	       e->len ? e->name : "", name ? name : "");
}

int main(void)
{
	char before[1024], after[1024], buf[4096];

	if (mkdir("d", 0755) < 0)
		fail("mkdir: %m");
	touch("d/f");
	touch("g");
	in = inotify_init1(IN_NONBLOCK);
	if (in < 0)
		fail("inotify_init1: %m");
	int g1 = inotify_add_watch(in, "g", IN_ACCESS);
	int wd_dir = inotify_add_watch(in, "d", DIR_MASK);
	inotify_rm_watch(in, g1);
	int g3 = inotify_add_watch(in, "g", IN_OPEN);
	inotify_rm_watch(in, g3);
	int wd_file = inotify_add_watch(in, "d/f", FILE_MASK);
	if (g1 != 1 || wd_dir != 2 || g3 != 3 || wd_file != 4)
		fail("wds %d %d %d %d, want 1 2 3 4", g1, wd_dir, g3, wd_file);
	while (read(in, buf, sizeof(buf)) > 0) /* the IN_IGNORED events */
		;
	watches(before, sizeof(before));

	test_ready();
	test_wait();

	watches(after, sizeof(after));
	expect(!strcmp(before, after), "watches differ:\n  before %s\n  after  %s", before, after);
	expect(fcntl(in, F_GETFL) & O_NONBLOCK, "lost IN_NONBLOCK");
	expect(read(in, buf, sizeof(buf)) < 0 && errno == EAGAIN, "queue not empty after restart");
	touch("d/new");
	read_one(wd_dir, IN_CREATE, "new", "create in the directory");
	unlink("d/new"); /* for the next run of the same image (reuse mode) */
	read_one(wd_dir, IN_DELETE, "new", "delete in the directory");
	int fd = open("d/f", O_WRONLY);
	if (fd < 0 || write(fd, "x", 1) != 1)
		fail("write d/f: %m");
	read_one(wd_file, IN_MODIFY, NULL, "write to the file");
	close(fd);
	read_one(wd_file, IN_CLOSE_WRITE, NULL, "close of the file");
	int next = inotify_add_watch(in, "g", IN_ACCESS);
	expect(next == 5, "next watch got wd %d, want 5", next);
	expect(inotify_rm_watch(in, wd_dir) == 0, "inotify_rm_watch(%d): %m", wd_dir);
	read_one(wd_dir, IN_IGNORED, NULL, "removal of the directory watch");
	pass();
}
