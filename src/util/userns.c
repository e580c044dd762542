/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "util/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_file(pid_t pid, const char *name, const char *text, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
	int e = errno;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -e;
}

static int write_map(pid_t pid, const char *name, const char *saved, unsigned self)
{
	char line[520];
	unsigned inner, outer, count;
	int n;

	if (geteuid() == 0)
		n = snprintf(line, sizeof(line), "%s", saved);
	else if (sscanf(saved, "%u %u %u %n", &inner, &outer, &count, &n) == 3 && count == 1 &&
		 !saved[n])
		n = snprintf(line, sizeof(line), "%u %u 1", inner, self);
	else
		return -EDOM;
	return write_file(pid, name, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

int userns_read_map(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	return 0;
}

int64_t userns_map_id(const char *map, uint32_t id, bool in)
{
	for (const char *p = map; *p;) {
		unsigned long ids[2], count;
		int used;
		if (sscanf(p, " %lu %lu %lu%n", &ids[0], &ids[1], &count, &used) != 3)
			break;
		unsigned long from = ids[!in], to = ids[in];
		if (id >= from && id - from < count)
			return (int64_t)(to + (id - from));
		p += used;
	}
	return -1;
}

int userns_write_maps(pid_t pid, const char *uid_map, const char *gid_map, const char **ret_what)
{
	int r = 0;
	*ret_what = "setgroups";
	if (geteuid() != 0 && (r = write_file(pid, "setgroups", "deny", 4)) < 0)
		return r;
	*ret_what = "uid_map";
	if ((r = write_map(pid, "uid_map", uid_map, geteuid())) < 0)
		return r;
	*ret_what = "gid_map";
	return write_map(pid, "gid_map", gid_map, getegid());
}

int userns_map_self(pid_t pid, const char **ret_what)
{
	char u[32], g[32];
	snprintf(u, sizeof(u), "%u %u 1", (unsigned)geteuid(), (unsigned)geteuid());
	snprintf(g, sizeof(g), "%u %u 1", (unsigned)getegid(), (unsigned)getegid());
	return userns_write_maps(pid, u, g, ret_what);
}

int userns_caps(uint64_t *effective, uint64_t *permitted)
{
	struct {
		uint32_t version;
		int pid;
	} hdr = { 0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0 };
	struct {
		uint32_t effective, permitted, inheritable;
	} data[2] = { 0 };
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	*effective = data[0].effective | (uint64_t)data[1].effective << 32;
	*permitted = data[0].permitted | (uint64_t)data[1].permitted << 32;
	return 0;
}

int userns_cap_effective(int cap)
{
	uint64_t eff, prm;
	if (cap < 0 || cap >= 64)
		return -EINVAL;
	int r = userns_caps(&eff, &prm);
	return r < 0 ? r : (int)(eff >> cap & 1);
}

bool userns_may_mount(void)
{
	return userns_cap_effective(21 /* CAP_SYS_ADMIN */) > 0;
}

bool userns_can_make(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0 ? 0 : 1);
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
