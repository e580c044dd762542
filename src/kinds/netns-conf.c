/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A network namespace's sysctls (netns.c tells the whole kind).
 *
 * Checkpoint: ckpt's thread, in the tree's namespace, reads every file
 * under /proc/sys/net that can be read and written; meanwhile a thread of
 * its own enters a fresh namespace of its own making and reads the same
 * files there (if no thread can be made, ckpt's thread does it after). A
 * namespace other than the first shows only the sysctls that are its own
 * (the host-wide ones are registered in the first namespace alone), so
 * this is the namespace's whole configuration, and what differs from a
 * fresh namespace's value is saved:
 * - a file outside a device's directory (net.ipv4.tcp_*, net.core.somaxconn,
 *   ipv4/conf/all, ipv4/conf/default...): when its value differs from the
 *   fresh namespace's;
 * - a device's (ipv4/conf/DEV, ipv6/conf/DEV, ipv4/neigh/DEV,
 *   ipv6/neigh/DEV): loopback's when it differs from a fresh loopback's;
 *   another link's when it differs from a fresh namespace's "default" or
 *   from this namespace's "default" (a link made at restart takes the
 *   restored "default", as it did when it was made); the neighbour tables
 *   have a "default" in the first namespace only, and a link takes the
 *   host-wide values, so there the fresh loopback's is the one compared.
 * Names are paths under /proc/sys ("net/ipv4/conf/eth0/forwarding": a
 * link's name may hold a dot).
 *
 * Restart: ckpt's thread is in the new namespace, which again shows its
 * own sysctls only, so a file of the host's cannot be named. The files
 * outside links' directories, "all" and "default" included, are written
 * before the links are made; the links' own after their addresses and
 * routes. Writes that the kernel refuses because of another value not
 * written yet (ip_local_port_range against ip_unprivileged_port_start)
 * are tried again once the others are in; a pass with no progress fails
 * the restart, naming the sysctl.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/netns.h"
#include "netns.pb-c.h"
#include "util/cleanup.h"

#define SYSCTL_NAME_MAX 160
#define SYSCTL_VALUE_MAX 1024

struct kv {
	char *name, *value;
};

struct kvs {
	struct kv *v;
	size_t n, cap;
	struct kv **by_name; /* v sorted by name, for kvs_get (kvs_index) */
};

static void kvs_free(struct kvs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].name);
		free(s->v[i].value);
	}
	free(s->v);
	free(s->by_name);
	*s = (struct kvs){ 0 };
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(struct kv *const *)a)->name, (*(struct kv *const *)b)->name);
}

/* s->by_name made, once s is complete (700 sysctls compared with a
 * linear search took a millisecond of the frozen time) */
static int kvs_index(struct kvs *s)
{
	s->by_name = malloc((s->n ? s->n : 1) * sizeof(*s->by_name));
	if (!s->by_name)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++)
		s->by_name[i] = &s->v[i];
	qsort(s->by_name, s->n, sizeof(*s->by_name), by_name);
	return 0;
}

static int kvs_add(struct kvs *s, const char *name, const char *value)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct kv *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	char *n = strdup(name), *val = strdup(value);
	if (!n || !val) {
		free(n);
		free(val);
		return -ENOMEM;
	}
	s->v[s->n++] = (struct kv){ n, val };
	return 0;
}

static const char *kvs_get(const struct kvs *s, const char *name)
{
	struct kv key = { .name = (char *)name }, *k = &key;
	struct kv **f = bsearch(&k, s->by_name, s->n, sizeof(*s->by_name), by_name);
	return f ? (*f)->value : NULL;
}

/* A file's value without its last newline; -errno if it cannot be read. */
static int read_value(int dirfd, const char *file, char *buf, size_t len)
{
	_cleanup_close_ int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t got = fd < 0 ? -1 : read(fd, buf, len - 1);
	if (got < 0)
		return -errno;
	if ((size_t)got == len - 1)
		return -EFBIG;
	buf[got] = 0;
	if (got && buf[got - 1] == '\n')
		buf[got - 1] = 0;
	return 0;
}

/* Every readable and writable file under dir (path: its name under
 * /proc/sys), appended to s. */
