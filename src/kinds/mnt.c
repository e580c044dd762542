/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A container's mount namespace, when the container has a root file
 * system of its own (ckpt run --root: its "/" is not ckpt's). A container
 * that shares the host's root has no record: its mounts are the copy of
 * the host's that any new mount namespace gets, plus /proc and devpts
 * (ns.c).
 *
 * Checkpoint (the root's collect): /proc/PID/mountinfo, every mount in
 * order, parents first. A mount whose file system is also mounted in
 * ckpt's namespace is a bind, saved by its host path (that mount's point
 * plus the rest of its root), checked to be the same directory or file;
 * proc, sysfs, devpts, mqueue, tmpfs and overlay instances of its own are
 * saved by type and options (an overlay's layers by their host paths). Each gets its per-mount flags (ro, nosuid, nodev,
 * noexec, atime) and propagation. NFS, FUSE, block-device mounts and any
 * other file system are refused by mount point and type, with the reason.
 * At dump, each tmpfs of its own is walked through the root's
 * /proc/PID/root: every directory, regular file (its data in full),
 * symlink, FIFO and the device nodes of a /dev, with mode, owner and
 * times, one TmpfsFile record each (a mount point on it as an empty
 * directory or file; sockets are the unix kind's; hard links are saved
 * as separate files).
 *
 * Files of the container (file_reg) are marked "in root" when the path
 * the task sees leads, through the root's /proc/PID/root, to the same
 * inode: at restart they are opened through the new tree, once it is made
 * (mnt_rst_path), the others by host path as before.
 *
 * Restart (root ready, after ns.c has made the mounts private and before
 * anything opens a file of the container): in the root's new mount
 * namespace, the root's host directory is bound on itself (an overlay root
 * is mounted on its first lower layer) and every mount is made on it in
 * order: binds from their host paths (a path that is
 * gone fails the restart, naming the mount and the path), new instances
 * by type (each tmpfs then filled from ckpt's side through the puppet's
 * /proc/PID/root); then the per-mount flags and propagation are set and
 * pivot_root makes it "/". All of it lives in the puppet's namespace, so
 * a failed restart leaves nothing behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/mnt.h"
#include "kinds/ns.h"
#include "mnt.pb-c.h"
#include "util/cleanup.h"

enum { MNT_TREE = REC_TYPE(KID_mnt, 1), MNT_FILE = REC_TYPE(KID_mnt, 2) };

#define MNT_MAX 1000
#define MNT_FLAGS                                                                           \
	(MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME |        \
	 MS_RELATIME | MS_STRICTATIME)

/* One line of a mountinfo, its strings in the text (unescaped in place). */
struct mi {
	unsigned id, parent;
	dev_t dev;
	char *root, *point, *opts, *fields, *fstype, *source, *super;
};

struct mnt_ckpt {
	MountTree tree;
	MountEntry *ents;
	MountEntry **ptrs;
	dev_t *devs;            /* each mount's device (its tmpfs to walk) */
	char **strs;            /* strings made here, freed with the state */
	size_t nstrs;
	pid_t pid;              /* the root, whose /proc/PID/root the tree is seen through */
};

/* --- mountinfo -------------------------------------------------------- */

/* "\040" and the like back into their characters. */
static void unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else
			*o++ = *s;
	}
	*o = '\0';
}

static char *field(char **p)
{
	char *s = *p, *e;
	while (*s == ' ')
		s++;
	e = s + strcspn(s, " ");
	if (*e)
		*e++ = '\0';
	*p = e;
	return s;
}

/* The lines of a mountinfo text (modified), *ret malloc'd. */
static int parse_mountinfo(char *text, struct mi **ret, size_t *ret_n)
{
	size_t n = 0, cap = 0;
	struct mi *all = NULL;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct mi m = { 0 };
		unsigned maj, min;
		char *sep = strstr(line, " - ");
		if (!sep)
			goto bad;
		*sep = '\0';
		char *p = line, *tail = sep + 3;
		if (sscanf(field(&p), "%u", &m.id) != 1 || sscanf(field(&p), "%u", &m.parent) != 1 ||
		    sscanf(field(&p), "%u:%u", &maj, &min) != 2)
			goto bad;
		m.dev = makedev(maj, min);
		m.root = field(&p);
		m.point = field(&p);
		m.opts = field(&p);
		m.fields = p;
		m.fstype = field(&tail);
		m.source = field(&tail);
		m.super = field(&tail);
		unescape(m.root);
		unescape(m.point);
		unescape(m.source);
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			struct mi *na = realloc(all, cap * sizeof(*all));
			if (!na)
				goto nomem;
			all = na;
		}
		all[n++] = m;
	}
	*ret = all;
	*ret_n = n;
	return 0;
nomem:
	free(all);
	return -ENOMEM;
bad:
	free(all);
	return -EINVAL;
}

/* The mount whose parent is not listed: the root of what the reader sees. */
static const struct mi *top(const struct mi *all, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool has_parent = false;
		for (size_t j = 0; j < n && !has_parent; j++)
			has_parent = i != j && all[j].id == all[i].parent;
		if (!has_parent)
			return &all[i];
	}
	return NULL;
}

static uint32_t mount_flags(const char *opts)
{
	static const struct {
		const char *name;
		uint32_t flag;
	} names[] = { { "ro", MS_RDONLY },	   { "nosuid", MS_NOSUID },
		      { "nodev", MS_NODEV },	   { "noexec", MS_NOEXEC },
		      { "noatime", MS_NOATIME },   { "nodiratime", MS_NODIRATIME },
		      { "relatime", MS_RELATIME }, { "strictatime", MS_STRICTATIME } };
	uint32_t f = 0;
	for (const char *o = opts; *o;) {
		size_t k = strcspn(o, ",");
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (strlen(names[i].name) == k && !strncmp(o, names[i].name, k))
				f |= names[i].flag;
		o += k + (o[k] == ',');
	}
	return f;
}

/* --- checkpoint -------------------------------------------------------- */

static bool same_mntns(pid_t pid)
{
	char path[64];
	struct stat a, b;
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
	return stat(path, &a) < 0 || (stat("/proc/self/ns/mnt", &b) == 0 && a.st_ino == b.st_ino &&
				       a.st_dev == b.st_dev);
}

static char *keep(struct mnt_ckpt *s, char *str)
{
	char **ns = str ? realloc(s->strs, (s->nstrs + 1) * sizeof(*ns)) : NULL;
	if (!ns) {
		free(str);
		return NULL;
	}
	s->strs = ns;
	return s->strs[s->nstrs++] = str;
}

