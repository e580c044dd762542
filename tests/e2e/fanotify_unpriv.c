/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An unprivileged fanotify group: made without CAP_SYS_ADMIN (dropped from
 * the effective set), reporting directory file handles and names
 * (FAN_REPORT_DFID_NAME), an inode mark on d for FAN_CREATE | FAN_DELETE;
 * a unix socket bound at d/sock is held too, which the restart makes again
 * (unlinked and bound: a delete and a create in d, after the group is
 * made). After restart fdinfo shows the same flags and mark and the queue
 * is empty (the restart's own events were read off); a child creating d/x
 * gives FAN_CREATE "x" with pid 0 (an unprivileged group hides other
 * processes' pids), the test itself creating and removing d/y gives
 * FAN_CREATE and FAN_DELETE "y" with its own pid.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int fan;

static void drop_sys_admin(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		fail("capget: %m");
	d[0].effective &= ~(1u << CAP_SYS_ADMIN);
	if (syscall(SYS_capset, &h, d) < 0)
		fail("capset: %m");
}

/* the "fanotify ..." lines of fdinfo */
static void marks(char *buf, size_t size)
{
	test_fdinfo_lines(fan, "fanotify ", buf, size);
}

/* The next event: its mask and pid, and the name its DFID_NAME record gives. */
static void one(uint32_t want, const char *name, pid_t pid, const char *what)
{
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n = read(fan, buf, sizeof(buf));
	const struct fanotify_event_metadata *m = (const void *)buf;
	if (n < (ssize_t)sizeof(*m) || !FAN_EVENT_OK(m, n)) {
		test_failf("%s: no event (%zd, %m)", what, n);
		return;
	}
	const char *got = "";
	const struct fanotify_event_info_fid *fid = (const void *)(m + 1);
	if (m->event_len > sizeof(*m) + sizeof(*fid) &&
	    fid->hdr.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
		const struct file_handle *fh = (const void *)fid->handle;
		got = (const char *)fh->f_handle + fh->handle_bytes;
	}
	expect(m->mask == want && m->pid == pid && !strcmp(got, name) && m->fd == FAN_NOFD,
	       "%s: event %#llx pid %d name '%s' fd %d, want %#x pid %d '%s'", what,
	       (unsigned long long)m->mask, m->pid, got, m->fd, want, pid, name);
	expect(n == m->event_len, "%s: %zd bytes, more than one event", what, n);
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		fail("create %s: %m", path);
	close(fd);
}

int main(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = "d/sock"};
	char before[4096], after[4096], buf[256];

	if (mkdir("d", 0755) < 0)
		fail("mkdir: %m");
	int sk = socket(AF_UNIX, SOCK_STREAM, 0);
	if (sk < 0 || bind(sk, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(sk, 1) < 0)
		fail("bind d/sock: %m");
	drop_sys_admin();
	fan = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_NONBLOCK, O_RDONLY);
	if (fan < 0)
		fail("fanotify_init: %m");
	if (fanotify_mark(fan, FAN_MARK_ADD, FAN_CREATE | FAN_DELETE, AT_FDCWD, "d") < 0)
		fail("fanotify_mark: %m");
	marks(before, sizeof(before));

	test_ready();
	test_wait();

	marks(after, sizeof(after));
	expect(!strcmp(before, after), "marks differ:\nbefore:\n%safter:\n%s", before, after);
	ssize_t n = read(fan, buf, sizeof(buf));
	expect(n < 0 && errno == EAGAIN, "queue not empty after restart (%zd bytes)", n);
	pid_t c = fork();
	if (c == 0) {
		touch("d/x");
		_exit(0);
	}
	int status;
	if (c < 0 || waitpid(c, &status, 0) != c || status != 0)
		fail("child: %m");
	one(FAN_CREATE, "x", 0, "a child's create");
	touch("d/y");
	one(FAN_CREATE, "y", getpid(), "own create");
	unlink("d/y");
	one(FAN_DELETE, "y", getpid(), "own delete");
	unlink("d/x"); /* for the next run of the same image (reuse mode) */
	one(FAN_DELETE, "x", getpid(), "own delete of x");
	pass();
}
