/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A container's mount namespace, when the container has a root file
 * system of its own (ckpt run --root: its "/" is not ckpt's), or the
 * mounts a container sharing the host's root made of its own (those the
 * host's mountinfo does not have, but for ns.c's /proc and devpts; a tree
 * marked host_root; none: no record). A plain tree whose root has a
 * mount namespace of its own derived from ckpt's (PrivateTmp=yes) is
 * saved as such a host-rooted container (its namespace is ns.c's).
 *
 * Checkpoint (the root's collect): /proc/PID/mountinfo, every mount in
 * order, parents first. A mount whose file system is also mounted in
 * ckpt's namespace is a bind, saved by its host path (that mount's point
 * plus the rest of its root), checked to be the same directory or file;
 * one of a file system an earlier mount of the container's own has is a
 * bind of that mount ("from"); proc, sysfs, devpts, mqueue, tmpfs and
 * overlay instances of its own are saved by type and options (an
 * overlay's layers by their host paths). Each gets its per-mount flags
 * (ro, nosuid, nodev, noexec, atime), its root, its peer group and master.
 * NFS, FUSE, block-device mounts, namespace files (nsfs) and any other
 * file system are refused by mount point and type, with the reason; so is
 * a slave of a group outside, and a mount in (or a slave of) a peer group
 * that has mounts in ckpt's namespace. Every task must be in the root's
 * mount namespace (any tree: a subtree's too).
 * At dump, each tmpfs of its own is walked (mnt-tmpfs.c).
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
 * /proc/PID/root, or attached, made at prepare for a unix socket's name);
 * then the per-mount flags are set, pivot_root makes it "/", and the
 * propagation is made (peer groups joined by move_mount's
 * MOVE_MOUNT_SET_GROUP). All of it lives in the puppet's namespace, so a
 * failed restart leaves nothing behind.
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
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/mnt-int.h"
#include "kinds/mnt.h"
#include "kinds/ns.h"
#include "mnt.pb-c.h"
#include "util/cleanup.h"


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
	/* mountinfo names no atime option for strictatime: without this,
	 * a remount or a new instance took the default, relatime (firejail's
	 * tmpfs mounts are strictatime) */
	if (!(f & (MS_NOATIME | MS_RELATIME)))
		f |= MS_STRICTATIME;
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

bool mnt_has_prefix_dir(const char *path, const char *dir)
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
		if (host[i].dev == c->dev && mnt_has_prefix_dir(c->root, host[i].root) &&
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
	if (!strcmp(t, "nsfs"))
		return "a namespace file bound (the namespace it holds is not saved) is not "
		       "supported yet";
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
		    !mnt_has_prefix_dir(c->root, o->root))
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

/* Is c a bind of a part of the container's /proc, the one ns.c mounts
 * (not in a host-rooted tree): bwrap's and nspawn's read-only /proc/irq,
 * /proc/bus, /proc/sys, left out with a warning before? */
static bool proc_part(const struct mi *all, size_t n, const struct mi *c)
{
	if (strcmp(c->fstype, "proc") || !strcmp(c->root, "/"))
		return false;
	for (size_t j = 0; j < n; j++)
		if (&all[j] != c && all[j].dev == c->dev && !strcmp(all[j].point, "/proc") &&
		    !strcmp(all[j].root, "/") && !strcmp(all[j].fstype, "proc"))
			return true;
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
		return major(c->dev) != 0 || !strncmp(c->source, "/dev/", 5)
			       ? "block-device mounts are not supported (the device is not saved)"
			       : "a file system ckpt cannot make again";
	if (strcmp(c->fstype, "sysfs") && save_from(s, i, c, e))
		return NULL;
	if (proc_part(all, n, c)) {
		e->has_proc_part = e->proc_part = true;
		e->source = c->root;
		return NULL;
	}
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
			      mnt_has_prefix_dir(root_of(m), root_of(o));
		}
		if (all)
			return o;
	}
	return NULL;
}

size_t mnt_find_index(const MountTree *tree, const MountEntry *e)
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
	if (e->has_master && (!rep || !mnt_has_prefix_dir(root_of(e), root_of(rep))))
		return "a slave mount whose master is not a mount of the container is not "
		       "supported";
	if (e->has_peer && !group_rep(tree, e->peer))
		return "a peer group whose mounts' roots do not nest is not supported yet";
	return NULL;
}

/*
 * A mount of ckpt's namespace in the peer group e is in or receives from
 * (a mount of the host's grafted into the container by open_tree and
 * move_mount, or a namespace made without private propagation), or NULL:
 * such a mount shares its propagation with a namespace the container does
 * not own, which a restart, in a namespace of its own, cannot give back.
 */
