/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Credentials: uids, gids, groups, capabilities (inheritable, permitted,
 * effective, bounding, ambient), securebits, no_new_privs, and what a
 * credential change resets (pdeathsig, dumpable).
 *
 * They are restored by the puppet itself, so the kernel checks each step
 * against what ckpt's caller could do: an image cannot grant more. The
 * puppet starts with the caller's credentials (root with its capabilities,
 * root in a user namespace, or a user restoring their own process), and
 * each step asks for privilege only where the image needs it:
 *   0. inheritable caps that the image's bounding set lacks: raised
 *      first, while the puppet's bounding set has them (a capset may
 *      add to the inheritable set only what is in the bounding set);
 *   1. the bounding set: drop what the image lacks and the puppet still
 *      has (CAP_SETPCAP, only if there is something to drop);
 *   2. groups (only if they differ), setresgid, setfsgid;
 *   3. PR_SET_KEEPCAPS 1, which needs no privilege (PR_SET_SECUREBITS
 *      does): leaving uid 0 keeps the permitted set, to be cut at step 5;
 *   4. setresuid, setfsuid: leaving uid 0 clears effective and ambient;
 *   5. capset: the image's permitted, effective and inheritable sets, plus
 *      CAP_SETPCAP if the puppet still has it and step 7 needs it;
 *   6. ambient caps raised (each is in permitted and inheritable now, and
 *      no securebit forbids it yet);
 *   7. securebits, only if they differ: keepcaps alone by PR_SET_KEEPCAPS
 *      (no privilege: a root that dropped to a user with no capabilities
 *      left ends here), any other bit or lock by PR_SET_SECUREBITS with
 *      CAP_SETPCAP;
 *   8. capset exactly the image's sets, if step 5 lent CAP_SETPCAP;
 *   9. no_new_privs, pdeathsig, dumpable.
 * What the puppet has is read by one batch, and the steps run as another.
 * So root keeping capabilities, root dropped to a user with none, a user's
 * process restored by root or by that user, ambient capabilities and
 * locked securebits each come back as saved.
 */
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "core/ctx.h"
#include "kinds/checks.h"
#include "creds.pb-c.h"
#include "kinds/ns.h"
#include "util/cleanup.h"

enum { CREDS_ENTRY = REC_TYPE(KID_creds, 1) };
#define CAP_LAST 40

/* the most supplementary groups a restart sets: setgroups' list goes in
 * half the puppet's scratch area (NGROUPS_MAX is 65536) */
#define CREDS_GROUPS_MAX (PUPPET_SCRATCH_SIZE / 2 / sizeof(uint32_t))

struct creds_ckpt {
	CredsEntry e;
	uint32_t groups[256];
	uint32_t *more; /* all the groups, where they are more than 256 */
	int call[3];        /* the probes: securebits, dumpable, pdeathsig */
	uint64_t pdeath_at; /* where the last writes, in the task */
};

static int creds_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct creds_ckpt *k = task_state(t, KIND_creds, sizeof(*k));
	(void)ctx;
	if (!k)
		return -ENOMEM;
	k->pdeath_at = task_probe_area(t, sizeof(uint32_t));
	k->call[0] = task_probe_call(t, PUPPET_CALL(SYS_prctl, PR_GET_SECUREBITS, 0, 0, 0, 0));
	k->call[1] = task_probe_call(t, PUPPET_CALL(SYS_prctl, PR_GET_DUMPABLE, 0, 0, 0, 0));
	k->call[2] = k->pdeath_at ? task_probe_call(t, PUPPET_CALL(SYS_prctl, PR_GET_PDEATHSIG,
								  k->pdeath_at)) : -ENOSPC;
	return 0;
}

/* All the groups of t, where /proc/PID/status has more than struct
 * proc_status keeps, to k->more: how many, or -errno */