static bool has_prefix_dir(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (!strcmp(dir, "/"))
		return true;
	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* Is c overmounted at its own mount point by a later mount of the list? */
static bool stacked(const struct mi *all, size_t n, const struct mi *c)
{
	for (size_t i = (size_t)(c - all) + 1; i < n; i++)
		if (!strcmp(all[i].point, c->point))
			return true;
	return false;
}

/*
 * c as a bind of the host's: the path of its root in ckpt's namespace
 * (malloc'd), found through a mount of its device there whose root holds
 * c's root; NULL if the file system is not mounted in ckpt's namespace.
 */
static char *host_path(const struct mi *c, const struct mi *host, size_t nhost)
{
	const struct mi *best = NULL;
	for (size_t i = 0; i < nhost; i++)
		if (host[i].dev == c->dev && has_prefix_dir(c->root, host[i].root) &&
		    (!best || strlen(host[i].root) > strlen(best->root)))
			best = &host[i];
	if (!best)
		return NULL;
	const char *rest = c->root + (strcmp(best->root, "/") ? strlen(best->root) : 0);
	char *out = NULL;
	if (asprintf(&out, "%s%s", strcmp(best->point, "/") || !*rest ? best->point : "",
		     rest) < 0)
		return NULL;
	return out;
}

/* Why a mount of c's type cannot be saved, or NULL. */
static const char *fs_refusal(const struct mi *c)
{
	const char *t = c->fstype;
	if (!strncmp(t, "nfs", 3) || !strcmp(t, "cifs") || !strcmp(t, "smb3") || !strcmp(t, "9p"))
		return "network file systems are not supported (their files are on a server)";
	if (!strncmp(t, "fuse", 4))
		return "FUSE mounts are not supported yet (their files come from a process)";
	return NULL;
}

static bool own_type(const char *t)
{
	return !strcmp(t, "proc") || !strcmp(t, "sysfs") || !strcmp(t, "devpts") ||
	       !strcmp(t, "mqueue") || !strcmp(t, "tmpfs") || !strcmp(t, "overlay");
}

/*
 * The directories of an overlay's options (lowerdir=A:B,upperdir=U,
 * workdir=W,...): pointers into copy (modified), the first lower first;
 * their number, or -EINVAL (no lowerdir, or more than max).
 */
static int overlay_dirs(char *copy, char **dirs, int max)
{
	int n = 0;
	bool lower = false;
	for (char *save = NULL, *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		bool is_lower = !strncmp(o, "lowerdir=", 9);
		char *v = is_lower ? o + 9 : !strncmp(o, "upperdir=", 9) ? o + 9
					 : !strncmp(o, "workdir=", 8)	 ? o + 8
									 : NULL;
		if (!v)
			continue;
		lower |= is_lower;
		for (char *s2 = NULL, *d = strtok_r(v, ":", &s2); d; d = strtok_r(NULL, ":", &s2)) {
			if (n == max || (!is_lower && d != v))
				return -EINVAL;
			dirs[n++] = d;
		}
	}
	return lower ? n : -EINVAL;
}

/* The options of a new instance: its super options without rw/ro, uid=
 * and gid= as the container sees them (a tmpfs made in a user namespace
 * shows its owner as ckpt sees it). */
static char *instance_data(struct ckpt_ctx *ctx, const struct mi *c)
{
	const char *o = c->super;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	if (!strcmp(c->fstype, "devpts"))
		fputs("newinstance", f);
	for (; *o;) {
		size_t k = strcspn(o, ",");
		unsigned id;
		bool first = ftell(f) == 0;
		if ((k == 2 && (!strncmp(o, "rw", 2) || !strncmp(o, "ro", 2))))
			;
		else if (sscanf(o, "uid=%u", &id) == 1)
			fprintf(f, "%suid=%u", first ? "" : ",", ns_uid_inside(ctx, id));
		else if (sscanf(o, "gid=%u", &id) == 1)
			fprintf(f, "%sgid=%u", first ? "" : ",", ns_gid_inside(ctx, id));
		else
			fprintf(f, "%s%.*s", first ? "" : ",", (int)k, o);
		o += k + (o[k] == ',');
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* The number after tag ("shared:", "master:") in a mountinfo's optional
 * fields, or 0. */
static uint32_t tag_of(const char *fields, const char *tag)
{
	const char *p = strstr(fields, tag);
	return p ? (uint32_t)strtoul(p + strlen(tag), NULL, 10) : 0;
}

/* Its propagation: peer group, master, unbindable. */
static void save_propagation(const struct mi *c, MountEntry *e)
{
	e->peer = tag_of(c->fields, "shared:");
	e->master = tag_of(c->fields, "master:");
	e->has_peer = e->peer != 0;
	e->has_master = e->master != 0;
	e->has_propagation = e->has_peer || e->has_master;
	e->propagation = e->has_peer ? MS_SHARED : MS_SLAVE;
	if (strstr(c->fields, "unbindable")) {
		e->has_propagation = true;
		e->propagation = MS_UNBINDABLE;
	}
}

/*
 * c as a bind of an earlier mount (ents[0..i)) of a file system of the
 * container's own, whose root holds c's root: e->from and the path below
 * it; false if there is none.
 */
static bool save_from(struct mnt_ckpt *s, size_t i, const struct mi *c, MountEntry *e)
{
	for (size_t j = 0; j < i; j++) {
		const MountEntry *o = &s->ents[j];
		if (s->devs[j] != c->dev || o->bind || o->has_from || !strcmp(o->fstype, "sysfs") ||
		    !has_prefix_dir(c->root, o->root))
			continue;
		e->has_from = true;
		e->from = o->id;
		e->source = c->root + (strcmp(o->root, "/") ? strlen(o->root) : 0);
		if (!strcmp(e->source, "/"))
			e->source = "";
		return true;
	}
	return false;
}

/* One mount into e (s->ents[i]), or why it cannot be saved. */
static const char *save_mount(struct ckpt_ctx *ctx, struct mnt_ckpt *s, const struct mi *all,
			      size_t n, const struct mi *host, size_t nhost, const struct mi *c,
			      size_t i)
{
	MountEntry *e = &s->ents[i];
	const char *why = fs_refusal(c);
	if (why)
		return why;
	e->id = c->id;
	e->point = c->point;
	e->fstype = c->fstype;
	e->root = c->root;
	e->flags = mount_flags(c->opts);
	save_propagation(c, e);
	char *hp = strcmp(c->fstype, "sysfs") ? host_path(c, host, nhost) : NULL;
	if (hp) {
		char via[4200];
		struct stat a, b;
		e->has_bind = e->bind = true;
		if (!(e->source = keep(s, hp)))
			return "out of memory";
		snprintf(via, sizeof(via), "/proc/%d/root%s", s->pid, c->point);
		if (!stacked(all, n, c) &&
		    (stat(hp, &a) < 0 || stat(via, &b) < 0 || a.st_dev != b.st_dev ||
		     a.st_ino != b.st_ino))
			return "a bind whose host path is not the directory or file bound (moved, "
			       "or hidden under another mount)";
		return NULL;
	}
	if (!own_type(c->fstype))
		return !strncmp(c->source, "/dev/", 5)
			       ? "block-device mounts are not supported (the device is not saved)"
			       : "a file system ckpt cannot make again";
	if (strcmp(c->fstype, "sysfs") && save_from(s, i, c, e))
		return NULL;
	if (strcmp(c->root, "/"))
		return "a part of a file system of its own bound elsewhere is not supported yet";
	e->source = c->source;
	if (!(e->data = keep(s, instance_data(ctx, c))))
		return "out of memory";
	return NULL;
}

static const char *root_of(const MountEntry *e)
{
	return e->root ? e->root : "/";
}

/* The member of peer group peer whose root holds every member's root (the
 * one the others join at restart), or NULL. */
static const MountEntry *group_rep(const MountTree *tree, uint32_t peer)
{
	for (size_t j = 0; j < tree->n_mounts; j++) {
		const MountEntry *o = tree->mounts[j];
		bool all = o->has_peer && o->peer == peer;
		for (size_t k = 0; all && k < tree->n_mounts; k++) {
			const MountEntry *m = tree->mounts[k];
			all = !m->has_peer || m->peer != peer ||
			      has_prefix_dir(root_of(m), root_of(o));
		}
		if (all)
			return o;
	}
	return NULL;
}

static size_t find_index(const MountTree *tree, const MountEntry *e)
{
	size_t i = 0;
	while (i < tree->n_mounts && tree->mounts[i] != e)
		i++;
	return i;
}

/*
 * Why the propagation of mount e cannot be made again, or NULL: a slave
 * whose master's peer group is not in the container, or a peer group no
 * member of which holds the others' roots (move_mount's
 * MOVE_MOUNT_SET_GROUP joins a group from a mount with a wider root).
 */
static const char *propagation_refusal(const MountTree *tree, const MountEntry *e)
{
	const MountEntry *rep = e->has_master ? group_rep(tree, e->master) : NULL;
	if (e->has_master && (!rep || !has_prefix_dir(root_of(e), root_of(rep))))
		return "a slave mount whose master is not a mount of the container is not "
		       "supported";
	if (e->has_peer && !group_rep(tree, e->peer))
		return "a peer group whose mounts' roots do not nest is not supported yet";
	return NULL;
}

/* The mounts in an order with parents first (mountinfo's, mostly). */
static int order(const struct mi *all, size_t n, const struct mi *root, size_t *ord)
{
	size_t k = 0;
	bool *done = calloc(n, sizeof(*done));
	if (!done)
		return -ENOMEM;
	ord[k++] = (size_t)(root - all);
	done[ord[0]] = true;
	for (bool more = true; more;) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			if (done[i])
				continue;
			for (size_t j = 0; j < k; j++)
				if (all[ord[j]].id == all[i].parent) {
					done[i] = more = true;
					ord[k++] = i;
					break;
				}
		}
	}
	free(done);
	return k == n ? 0 : -EINVAL;
}

/* A mount of a container sharing the host's root that the host has not
 * (same point and device; a cgroup namespace shows other roots), other
 * than the /proc and devpts the ns kind makes. */
static bool extra_mount(struct ckpt_ctx *ctx, const struct mi *c, const struct mi *host,
			size_t nhost)
{
	if ((!strcmp(c->point, "/proc") && !strcmp(c->fstype, "proc")) ||
	    (!strcmp(c->point, "/dev/pts") && !strcmp(c->fstype, "devpts") &&
	     c->dev == ns_devpts_dev(ctx)))
		return false;
	for (size_t i = 0; i < nhost; i++)
		if (host[i].dev == c->dev && !strcmp(host[i].point, c->point))
			return false;
	return true;
}

/*
 * A container sharing the host's root: the mounts it made of its own, in
 * mountinfo's order (each after the mount it is on); 1 if none (no
 * record, as before).
 */
static int collect_extras(struct ckpt_ctx *ctx, struct mnt_ckpt *s, const struct mi *all,
			  size_t n, const struct mi *host, size_t nhost)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct mi *c = &all[i];
		if (!extra_mount(ctx, c, host, nhost))
			continue;
		MountEntry *e = &s->ents[k];
		mount_entry__init(e);
		s->devs[k] = c->dev;
		const char *why = save_mount(ctx, s, all, n, host, nhost, c, k);
		if (why)
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: mount %s (%s, %s): %s",
					s->pid, c->point, c->fstype, c->source, why);
		e->parent = c->parent;
		s->ptrs[k++] = e;
	}
	if (!k)
		return 1;
	s->tree.n_mounts = k;
	s->tree.mounts = s->ptrs;
	s->tree.has_host_root = s->tree.host_root = true;
	for (size_t i = 0; i < k; i++) {
		const MountEntry *e = s->ptrs[i];
		const char *why = propagation_refusal(&s->tree, e);
		if (why)
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: mount %s (%s, shared:%u, master:%u): %s",
					s->pid, e->point, e->fstype, e->peer, e->master, why);
	}
	return 0;
}