static const struct mi *outside_peer(const MountEntry *e, const struct mi *host, size_t nhost)
{
	for (size_t i = 0; i < nhost; i++) {
		uint32_t g = tag_of(host[i].fields, "shared:");
		if (g && ((e->has_peer && g == e->peer) || (e->has_master && g == e->master)))
			return &host[i];
	}
	return NULL;
}

/* Is peer group g one of ckpt's mounts' (host)? */
static bool host_group(const struct mi *host, size_t nhost, uint32_t g)
{
	for (size_t i = 0; i < nhost; i++)
		if (tag_of(host[i].fields, "shared:") == g)
			return true;
	return false;
}

/*
 * A plain tree's root in a mount namespace of its own (ns.c): its copies
 * of ckpt's mounts are slaves of them (PrivateTmp=yes, unshare
 * --propagation slave: one at least has a master of ckpt's) or private
 * (unshare -m), and either way may also be shared, each in a peer group of
 * the namespace's own (systemd's default MountFlags=shared: mount
 * --make-rshared / after the unshare). A restart makes them so with two
 * flags for the whole tree, so what the flags cannot say is refused, by
 * mount point:
 * - a copy still in a peer group of ckpt's (unshare --propagation
 *   unchanged): what it mounts there is the host's too, which a restart
 *   in a namespace of its own would cut;
 * - a copy of a shared mount of ckpt's that is not its slave, where
 *   another copy is one (made private after the unshare);
 * - copies shared in groups of their own beside copies that are not, a
 *   copy whose group has another member, or a copy that is a slave of a
 *   group of the namespace's own.
 */
static const struct mi *host_twin(const struct mi *c, const struct mi *host, size_t nhost);

/* Has any other mount of all (n) peer group g? */
static bool group_shared_with(const struct mi *all, size_t n, const struct mi *c, uint32_t g)
{
	for (size_t i = 0; i < n; i++)
		if (&all[i] != c && tag_of(all[i].fields, "shared:") == g)
			return true;
	return false;
}

/* What the restart's two flags cannot make of copy c (h: its twin of
 * ckpt's; a_slave: a copy that is a slave of ckpt's, or NULL): false, or
 * true with why (len bytes), for the refusal. */
static bool copy_refused(const struct mi *all, size_t n, const struct mi *c, const struct mi *h,
			 const struct mi *host, size_t nhost, const struct mi *a_slave, char *why,
			 size_t len)
{
	uint32_t g = tag_of(c->fields, "shared:"), m = tag_of(c->fields, "master:");
	if (m && !host_group(host, nhost, m))
		snprintf(why, len, "is a slave of a peer group of its own namespace (master:%u)", m);
	else if (a_slave && tag_of(h->fields, "shared:") && !m)
		snprintf(why, len, "is not a slave of ckpt's mount (%s), where %s is one (%s)",
			 *c->fields ? c->fields : "private", a_slave->point, a_slave->fields);
	else if (g && group_shared_with(all, n, c, g))
		snprintf(why, len, "shares its peer group (shared:%u) with another mount of the "
			 "namespace", g);
	else
		return false;
	return true;
}

int mnt_subtree_prop(struct ckpt_ctx *ctx, pid_t pid, bool *ret_slave, bool *ret_shared)
{
	_cleanup_free_ char *text = NULL, *htext = NULL;
	_cleanup_free_ struct mi *all = NULL, *host = NULL;
	size_t n = 0, nhost = 0;
	int r = proc_read(pid, "mountinfo", &text, NULL);
	if (r >= 0)
		r = proc_read(0, "mountinfo", &htext, NULL);
	if (r >= 0)
		r = parse_mountinfo(text, &all, &n);
	if (r >= 0)
		r = parse_mountinfo(htext, &host, &nhost);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its mountinfo or ckpt's: %s",
				pid, strerror(-r));
	*ret_slave = *ret_shared = false;
	const struct mi *root = top(all, n), *hroot = top(host, nhost);
	if (!root || !hroot || root->dev != hroot->dev || strcmp(root->root, hroot->root))
		return 1; /* a root of its own: the mnt kind saves every mount's propagation */
	const struct mi *a_slave = NULL, *a_own = NULL, *a_plain = NULL;
	for (size_t i = 0; i < n; i++) {
		uint32_t g = tag_of(all[i].fields, "shared:"), m = tag_of(all[i].fields, "master:");
		if (g && host_group(host, nhost, g))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: mount %s of its own mount namespace is in a peer "
					"group of ckpt's (shared:%u): a mount namespace on ckpt's "
					"root made without private or slave propagation is not "
					"supported",
					pid, all[i].point, g);
		if (!a_slave && m && host_group(host, nhost, m))
			a_slave = &all[i];
	}
	for (size_t i = 0; i < n; i++) {
		const struct mi *c = &all[i], *h = host_twin(c, host, nhost);
		if (!h)
			continue; /* a mount of its own: the mnt kind's */
		char why[512];
		if (copy_refused(all, n, c, h, host, nhost, a_slave, why, sizeof(why)))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: mount %s of its own mount namespace %s: a restart "
					"gives every copy of ckpt's mounts the same propagation; not "
					"supported yet",
					pid, c->point, why);
		if (tag_of(c->fields, "shared:"))
			a_own = a_own ? a_own : c;
		else
			a_plain = a_plain ? a_plain : c;
	}
	if (a_own && a_plain)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: mount %s of its own mount namespace is not shared (%s), "
				"where %s is shared in a peer group of the namespace's own (%s): a "
				"restart gives every copy of ckpt's mounts the same propagation; "
				"not supported yet",
				pid, a_plain->point, *a_plain->fields ? a_plain->fields : "private",
				a_own->point, a_own->fields);
	*ret_slave = a_slave != NULL;
	*ret_shared = a_own != NULL;
	return 0;
}

