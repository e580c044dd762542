/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "util/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"

const char *const cg_limit_names[] = {
    "cgroup.max.descendants", "cgroup.max.depth", "memory.max", "memory.high",
    "memory.swap.max",	      "cpu.max",	  "cpu.weight", "pids.max",
};
const size_t cg_nlimit_names = sizeof(cg_limit_names) / sizeof(cg_limit_names[0]);

int cg_mount(char *buf, size_t len)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char root[1024], point[1024];
		const char *dash = strstr(line, " - cgroup2 ");
		if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", root, point) != 2 ||
		    strcmp(root, "/") || strchr(point, '\\'))
			continue;
		if ((size_t)snprintf(buf, len, "%s", point) >= len)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

int cg_v2_path(const char *text, char *buf, size_t len)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "0::", 3))
			continue;
		p += 3;
		size_t n = strcspn(p, "\n");
		if (n == 0 || n >= len)
			return -EINVAL;
		memcpy(buf, p, n);
		buf[n] = '\0';
		return 0;
	}
	return -ENOENT;
}

bool cg_path_ok(const char *rel)
{
	if (rel[0] != '/' || strlen(rel) >= CG_PATH_MAX / 2)
		return false;
	if (!strcmp(rel, "/"))
		return true;
	for (const char *p = rel; *p == '/';) {
		size_t n = strcspn(p + 1, "/");
		if (n == 0 || (n == 1 && p[1] == '.') || (n == 2 && !strncmp(p + 1, "..", 2)))
			return false;
		p += 1 + n;
		if (*p && p[1] == '\0')
			return false; /* a trailing '/' */
	}
	return true;
}

bool cg_limit_name_ok(const char *name)
{
	for (size_t i = 0; i < cg_nlimit_names; i++)
		if (!strcmp(name, cg_limit_names[i]))
			return true;
	/* hugetlb.<size>.max, hugetlb.<size>.rsvd.max */
	if (strncmp(name, "hugetlb.", 8))
		return false;
	const char *p = name + 8;
	size_t n = strspn(p, "0123456789KMGB");
	return n > 0 && n < 8 && (!strcmp(p + n, ".max") || !strcmp(p + n, ".rsvd.max"));
}

static int file_path(char *buf, const char *mnt, const char *rel, const char *file)
{
	int n = snprintf(buf, CG_PATH_MAX, "%s%s/%s", mnt, strcmp(rel, "/") ? rel : "", file);
	return n >= CG_PATH_MAX ? -ENAMETOOLONG : 0;
}

int cg_read(const char *mnt, const char *rel, const char *file, char *buf, size_t len)
{
	char path[CG_PATH_MAX];
	int r = file_path(path, mnt, rel, file);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

int cg_write(const char *mnt, const char *rel, const char *file, const char *value)
{
	char path[CG_PATH_MAX];
	int r = file_path(path, mnt, rel, file);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(value);
	if (fd < 0 || write(fd, value, len) != (ssize_t)len)
		return -errno;
	return 0;
}

static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
	return false;
}

int cg_enable_for(const char *mnt, const char *rel, const char *limit, char *ret_where)
{
	char ctrl[32], anc[CG_PATH_MAX], list[512];
	size_t n = strcspn(limit, ".");
	if (n >= sizeof(ctrl))
		return -EINVAL;
	memcpy(ctrl, limit, n);
	ctrl[n] = '\0';
	if (!strcmp(ctrl, "cgroup") || !strcmp(rel, "/"))
		return 0;
	/* every ancestor of rel: "/", then each prefix up to its parent */
	snprintf(anc, sizeof(anc), "/");
	for (const char *p = rel;;) {
		const char *next = strchr(p + 1, '/');
		int r = cg_read(mnt, anc, "cgroup.subtree_control", list, sizeof(list));
		if (r >= 0 && !has_word(list, ctrl)) {
			char plus[40];
			snprintf(plus, sizeof(plus), "+%s", ctrl);
			r = cg_write(mnt, anc, "cgroup.subtree_control", plus);
		}
		if (r < 0) {
			snprintf(ret_where, CG_PATH_MAX, "%s", anc);
			return r;
		}
		if (!next)
			return 0;
		snprintf(anc, sizeof(anc), "%.*s", (int)(next - rel), rel);
		p = next;
	}
}

int cg_is_empty(const char *mnt, const char *rel)
{
	char buf[16];
	int r = cg_read(mnt, rel, "cgroup.procs", buf, sizeof(buf));
	return r < 0 ? r : buf[0] == '\0';
}