static int walk(int dir_fd, const char *path, int depth, struct kvs *s)
{
	_cleanup_close_ int fd = dir_fd;
	DIR *d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -1;
	int r = 0;
	struct dirent *de;
	while (r >= 0 && (de = readdir(d))) {
		char name[SYSCTL_NAME_MAX], value[SYSCTL_VALUE_MAX];
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t)snprintf(name, sizeof(name), "%s/%s", path, de->d_name) >= sizeof(name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth < 6) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (sub >= 0)
				r = walk(sub, name, depth + 1, s);
		} else if (S_ISREG(st.st_mode) && (st.st_mode & 0600) == 0600 &&
			   read_value(dirfd(d), de->d_name, value, sizeof(value)) == 0) {
			r = kvs_add(s, name, value);
		}
	}
	closedir(d);
	return r;
}

static int walk_net(struct kvs *s)
{
	int fd = open("/proc/sys/net", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : walk(fd, "net", 0, s);
}

/* "net/ipv4/conf/DEV/x" and the like: DEV's offset and length, else false. */
static bool device_part(const char *name, size_t *off, size_t *len)
{
	static const char *const dirs[] = { "net/ipv4/conf/", "net/ipv6/conf/", "net/ipv4/neigh/",
					     "net/ipv6/neigh/", "net/mpls/conf/" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
		size_t l = strlen(dirs[i]);
		const char *slash = strchr(name + l, '/');
		if (!strncmp(name, dirs[i], l) && slash) {
			*off = l;
			*len = (size_t)(slash - name - l);
			return true;
		}
	}
	return false;
}

/* What "name" would be in DEV's place: "net/ipv4/conf/default/x". */
static void with_device(const char *name, size_t off, size_t len, const char *dev, char *buf,
			size_t buflen)
{
	snprintf(buf, buflen, "%.*s%s%s", (int)off, name, dev, name + off + len);
}

/* Should the value of name be saved? (see the top of the file) */
static bool differs(const struct kvs *ns, const struct kvs *fresh, const struct kv *kv)
{
	size_t off, len;
	const char *f = kvs_get(fresh, kv->name);
	if (!device_part(kv->name, &off, &len) ||
	    (len == 3 && !strncmp(kv->name + off, "all", 3)) ||
	    (len == 7 && !strncmp(kv->name + off, "default", 7)) ||
	    (len == 2 && !strncmp(kv->name + off, "lo", 2)))
		return !f || strcmp(f, kv->value);
	char def[SYSCTL_NAME_MAX], lo[SYSCTL_NAME_MAX];
	with_device(kv->name, off, len, "default", def, sizeof(def));
	with_device(kv->name, off, len, "lo", lo, sizeof(lo));
	/* the neighbour tables have no "default" but in the first namespace:
	 * a link takes the host-wide values, as a fresh loopback has them */
	const char *fd = kvs_get(fresh, def), *nd = kvs_get(ns, def);
	if (!fd)
		fd = kvs_get(fresh, lo);
	return !fd || strcmp(fd, kv->value) || (nd && strcmp(nd, kv->value));
}

static void free_list(NetnsSysctl **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		if (!v[i])
			continue;
		free(v[i]->name);
		free(v[i]->value);
		free(v[i]);
	}
	free(v);
}

void netns_sysctls_free(NetnsEntry *e)
{
	free_list(e->sysctls, e->n_sysctls);
	e->sysctls = NULL;
	e->n_sysctls = 0;
}

static int keep(const struct kvs *ns, const struct kvs *fresh, NetnsEntry *e)
{
	e->sysctls = calloc(ns->n ? ns->n : 1, sizeof(*e->sysctls));
	if (!e->sysctls)
		return -ENOMEM;
	_cleanup_free_ bool *save = calloc(ns->n ? ns->n : 1, sizeof(*save));
	if (!save)
		return -ENOMEM;
	for (size_t i = 0; i < ns->n; i++) /* before any name moves */
		save[i] = differs(ns, fresh, &ns->v[i]);
	for (size_t i = 0; i < ns->n; i++) {
		if (!save[i])
			continue;
		NetnsSysctl *s = malloc(sizeof(*s));
		if (!s)
			return -ENOMEM;
		netns_sysctl__init(s);
		e->sysctls[e->n_sysctls++] = s;
		s->name = ns->v[i].name;
		s->value = ns->v[i].value;
		ns->v[i].name = ns->v[i].value = NULL; /* now the entry's */
	}
	return 0;
}

struct fresh_job {
	struct kvs kvs;
	int ret;
};

/* A thread of its own in a fresh namespace reads the values to compare
 * with, meanwhile the caller reads the tree's (the two walks took 7-10 ms
 * each of a migration's frozen time, one after the other). */