/* Each mount's propagation can be made again, and is the container's
 * alone: 0, or refused naming the mount. */
static int check_propagation(struct ckpt_ctx *ctx, const struct mnt_ckpt *s,
			     const struct mi *host, size_t nhost)
{
	for (size_t i = 0; i < s->tree.n_mounts; i++) {
		const MountEntry *e = s->tree.mounts[i];
		const struct mi *h = outside_peer(e, host, nhost);
		const char *why = propagation_refusal(&s->tree, e);
		if (h)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: mount %s (%s, shared:%u, master:%u): shares its "
					"propagation with a mount outside the container (%s in ckpt's "
					"mount namespace, shared:%u): a mount of a namespace the "
					"container does not own is not supported",
					s->pid, e->point, e->fstype, e->peer, e->master, h->point,
					tag_of(h->fields, "shared:"));
		if (why)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: mount %s (%s, shared:%u, master:%u): %s", s->pid,
					e->point, e->fstype, e->peer, e->master, why);
	}
	return 0;
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
	if ((!strcmp(c->point, "/proc") && !strcmp(c->fstype, "proc") && ctx->container) ||
	    (!strcmp(c->point, "/dev/pts") && !strcmp(c->fstype, "devpts") &&
	     c->dev == ns_devpts_dev(ctx)))
		return false;
	for (size_t i = 0; i < nhost; i++)
		if (host[i].dev == c->dev && !strcmp(host[i].point, c->point))
			return false;
	return true;
}

/* The last mount of the host's at c's point on c's device (stacked: the
 * one seen), or NULL. */
static const struct mi *host_twin(const struct mi *c, const struct mi *host, size_t nhost)
{
	const struct mi *h = NULL;
	for (size_t i = 0; i < nhost; i++)
		if (host[i].dev == c->dev && !strcmp(host[i].point, c->point))
			h = &host[i];
	return h;
}

/*
 * The mounts of the host's that the container has (its namespace's copy)
 * with per-mount flags of its own: bwrap's --ro-bind / / makes them all
 * read-only, nosuid and nodev, and a restart without them gave the
 * sandbox a writable host (the container's own /proc and devpts are ns.c's;
 * the host's under them are hidden).
 */
static int collect_host_flags(struct mnt_ckpt *s, const struct mi *all, size_t n,
			      const struct mi *host, size_t nhost)
{
	size_t k = 0;
	s->hflags = calloc(n, sizeof(*s->hflags));
	s->hptrs = calloc(n, sizeof(*s->hptrs));
	if (!s->hflags || !s->hptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct mi *c = &all[i], *h = host_twin(c, host, nhost);
		if (!h || (!strcmp(c->point, "/proc") && !strcmp(c->fstype, "proc")) ||
		    (!strcmp(c->point, "/dev/pts") && !strcmp(c->fstype, "devpts")))
			continue;
		uint32_t f = mount_flags(c->opts);
		/* under a mount of its own, or one on top of it at its point
		 * (bwrap's /dev tmpfs on the host's /dev, its /proc) */
		bool hidden = false;
		for (size_t j = 0; j < n && !hidden; j++)
			hidden = j != i && mnt_has_prefix_dir(c->point, all[j].point) &&
				 (j > i || strcmp(c->point, all[j].point)) &&
				 !host_twin(&all[j], host, nhost);
		if (hidden || f == mount_flags(h->opts))
			continue;
		host_mount_flags__init(&s->hflags[k]);
		s->hflags[k].point = c->point;
		s->hflags[k].flags = f;
		s->hptrs[k] = &s->hflags[k];
		k++;
	}
	s->tree.n_host_flags = k;
	s->tree.host_flags = s->hptrs;
	return 0;
}

