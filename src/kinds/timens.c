/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The time namespace. A tree in a time namespace of its own (every process
 * in it, and its children's namespace the same one: see below) is saved
 * with the clocks it saw at the checkpoint, CLOCK_MONOTONIC and
 * CLOCK_BOOTTIME (ckpt's own plus the difference of the two namespaces'
 * offsets). At restart the root, before it forks anything, unshares a new
 * time namespace whose offsets ckpt sets so that those clocks go on from
 * the values saved -- as if the tree had been stopped, on this host or
 * another, since boot or not -- and enters it (setns of its
 * time_for_children); every task forked after it is in it.
 *
 * Refused, naming the process: a tree whose processes are in different
 * time namespaces, or one whose namespace for children (unshare without a
 * fork since) is not its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/ctx.h"
#include "timens.pb-c.h"
#include "util/cleanup.h"

enum { TIMENS_ENTRY = REC_TYPE(KID_timens, 1) };
#define NSEC 1000000000ll
#define MAX_CLOCK_NS (INT64_MAX / 4) /* ~36 years: a saved clock above is forged */

struct timens_ckpt {
	TimensEntry e;
	ino_t ino;  /* the tree's time namespace: the root's */
	bool saved; /* not ckpt's: e is dumped */
};

static int ns_ino(pid_t pid, const char *name, ino_t *ret)
{
	char path[64];
	struct stat st;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, name);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	if (stat(path, &st) < 0)
		return -errno;
	*ret = st.st_ino;
	return 0;
}

/* The offsets of pid's namespace for children (0: ckpt's own), in ns. */
static int read_offsets(pid_t pid, int64_t *mono, int64_t *boot)
{
	_cleanup_free_ char *text = NULL;
	int r = proc_read(pid ? pid : getpid(), "timens_offsets", &text, NULL);
	if (r < 0)
		return r;
	*mono = *boot = 0;
	for (char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		char name[16];
		long long s;
		long ns;
		if (sscanf(l, "%15s %lld %ld", name, &s, &ns) != 3)
			return -EINVAL;
		int64_t v = (int64_t)s * NSEC + ns;
		if (!strcmp(name, "monotonic"))
			*mono = v;
		else if (!strcmp(name, "boottime"))
			*boot = v;
	}
	return 0;
}

static int64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

/* The root's namespace, the tree's; when it is not ckpt's, its clocks now. */
static int collect_root(struct ckpt_ctx *ctx, struct task *t, ino_t ino, ino_t own)
{
	struct timens_ckpt *k = task_state(t, KIND_timens, sizeof(*k));
	int64_t mono, boot, own_mono, own_boot;
	if (!k)
		return -ENOMEM;
	timens_entry__init(&k->e);
	k->ino = ino;
	if (ino == own)
		return 0;
	k->saved = true;
	int r = read_offsets(t->pid, &mono, &boot);
	if (r >= 0)
		r = read_offsets(0, &own_mono, &own_boot);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot read its time namespace's offsets: %s",
				t->pid, strerror(-r));
	k->e.monotonic_ns = clock_ns(CLOCK_MONOTONIC) - own_mono + mono;
	k->e.boottime_ns = clock_ns(CLOCK_BOOTTIME) - own_boot + boot;
	k->e.has_monotonic_offset_ns = k->e.has_boottime_offset_ns = true;
	k->e.monotonic_offset_ns = mono;
	k->e.boottime_offset_ns = boot;
	log_debug(&ctx->log, "pid %d: a time namespace of its own (offsets %" PRId64 ", %" PRId64
		  " ns)", t->pid, mono, boot);
	return 0;
}

static int timens_collect(struct ckpt_ctx *ctx, struct task *t)
{
	/* ckpt's own namespace is looked at once, with the root */
	struct task *root = &ctx->tasks[0];
	const struct timens_ckpt *k = root->kstate[KIND_timens];
	ino_t own = 0, ns, children;
	int r = t == root ? ns_ino(0, "time", &own) : 0;
	if (r >= 0)
		r = ns_ino(t->pid, "time", &ns);
	if (r >= 0)
		r = ns_ino(t->pid, "time_for_children", &children);
	if (r < 0)
		return log_fail(&ctx->log, r, "pid %d: cannot look at its time namespace: %s",
				t->pid, strerror(-r));
	if (children != ns)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: its children's time namespace is not its own (unshare "
				"CLONE_NEWTIME without a fork since); not supported yet",
				t->pid);
	if (t == root)
		return collect_root(ctx, t, ns, own);
	if (k && ns != k->ino)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: in another time namespace than the tree's root (pid %d); "
				"not supported yet",
				t->pid, root->pid);
	return 0;
}