static int creds_more_groups(struct ckpt_ctx *ctx, struct task *t, struct creds_ckpt *k)
{
	_cleanup_free_ char *text = NULL;
	uint32_t n = t->status.ngroups_total;
	if (n > CREDS_GROUPS_MAX)
		return log_fail(&ctx->log, -E2BIG,
				"pid %d: has %u supplementary groups; a restart sets at most %zu", t->pid,
				n, (size_t)CREDS_GROUPS_MAX);
	free(k->more);
	if (!(k->more = calloc(n, sizeof(uint32_t))))
		return -ENOMEM;
	int r = proc_read(t->pid, "status", &text, NULL);
	long got = r < 0 ? r : proc_status_groups(text, k->more, n);
	if (got < 0)
		return log_fail(&ctx->log, (int)got, "pid %d: cannot read its groups: %s", t->pid,
				strerror((int)-got));
	if ((uint32_t)got != n) /* the status read before said otherwise */
		return log_fail(&ctx->log, -EAGAIN,
				"pid %d: its supplementary groups changed while it was collected",
				t->pid);
	return (int)n;
}

static int creds_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct creds_ckpt *k = task_state(t, KIND_creds, sizeof(*k));
	const struct proc_status *s = &t->status;

	if (!k)
		return -ENOMEM;
	creds_entry__init(&k->e);
	/* /proc shows ids as ckpt sees them; a container keeps its own */
#define U(x) ns_uid_inside(ctx, (x))
#define G(x) ns_gid_inside(ctx, (x))
	k->e.uid = U(s->uid[0]);
	k->e.euid = U(s->uid[1]);
	k->e.suid = U(s->uid[2]);
	k->e.fsuid = U(s->uid[3]);
	k->e.gid = G(s->gid[0]);
	k->e.egid = G(s->gid[1]);
	k->e.sgid = G(s->gid[2]);
	k->e.fsgid = G(s->gid[3]);
	uint32_t *groups = k->groups, ngroups = s->ngroups;
	const uint32_t *from = s->groups;
	if (s->ngroups_total > s->ngroups) { /* status keeps 256 of them: read all */
		int r = creds_more_groups(ctx, t, k);
		if (r < 0)
			return r;
		from = groups = k->more;
		ngroups = (uint32_t)r;
	}
	for (uint32_t i = 0; i < ngroups; i++)
		groups[i] = G(from[i]);
#undef U
#undef G
	k->e.groups = groups;
	k->e.n_groups = ngroups;
	k->e.cap_inh = s->cap_inh;
	k->e.cap_prm = s->cap_prm;
	k->e.cap_eff = s->cap_eff;
	k->e.cap_bnd = s->cap_bnd;
	k->e.has_cap_amb = k->e.has_no_new_privs = true;
	k->e.cap_amb = s->cap_amb;
	k->e.no_new_privs = s->no_new_privs;

	/* the probes (one batch with every kind's) */
	uint32_t pdeath = 0;
	long sb = task_probe_ret(t, k->call[0]), dumpable = task_probe_ret(t, k->call[1]),
	     pd = task_probe_ret(t, k->call[2]);
	const void *pdo = task_probe_out(t, k->pdeath_at, sizeof(pdeath));
	if (sb < 0 || dumpable < 0 || pd < 0 || !pdo)
		return log_fail(&ctx->log, -EIO, "pid %d: cannot read securebits/dumpable/pdeathsig",
				t->pid);
	memcpy(&pdeath, pdo, sizeof(pdeath));
	k->e.has_securebits = k->e.has_dumpable = k->e.has_pdeathsig = true;
	k->e.securebits = (uint32_t)sb;
	k->e.dumpable = (uint32_t)dumpable;
	k->e.pdeathsig = pdeath;
	return 0;
}

static int creds_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct creds_ckpt *k = t->kstate[KIND_creds];
	return ctx_write_msg(ctx, CREDS_ENTRY, &k->e.base);
}