/*
 * A container sharing the host's root: the mounts it made of its own, in
 * mountinfo's order (each after the mount it is on); 1 if none (no
 * record, as before). One ckpt cannot make again is left out with a
 * warning, not refused: a mount of the host's that the host unmounted
 * after the container started (ip netns del) looks the same, and used to
 * be left out too; a file open on it is refused by its kind.
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
		if (why) { /* or a mount of the host's it has unmounted since */
			log_warn(&ctx->log, "pid %d: mount %s (%s, %s) left out: %s", s->pid,
				 c->point, c->fstype, c->source, why);
			continue;
		}
		e->parent = c->parent;
		if (e->proc_part) /* no file is "in root" for it */
			s->devs[k] = 0;
		s->ptrs[k++] = e;
	}
	int r = collect_host_flags(s, all, n, host, nhost);
	if (r < 0)
		return r;
	if (!k && !s->tree.n_host_flags)
		return 1;
	s->tree.n_mounts = k;
	s->tree.mounts = s->ptrs;
	s->tree.has_host_root = s->tree.host_root = true;
	return check_propagation(ctx, s, host, nhost);
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
	if (!ctx->container)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: a plain tree whose root has a root directory of its own "
				"in its mount namespace (pivot_root) is not supported (a container "
				"is checkpointed by the pid of its init)",
				s->pid);
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
	int r = check_propagation(ctx, s, host, nhost);
	if (r < 0)
		return r;
	if (!s->ents[0].bind && strcmp(s->ents[0].fstype, "overlay"))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: its root is neither a directory of the host nor an overlay; "
				"not supported yet",
				s->pid);
	return 0;
}

/*
 * Every thread of t in the mount namespace of the tree's root, whose
 * mounts are the ones saved (a task that unshared CLONE_NEWNS has mounts
 * of a namespace nothing saves, and would come back in the root's): else
 * refused by pid.
 */
static int in_root_mntns(struct ckpt_ctx *ctx, struct task *t)
{
	struct task *root = &ctx->tasks[0];
	struct stat rs, ts;
	if (t->zombie)
		return 0;
	int r = proc_ns_stat(root->pid, "mnt", &rs);
	_cleanup_free_ struct ns_thread_ino *ths = ns_threads_ino(t, "mnt");
	if (!ths)
		return -ENOMEM;
	for (size_t j = 0; r >= 0 && j < t->nthreads + (t != root); j++) {
		pid_t tid = j < t->nthreads ? t->threads[j].pid : 0;
		if (tid) { /* by its inode alone: nsfs is one device */
			r = ths[j].err;
			ts.st_ino = ths[j].ino;
			ts.st_dev = rs.st_dev;
		} else {
			r = proc_ns_stat(t->pid, "mnt", &ts);
		}
		if (r >= 0 && (ts.st_ino != rs.st_ino || ts.st_dev != rs.st_dev))
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d%s%.0d: in another mount namespace (mnt:[%lu]) than the "
					"tree's root (pid %d, mnt:[%lu]): its mounts are not saved; not "
					"supported yet",
					t->pid, tid ? " thread " : "", tid, (unsigned long)ts.st_ino,
					root->pid, (unsigned long)rs.st_ino);
	}
	if (r < 0 && r != -ENOENT)
		return log_fail(&ctx->log, r, "pid %d: cannot read its mount namespace: %s", t->pid,
				strerror(-r));
	return 0;
}

