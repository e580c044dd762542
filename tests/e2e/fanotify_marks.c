/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A fanotify group (FAN_NONBLOCK) with marks of every kind: inode marks on
 * a file (a mask and an old-style ignore mask that survives modification),
 * on a directory (FAN_EVENT_ON_CHILD) and, evictable, on another file; a
 * mount mark and a filesystem mark on "mnt" (a tmpfs the runner mounts,
 * so nothing else makes events there) and a FAN_MARK_IGNORE ignore mask on
 * mnt/quiet. After restart fdinfo shows the same flags and marks and the
 * queue is empty; then each mark delivers its events, with an fd for the
 * file: writing f gives FAN_MODIFY | FAN_CLOSE_WRITE, a child of d
 * FAN_CLOSE_WRITE, e FAN_MODIFY, mnt/loud FAN_OPEN | FAN_CLOSE_WRITE (the
 * mount) and, read, FAN_OPEN | FAN_ACCESS (the filesystem), mnt/quiet
 * nothing.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

static int fan;
static char cwd[PATH_MAX];

static void put(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		fail("write %s: %m", path);
	close(fd);
}

static void mark(unsigned flags, uint64_t mask, const char *path)
{
	if (fanotify_mark(fan, FAN_MARK_ADD | flags, mask, AT_FDCWD, path) < 0)
		fail("fanotify_mark(%#x, %#llx, %s): %m", flags, (unsigned long long)mask, path);
}

/* the "fanotify ..." lines of fdinfo */
static void marks(char *buf, size_t size)
{
	test_fdinfo_lines(fan, "fanotify ", buf, size);
}

/* Reads every queued event: all must be about name (NULL: none may come),
 * their masks together want. */
static void events(const char *name, uint32_t want, const char *what)
{
	char buf[4096] __attribute__((aligned(8))), path[PATH_MAX + 64], got[PATH_MAX];
	uint32_t mask = 0;
	ssize_t n;

	while ((n = read(fan, buf, sizeof(buf))) > 0) {
		const struct fanotify_event_metadata *m = (const void *)buf;
		for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
			snprintf(path, sizeof(path), "/proc/self/fd/%d", m->fd);
			ssize_t len = m->fd >= 0 ? readlink(path, got, sizeof(got) - 1) : -1;
			got[len > 0 ? len : 0] = '\0';
			if (m->fd >= 0)
				close(m->fd);
			snprintf(path, sizeof(path), "%s/%s", cwd, name ? name : "");
			expect(name && !strcmp(got, path), "%s: event %#llx on '%s' (fd %d)", what,
			       (unsigned long long)m->mask, got, m->fd);
			expect(m->pid == getpid(), "%s: event of pid %d", what, m->pid);
			mask |= (uint32_t)m->mask;
		}
	}
	expect(n < 0 && errno == EAGAIN, "%s: read: %zd %m", what, n);
	expect(mask == want, "%s: events %#x, want %#x", what, mask, want);
}

int main(void)
{
	char before[4096], after[4096], buf[256];
	struct stat st, up;

	if (stat("mnt", &st) < 0 || stat(".", &up) < 0 || st.st_dev == up.st_dev)
		skip("no tmpfs on mnt (the runner mounts one)");
	if (!getcwd(cwd, sizeof(cwd)))
		fail("getcwd: %m");
	if (mkdir("d", 0755) < 0)
		fail("mkdir: %m");
	put("f", "f");
	put("e", "e");
	put("mnt/quiet", "q");
	put("mnt/loud", "l");
	int efd = open("e", O_RDONLY); /* an evictable mark lasts while the inode is held */
	fan = fanotify_init(FAN_CLASS_NOTIF | FAN_NONBLOCK, O_RDONLY);
	if (efd < 0 || fan < 0)
		fail("fanotify_init: %m");
	mark(0, FAN_MODIFY | FAN_CLOSE_WRITE, "f");
	mark(FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY, FAN_OPEN, "f");
	mark(0, FAN_CLOSE_WRITE | FAN_EVENT_ON_CHILD, "d");
	mark(FAN_MARK_MOUNT, FAN_OPEN | FAN_CLOSE_WRITE, "mnt");
	mark(FAN_MARK_IGNORE_SURV, FAN_OPEN | FAN_CLOSE_WRITE, "mnt/quiet");
	mark(FAN_MARK_FILESYSTEM, FAN_ACCESS, "mnt");
	mark(FAN_MARK_EVICTABLE, FAN_MODIFY, "e");
	marks(before, sizeof(before));

	test_ready();
	test_wait();

	marks(after, sizeof(after));
	expect(!strcmp(before, after), "marks differ:\nbefore:\n%safter:\n%s", before, after);
	expect(fcntl(fan, F_GETFL) & O_NONBLOCK, "lost O_NONBLOCK");
	expect(read(fan, buf, sizeof(buf)) < 0 && errno == EAGAIN, "queue not empty after restart");
	put("f", "f");
	events("f", FAN_MODIFY | FAN_CLOSE_WRITE, "write f");
	put("d/child", "c");
	events("d/child", FAN_CLOSE_WRITE, "write d/child");
	put("e", "e");
	events("e", FAN_MODIFY, "write e");
	put("mnt/quiet", "q");
	events(NULL, 0, "write mnt/quiet");
	put("mnt/loud", "l");
	events("mnt/loud", FAN_OPEN | FAN_CLOSE_WRITE, "write mnt/loud");
	int fd = open("mnt/loud", O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) != 1)
		fail("read mnt/loud: %m");
	close(fd);
	events("mnt/loud", FAN_OPEN | FAN_ACCESS, "read mnt/loud");
	close(efd);
	pass();
}