const char *creds_entry_invalid(const CredsEntry *e)
{
	if (e->n_groups > 65536)
		return "more than 65536 supplementary groups";
	if (e->has_pdeathsig && e->pdeathsig > 64)
		return "a parent-death signal above 64";
	return NULL;
}

/*
 * What a puppet had before its credentials were set: every bounding cap,
 * its groups, securebits and capabilities. A process with threads reads
 * them all, and its threads, cloned from it before, had the same: each
 * takes them from here rather than by a batch of its own.
 */
struct creds_had {
	long bnd[CAP_LAST + 1];
	long ngroups;
	uint32_t groups[256];
	long securebits;
	long capget;
	struct __user_cap_data_struct data[2];
};

/* A task's state at restart: its entry, and (a process with threads) what
 * it had. */
struct creds_rst {
	CredsEntry *e;
	bool have_had;
	struct creds_had had;
};

static int creds_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	CredsEntry *e = rctx_load_one(ctx, t, rec, KIND_creds, CREDS_ENTRY, &creds_entry__descriptor);
	if (!e)
		return -EINVAL;
	/* the context's, as the entry is (1.4 KiB a thread) */
	struct creds_rst *c = arena_alloc(&ctx->msgs, sizeof(*c));
	if (!c) {
		t->kstate[KIND_creds] = NULL;
		return -ENOMEM;
	}
	*c = (struct creds_rst){ .e = e };
	t->kstate[KIND_creds] = c;
	const char *why = creds_entry_invalid(e);
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: creds of pid %d: %s", rec->index,
				t->pid, why);
	return 0;
}

static int step(struct rst_ctx *ctx, struct rst_task *t, long r, const char *what)
{
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"pid %d: %s failed: %s (a restart may not grant more than its caller has)",
				t->pid, what, strerror((int)-r));
	return 0;
}

/* The calls of a restore, run as few batches (one stop of the puppet each). */
#define CREDS_CALLS (2 * (CAP_LAST + 1) + 16)
struct creds_calls {
	struct puppet_call c[CREDS_CALLS];
	const char *what[CREDS_CALLS]; /* NULL: its failure is not one */
	size_t n;
};

static void add(struct creds_calls *b, const char *what, struct puppet_call c)
{
	b->what[b->n] = what;
	b->c[b->n++] = c;
}

/* Runs them in order; the first that failed and must not is the error. */
static int run_calls(struct rst_ctx *ctx, struct rst_task *t, struct creds_calls *b)
{
	for (size_t i = 0; i < b->n; i += PUPPET_BATCH_MAX) {
		size_t m = MIN(b->n - i, (size_t)PUPPET_BATCH_MAX);
		int r = puppet_syscalls(&t->pup, b->c + i, m);
		for (size_t j = i; j < i + m; j++)
			if (b->what[j] && (r = step(ctx, t, r < 0 ? r : b->c[j].ret, b->what[j])) < 0)
				return r;
	}
	return 0;
}

/* Where the calls' data go in the scratch area. */
enum {
	AT_HDR = 0,     /* capget/capset header */
	AT_GOT = 64,    /* capget's sets */
	AT_CAPS = 128,  /* capset's sets (step 5) */
	AT_CAPS2 = 192, /* capset's sets (step 8) */
	AT_CAPS0 = 256, /* capset's sets (step 0) */
	AT_NOW = 2048,  /* getgroups' */
};