static int mnt_collect(struct ckpt_ctx *ctx, struct task *t)
{
	int r = in_root_mntns(ctx, t);
	/* a plain tree's root in a mount namespace of its own too (ns.c) */
	if (r < 0 || t != &ctx->tasks[0] || same_mntns(t->pid))
		return r;
	char *text = NULL;
	_cleanup_free_ char *htext = NULL;
	r = proc_read(t->pid, "mountinfo", &text, NULL);
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
		s->tree.n_mounts = s->tree.n_host_flags = 0;
	if (r >= 0 && (s->tree.n_mounts || s->tree.n_host_flags))
		log_info(&ctx->log, "pid %d: %s, %zu mounts%s", t->pid,
			 s->tree.host_root ? "the host's root with mounts of its own"
					   : "a root of its own",
			 s->tree.n_mounts,
			 s->tree.n_host_flags ? ", flags of its own on mounts of the host's" : "");
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

int mnt_unix_name(struct ckpt_ctx *ctx, const char *path, uid_t uid, gid_t gid)
{
	const struct mnt_ckpt *s = tree_of(ctx);
	size_t i = s && path ? mnt_mount_of_path(&s->tree, path) : 0;
	if (!path || !s || path[0] != '/' || (s->tree.host_root && i == s->tree.n_mounts))
		return 0;
	if (geteuid() == 0 && !ns_own_userns(ctx))
		return 1;
	const MountEntry *m = i < s->tree.n_mounts ? s->tree.mounts[i] : NULL;
	if (m && !m->bind && !m->has_from && !strcmp(m->fstype, "tmpfs") && ns_own_userns(ctx))
		return 2; /* a tmpfs's: bound once its tree is made, in its namespaces */
	if (!m || !m->bind)
		return -EOPNOTSUPP;
	/* a bind of the host's: bound in a user namespace of ckpt's (see
	 * mnt_rst_bind_unix), as ckpt, in the host's directory */
	char dir[8400];
	const char *rest = path + (strcmp(m->point, "/") ? strlen(m->point) : 0);
	const char *slash = strrchr(rest, '/');
	snprintf(dir, sizeof(dir), "%s%.*s", m->source, slash ? (int)(slash - rest) : 0, rest);
	if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0)
		return -EACCES;
	return geteuid() == 0 || (uid == geteuid() && gid == getegid()) ? 1 : -EPERM;
}

static int mnt_dump(struct ckpt_ctx *ctx, struct task *t)
{
	const struct mnt_ckpt *s = t->kstate[KIND_mnt];
	if (!s || (!s->tree.n_mounts && !s->tree.n_host_flags))
		return 0;
	int r = ctx_write_msg(ctx, MNT_TREE, &s->tree.base);
	for (size_t i = 0; r >= 0 && i < s->tree.n_mounts; i++)
		if (!s->ptrs[i]->bind && !s->ptrs[i]->has_from &&
		    !strcmp(s->ptrs[i]->fstype, "tmpfs"))
			r = mnt_dump_tmpfs(ctx, s, i);
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
	free(s->hflags);
	free(s->hptrs);
	free(s);
}

/* --- restart ----------------------------------------------------------- */


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
bool mnt_clean_path(const char *p, bool rel)
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
		ok = mnt_clean_path(dirs[i], false) && !strchr(dirs[i], '\\');
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
			    (e->source[0] && !mnt_clean_path(e->source, false))))
		return "a bind of a mount that is not an earlier instance, or its path not clean";
	if ((e->root && !mnt_clean_path(e->root, false)) || propagation_refusal(tree, e))
		return "a root not clean, or a propagation that cannot be made";
	if (!parent)
		return "a mount before its parent (the root first)";
	if (!mnt_clean_path(e->point, false))
		return "a mount point that is not a clean absolute path";
	if (e->bind ? !e->source || !mnt_clean_path(e->source, false) : !own_type(e->fstype))
		return "a bind without an absolute source, or a file system ckpt cannot make";
	if (e->proc_part &&
	    (!tree->host_root || e->bind || e->has_from || strcmp(e->fstype, "proc") ||
	     !e->source || e->data || !mnt_clean_path(e->source, false)))
		return "a part of the container's /proc that is not one";
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
	bool flags_only = s->tree->host_root && s->tree->n_host_flags;
	if ((!s->tree->n_mounts && !flags_only) || s->tree->n_mounts > MNT_MAX ||
	    s->tree->n_host_flags > MNT_MAX || (s->tree->n_host_flags && !s->tree->host_root) ||
	    t != &ctx->tasks[0] || !(ns_rst_flags(ctx) & CLONE_NEWNS))
		return log_fail(&ctx->log, -EINVAL, "record %u: a mount tree not valid", rec->index);
	for (size_t i = 0; i < s->tree->n_host_flags; i++) {
		const HostMountFlags *h = s->tree->host_flags[i];
		if (!mnt_clean_path(h->point, false) || (h->flags & ~(uint32_t)MNT_FLAGS))
			return log_fail(&ctx->log, -EINVAL,
					"record %u: host mount %zu: a point "
					"not clean, or flags not valid",
					rec->index, i);
	}
	for (size_t i = 0; i < s->tree->n_mounts; i++) {
		const char *why = entry_invalid(s->tree, i);
		if (why)
			return log_fail(&ctx->log, -EINVAL, "record %u: mount %zu: %s", rec->index, i,
					why);
	}
	if (!(s->early = malloc((s->tree->n_mounts + 1) * sizeof(*s->early))))
		return -ENOMEM;
	for (size_t i = 0; i < s->tree->n_mounts; i++)
		s->early[i] = -1;
	return 0;
}