static int collect_tree(struct ckpt_ctx *ctx, struct mnt_ckpt *s, char *text, char *htext)
{
	_cleanup_free_ struct mi *all = NULL, *host = NULL;
	_cleanup_free_ size_t *ord = NULL;
	size_t n, nhost;
	if (parse_mountinfo(text, &all, &n) < 0 || parse_mountinfo(htext, &host, &nhost) < 0 ||
	    !n || n > MNT_MAX)
		return log_fail(&ctx->log, -EINVAL, "pid %d: cannot parse its mountinfo", s->pid);
	const struct mi *root = top(all, n), *hroot = top(host, nhost);
	if (!root || !hroot)
		return log_fail(&ctx->log, -EINVAL, "pid %d: its mountinfo has no root", s->pid);
	bool host_root = root->dev == hroot->dev && !strcmp(root->root, hroot->root);
	s->ents = calloc(n, sizeof(*s->ents));
	s->ptrs = calloc(n, sizeof(*s->ptrs));
	s->devs = calloc(n, sizeof(*s->devs));
	ord = calloc(n, sizeof(*ord));
	if (!s->ents || !s->ptrs || !s->devs || !ord)
		return -ENOMEM;
	if (host_root)
		return collect_extras(ctx, s, all, n, host, nhost);
	if (order(all, n, root, ord) < 0)
		return log_fail(&ctx->log, -EINVAL, "pid %d: its mounts do not form a tree", s->pid);
	for (size_t i = 0; i < n; i++) {
		const struct mi *c = &all[ord[i]];
		MountEntry *e = &s->ents[i];
		mount_entry__init(e);
		s->devs[i] = c->dev;
		const char *why = save_mount(ctx, s, all, n, host, nhost, c, i);
		if (why)
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: mount %s (%s, %s): %s",
					s->pid, c->point, c->fstype, c->source, why);
		e->parent = c == root ? 0 : c->parent;
		s->ptrs[i] = e;
	}
	s->tree.n_mounts = n;
	s->tree.mounts = s->ptrs;
	for (size_t i = 0; i < n; i++) {
		const MountEntry *e = s->ptrs[i];
		const char *why = propagation_refusal(&s->tree, e);
		if (why)
			return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: mount %s (%s, shared:%u, master:%u): %s",
					s->pid, e->point, e->fstype, e->peer, e->master,
					why);
	}
	if (!s->ents[0].bind && strcmp(s->ents[0].fstype, "overlay"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: its root is neither a directory of the host nor an overlay; "
				"not supported yet",
				s->pid);
	return 0;
}

static int mnt_collect(struct ckpt_ctx *ctx, struct task *t)
{
	if (t != &ctx->tasks[0] || !ctx->container || same_mntns(t->pid))
		return 0;
	char *text = NULL;
	_cleanup_free_ char *htext = NULL;
	int r = proc_read(t->pid, "mountinfo", &text, NULL);
	if (r >= 0)
		r = proc_read(0, "mountinfo", &htext, NULL);
	if (r < 0) {
		free(text);
		return log_fail(&ctx->log, r, "pid %d: cannot read its mountinfo: %s", t->pid,
				strerror(-r));
	}
	struct mnt_ckpt *s = task_state(t, KIND_mnt, sizeof(*s));
	if (!s)
		free(text);
	/* the strings of the entries point into text, which the state keeps */
	if (!s || !keep(s, text))
		return -ENOMEM;
	mount_tree__init(&s->tree);
	s->pid = t->pid;
	r = collect_tree(ctx, s, text, htext);
	if (r == 1) /* the host's root: no tree of its own, no record */
		s->tree.n_mounts = 0;
	if (r >= 0 && s->tree.n_mounts)
		log_info(&ctx->log, "pid %d: %s, %zu mounts", t->pid,
			 s->tree.host_root ? "the host's root with mounts of its own"
					   : "a root of its own",
			 s->tree.n_mounts);
	return r < 0 ? r : 0;
}

static const struct mnt_ckpt *tree_of(struct ckpt_ctx *ctx)
{
	const struct mnt_ckpt *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_mnt] : NULL;
	return s && s->tree.n_mounts ? s : NULL;
}

bool mnt_own_root(struct ckpt_ctx *ctx)
{
	const struct mnt_ckpt *s = tree_of(ctx);
	return s && !s->tree.host_root;
}

const char *mnt_seen(struct ckpt_ctx *ctx, const char *path, char *buf, size_t len)
{
	const struct mnt_ckpt *s = tree_of(ctx);
	int n = s && path[0] == '/' ? snprintf(buf, len, "/proc/%d/root%s", s->pid, path) : -1;
	return n > 0 && (size_t)n < len ? buf : path;
}