static int timens_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct timens_ckpt *k = t->kstate[KIND_timens];
	return k && k->saved ? ctx_write_msg(ctx, TIMENS_ENTRY, &k->e.base) : 0;
}

/* --- restart ---------------------------------------------------------- */

static int timens_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	if (t != &ctx->tasks[0])
		return log_fail(&ctx->log, -EINVAL, "record %u: a time namespace of pid %d, not of "
				"the root", rec->index, t->pid);
	TimensEntry *e = rctx_load_one(ctx, t, rec, KIND_timens, TIMENS_ENTRY,
				       &timens_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (e->monotonic_ns < 0 || e->monotonic_ns > MAX_CLOCK_NS || e->boottime_ns < 0 ||
	    e->boottime_ns > MAX_CLOCK_NS)
		return log_fail(&ctx->log, -EINVAL, "record %u: the time namespace's clocks are "
				"out of range", rec->index);
	return 0;
}

static void put_offset(char *buf, size_t len, const char *name, int64_t ns)
{
	int64_t s = ns / NSEC, rem = ns % NSEC;
	if (rem < 0)
		s--, rem += NSEC;
	snprintf(buf, len, "%s %" PRId64 " %" PRId64 "\n", name, s, rem);
}

/* Offsets that continue the saved clocks, written to the root's new
 * namespace for children before anyone is in it. */
static int set_offsets(struct rst_ctx *ctx, struct rst_task *t, const TimensEntry *e)
{
	int64_t own_mono, own_boot;
	char path[64], mono[64], boot[64];
	int r = read_offsets(0, &own_mono, &own_boot);
	if (r < 0)
		return log_fail(&ctx->log, r, "cannot read ckpt's own time offsets: %s",
				strerror(-r));
	put_offset(mono, sizeof(mono), "monotonic",
		   e->monotonic_ns - (clock_ns(CLOCK_MONOTONIC) - own_mono));
	put_offset(boot, sizeof(boot), "boottime",
		   e->boottime_ns - (clock_ns(CLOCK_BOOTTIME) - own_boot));
	snprintf(path, sizeof(path), "/proc/%d/timens_offsets", t->pup.pid);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, mono, strlen(mono)) < 0 || write(fd, boot, strlen(boot)) < 0)
		return log_fail(&ctx->log, -errno, "pid %d: cannot set the offsets of its time "
				"namespace: %m", t->pid);
	return 0;
}

/* Step "root ready": the root unshares a time namespace, ckpt sets its
 * offsets, the root enters it; nothing has been forked yet. */
static int timens_root_ready(struct rst_ctx *ctx, struct rst_task *t)
{
	const TimensEntry *e = t->kstate[KIND_timens];
	struct puppet *p = &t->pup;
	if (!e)
		return 0;
	long r = puppet_syscall(p, SYS_unshare, CLONE_NEWTIME);
	if (rst_check(ctx, t, r, "unshare(CLONE_NEWTIME)") < 0)
		return (int)r;
	int e2 = set_offsets(ctx, t, e);
	if (e2 < 0)
		return e2;
	const char path[] = "/proc/self/ns/time_for_children";
	uint64_t at = puppet_scratch_put(p, 0, path, sizeof(path));
	long fd = at ? puppet_syscall(p, SYS_openat, AT_FDCWD, at, O_RDONLY | O_CLOEXEC) : -EFAULT;
	if (rst_check(ctx, t, fd, "opening its new time namespace") < 0)
		return (int)fd;
	r = puppet_syscall(p, SYS_setns, fd, CLONE_NEWTIME);
	puppet_syscall(p, SYS_close, fd);
	if (rst_check(ctx, t, r, "entering its new time namespace") < 0)
		return (int)r;
	log_debug(&ctx->log, "pid %d: in a new time namespace", t->pid);
	return 0;
}

static const ProtobufCMessageDescriptor *timens_descriptor(uint32_t sub)
{
	return sub == REC_SUB(TIMENS_ENTRY) ? &timens_entry__descriptor : NULL;
}

const struct kind_ops timens_ops = {
	.collect = timens_collect,
	.dump = timens_dump,
	.load = timens_load,
	.root_ready = timens_root_ready,
	.free_state = free,
	.descriptor = timens_descriptor,
};