const MountEntry *mnt_find_mount(const struct mnt_rst *s, uint32_t id)
{
	for (size_t i = 0; s->tree && i < s->tree->n_mounts; i++)
		if (s->tree->mounts[i]->id == id)
			return s->tree->mounts[i];
	return NULL;
}

/* A sparse file's runs: pairs, ascending, within its size, data their
 * total (none: data from offset 0). */
static bool extents_ok(const TmpfsFile *f)
{
	uint64_t end = 0, total = 0;
	if (!f->n_extents)
		return true;
	if (f->n_extents % 2 || !f->has_data || (f->mode & S_IFMT) != S_IFREG)
		return false;
	for (size_t k = 0; k < f->n_extents; k += 2) {
		uint64_t off = f->extents[k], len = f->extents[k + 1];
		if (off < end || len > f->size || off > f->size - len)
			return false;
		end = off + len;
		total += len;
	}
	return total == f->data.len;
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
	const MountEntry *m = mnt_find_mount(s, f->mount);
	mode_t type = f->mode & S_IFMT;
	if (f->link) { /* a hard link: to a file of the same tmpfs saved before */
		bool ok = false;
		for (size_t i = 0; !ok && i + 1 < s->nfiles; i++)
			ok = s->files[i]->mount == f->mount && !s->files[i]->link &&
			     !strcmp(s->files[i]->path, f->link) && !S_ISDIR(s->files[i]->mode);
		if (!ok || !mnt_clean_path(f->path, true))
			return log_fail(&ctx->log, -EINVAL,
					"record %u: a tmpfs hard link not valid", rec->index);
		return 0;
	}
	bool ok = m && !m->bind && !m->has_from && !strcmp(m->fstype, "tmpfs") &&
		  (!f->path[0] || mnt_clean_path(f->path, true)) &&
		  (type == S_IFDIR || type == S_IFREG || type == S_IFLNK || type == S_IFIFO ||
		   type == S_IFCHR) &&
		  (type != S_IFLNK || f->target) && (type != S_IFCHR || mnt_dev_allowed(f->mode, f->rdev)) &&
		  (f->path[0] || type == S_IFDIR) &&
		  (!f->has_data || f->data.len <= f->size) && extents_ok(f);
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

static void target_of(const MountEntry *m, const char *root, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", root, strcmp(m->point, "/") || !root[0] ? m->point : "");
}

/*
 * The host sources of binds that a mount made before them would hide
 * (bwrap's --dev: a tmpfs on /dev, then /dev/null bound from the host's
 * /dev/null onto the empty file it holds; by path, the bind took that
 * empty file, and the fd on /dev/null failed the restart as "no longer
 * the same type of file"): the puppet opens each (O_PATH) before any
 * mount is made, and the bind is made from /proc/self/fd/N. A bind from
 * another namespace's path is refused (EINVAL), so the fd is the
 * puppet's own, in its copy of ckpt's namespace. -1 where nothing hides
 * the source: those are bound by path, as before.
 */
static int open_hidden_sources(struct rst_ctx *ctx, struct rst_task *t, const struct mnt_rst *s,
			       const char *root, long *fds)
{
	struct puppet *p = &t->pup;
	for (size_t i = 0; i < s->tree->n_mounts; i++) {
		const MountEntry *m = s->tree->mounts[i];
		bool hidden = false;
		fds[i] = -1;
		for (size_t j = 0; m->bind && !m->has_from && !hidden && j < i; j++) {
			char target[4200];
			target_of(s->tree->mounts[j], root, target, sizeof(target));
			hidden = mnt_has_prefix_dir(m->source, target);
		}
		if (!hidden)
			continue;
		fds[i] = puppet_syscall(p, SYS_openat, AT_FDCWD, put_str(p, 0, m->source),
					O_PATH | O_CLOEXEC);
		if (fds[i] < 0)
			return log_fail(&ctx->log, (int)fds[i],
					"mount %s: cannot open its source '%s': %s", m->point,
					m->source, strerror((int)-fds[i]));
	}
	return 0;
}

static void close_sources(struct rst_task *t, const MountTree *tree, const long *fds)
{
	for (size_t i = 0; fds && i < tree->n_mounts; i++)
		if (fds[i] >= 0)
			puppet_syscall(&t->pup, SYS_close, fds[i]);
}

/* Mount m in the puppet at root + its point (the new tree, not yet "/");
 * srcfd: the puppet's fd of a bind's hidden source, or -1. */
static int make_mount(struct rst_ctx *ctx, struct rst_task *t, const struct mnt_rst *s,
		      const MountEntry *m, const char *root, long srcfd)
{
	struct puppet *p = &t->pup;
	char target[4200], via[4300];
	struct stat st;
	snprintf(target, sizeof(target), "%s%s", root, strcmp(m->point, "/") || !root[0] ? m->point : "");
	snprintf(via, sizeof(via), "/proc/%d/root%s", p->pid, target);
	if (m->bind && stat(m->source, &st) < 0)
		return log_fail(&ctx->log, -errno, "mount %s: its source '%s' is gone: %m", m->point,
				m->source);
	/* before the mount point: an overlay root's is its first lower layer */
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
	if (lstat(via, &st) < 0)
		return log_fail(&ctx->log, -errno, "mount %s: its mount point is missing: %m",
				m->point);
	size_t idx = mnt_find_index(s->tree, m);
	if (s->early[idx] >= 0) /* made at prepare for a socket's name: attached */
		return attach_early(ctx, t, m, s->early[idx], target);
	char from[8400];
	if (srcfd >= 0)
		snprintf(from, sizeof(from), "/proc/self/fd/%ld", srcfd);
	if (m->proc_part) /* of ns.c's /proc, made at root ready before */
		snprintf(from, sizeof(from), "/proc%s", m->source);
	if (m->has_from) { /* a bind of an earlier mount of the tree */
		const MountEntry *o = mnt_find_mount(s, m->from);
		snprintf(from, sizeof(from), "%s%s%s", root, strcmp(o->point, "/") ? o->point : "",
			 m->source);
	}
	long r =
	    m->has_from || m->proc_part ? puppet_syscall(p, SYS_mount, put_str(p, 0, from),
							 put_str(p, 8192, target), 0, MS_BIND, 0)
	    : m->bind
		? puppet_syscall(p, SYS_mount, put_str(p, 0, srcfd >= 0 ? from : m->source),
				 put_str(p, 8192, target), 0, MS_BIND, 0)
		: puppet_syscall(p, SYS_mount, put_str(p, 0, m->source), put_str(p, 8192, target),
				 put_str(p, 4096, m->fstype), m->flags & ~(uint32_t)MS_RDONLY,
				 m->data ? put_str(p, 16384, m->data) : 0);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "mount %s (%s%s%s): cannot mount it: %s",
				m->point, m->bind ? "bind of '" : m->fstype, m->bind ? m->source : "",
				m->bind ? "'" : "", strerror((int)-r));
	if (!m->bind && !m->has_from && !strcmp(m->fstype, "tmpfs"))
		return mnt_fill_tmpfs(ctx, s, m, via);
	return 0;
}