bool mnt_inside(struct ckpt_ctx *ctx, const char *path, const struct stat *st)
{
	const struct mnt_ckpt *s = tree_of(ctx);
	char via[4200];
	struct stat in;
	bool on_own = s && !s->tree.host_root; /* else: on a mount it made */
	for (size_t i = 0; s && !on_own && i < s->tree.n_mounts; i++)
		on_own = s->devs[i] == st->st_dev;
	if (!on_own || path[0] != '/')
		return false;
	snprintf(via, sizeof(via), "/proc/%d/root%s", s->pid, path);
	return lstat(via, &in) == 0 && in.st_dev == st->st_dev && in.st_ino == st->st_ino;
}

int mnt_unix_name(struct ckpt_ctx *ctx, const char *path)
{
	if (!path || !mnt_own_root(ctx))
		return 0;
	return geteuid() == 0 && !ns_own_userns(ctx) ? 1 : -EOPNOTSUPP;
}

/* Device nodes a tmpfs may hold: those of a minimal /dev. */
static bool dev_allowed(mode_t mode, dev_t rdev)
{
	unsigned maj = major(rdev), min = minor(rdev);
	return S_ISCHR(mode) && ((maj == 1 && (min == 3 || min == 5 || min == 7 || min == 8 ||
					       min == 9)) ||
				 (maj == 5 && (min == 0 || min == 2)));
}

/* A file of several names seen by the walk: its first name's path. */
struct seen_ino {
	ino_t ino;
	char *path;
};

struct walk {
	struct ckpt_ctx *ctx;
	const MountEntry *m;
	dev_t dev;
	struct seen_ino *inos; /* files with st_nlink > 1 saved so far */
	size_t ninos;
	char path[4096]; /* relative to the tmpfs's root */
};

/* The path a file of several names was first saved by, or NULL (then it
 * is noted with this path: its other names are hard links to it). */
static int first_name(struct walk *w, const struct stat *st, const char **ret)
{
	*ret = NULL;
	if (S_ISDIR(st->st_mode) || S_ISSOCK(st->st_mode) || st->st_nlink < 2 ||
	    st->st_dev != w->dev)
		return 0;
	for (size_t i = 0; i < w->ninos; i++)
		if (w->inos[i].ino == st->st_ino) {
			*ret = w->inos[i].path;
			return 0;
		}
	struct seen_ino *n = realloc(w->inos, (w->ninos + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	w->inos = n;
	if (!(n[w->ninos].path = strdup(w->path)))
		return -ENOMEM;
	n[w->ninos++].ino = st->st_ino;
	return 0;
}

static int write_file(struct walk *w, int dfd, const char *name, const struct stat *st)
{
	TmpfsFile f;
	_cleanup_free_ char *data = NULL;
	char target[4096];
	tmpfs_file__init(&f);
	f.mount = w->m->id;
	f.path = w->path;
	f.mode = st->st_mode;
	f.uid = ns_uid_inside(w->ctx, st->st_uid);
	f.gid = ns_gid_inside(w->ctx, st->st_gid);
	f.has_atime_ns = f.has_mtime_ns = true;
	f.atime_ns = st->st_atim.tv_sec * 1000000000ull + st->st_atim.tv_nsec;
	f.mtime_ns = st->st_mtim.tv_sec * 1000000000ull + st->st_mtim.tv_nsec;
	const char *first;
	int r = first_name(w, st, &first);
	if (r < 0)
		return r;
	if (first) { /* another name of a file saved before */
		f.link = (char *)first;
	} else if (st->st_dev != w->dev) { /* a mount point: what it is, empty */
		f.mode = S_ISDIR(st->st_mode) ? S_IFDIR | 0755 : S_IFREG | 0644;
		f.uid = f.gid = 0;
	} else if (S_ISLNK(st->st_mode)) {
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		f.target = target;
	} else if (S_ISREG(st->st_mode)) {
		_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		size_t len = (size_t)st->st_size, got = 0;
		if (fd < 0 || !(data = malloc(len ? len : 1)))
			return fd < 0 ? -errno : -ENOMEM;
		while (got < len) {
			ssize_t r = read(fd, data + got, len - got);
			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			got += (size_t)r;
		}
		f.has_data = f.has_size = true;
		f.data.data = (uint8_t *)data;
		f.data.len = len;
		f.size = len;
	} else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		if (!dev_allowed(st->st_mode, st->st_rdev))
			return log_fail(&w->ctx->log, -EOPNOTSUPP,
					"mount %s (tmpfs): the device node '%s' is not one of a "
					"minimal /dev; not supported",
					w->m->point, w->path);
		f.has_rdev = true;
		f.rdev = st->st_rdev;
	} else if (S_ISSOCK(st->st_mode)) {
		return 0; /* a unix socket's name: the unix kind's */
	}
	return ctx_write_msg(w->ctx, MNT_FILE, &f.base);
}

/* Every entry of the directory dfd (at w->path), depth first. */
static int walk_dir(struct walk *w, int dfd, int depth)
{
	_cleanup_closedir_ DIR *d = NULL;
	int dup_fd = dup(dfd);
	if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
		if (dup_fd >= 0)
			close(dup_fd);
		return -errno;
	}
	if (depth > 64)
		return -ELOOP;
	size_t len = strlen(w->path);
	for (struct dirent *de; (de = readdir(d));) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (snprintf(w->path + len, sizeof(w->path) - len, "%s%s", len ? "/" : "",
			     de->d_name) >= (int)(sizeof(w->path) - len))
			return -ENAMETOOLONG;
		int r = write_file(w, dfd, de->d_name, &st);
		if (r >= 0 && S_ISDIR(st.st_mode) && st.st_dev == w->dev) {
			_cleanup_close_ int sub =
				openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = sub < 0 ? -errno : walk_dir(w, sub, depth + 1);
		}
		w->path[len] = '\0';
		if (r < 0)
			return r;
	}
	return 0;
}

static int dump_tmpfs(struct ckpt_ctx *ctx, const struct mnt_ckpt *s, size_t i)
{
	struct walk w = { .ctx = ctx, .m = s->ptrs[i], .dev = s->devs[i] };
	char via[4200];
	struct stat st;
	snprintf(via, sizeof(via), "/proc/%d/root%s", s->pid, w.m->point);
	_cleanup_close_ int fd = open(via, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = fd < 0 || fstat(fd, &st) < 0 ? -errno : 0;
	if (r >= 0 && st.st_dev != w.dev)
		r = -EBUSY; /* another mount over it */
	if (r >= 0)
		r = write_file(&w, fd, ".", &st);
	if (r >= 0)
		r = walk_dir(&w, fd, 0);
	for (size_t k = 0; k < w.ninos; k++)
		free(w.inos[k].path);
	free(w.inos);
	if (r < 0 && !ctx->log.errors)
		log_error(&ctx->log, "pid %d: mount %s (tmpfs): cannot save its files%s%s: %s",
			  s->pid, w.m->point, w.path[0] ? " at " : "", w.path, strerror(-r));
	return r;
}

static int mnt_dump(struct ckpt_ctx *ctx, struct task *t)
{
	const struct mnt_ckpt *s = t->kstate[KIND_mnt];
	if (!s || !s->tree.n_mounts)
		return 0;
	int r = ctx_write_msg(ctx, MNT_TREE, &s->tree.base);
	for (size_t i = 0; r >= 0 && i < s->tree.n_mounts; i++)
		if (!s->ptrs[i]->bind && !s->ptrs[i]->has_from &&
		    !strcmp(s->ptrs[i]->fstype, "tmpfs"))
			r = dump_tmpfs(ctx, s, i);
	return r;
}

static void mnt_free_state(void *state)
{
	struct mnt_ckpt *s = state;
	if (!s)
		return;
	for (size_t i = 0; i < s->nstrs; i++)
		free(s->strs[i]);
	free(s->strs);
	free(s->ents);
	free(s->ptrs);
	free(s->devs);
	free(s);
}

/* --- restart ----------------------------------------------------------- */

struct mnt_rst {
	MountTree *tree;
	TmpfsFile **files;
	size_t nfiles;
	int *early; /* per mount: a tmpfs made and filled at prepare, detached
		     * (fsmount), for the unix sockets bound on it; or -1 */
};

static const struct mnt_rst *rst_of(struct rst_ctx *ctx)
{
	const struct mnt_rst *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_mnt] : NULL;
	return s && s->tree ? s : NULL;
}