static void *walk_fresh(void *arg)
{
	struct fresh_job *job = arg;
	job->ret = unshare(CLONE_NEWNET) < 0 ? -errno : walk_net(&job->kvs);
	return NULL;
}

int netns_sysctls_read(struct ckpt_log *log, pid_t root, NetnsEntry *e)
{
	struct kvs ns = { 0 };
	struct fresh_job job = { .ret = -EAGAIN };
	pthread_t th;
	bool threaded = pthread_create(&th, NULL, walk_fresh, &job) == 0;
	int r = walk_net(&ns);
	if (threaded)
		pthread_join(th, NULL);
	else /* this thread leaves for a fresh namespace; the caller takes it back */
		walk_fresh(&job);
	struct kvs fresh = job.kvs;
	if (r < 0) {
		kvs_free(&ns);
		kvs_free(&fresh);
		return log_fail(log, r, "pid %d: network namespace: cannot read its sysctls: %s", root,
				strerror(-r));
	}
	r = job.ret;
	if (r < 0)
		log_error(log, "pid %d: network namespace: cannot read a fresh namespace's sysctls "
			  "to compare: %s", root, strerror(-r));
	if (r >= 0 && ((r = kvs_index(&ns)) < 0 || (r = kvs_index(&fresh)) < 0))
		log_error(log, "pid %d: network namespace: %s", root, strerror(-r));
	if (r >= 0 && (r = keep(&ns, &fresh, e)) < 0)
		netns_sysctls_free(e);
	kvs_free(&ns);
	kvs_free(&fresh);
	return r;
}

/* --- restart -------------------------------------------------------- */

/* A name of the old form ("net.ipv4.ip_forward") or a path under /proc/sys
 * in net/, with no empty, "." or ".." part; a value without a control
 * character but tab. */
bool netns_sysctl_ok(const NetnsSysctl *s)
{
	size_t n = strlen(s->name), parts = 0;
	if (strncmp(s->name, "net", 3) || (s->name[3] != '.' && s->name[3] != '/') ||
	    n >= SYSCTL_NAME_MAX || strlen(s->value) >= SYSCTL_VALUE_MAX)
		return false;
	for (const char *p = s->name; *p; parts++) {
		size_t l = strcspn(p, "/");
		if (!l || (l == 1 && p[0] == '.') || (l == 2 && !strncmp(p, "..", 2)))
			return false;
		p += l + (p[l] == '/');
	}
	for (const char *p = s->name; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return false;
	for (const char *p = s->value; *p; p++)
		if (((unsigned char)*p < ' ' && *p != '\t') || *p == 0x7f)
			return false;
	return parts <= 8 && s->name[n - 1] != '/';
}

static void sysctl_path(const NetnsSysctl *s, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/sys/%s", s->name);
	if (!strchr(s->name, '/')) /* the old form: dots for slashes */
		for (char *c = buf + 10; *c; c++)
			*c = *c == '.' ? '/' : *c;
}

/* Before the links (early) or after them: which sysctls are whose. */
static bool is_early(const NetnsSysctl *s)
{
	size_t off, len;
	if (!strchr(s->name, '/') || !device_part(s->name, &off, &len))
		return true;
	return (len == 3 && !strncmp(s->name + off, "all", 3)) ||
	       (len == 7 && !strncmp(s->name + off, "default", 7)) ||
	       (len == 2 && !strncmp(s->name + off, "lo", 2));
}

static int write_one(const NetnsSysctl *s)
{
	char path[SYSCTL_NAME_MAX + 16];
	sysctl_path(s, path, sizeof(path));
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t len = strlen(s->value);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, s->value, len);
	return w < 0 ? -errno : (size_t)w != len ? -EIO : 0;
}

int netns_sysctls_write(struct rst_ctx *ctx, const NetnsEntry *e, bool early)
{
	size_t n = e->n_sysctls, left = 0;
	_cleanup_free_ int *err = calloc(n ? n : 1, sizeof(*err));
	if (!err)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		err[i] = is_early(e->sysctls[i]) == early ? -EAGAIN : 0;
	for (;;) {
		size_t before = left;
		left = 0;
		for (size_t i = 0; i < n; i++)
			if (err[i] && (err[i] = write_one(e->sysctls[i])) < 0)
				left++;
		if (!left || left == before)
			break;
	}
	for (size_t i = 0; i < n; i++)
		if (err[i] < 0)
			return log_fail(&ctx->log, err[i], "network namespace: cannot set %s to '%s': %s",
					e->sysctls[i]->name, e->sysctls[i]->value,
					strerror(-err[i]));
	return 0;
}