/* Flags of m, once every mount is made. */
static int finish_mount(struct rst_ctx *ctx, struct rst_task *t, const MountEntry *m,
			const char *root)
{
	struct puppet *p = &t->pup;
	char target[4200];
	long r = 0;
	target_of(m, root, target, sizeof(target));
	if (m->bind || m->has_from || m->proc_part || (m->flags & MS_RDONLY))
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
	size_t ir = rep ? (size_t)(mnt_find_index(tree, rep)) : 0;
	size_t im = master ? (size_t)(mnt_find_index(tree, master)) : 0;
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

/*
 * The flags a container gave its copy of a host mount, set on the puppet's
 * copy (a bind remount changes that mount alone, not the host's). The
 * point must still be a mount point (the host may have unmounted it
 * since): else the flags would land on the mount below, and a sandbox
 * restarted without its read-only mount would not say so.
 */
static int set_host_flags(struct rst_ctx *ctx, struct rst_task *t, const HostMountFlags *h)
{
	struct puppet *p = &t->pup;
	char via[4300];
	struct statx a;
	snprintf(via, sizeof(via), "/proc/%d/root%s", p->pid, h->point);
	/* the point itself, not "point/..": a user may not search
	 * /sys/kernel/tracing */
	if (strcmp(h->point, "/") && (statx(AT_FDCWD, via, AT_SYMLINK_NOFOLLOW, 0, &a) < 0 ||
				      !(a.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
				      !(a.stx_attributes & STATX_ATTR_MOUNT_ROOT)))
		return log_fail(&ctx->log, -ENOENT,
				"mount %s of the host's, with flags of the "
				"container's own: no longer a mount point here",
				h->point);
	long r = puppet_syscall(p, SYS_mount, 0, put_str(p, 0, h->point), 0,
				MS_REMOUNT | MS_BIND | h->flags, 0);
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"mount %s of the host's: cannot set the "
				"container's flags on it: %s",
				h->point, strerror((int)-r));
	return 0;
}

/* A container sharing the host's root: the mounts it made, made again at
 * their points (ns.c has made its /proc and devpts). */
/*
 * ns.c's /dev/pts, if a mount of the container's own would hide it (bwrap
 * --dev: its devpts is on /dev/pts of its /dev tmpfs; ns.c mounts it on
 * the host's /dev, under that tmpfs, where the restored sandbox had no
 * devpts and /dev/ptmx led nowhere): the puppet's O_PATH fd of it, taken
 * before the mounts are made and moved onto the new /dev/pts after; -1.
 */
static long open_devpts(struct rst_task *t, const struct mnt_rst *s)
{
	struct puppet *p = &t->pup;
	bool hidden = false;
	for (size_t i = 0; !hidden && i < s->tree->n_mounts; i++)
		hidden = mnt_has_prefix_dir("/dev/pts", s->tree->mounts[i]->point);
	if (!hidden)
		return -1;
	char via[64];
	struct statfs sfs;
	snprintf(via, sizeof(via), "/proc/%d/root/dev/pts", p->pid);
	if (statfs(via, &sfs) < 0 || sfs.f_type != DEVPTS_SUPER_MAGIC)
		return -1;
	long fd =
	    puppet_syscall(p, SYS_openat, AT_FDCWD, put_str(p, 0, "/dev/pts"), O_PATH | O_CLOEXEC);
	return fd < 0 ? -1 : fd;
}

static int move_devpts(struct rst_ctx *ctx, struct rst_task *t, long fd)
{
	struct puppet *p = &t->pup;
	long r = puppet_syscall(p, SYS_move_mount, fd, put_str(p, 0, ""), AT_FDCWD,
				put_str(p, 8192, "/dev/pts"), MOVE_MOUNT_F_EMPTY_PATH);
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"mount /dev/pts (devpts): cannot move it onto "
				"the container's /dev: %s",
				strerror((int)-r));
	return 0;
}