static uint64_t put_caps(struct rst_ctx *ctx, struct rst_task *t, size_t off, uint64_t eff,
			 uint64_t prm, uint64_t inh)
{
	struct __user_cap_data_struct data[2] = {
		{ (uint32_t)eff, (uint32_t)prm, (uint32_t)inh },
		{ (uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(inh >> 32) },
	};
	return rst_put(ctx, t, off, data, sizeof(data));
}

/* What the puppet has now, in one batch: which bounding caps the image
 * lacks and it still has (bnd_read[cap] == 1), its groups, its securebits,
 * and whether it has CAP_SETPCAP to lend (only asked if securebits other
 * than keepcaps are to be set). */
struct creds_now {
	long bnd_read[CAP_LAST + 1];
	bool same_groups;
	long securebits;
	bool setpcap;
	bool have_caps; /* caps: its sets (read if step 0 or securebits need them) */
	struct __user_cap_data_struct caps[2];
};

/* The inheritable caps of e that its bounding set lacks (step 0) */
static uint64_t inh_unbounded(const CredsEntry *e)
{
	return e->cap_inh & ~e->cap_bnd;
}

/* now as had says, for entry e (whose securebits are sb) */
static void now_from(const struct creds_had *had, const CredsEntry *e, uint32_t sb,
		     struct creds_now *now)
{
	for (int cap = 0; cap <= CAP_LAST; cap++)
		now->bnd_read[cap] = e->cap_bnd & (1ull << cap) ? 0 : had->bnd[cap];
	now->same_groups = had->ngroups == (long)e->n_groups && had->ngroups >= 0 &&
			   (had->ngroups == 0 || !memcmp(had->groups, e->groups, (size_t)had->ngroups * 4));
	now->securebits = had->securebits;
	now->setpcap = (sb & ~(uint32_t)SECBIT_KEEP_CAPS) && had->capget == 0 &&
		       (had->data[0].permitted & (1u << CAP_SETPCAP));
	now->have_caps = had->capget == 0;
	memcpy(now->caps, had->data, sizeof(now->caps));
}

/* Does process t fork or clone another process of the tree? */
static bool creates(const struct rst_ctx *ctx, const struct rst_task *t)
{
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (ctx->tasks[i].creator == (int)(t - ctx->tasks))
			return true;
	return false;
}

/* Whose read t may take (NULL: none): its leader's, or the process's that
 * forked it, if that one read all it had */
static const struct creds_rst *had_from(const struct rst_ctx *ctx, const struct rst_task *t)
{
	const struct creds_rst *c = NULL;
	if (t->leader)
		c = t->leader->kstate[KIND_creds];
	else if (t->creator >= 0 && (size_t)t->creator < ctx->ntasks)
		c = ctx->tasks[t->creator].kstate[KIND_creds];
	return c && c->have_had ? c : NULL;
}

/*
 * What the puppet has, by one batch; a process with threads, or that
 * forks others, reads all of it (every bounding cap, its capabilities)
 * and keeps it for them: they had the same when they were cloned or
 * forked from it (tree ready, create tasks: before any task state, where
 * only this op changes credentials), so a thread, or a process forked by
 * one that read, runs no batch of its own here.
 */
static int read_now(struct rst_ctx *ctx, struct rst_task *t, const CredsEntry *e, uint32_t sb,
		    struct creds_now *now)
{
	struct puppet *p = &t->pup;
	const struct creds_rst *from = had_from(ctx, t);
	struct creds_rst *c = t->kstate[KIND_creds];
	if (from) {
		now_from(&from->had, e, sb, now);
		if (c && !t->leader && c != from) { /* what its own children have too */
			c->had = from->had;
			c->have_had = true;
		}
		return 0;
	}
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	uint64_t h = puppet_scratch_put(p, AT_HDR, &hdr, sizeof(hdr));
	if (!h)
		return log_fail(&ctx->log, -EFAULT, "pid %d: cannot write to its scratch area",
				t->pid);
	bool all = !t->leader && (t->nthreads || creates(ctx, t));
	struct creds_calls b = { .n = 0 };
	int cap_at[CAP_LAST + 1];
	for (int cap = 0; cap <= CAP_LAST; cap++) {
		cap_at[cap] = -1;
		if ((e->cap_bnd & (1ull << cap)) && !all)
			continue;
		cap_at[cap] = (int)b.n;
		add(&b, NULL, PUPPET_CALL(SYS_prctl, PR_CAPBSET_READ, cap, 0, 0, 0));
	}
	size_t groups = b.n;
	add(&b, NULL, PUPPET_CALL(SYS_getgroups, 256, p->scratch + AT_NOW));
	size_t secure = b.n;
	add(&b, "reading securebits", PUPPET_CALL(SYS_prctl, PR_GET_SECUREBITS, 0, 0, 0, 0));
	size_t got = b.n;
	if ((sb & ~(uint32_t)SECBIT_KEEP_CAPS) || all || inh_unbounded(e))
		add(&b, NULL, PUPPET_CALL(SYS_capget, h, p->scratch + AT_GOT));
	int r = run_calls(ctx, t, &b);
	if (r < 0)
		return r;
	struct creds_had had = { .capget = -ENOENT };
	for (int cap = 0; cap <= CAP_LAST; cap++) {
		had.bnd[cap] = cap_at[cap] >= 0 ? b.c[cap_at[cap]].ret : 0;
		/* EINVAL: a cap this kernel does not know */
		if (had.bnd[cap] < 0 && had.bnd[cap] != -EINVAL)
			return log_fail(&ctx->log, (int)had.bnd[cap],
					"pid %d: cannot read bounding cap %d: %s", t->pid, cap,
					strerror((int)-had.bnd[cap]));
	}
	had.ngroups = b.c[groups].ret;
	if (had.ngroups > 0 &&
	    puppet_read(p, p->scratch + AT_NOW, had.groups, (size_t)had.ngroups * 4) < 0)
		had.ngroups = -EIO;
	had.securebits = b.c[secure].ret;
	if (got < b.n && b.c[got].ret == 0 &&
	    puppet_read(p, p->scratch + AT_GOT, had.data, sizeof(had.data)) == 0)
		had.capget = 0;
	now_from(&had, e, sb, now);
	if (all && c) {
		c->had = had;
		c->have_had = true;
	}
	return 0;
}

/* Steps 1-4: the bounding set, groups and gids, keepcaps, then uids. */
static int add_ids(struct rst_ctx *ctx, struct rst_task *t, const CredsEntry *e,
		   struct creds_now *now, struct creds_calls *b)
{
	struct puppet *p = &t->pup;

	/* step 0: the puppet's permitted and effective sets as they are */
	uint64_t raise = inh_unbounded(e);
	if (raise) {
		const struct __user_cap_data_struct *c = now->caps;
		if (!now->have_caps)
			return log_fail(&ctx->log, -EIO, "pid %d: cannot read its capabilities",
					t->pid);
		struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
		uint64_t h = rst_put(ctx, t, AT_HDR, &hdr, sizeof(hdr));
		uint64_t d = put_caps(ctx, t, AT_CAPS0, c[0].effective | (uint64_t)c[1].effective << 32,
				      c[0].permitted | (uint64_t)c[1].permitted << 32,
				      c[0].inheritable | (uint64_t)c[1].inheritable << 32 | raise);
		if (!h || !d)
			return log_fail(&ctx->log, -EFAULT, "pid %d: cannot write to its scratch area",
					t->pid);
		add(b, "raising inheritable caps outside its bounding set",
		    PUPPET_CALL(SYS_capset, h, d));
	}
	for (int cap = 0; cap <= CAP_LAST; cap++)
		if (now->bnd_read[cap] == 1)
			add(b, "dropping a bounding cap",
			    PUPPET_CALL(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0));
	if (e->n_groups * sizeof(uint32_t) > p->scratch_len / 2)
		return log_fail(&ctx->log, -E2BIG, "pid %d: too many groups", t->pid);
	if (!now->same_groups) {
		uint64_t g = rst_put(ctx, t, p->scratch_len / 2, e->groups,
						e->n_groups * sizeof(uint32_t));
		add(b, "setgroups", PUPPET_CALL(SYS_setgroups, e->n_groups, g));
	}
	add(b, "setresgid", PUPPET_CALL(SYS_setresgid, e->gid, e->egid, e->sgid));
	add(b, NULL, PUPPET_CALL(SYS_setfsgid, e->fsgid));
	/* keepcaps needs no privilege, unlike PR_SET_SECUREBITS: the
	 * permitted set outlives leaving uid 0, to be cut to the image's */
	if (!(now->securebits & SECBIT_KEEP_CAPS)) {
		add(b, "setting keepcaps", PUPPET_CALL(SYS_prctl, PR_SET_KEEPCAPS, 1, 0, 0, 0));
		now->securebits |= SECBIT_KEEP_CAPS;
	}
	add(b, "setresuid", PUPPET_CALL(SYS_setresuid, e->uid, e->euid, e->suid));
	add(b, NULL, PUPPET_CALL(SYS_setfsuid, e->fsuid));
	return 0;
}

/* Step 7: the securebits, asking for privilege only when it is needed
 * (the puppet's are read_now()'s, with keepcaps as step 3 left it). */
static void add_securebits(struct creds_calls *b, uint32_t cur, uint32_t want)
{
	if (cur == want)
		return;
	if ((cur ^ want) == SECBIT_KEEP_CAPS)
		add(b, "setting keepcaps",
		    PUPPET_CALL(SYS_prctl, PR_SET_KEEPCAPS, !!(want & SECBIT_KEEP_CAPS), 0, 0, 0));
	else
		add(b, "setting securebits", PUPPET_CALL(SYS_prctl, PR_SET_SECUREBITS, want, 0, 0, 0));
}

/*
 * What the puppet has is read by one batch, then every step is one more
 * (two stops in all, where a call each was a stop each). A failed step
 * fails the restart, which kills the puppet: the calls after it in the
 * batch do no harm.
 */
static int creds_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	CredsEntry *e = ((struct creds_rst *)t->kstate[KIND_creds])->e;
	struct creds_now now;
	struct creds_calls b = { .n = 0 };
	int r;

	uint32_t sb = e->has_securebits ? e->securebits : 0;
	if ((r = read_now(ctx, t, e, sb, &now)) < 0 || (r = add_ids(ctx, t, e, &now, &b)) < 0)
		return r;
	/* step 5: the image's sets, plus CAP_SETPCAP while the puppet still
	 * has it and securebits other than keepcaps are to be set (step 8
	 * takes it away again) */
	uint64_t lend = now.setpcap ? 1ull << CAP_SETPCAP : 0;
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	uint64_t h = rst_put(ctx, t, AT_HDR, &hdr, sizeof(hdr));
	uint64_t d = put_caps(ctx, t, AT_CAPS, e->cap_eff | lend, e->cap_prm | lend, e->cap_inh);
	uint64_t d2 = lend ? put_caps(ctx, t, AT_CAPS2, e->cap_eff, e->cap_prm, e->cap_inh) : 1;
	if (!h || !d || !d2)
		return log_fail(&ctx->log, -EFAULT, "pid %d: cannot write to its scratch area",
				t->pid);
	add(&b, "capset", PUPPET_CALL(SYS_capset, h, d));
	/* step 6: ambient caps (in permitted and inheritable now), before
	 * securebits that may forbid raising them */
	for (int cap = 0; cap <= CAP_LAST; cap++)
		if (e->has_cap_amb && (e->cap_amb & (1ull << cap)))
			add(&b, "raising an ambient cap",
			    PUPPET_CALL(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0));
	/* steps 7 and 8: securebits, then exactly the image's sets (the
	 * ambient ones are in them and stay) */
	add_securebits(&b, (uint32_t)now.securebits, sb);
	if (lend)
		add(&b, "capset", PUPPET_CALL(SYS_capset, h, d2));
	/* step 9 */
	if (e->has_no_new_privs && e->no_new_privs)
		add(&b, "no_new_privs", PUPPET_CALL(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	/* the puppet died with ckpt until now; from here it has its own. Not
	 * the root's when its parent, the ckpt command, exits at once
	 * (--detach): the signal would kill it then (its parent of before is
	 * gone anyway); under ckpt's init (--pidns), in the foreground, or
	 * with a library caller that stays, the parent is there to watch */
	int pdeath = e->has_pdeathsig ? (int)e->pdeathsig : 0;
	const struct rst_task *proc = t->leader ? t->leader : t; /* a thread's: its process's */
	if (pdeath && proc->parent < 0 && (ctx->flags & RESTART_DETACH) &&
	    (ctx->flags & RESTART_CALLER_EXITS) && !ctx->pidns) {
		log_warn(&ctx->log,
			 "pid %d: its parent-death signal %d is not set again: with --detach its "
			 "parent is ckpt, which exits now (restart it without --detach to keep it)",
			 t->pid, pdeath);
		pdeath = 0;
	}
	add(&b, NULL, PUPPET_CALL(SYS_prctl, PR_SET_PDEATHSIG, pdeath));
	if (e->has_dumpable)
		add(&b, NULL, PUPPET_CALL(SYS_prctl, PR_SET_DUMPABLE, e->dumpable));
	/* a thread's are queued, run with its siblings' (core/calls.c) */
	return rst_calls(ctx, t, b.c, b.what, "(a restart may not grant more than its caller has)",
			 b.n);
}

/* --- before --kill: could this caller give them back? -------------------- */

static bool id_in(uint32_t id, const uint32_t *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == id)
			return true;
	return false;
}

/* Do the sets a and b of n ids hold the same ids? */
static bool same_set(const uint32_t *a, const uint32_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!id_in(a[i], b, n) || !id_in(b[i], a, n))
			return false;
	return true;
}