bool mnt_rst_tree(struct rst_ctx *ctx)
{
	const struct mnt_rst *s = rst_of(ctx);
	return s && !s->tree->host_root;
}

int mnt_rst_path(struct rst_ctx *ctx, const char *path, char *buf, size_t len)
{
	if (!rst_of(ctx))
		return -ENOENT;
	int n = snprintf(buf, len, "/proc/%d/root%s", (int)ctx->tasks[0].pup.pid, path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A path inside the container: absolute (rel: relative), no "." or ".." parts. */
static bool clean_path(const char *p, bool rel)
{
	if (strlen(p) >= 4000 || (rel ? p[0] == '/' : p[0] != '/'))
		return false;
	for (const char *c = p; *c;) {
		while (*c == '/')
			c++;
		size_t k = strcspn(c, "/");
		if ((k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += k;
	}
	return true;
}

static bool data_ok(const char *d)
{
	return !d || (strlen(d) < 256 && strspn(d, "abcdefghijklmnopqrstuvwxyz"
						   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=,_.%-") ==
					     strlen(d));
}

/* An overlay's options: its directories clean absolute paths, the other
 * options plain words. */
static bool overlay_ok(const char *d)
{
	char *copy = d && strlen(d) < 8192 ? strdup(d) : NULL, *dirs[20];
	int n = copy ? overlay_dirs(copy, dirs, 20) : -EINVAL;
	bool ok = n > 0;
	for (int i = 0; ok && i < n; i++)
		ok = clean_path(dirs[i], false) && !strchr(dirs[i], '\\');
	free(copy);
	for (const char *o = d; ok && *o;) {
		size_t k = strcspn(o, ",");
		if (strncmp(o, "lowerdir=", 9) && strncmp(o, "upperdir=", 9) &&
		    strncmp(o, "workdir=", 8))
			ok = strcspn(o, "/:") >= k;
		o += k + (o[k] == ',');
	}
	return ok;
}

static const char *entry_invalid(const MountTree *tree, size_t i)
{
	const MountEntry *e = tree->mounts[i];
	bool parent = tree->host_root || (i == 0 && e->parent == 0 && !strcmp(e->point, "/"));
	bool from = !e->has_from;
	for (size_t j = 0; j < i; j++) {
		const MountEntry *o = tree->mounts[j];
		parent |= o->id == e->parent;
		from |= o->id == e->from && !o->bind && !o->has_from && !strcmp(o->fstype, e->fstype);
		if (o->id == e->id)
			return "a mount id given twice";
	}
	if (e->has_from && (i == 0 || e->bind || !from || !e->source ||
			    (e->source[0] && !clean_path(e->source, false))))
		return "a bind of a mount that is not an earlier instance, or its path not clean";
	if ((e->root && !clean_path(e->root, false)) || propagation_refusal(tree, e))
		return "a root not clean, or a propagation that cannot be made";
	if (!parent)
		return "a mount before its parent (the root first)";
	if (!clean_path(e->point, false))
		return "a mount point that is not a clean absolute path";
	if (e->bind ? !e->source || !clean_path(e->source, false) : !own_type(e->fstype))
		return "a bind without an absolute source, or a file system ckpt cannot make";
	bool overlay = !e->bind && !strcmp(e->fstype, "overlay");
	if (i == 0 && !e->bind && !overlay && !tree->host_root)
		return "a root that is neither a bind nor an overlay";
	if ((e->flags & ~(uint32_t)MNT_FLAGS) ||
	    !(e->has_from ? !e->data : overlay ? overlay_ok(e->data) : data_ok(e->data)))
		return "flags or options not valid";
	if (e->has_propagation && e->propagation != MS_SHARED && e->propagation != MS_SLAVE &&
	    e->propagation != MS_UNBINDABLE)
		return "a propagation not valid";
	return NULL;
}

static int load_tree(struct rst_ctx *ctx, struct rst_task *t, struct mnt_rst *s,
		     const struct img_record *rec)
{
	if (s->tree)
		return log_fail(&ctx->log, -EINVAL, "record %u: a second mount tree", rec->index);
	if (!(s->tree = rctx_unpack(ctx, rec, &mount_tree__descriptor)))
		return -EINVAL;
	if (!s->tree->n_mounts || s->tree->n_mounts > MNT_MAX || t != &ctx->tasks[0])
		return log_fail(&ctx->log, -EINVAL, "record %u: a mount tree not valid", rec->index);
	for (size_t i = 0; i < s->tree->n_mounts; i++) {
		const char *why = entry_invalid(s->tree, i);
		if (why)
			return log_fail(&ctx->log, -EINVAL, "record %u: mount %zu: %s", rec->index, i,
					why);
	}
	if (!(s->early = malloc(s->tree->n_mounts * sizeof(*s->early))))
		return -ENOMEM;
	for (size_t i = 0; i < s->tree->n_mounts; i++)
		s->early[i] = -1;
	return 0;
}

static const MountEntry *find_mount(const struct mnt_rst *s, uint32_t id)
{
	for (size_t i = 0; s->tree && i < s->tree->n_mounts; i++)
		if (s->tree->mounts[i]->id == id)
			return s->tree->mounts[i];
	return NULL;
}

static int load_file(struct rst_ctx *ctx, struct mnt_rst *s, const struct img_record *rec)
{
	TmpfsFile *f = rctx_unpack(ctx, rec, &tmpfs_file__descriptor);
	if (!f)
		return -EINVAL;
	TmpfsFile **nf = realloc(s->files, (s->nfiles + 1) * sizeof(*nf));
	if (!nf) {
		tmpfs_file__free_unpacked(f, NULL);
		return -ENOMEM;
	}
	s->files = nf;
	s->files[s->nfiles++] = f;
	const MountEntry *m = find_mount(s, f->mount);
	mode_t type = f->mode & S_IFMT;
	if (f->link) { /* a hard link: to a file of the same tmpfs saved before */
		bool ok = false;
		for (size_t i = 0; !ok && i + 1 < s->nfiles; i++)
			ok = s->files[i]->mount == f->mount && !s->files[i]->link &&
			     !strcmp(s->files[i]->path, f->link) && !S_ISDIR(s->files[i]->mode);
		if (!ok || !clean_path(f->path, true))
			return log_fail(&ctx->log, -EINVAL,
					"record %u: a tmpfs hard link not valid", rec->index);
		return 0;
	}
	bool ok = m && !m->bind && !m->has_from && !strcmp(m->fstype, "tmpfs") &&
		  (!f->path[0] || clean_path(f->path, true)) &&
		  (type == S_IFDIR || type == S_IFREG || type == S_IFLNK || type == S_IFIFO ||
		   type == S_IFCHR) &&
		  (type != S_IFLNK || f->target) && (type != S_IFCHR || dev_allowed(f->mode, f->rdev)) &&
		  (f->path[0] || type == S_IFDIR) &&
		  (!f->has_data || f->data.len <= f->size);
	if (!ok)
		return log_fail(&ctx->log, -EINVAL, "record %u: a tmpfs file not valid", rec->index);
	return 0;
}

static int mnt_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	struct mnt_rst *s = t->kstate[KIND_mnt];
	if (!s && !(s = t->kstate[KIND_mnt] = calloc(1, sizeof(*s))))
		return -ENOMEM;
	if (rec->type == MNT_TREE)
		return load_tree(ctx, t, s, rec);
	if (rec->type == MNT_FILE)
		return load_file(ctx, s, rec);
	return log_fail(&ctx->log, -EINVAL, "record %u: unknown mnt subtype %u", rec->index,
			REC_SUB(rec->type));
}

static long put_str(struct puppet *p, size_t off, const char *s)
{
	return (long)puppet_scratch_put(p, off, s, strlen(s) + 1);
}

/* The container's ids as ckpt sees them: its user namespace's maps, read
 * from the puppet (written at "spawn root"; the identity without one). */
struct idmaps {
	char uid[512], gid[512];
};

static int read_map(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* id inside, mapped by map ("inside outside count" lines); -1 if unmapped. */
static int64_t outside(const char *map, uint32_t id)
{
	for (const char *p = map; *p;) {
		unsigned long in, out, count;
		int used;
		if (sscanf(p, " %lu %lu %lu%n", &in, &out, &count, &used) != 3)
			break;
		if (id >= in && id - in < count)
			return (int64_t)(out + (id - in));
		p += used;
	}
	return -1;
}

/*
 * The directory that holds path (relative to the tmpfs's root top), an
 * O_PATH fd, found without following any symlink or leaving the tmpfs (the
 * image's own symlinks must not lead ckpt's writes elsewhere); *ret_name
 * the last component ("." for the root itself).
 */
static int parent_of(int top, const char *path, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	*ret_name = !path[0] ? "." : slash ? slash + 1 : path;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	long fd = syscall(SYS_openat2, top, dir, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/* One file of a tmpfs, made from ckpt's side under the tmpfs's root top. */
static int make_file(const TmpfsFile *f, int top, const struct idmaps *ids)
{
	int64_t uid = outside(ids->uid, f->uid), gid = outside(ids->gid, f->gid);
	const char *name;
	if (uid < 0 || gid < 0)
		return -EOVERFLOW;
	_cleanup_close_ int dfd = parent_of(top, f->path, &name);
	if (dfd < 0)
		return dfd;
	if (f->link) { /* another name of a file made before */
		const char *oname;
		_cleanup_close_ int ofd = parent_of(top, f->link, &oname);
		if (ofd < 0)
			return ofd;
		return linkat(ofd, oname, dfd, name, 0) < 0 ? -errno : 0;
	}
	mode_t perm = f->mode & 07777;
	int r = 0;
	switch (f->mode & S_IFMT) {
	case S_IFDIR:
		r = f->path[0] && mkdirat(dfd, name, 0700) < 0 ? -errno : 0;
		break;
	case S_IFLNK:
		r = symlinkat(f->target, dfd, name) < 0 ? -errno : 0;
		break;
	case S_IFIFO:
	case S_IFCHR:
		r = mknodat(dfd, name, f->mode & (S_IFMT | 07777), (dev_t)f->rdev) < 0 ? -errno : 0;
		break;
	case S_IFREG: {
		_cleanup_close_ int fd =
			openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		for (size_t done = 0; done < f->data.len;) {
			ssize_t w = write(fd, f->data.data + done, f->data.len - done);
			if (w < 0)
				return -errno;
			done += (size_t)w;
		}
		if (ftruncate(fd, (off_t)f->size) < 0)
			return -errno;
		break;
	}
	}
	if (r >= 0 && fchownat(dfd, name, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (r >= 0 && !S_ISLNK(f->mode) && fchmodat(dfd, name, perm, 0) < 0)
		r = -errno;
	return r;
}

/* The files of the tmpfs m, at via; their times last, children first. */
static int fill_tmpfs_at(struct rst_ctx *ctx, const struct mnt_rst *s, const MountEntry *m,
			 int dfd, const struct idmaps *ids);

static int fill_tmpfs(struct rst_ctx *ctx, const struct mnt_rst *s, const MountEntry *m,
		      const char *via)
{
	_cleanup_close_ int dfd = open(via, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct idmaps ids;
	pid_t pid = ctx->tasks[0].pup.pid;
	if (dfd < 0)
		return log_fail(&ctx->log, -errno, "mount %s (tmpfs): cannot open it: %m", m->point);
	if (read_map(pid, "uid_map", ids.uid, sizeof(ids.uid)) < 0 ||
	    read_map(pid, "gid_map", ids.gid, sizeof(ids.gid)) < 0)
		return log_fail(&ctx->log, -EIO, "pid %d: cannot read its id maps", pid);
	return fill_tmpfs_at(ctx, s, m, dfd, &ids);
}

static int fill_tmpfs_at(struct rst_ctx *ctx, const struct mnt_rst *s, const MountEntry *m,
			 int dfd, const struct idmaps *ids)
{
	for (size_t i = 0; i < s->nfiles; i++) {
		const TmpfsFile *f = s->files[i];
		int r = f->mount == m->id ? make_file(f, dfd, ids) : 0;
		if (r < 0)
			return log_fail(&ctx->log, r, "mount %s (tmpfs): cannot make '%s': %s",
					m->point, f->path, strerror(-r));
	}
	for (size_t i = s->nfiles; i-- > 0;) {
		const TmpfsFile *f = s->files[i];
		struct timespec ts[2] = { { (time_t)(f->atime_ns / 1000000000),
					    (long)(f->atime_ns % 1000000000) },
					  { (time_t)(f->mtime_ns / 1000000000),
					    (long)(f->mtime_ns % 1000000000) } };
		const char *name;
		_cleanup_close_ int pfd = f->mount == m->id ? parent_of(dfd, f->path, &name) : -1;
		if (pfd >= 0)
			utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW);
	}
	return 0;
}

/* The detached tmpfs fd (made at prepare) moved onto target in the puppet. */
static int attach_early(struct rst_ctx *ctx, struct rst_task *t, const MountEntry *m, int fd,
			const char *target)
{
	struct puppet *p = &t->pup;
	int rfd = puppet_send_fd(p, ctx->ctl[0], ctx->ctl_remote, fd);
	long r = rfd;
	if (rfd >= 0) {
		r = puppet_syscall(p, SYS_move_mount, rfd, put_str(p, 0, ""), AT_FDCWD,
				   put_str(p, 8192, target), MOVE_MOUNT_F_EMPTY_PATH);
		puppet_syscall(p, SYS_close, rfd);
	}
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "mount %s (tmpfs): cannot attach it: %s",
				m->point, strerror((int)-r));
	return 0;
}

/* Mount m in the puppet at root + its point (the new tree, not yet "/"). */
static int make_mount(struct rst_ctx *ctx, struct rst_task *t, const struct mnt_rst *s,
		      const MountEntry *m, const char *root)
{
	struct puppet *p = &t->pup;
	char target[4200], via[4300];
	struct stat st;
	snprintf(target, sizeof(target), "%s%s", root, strcmp(m->point, "/") || !root[0] ? m->point : "");
	snprintf(via, sizeof(via), "/proc/%d/root%s", p->pid, target);
	if (m->bind && stat(m->source, &st) < 0)
		return log_fail(&ctx->log, -errno, "mount %s: its source '%s' is gone: %m", m->point,
				m->source);
	if (lstat(via, &st) < 0)
		return log_fail(&ctx->log, -errno, "mount %s: its mount point is missing: %m",
				m->point);
	if (!m->bind && !strcmp(m->fstype, "overlay")) {
		_cleanup_free_ char *copy = strdup(m->data);
		char *dirs[20];
		int n = copy ? overlay_dirs(copy, dirs, 20) : -ENOMEM;
		for (int i = 0; i < n; i++)
			if (stat(dirs[i], &st) < 0)
				return log_fail(&ctx->log, -errno,
						"mount %s (overlay): its layer '%s' is gone: %m",
						m->point, dirs[i]);
	}
	size_t idx = find_index(s->tree, m);
	if (s->early[idx] >= 0) /* made at prepare for a socket's name: attached */
		return attach_early(ctx, t, m, s->early[idx], target);
	char from[8400];
	if (m->has_from) { /* a bind of an earlier mount of the tree */
		const MountEntry *o = find_mount(s, m->from);
		snprintf(from, sizeof(from), "%s%s%s", root, strcmp(o->point, "/") ? o->point : "",
			 m->source);
	}
	long r = m->has_from ? puppet_syscall(p, SYS_mount, put_str(p, 0, from),
					      put_str(p, 8192, target), 0, MS_BIND, 0)
		 : m->bind   ? puppet_syscall(p, SYS_mount, put_str(p, 0, m->source),
					      put_str(p, 8192, target), 0, MS_BIND, 0)
			     : puppet_syscall(p, SYS_mount, put_str(p, 0, m->source),
					  put_str(p, 8192, target), put_str(p, 4096, m->fstype),
					  m->flags & ~(uint32_t)MS_RDONLY,
					  m->data ? put_str(p, 16384, m->data) : 0);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "mount %s (%s%s%s): cannot mount it: %s",
				m->point, m->bind ? "bind of '" : m->fstype, m->bind ? m->source : "",
				m->bind ? "'" : "", strerror((int)-r));
	if (!m->bind && !m->has_from && !strcmp(m->fstype, "tmpfs"))
		return fill_tmpfs(ctx, s, m, via);
	return 0;
}

static void target_of(const MountEntry *m, const char *root, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", root, strcmp(m->point, "/") || !root[0] ? m->point : "");
}

/* Flags of m, once every mount is made. */
static int finish_mount(struct rst_ctx *ctx, struct rst_task *t, const MountEntry *m,
			const char *root)
{
	struct puppet *p = &t->pup;
	char target[4200];
	long r = 0;
	target_of(m, root, target, sizeof(target));
	if (m->bind || m->has_from || (m->flags & MS_RDONLY))
		r = puppet_syscall(p, SYS_mount, 0, put_str(p, 0, target), 0,
				   MS_REMOUNT | MS_BIND | m->flags, 0);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "mount %s: cannot set its flags: %s", m->point,
				strerror((int)-r));
	return 0;
}

#ifndef MOVE_MOUNT_SET_GROUP
#define MOVE_MOUNT_SET_GROUP 0x100
#endif

/* m joins the peer group of o (and o's master): move_mount's SET_GROUP. */
static long join_group(struct puppet *p, const MountEntry *o, const MountEntry *m,
		       const char *root)
{
	char from[4200], to[4200];
	target_of(o, root, from, sizeof(from));
	target_of(m, root, to, sizeof(to));
	return puppet_syscall(p, SYS_move_mount, AT_FDCWD, put_str(p, 0, from), AT_FDCWD,
			      put_str(p, 8192, to), MOVE_MOUNT_SET_GROUP);
}

/*
 * The propagation of m, if what it needs is made (its master's group, or
 * its peer group's first member): a member of a group made before joins
 * it; else a slave joins its master's group and becomes a slave of it,
 * and the first member of a peer group is made shared (a new group). 1 if
 * made, 0 if it waits for another mount, or -errno.
 */
static int set_propagation(struct rst_ctx *ctx, struct rst_task *t, const MountTree *tree,
			   const MountEntry *m, const char *root, bool *made)
{
	struct puppet *p = &t->pup;
	const MountEntry *rep = m->has_peer ? group_rep(tree, m->peer) : NULL;
	const MountEntry *master = m->has_master ? group_rep(tree, m->master) : NULL;
	size_t ir = rep ? (size_t)(find_index(tree, rep)) : 0;
	size_t im = master ? (size_t)(find_index(tree, master)) : 0;
	long r = 0;
	char target[4200];
	target_of(m, root, target, sizeof(target));
	if (rep && rep != m) { /* joins its group, and its master with it */
		if (!made[ir])
			return 0;
		r = join_group(p, rep, m, root);
	} else if (m->has_peer || m->has_master) {
		if (master && !made[im])
			return 0;
		if (master)
			r = join_group(p, master, m, root);
		if (r >= 0 && master)
			r = puppet_syscall(p, SYS_mount, 0, put_str(p, 0, target), 0, MS_SLAVE, 0);
		if (r >= 0 && m->has_peer)
			r = puppet_syscall(p, SYS_mount, 0, put_str(p, 0, target), 0, MS_SHARED, 0);
	} else if (m->has_propagation) {
		r = puppet_syscall(p, SYS_mount, 0, put_str(p, 0, target), 0, m->propagation, 0);
	}
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"mount %s: cannot set its propagation (shared:%u master:%u): %s",
				m->point, m->peer, m->master, strerror((int)-r));
	return 1;
}

/* Every mount's propagation, masters' groups before their slaves. */
static int set_propagations(struct rst_ctx *ctx, struct rst_task *t, const MountTree *tree,
			    const char *root)
{
	_cleanup_free_ bool *made = calloc(tree->n_mounts, sizeof(*made));
	size_t left = tree->n_mounts;
	if (!made)
		return -ENOMEM;
	for (bool more = true; more && left;) {
		more = false;
		for (size_t i = 0; i < tree->n_mounts; i++) {
			if (made[i])
				continue;
			int r = set_propagation(ctx, t, tree, tree->mounts[i], root, made);
			if (r < 0)
				return r;
			if (r > 0) {
				made[i] = more = true;
				left--;
			}
		}
	}
	if (left)
		return log_fail(&ctx->log, -EINVAL, "the mounts' propagation forms a loop");
	return 0;
}

/* A container sharing the host's root: the mounts it made, made again at
 * their points (ns.c has made its /proc and devpts). */
static int make_extras(struct rst_ctx *ctx, struct rst_task *t, const struct mnt_rst *s)
{
	int r = 0;
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++)
		r = make_mount(ctx, t, s, s->tree->mounts[i], "");
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++)
		r = finish_mount(ctx, t, s->tree->mounts[i], "");
	if (r >= 0)
		r = set_propagations(ctx, t, s->tree, "");
	if (r >= 0)
		log_debug(&ctx->log, "container: %zu mounts of its own made on the host's root, "
			  "%zu tmpfs files", s->tree->n_mounts, s->nfiles);
	return r;
}

static int mnt_root_ready(struct rst_ctx *ctx, struct rst_task *t)
{
	const struct mnt_rst *s = rst_of(ctx);
	struct puppet *p = &t->pup;
	if (!s)
		return 0;
	if (s->tree->host_root)
		return make_extras(ctx, t, s);
	/* the new root is made on its host directory, or an overlay on its
	 * first lower layer (hidden in the puppet's namespace only) */
	const MountEntry *top = s->tree->mounts[0];
	_cleanup_free_ char *copy = top->bind ? NULL : strdup(top->data);
	char *dirs[20];
	if (!top->bind && (!copy || overlay_dirs(copy, dirs, 20) < 1))
		return -ENOMEM;
	const char *root = top->bind ? top->source : dirs[0];
	int r = 0;
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++)
		r = make_mount(ctx, t, s, s->tree->mounts[i], root);
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++)
		r = finish_mount(ctx, t, s->tree->mounts[i], root);
	if (r < 0)
		return r;
	long c = puppet_syscall(p, SYS_chdir, put_str(p, 0, root));
	if (c >= 0)
		c = puppet_syscall(p, SYS_pivot_root, put_str(p, 0, "."), put_str(p, 8, "."));
	if (c >= 0)
		c = puppet_syscall(p, SYS_umount2, put_str(p, 0, "."), MNT_DETACH);
	if (c >= 0)
		c = puppet_syscall(p, SYS_chdir, put_str(p, 0, "/"));
	if (c < 0)
		return log_fail(&ctx->log, (int)c, "pivot_root into the container's root '%s': %s",
				root, strerror((int)-c));
	/* after pivot_root, which a shared root would refuse */
	r = set_propagations(ctx, t, s->tree, "");
	if (r < 0)
		return r;
	log_debug(&ctx->log, "container: %zu mounts made, %zu tmpfs files", s->tree->n_mounts,
		  s->nfiles);
	return 0;
}

/* --- unix socket names in the container (restart, at prepare) --------- */

/* A tmpfs's per-mount flags as fsmount(2) takes them (ro: at root ready). */
static unsigned int mount_attrs(uint32_t flags)
{
	return ((flags & MS_NOSUID) ? MOUNT_ATTR_NOSUID : 0) |
	       ((flags & MS_NODEV) ? MOUNT_ATTR_NODEV : 0) |
	       ((flags & MS_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0) |
	       ((flags & MS_NOATIME) ? MOUNT_ATTR_NOATIME : 0) |
	       ((flags & MS_STRICTATIME) ? MOUNT_ATTR_STRICTATIME : 0) |
	       ((flags & MS_NODIRATIME) ? MOUNT_ATTR_NODIRATIME : 0);
}

/* Tmpfs i made now, detached (fsopen, fsmount) and filled from the image:
 * attached to the tree at root ready (attach_early). */
static int make_early(struct rst_ctx *ctx, struct mnt_rst *s, size_t i)
{
	const MountEntry *m = s->tree->mounts[i];
	if (s->early[i] >= 0)
		return 0;
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	_cleanup_free_ char *copy = m->data ? strdup(m->data) : NULL;
	if (fs < 0)
		return -errno;
	for (char *save = NULL, *o = copy ? strtok_r(copy, ",", &save) : NULL; o;
	     o = strtok_r(NULL, ",", &save)) {
		char *v = strchr(o, '=');
		if (v)
			*v++ = '\0';
		if (syscall(SYS_fsconfig, fs, v ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, o, v,
			    0) < 0)
			return -errno;
	}
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	int mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, mount_attrs(m->flags));
	if (mfd < 0)
		return -errno;
	struct idmaps ids = { "0 0 4294967295", "0 0 4294967295" };
	int r = fill_tmpfs_at(ctx, s, m, mfd, &ids);
	if (r < 0) {
		close(mfd);
		return r;
	}
	s->early[i] = mfd;
	return 0;
}

struct sock_bind {
	const struct mnt_rst *s;
	const MountEntry *m; /* the mount that holds the name */
	int early;           /* its tmpfs (or its origin's), made at prepare; or -1 */
	int sock, mode;
	unsigned uid, gid;
	const char *name, *path;
	int r;
};

static int mkdir_p(char *path)
{
	for (char *p = path + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = '\0';
		int r = mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
		*p = c;
		if (r < 0 || !c)
			return r;
	}
}

/* In a thread of its own fs and mount namespace (see mnt.h). */
static int sock_bind_in(struct sock_bind *b)
{
	const MountEntry *m = b->m;
	char at[4200], base[4096];
	const char *top = "/tmp";
	if (unshare(CLONE_FS | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	/* a copy of the mount that holds the name, taken before the scaffold
	 * covers /tmp (where its source may be) */
	const char *below = m->has_from && m->source[0] ? m->source + 1 : "";
	_cleanup_close_ int c =
		m->bind ? (int)syscall(SYS_open_tree, AT_FDCWD, m->source,
				       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)
			: (int)syscall(SYS_open_tree, b->early, below,
				       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
					       (below[0] ? 0 : AT_EMPTY_PATH));
	if (c < 0 || mount("ckpt", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
		return -errno;
	snprintf(at, sizeof(at), "%s%s", top, strcmp(m->point, "/") ? m->point : "");
	int r = mkdir_p(at);
	if (r < 0)
		return r;
	if (syscall(SYS_move_mount, c, "", AT_FDCWD, at, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return -errno;
	/* a relative name was bound from the directory its path starts with */
	size_t nl = strlen(b->name), pl = strlen(b->path);
	snprintf(base, sizeof(base), "%.*s", pl > nl + 1 ? (int)(pl - nl - 1) : 1, b->path);
	struct stat st;
	if (chroot(top) < 0 || chdir(b->name[0] == '/' ? "/" : base) < 0)
		return -errno;
	if (lstat(b->path, &st) == 0 && (!S_ISSOCK(st.st_mode) || unlink(b->path) < 0))
		return -EEXIST; /* a stale socket file goes; anything else stays */
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (nl >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, b->name, nl);
	if (bind(b->sock, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
							      nl + 1)) < 0)
		return -errno;
	if (b->mode >= 0 && (chmod(b->path, (mode_t)b->mode & 07777) < 0 ||
			     lchown(b->path, b->uid, b->gid) < 0))
		return -errno;
	return 0;
}

static void *sock_bind_thread(void *arg)
{
	struct sock_bind *b = arg;
	b->r = sock_bind_in(b);
	return NULL;
}

/* The mount of the tree whose point holds path's directory (the last of
 * those with the longest point: a later one is on top). */
static size_t mount_of_path(const MountTree *tree, const char *path)
{
	size_t best = tree->n_mounts, blen = 0;
	const char *slash = strrchr(path, '/');
	char dir[4096];
	snprintf(dir, sizeof(dir), "%.*s", slash && slash != path ? (int)(slash - path) : 1, path);
	for (size_t i = 0; i < tree->n_mounts; i++) {
		const char *p = tree->mounts[i]->point;
		if (has_prefix_dir(dir, p) && (best == tree->n_mounts || strlen(p) >= blen)) {
			best = i;
			blen = strlen(p);
		}
	}
	return best;
}

int mnt_rst_bind_unix(struct rst_ctx *ctx, int sock, const char *name, const char *path, int mode,
		      unsigned uid, unsigned gid)
{
	struct mnt_rst *s = ctx->ntasks ? ctx->tasks[0].kstate[KIND_mnt] : NULL;
	if (!s || !s->tree || path[0] != '/' || !clean_path(path, false))
		return -EOPNOTSUPP;
	size_t i = mount_of_path(s->tree, path);
	if (i == s->tree->n_mounts)
		return -EOPNOTSUPP;
	struct sock_bind b = { .s = s, .m = s->tree->mounts[i], .early = -1, .sock = sock,
			       .mode = mode, .uid = uid, .gid = gid, .name = name, .path = path };
	if (!b.m->bind) {
		size_t o = b.m->has_from ? find_index(s->tree, find_mount(s, b.m->from)) : i;
		if (o == s->tree->n_mounts || strcmp(s->tree->mounts[o]->fstype, "tmpfs") ||
		    (ns_rst_flags(ctx) & CLONE_NEWUSER))
			return -EOPNOTSUPP;
		int r = make_early(ctx, s, o);
		if (r < 0)
			return r;
		b.early = s->early[o];
	}
	pthread_t th;
	if (pthread_create(&th, NULL, sock_bind_thread, &b) != 0)
		return -EAGAIN;
	pthread_join(th, NULL);
	return b.r;
}

static void mnt_free_rstate(void *state)
{
	struct mnt_rst *s = state;
	if (!s)
		return;
	for (size_t i = 0; s->early && i < s->tree->n_mounts; i++)
		if (s->early[i] >= 0)
			close(s->early[i]);
	free(s->early);
	if (s->tree)
		mount_tree__free_unpacked(s->tree, NULL);
	for (size_t i = 0; i < s->nfiles; i++)
		tmpfs_file__free_unpacked(s->files[i], NULL);
	free(s->files);
	free(s);
}

static const ProtobufCMessageDescriptor *mnt_descriptor(uint32_t sub)
{
	return sub == REC_SUB(MNT_TREE)	  ? &mount_tree__descriptor
	       : sub == REC_SUB(MNT_FILE) ? &tmpfs_file__descriptor
					  : NULL;
}

const struct kind_ops mnt_ops = {
	.collect = mnt_collect,
	.dump = mnt_dump,
	.load = mnt_load,
	.root_ready = mnt_root_ready,
	.free_state = mnt_free_state,
	.free_rstate = mnt_free_rstate,
	.descriptor = mnt_descriptor,
};