static int make_extras(struct rst_ctx *ctx, struct rst_task *t, const struct mnt_rst *s)
{
	_cleanup_free_ long *fds = calloc(s->tree->n_mounts, sizeof(*fds));
	long pts = open_devpts(t, s);
	int r = fds ? open_hidden_sources(ctx, t, s, "", fds) : -ENOMEM;
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++)
		r = make_mount(ctx, t, s, s->tree->mounts[i], "", fds[i]);
	close_sources(t, s->tree, fds);
	if (r >= 0 && pts >= 0)
		r = move_devpts(ctx, t, pts);
	if (pts >= 0)
		puppet_syscall(&t->pup, SYS_close, pts);
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++)
		r = finish_mount(ctx, t, s->tree->mounts[i], "");
	/* private first: one made on a shared copy of the host's (a plain
	 * tree's namespace, ns.c's mnt_shared) is shared in a group of its
	 * own, and move_mount joins a group only from a private mount */
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++) {
		long k = puppet_syscall(&t->pup, SYS_mount, 0,
					put_str(&t->pup, 0, s->tree->mounts[i]->point), 0, MS_PRIVATE, 0);
		if (k < 0)
			r = log_fail(&ctx->log, (int)k, "mount %s: cannot make it private: %s",
				     s->tree->mounts[i]->point, strerror((int)-k));
	}
	if (r >= 0)
		r = set_propagations(ctx, t, s->tree, "");
	for (size_t i = 0; r >= 0 && i < s->tree->n_host_flags; i++)
		r = set_host_flags(ctx, t, s->tree->host_flags[i]);
	if (r >= 0)
		log_debug(&ctx->log,
			  "container: %zu mounts of its own made on the host's root, "
			  "%zu tmpfs files, flags set on %zu of the host's",
			  s->tree->n_mounts, s->nfiles, s->tree->n_host_flags);
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
	_cleanup_free_ long *fds = calloc(s->tree->n_mounts, sizeof(*fds));
	int r = fds ? open_hidden_sources(ctx, t, s, root, fds) : -ENOMEM;
	for (size_t i = 0; r >= 0 && i < s->tree->n_mounts; i++)
		r = make_mount(ctx, t, s, s->tree->mounts[i], root, fds[i]);
	close_sources(t, s->tree, fds);
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