static const char *id_list(const uint32_t *v, size_t n, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used + 12 < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%u", i ? "," : "", v[i]);
	return n ? buf : "none";
}

/* The groups a restart in a user namespace of the caller's own leaves: the
 * caller's, as seen there (setgroups is denied): its gid mapped, the others
 * the overflow gid. */
static int check_groups_userns(struct ckpt_ctx *ctx, struct task *t, const CredsEntry *e)
{
	const struct restart_caller *c = ctx->caller;
	uint32_t view[256];
	char a[128], b[128];
	for (uint32_t i = 0; i < c->ngroups; i++)
		view[i] = c->groups[i] == c->gid[1] ? c->map_gid : 65534;
	if (e->n_groups == c->ngroups && same_set(e->groups, view, c->ngroups))
		return 0;
	return log_fail(&ctx->log, -EPERM,
			"pid %d: has supplementary groups %s; a restart without privilege "
			"cannot set groups (setgroups is denied in its user namespace) and would "
			"leave it %s",
			t->pid, id_list(e->groups, e->n_groups, a, sizeof(a)),
			id_list(view, c->ngroups, b, sizeof(b)));
}

/* Without privilege, in a user namespace where one uid and one gid map. */
static int check_userns(struct ckpt_ctx *ctx, struct task *t, const CredsEntry *e)
{
	const struct restart_caller *c = ctx->caller;
	const uint32_t uids[] = { e->uid, e->euid, e->suid, e->fsuid };
	const uint32_t gids[] = { e->gid, e->egid, e->sgid, e->fsgid };
	for (int i = 0; i < 4; i++)
		if (uids[i] != c->map_uid || gids[i] != c->map_gid)
			return log_fail(&ctx->log, -EPERM,
					"pid %d: has uids %u/%u/%u/%u and gids %u/%u/%u/%u; a restart "
					"without privilege has only uid %u and gid %u",
					t->pid, e->uid, e->euid, e->suid, e->fsuid, e->gid, e->egid,
					e->sgid, e->fsgid, c->map_uid, c->map_gid);
	if (!ctx->container && (e->cap_prm || e->cap_eff || (e->has_cap_amb && e->cap_amb)))
		return log_fail(&ctx->log, -EPERM,
				"pid %d: has capabilities (permitted %#llx); a restart without "
				"privilege would give them back only inside its user namespace",
				t->pid, (unsigned long long)e->cap_prm);
	return check_groups_userns(ctx, t, e);
}

/* On the host: what the caller's own ids and capabilities allow. */
static int check_host(struct ckpt_ctx *ctx, struct task *t, const CredsEntry *e)
{
	const struct restart_caller *c = ctx->caller;
	const uint32_t uids[] = { e->uid, e->euid, e->suid, e->fsuid };
	const uint32_t gids[] = { e->gid, e->egid, e->sgid, e->fsgid };
	char a[128];
	for (int i = 0; i < 4; i++) {
		if (!caller_can(c, CAP_SETUID) && !id_in(uids[i], c->uid, 3))
			return log_fail(&ctx->log, -EPERM,
					"pid %d: has uid %u; a restart by uid %u without CAP_SETUID "
					"cannot set it",
					t->pid, uids[i], c->uid[1]);
		if (!caller_can(c, CAP_SETGID) && !id_in(gids[i], c->gid, 3))
			return log_fail(&ctx->log, -EPERM,
					"pid %d: has gid %u; a restart by gid %u without CAP_SETGID "
					"cannot set it",
					t->pid, gids[i], c->gid[1]);
	}
	if (!caller_can(c, CAP_SETGID) &&
	    (e->n_groups != c->ngroups || !same_set(e->groups, c->groups, c->ngroups)))
		return log_fail(&ctx->log, -EPERM,
				"pid %d: has supplementary groups %s; a restart without CAP_SETGID "
				"cannot set them",
				t->pid, id_list(e->groups, e->n_groups, a, sizeof(a)));
	if (e->cap_prm & ~c->cap_prm)
		return log_fail(&ctx->log, -EPERM,
				"pid %d: has capabilities %#llx that the caller lacks; a restart "
				"cannot grant them",
				t->pid, (unsigned long long)(e->cap_prm & ~c->cap_prm));
	uint32_t sb = e->has_securebits ? e->securebits : 0;
	bool setpcap = c->cap_prm & (1ull << CAP_SETPCAP);
	if (!setpcap && (c->cap_bnd & ~e->cap_bnd))
		return log_fail(&ctx->log, -EPERM,
				"pid %d: its bounding set lacks capabilities that only CAP_SETPCAP "
				"can drop",
				t->pid);
	if (!setpcap && ((sb ^ c->securebits) & ~(uint32_t)SECBIT_KEEP_CAPS))
		return log_fail(&ctx->log, -EPERM,
				"pid %d: has securebits %#x; setting them needs CAP_SETPCAP", t->pid,
				sb);
	return 0;
}

static int creds_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	const struct creds_ckpt *k = t->kstate[KIND_creds];
	if (!k)
		return 0;
	/* a container with a user namespace of its own, restarted by root:
	 * its maps are written as they were, its ids are its own */
	if (ctx->container && ns_own_userns(ctx) && !ctx->caller->userns)
		return 0;
	return ctx->caller->userns ? check_userns(ctx, t, &k->e) : check_host(ctx, t, &k->e);
}

static const ProtobufCMessageDescriptor *creds_descriptor(uint32_t sub)
{
	return sub == REC_SUB(CREDS_ENTRY) ? &creds_entry__descriptor : NULL;
}

static int creds_loaded(struct rst_ctx *ctx, struct rst_task *t)
{
	return rst_require(ctx, t, KIND_creds);
}

static void creds_free_state(void *state)
{
	struct creds_ckpt *k = state;
	if (k)
		free(k->more);
	free(k);
}

const struct kind_ops creds_ops = {
	.per_thread = true,
	.check_restore = creds_check_restore,
	.probe = creds_probe,
	.collect = creds_collect,
	.dump = creds_dump,
	.load = creds_load,
	.loaded = creds_loaded,
	.restore = creds_restore,
	.free_state = creds_free_state,
	.descriptor = creds_descriptor,
};
