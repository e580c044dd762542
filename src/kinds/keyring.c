/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Keyrings (keyrings(7)): a task's session keyring and process keyring,
 * with the keys in them. ckpt saves what a restart can make again and
 * refuses the rest, naming the task, the keyring and the key.
 *
 * Checkpoint. The probes ask each task (a process or a thread, as the
 * task itself: keyctl knows no other task's keyrings) for the serials of
 * its thread, process and session keyrings (KEYCTL_GET_KEYRING_ID, no
 * create). The thread and process keyrings exist only once the task made
 * them; a session keyring is always there: asking for it gives a task
 * without one the user's session keyring, as its own first use of a key
 * would (the kernel installs it on access: nothing else can be asked).
 * A session keyring is outside the image when it is ckpt's own (ckpt runs
 * in the same login session) or the user's session keyring
 * ("_uid_ses.UID"): a restart gives the tree its caller's, as it gives it
 * its caller's terminal. Any other is the tree's own (a systemd service's,
 * one made by pam_keyinit at a login, by `keyctl session`): saved with the
 * first task that has it; a task that shares it with any task but its
 * parent is refused (a restart can only hand it down by fork).
 *
 * A saved keyring's keys are read by injected calls in the task, with its
 * own permissions (a possessor's): the list (KEYCTL_READ of the keyring),
 * each key's type, owner, permissions and description (KEYCTL_DESCRIBE),
 * a "user" key's payload (KEYCTL_READ), and /proc/keys for their expiry
 * and state. Saved: "user" keys and a link to the user keyring (what
 * pam_keyinit puts in a login's keyring). Refused: a key of any other type
 * ("logon" keys cannot be read back; "big_key", "encrypted", "asymmetric"
 * and the kernel's own types are not made again), a key or keyring that
 * expires (/proc/keys rounds its time left to minutes, hours or days),
 * a revoked or negative key, and a thread keyring holding a key. A thread
 * is asked for its thread keyring only: asking it for its session keyring
 * would install one in each thread that has none (a new cred each; 1,000
 * threads took 20-40 ms more to collect), so a thread that joined a
 * session keyring of its own, apart from its process's (rare), is not
 * detected: a gap.
 *
 * Restart. A task with a session keyring of its own joins a new one
 * (KEYCTL_JOIN_SESSION_KEYRING, anonymous, as systemd and pam_keyinit
 * make theirs) before it forks: the root at "root ready", any other at
 * "forked"; its children inherit it by the fork. The keys are added by
 * injected add_key calls, each then given its owner (KEYCTL_CHOWN) and
 * permissions (KEYCTL_SETPERM), and last the keyring's own; the user
 * keyring is linked as the owner's (the puppet's real uid set to it for
 * the link while it still has ckpt's credentials: creds come later in
 * kinds.def). The process keyring is made and filled at "task state".
 * Keys get new serial numbers (the kernel picks them): a program that
 * kept a key's serial rather than its description finds it gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/ctx.h"
#include "keyring.pb-c.h"
#include "util/cleanup.h"

enum { KEYRINGS_ENTRY = REC_TYPE(KID_keyring, 1) };

enum { RING_SESSION = 1, RING_PROCESS = 2 };

/* what a saved keyring may hold: more is refused */
#define KEYS_MAX 256
/* a user key's payload at most (the kernel's limit for the type) */
#define PAYLOAD_MAX 32767
#define DESC_MAX    4096
/* the scratch area at checkpoint: a description at 0, the buffer after */
#define BUF_OFF DESC_MAX
#define BUF_LEN (60 * 1024)
/* at restart: a description below 4 KiB, a payload from the middle on
 * (core/calls.c: what a kind's direct calls may use) */
#define RST_DESC_OFF	0
#define RST_PAYLOAD_OFF (32 * 1024)

struct keyring_ckpt {
	KeyringsEntry e;
	KeyringEntry ring[2];
	KeyringEntry *pring[2];
	int call[3];	 /* probes: thread, process, session keyring */
	int32_t session; /* its session keyring's serial */
	bool own;	 /* the tree's own (saved), not its caller's */
};

static void free_ring(KeyringEntry *r)
{
	for (size_t i = 0; i < r->n_keys; i++) {
		free(r->keys[i]->type);
		free(r->keys[i]->description);
		free(r->keys[i]->payload.data);
		free(r->keys[i]);
	}
	free(r->keys);
}

static void keyring_free_state(void *state)
{
	struct keyring_ckpt *k = state;
	if (!k)
		return;
	for (size_t i = 0; i < k->e.n_rings; i++)
		free_ring(k->pring[i]);
	free(k);
}

static int keyring_probe(struct ckpt_ctx *ctx, struct task *t)
{
	struct keyring_ckpt *k = task_state(t, KIND_keyring, sizeof(*k));
	(void)ctx;
	if (!k)
		return -ENOMEM;
	static const int spec[3] = {KEY_SPEC_THREAD_KEYRING, KEY_SPEC_PROCESS_KEYRING,
				    KEY_SPEC_SESSION_KEYRING};
	/* a thread: its own keyring only (asking for a session keyring
	 * installs one where there is none, a new cred each: 1,000 threads
	 * took 20-40 ms more to collect) */
	for (int i = 0; i < 3; i++)
		k->call[i] = i > 0 && t->leader
				 ? -ENOKEY
				 : task_probe_call(t, PUPPET_CALL(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
								  spec[i], 0));
	return 0;
}

/* keyctl(op, a2, buf, len) injected in t, its output copied into out:
 * the call's result (the whole length, which may exceed len) */
static long keyctl_out(struct task *t, int op, long a2, void *out, size_t len)
{
	uint64_t buf = t->pup.scratch + BUF_OFF;
	long r = puppet_syscall(&t->pup, SYS_keyctl, op, a2, (long)buf, (long)len);
	if (r > 0 && puppet_read(&t->pup, buf, out, MIN((size_t)r, len)) < 0)
		return -EFAULT;
	return r;
}

/* KEYCTL_DESCRIBE of id: "type;uid;gid;perm;description" into d */
struct key_desc {
	char type[32];
	uint32_t uid, gid, perm;
	char *desc; /* into text */
	char text[DESC_MAX + 64];
};

static long describe(struct task *t, int32_t id, struct key_desc *d)
{
	long r = keyctl_out(t, KEYCTL_DESCRIBE, id, d->text, sizeof(d->text) - 1);
	if (r < 0)
		return r;
	if ((size_t)r >= sizeof(d->text))
		return -E2BIG;
	d->text[r] = 0;
	int n = 0;
	if (sscanf(d->text, "%31[^;];%u;%u;%x;%n", d->type, &d->uid, &d->gid, &d->perm, &n) != 4 ||
	    !n)
		return -EINVAL;
	d->desc = d->text + n;
	return 0;
}

/*
 * /proc/keys as t sees it (keys it may view), for the expiry and state of
 * the keys at ids[0..n): 0, or the first one that expires or is not a
 * plain instantiated key, in *bad with what (*why).
 */
static int check_proc_keys(struct task *t, const int32_t *ids, size_t n, int32_t *bad,
			   const char **why)
{
	static const char path[] = "/proc/keys";
	uint64_t at = puppet_scratch_put(&t->pup, 0, path, sizeof(path));
	long fd = at ? puppet_syscall(&t->pup, SYS_openat, AT_FDCWD, (long)at, O_RDONLY) : -EFAULT;
	if (fd < 0)
		return (int)fd;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = 0;
	for (;;) {
		char *more = realloc(text, len + BUF_LEN + 1);
		if (!more) {
			r = -ENOMEM;
			break;
		}
		text = more;
		uint64_t buf = t->pup.scratch + BUF_OFF;
		long got = puppet_syscall(&t->pup, SYS_read, fd, (long)buf, BUF_LEN);
		if (got < 0 ||
		    (got > 0 && puppet_read(&t->pup, buf, text + len, (size_t)got) < 0)) {
			r = got < 0 ? (int)got : -EFAULT;
			break;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	puppet_syscall(&t->pup, SYS_close, fd);
	if (r < 0)
		return r;
	text[len] = 0;
	/* "%08x FLAGS USAGE TIMEOUT PERM UID GID TYPE DESC...": flags I
	 * (instantiated), R revoked, D dead, Q quota, U under construction,
	 * N negative, i invalidated; timeout "perm" for none */
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		unsigned id;
		char flags[16], timeout[16];
		if (sscanf(line, "%x %15s %*d %15s", &id, flags, timeout) != 3)
			continue;
		for (size_t i = 0; i < n; i++) {
			if ((uint32_t)ids[i] != id)
				continue;
			*bad = ids[i];
			if (strcmp(timeout, "perm") != 0) {
				*why = "expires (its exact expiry cannot be read back)";
				return 1;
			}
			if (flags[0] != 'I' || strpbrk(flags, "RDUNi")) {
				*why = "is revoked, negative or not instantiated";
				return 1;
			}
		}
	}
	return 0;
}

/* A user keyring ("_uid.UID", owned by UID): pam_keyinit links the one
 * of the login's user into its session keyring (a root process of the
 * login, as runuser or sshd, has it too) */
static bool user_keyring_of(const struct key_desc *d)
{
	char name[32];
	snprintf(name, sizeof(name), "_uid.%u", d->uid);
	return strcmp(d->desc, name) == 0;
}

/* The keys of keyring id (t's ring `which`, named what) into ring. */
static int read_ring(struct ckpt_ctx *ctx, struct task *t, int32_t id, uint32_t which,
		     const char *what, KeyringEntry *ring)
{
	struct key_desc d;
	long r = describe(t, id, &d);
	if (r < 0)
		return log_fail(&ctx->log, (int)r, "pid %d: cannot describe its %s keyring: %s",
				t->pid, what, strerror((int)-r));
	keyring_entry__init(ring);
	ring->which = which;
	ring->uid = d.uid;
	ring->gid = d.gid;
	ring->perm = d.perm;
	_cleanup_free_ int32_t *ids = calloc(KEYS_MAX + 1, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	r = keyctl_out(t, KEYCTL_READ, id, ids, (KEYS_MAX + 1) * sizeof(*ids));
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"pid %d: cannot list the keys of its %s keyring: %s", t->pid, what,
				strerror((int)-r));
	size_t n = (size_t)r / sizeof(*ids);
	if (n > KEYS_MAX)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d: its %s keyring holds %zu keys; ckpt saves %d at most",
				t->pid, what, n, KEYS_MAX);
	ring->keys = calloc(n ? n : 1, sizeof(*ring->keys));
	if (!ring->keys)
		return -ENOMEM;
	_cleanup_free_ uint8_t *payload = malloc(PAYLOAD_MAX + 1);
	if (!payload)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if ((r = describe(t, ids[i], &d)) < 0)
			return log_fail(&ctx->log, (int)r,
					"pid %d: cannot describe key %d of its %s keyring: %s",
					t->pid, ids[i], what, strerror((int)-r));
		KeyEntry *ke = calloc(1, sizeof(*ke));
		if (!ke)
			return -ENOMEM;
		key_entry__init(ke);
		ring->keys[ring->n_keys++] = ke;
		ke->uid = d.uid;
		ke->gid = d.gid;
		ke->perm = d.perm;
		ke->type = strdup(d.type);
		ke->description = strdup(d.desc);
		if (!ke->type || !ke->description)
			return -ENOMEM;
		if (strcmp(d.type, "keyring") == 0) {
			if (!user_keyring_of(&d))
				return log_fail(&ctx->log, -EOPNOTSUPP,
						"pid %d: its %s keyring links keyring %d (\"%s\"), "
						"which is not a user keyring; not supported",
						t->pid, what, ids[i], d.desc);
			ke->has_user_keyring = ke->user_keyring = true;
			continue;
		}
		if (strcmp(d.type, "user") != 0)
			return log_fail(&ctx->log, -EOPNOTSUPP,
					"pid %d: its %s keyring holds key %d (\"%s\") of type %s; "
					"ckpt saves keys of type user only",
					t->pid, what, ids[i], d.desc, d.type);
		r = keyctl_out(t, KEYCTL_READ, ids[i], payload, PAYLOAD_MAX + 1);
		if (r < 0 || r > PAYLOAD_MAX)
			return log_fail(&ctx->log, r < 0 ? (int)r : -E2BIG,
					"pid %d: cannot read key %d (\"%s\") of its %s keyring: %s",
					t->pid, ids[i], d.desc, what,
					strerror(r < 0 ? (int)-r : E2BIG));
		ke->has_payload = true;
		ke->payload.len = (size_t)r;
		ke->payload.data = malloc(r ? (size_t)r : 1);
		if (!ke->payload.data)
			return -ENOMEM;
		memcpy(ke->payload.data, payload, (size_t)r);
	}
	ids[n] = id;
	int32_t bad = 0;
	const char *why = NULL;
	int c = check_proc_keys(t, ids, n + 1, &bad, &why);
	if (c < 0)
		return log_fail(&ctx->log, c, "pid %d: cannot read /proc/keys: %s", t->pid,
				strerror(-c));
	if (c > 0)
		return log_fail(&ctx->log, -EOPNOTSUPP, "pid %d: %s %d of its %s keyring %s",
				t->pid, bad == id ? "the keyring" : "key", bad, what, why);
	return 0;
}

static KeyringEntry *add_ring(struct keyring_ckpt *k)
{
	size_t i = k->e.n_rings++;
	k->pring[i] = &k->ring[i];
	k->e.rings = k->pring;
	return &k->ring[i];
}

/* Is a session keyring outside the image (ckpt's, or the user's)? */
static int outside(struct ckpt_ctx *ctx, struct task *t, int32_t id, bool *ret)
{
	if (!ctx->session_keyring)
		ctx->session_keyring = (int32_t)syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
							KEY_SPEC_SESSION_KEYRING, 0);
	if (id == ctx->session_keyring) {
		*ret = true;
		return 0;
	}
	struct key_desc d;
	long r = describe(t, id, &d);
	if (r < 0)
		return log_fail(&ctx->log, (int)r,
				"pid %d: cannot describe its session keyring: %s", t->pid,
				strerror((int)-r));
	*ret = strncmp(d.desc, "_uid_ses.", 9) == 0;
	return 0;
}

/* A task of the tree before t (not its parent) whose session keyring is id */
static struct task *shares_session(struct ckpt_ctx *ctx, struct task *t, int32_t id)
{
	for (struct task *o = ctx->tasks; o < t; o++) {
		const struct keyring_ckpt *ok = o->kstate[KIND_keyring];
		if (ok && ok->own && ok->session == id)
			return o;
	}
	return NULL;
}

static int collect_session(struct ckpt_ctx *ctx, struct task *t, struct keyring_ckpt *k)
{
	struct task *parent = t == ctx->tasks ? NULL : ctx_find_task(ctx, t->stat.ppid);
	const struct keyring_ckpt *pk = parent ? parent->kstate[KIND_keyring] : NULL;
	if (pk && pk->session == k->session) {
		k->own = pk->own;
	} else {
		bool out;
		int r = outside(ctx, t, k->session, &out);
		if (r < 0)
			return r;
		k->own = !out;
		if (out && pk && pk->own)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d: its session keyring is its caller's or its user's, "
			    "where its parent (pid %d) has one of its own; a restart "
			    "cannot give it that back",
			    t->pid, parent->pid);
		struct task *o = k->own ? shares_session(ctx, t, k->session) : NULL;
		if (o)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "pid %d: shares its session keyring with pid %d, which is not "
			    "its parent; a restart can hand a keyring down only by fork",
			    t->pid, o->pid);
		if (k->own) {
			r = read_ring(ctx, t, k->session, RING_SESSION, "session", add_ring(k));
			if (r < 0)
				return r;
		}
	}
	if (k->own) {
		k->e.has_session_id = true;
		k->e.session_id = (uint32_t)k->session;
	}
	return 0;
}

static int keyring_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct keyring_ckpt *k = task_state(t, KIND_keyring, sizeof(*k));
	if (!k)
		return -ENOMEM;
	keyrings_entry__init(&k->e);
	/* a thread is not asked for its session keyring (the top of this file) */
	long ses = t->leader ? 0 : task_probe_ret(t, k->call[2]);
	if (ses <= 0 && !t->leader)
		return log_fail(&ctx->log, ses < 0 ? (int)ses : -EIO,
				"pid %d: cannot find its session keyring: %s", t->pid,
				strerror(ses < 0 ? (int)-ses : EIO));
	k->session = (int32_t)ses;
	long thr = task_probe_ret(t, k->call[0]);
	if (thr > 0) {
		_cleanup_free_ int32_t *ids = calloc(1, sizeof(*ids));
		long n = ids ? keyctl_out(t, KEYCTL_READ, thr, ids, sizeof(*ids)) : -ENOMEM;
		if (n != 0)
			return log_fail(&ctx->log, n < 0 ? (int)n : -EOPNOTSUPP,
					"thread %d: its thread keyring %s; not supported", t->pid,
					n < 0 ? "cannot be read" : "holds keys");
	}
	if (t->leader) /* its session keyring: see the top of this file */
		return 0;
	int r = collect_session(ctx, t, k);
	if (r < 0)
		return r;
	long proc = task_probe_ret(t, k->call[1]);
	if (proc > 0)
		return read_ring(ctx, t, (int32_t)proc, RING_PROCESS, "process", add_ring(k));
	return 0;
}

static int keyring_dump(struct ckpt_ctx *ctx, struct task *t)
{
	const struct keyring_ckpt *k = t->kstate[KIND_keyring];
	if (!k || t->leader || (!k->e.has_session_id && !k->e.n_rings))
		return 0;
	return ctx_write_msg(ctx, KEYRINGS_ENTRY, &k->e.base);
}

/* would a restart by the caller give every key its owner back? */
static int keyring_check_restore(struct ckpt_ctx *ctx, struct task *t)
{
	const struct keyring_ckpt *k = t->kstate[KIND_keyring];
	const struct restart_caller *c = ctx->caller;
	if (!k || caller_can(c, CAP_SYS_ADMIN))
		return 0;
	for (size_t i = 0; i < k->e.n_rings; i++) {
		const KeyringEntry *ring = k->pring[i];
		if (ring->uid != c->uid[1] || !caller_in_group(c, ring->gid))
			return log_fail(&ctx->log, -EPERM,
					"pid %d: its %s keyring belongs to %u:%u; giving it that "
					"owner needs CAP_SYS_ADMIN",
					t->pid, ring->which == RING_SESSION ? "session" : "process",
					ring->uid, ring->gid);
		for (size_t j = 0; j < ring->n_keys; j++) {
			const KeyEntry *ke = ring->keys[j];
			if (!ke->user_keyring &&
			    (ke->uid != c->uid[1] || !caller_in_group(c, ke->gid)))
				return log_fail(
				    &ctx->log, -EPERM,
				    "pid %d: key \"%s\" belongs to %u:%u; giving it that "
				    "owner needs CAP_SYS_ADMIN",
				    t->pid, ke->description, ke->uid, ke->gid);
		}
	}
	return 0;
}

static const char *ring_invalid(const KeyringEntry *ring)
{
	if (ring->which != RING_SESSION && ring->which != RING_PROCESS)
		return "an unknown keyring";
	if (ring->n_keys > KEYS_MAX)
		return "too many keys";
	for (size_t i = 0; i < ring->n_keys; i++) {
		const KeyEntry *ke = ring->keys[i];
		bool user = strcmp(ke->type, "user") == 0;
		if (user == (ke->has_user_keyring && ke->user_keyring))
			return "a key that is neither a user key nor the user keyring";
		if (user && (!ke->has_payload || ke->payload.len > PAYLOAD_MAX))
			return "a user key without a payload or with one too big";
		if (!*ke->description || strlen(ke->description) >= DESC_MAX)
			return "a key description empty or too long";
	}
	return NULL;
}

static int keyring_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	KeyringsEntry *e =
	    rctx_load_one(ctx, t, rec, KIND_keyring, KEYRINGS_ENTRY, &keyrings_entry__descriptor);
	if (!e)
		return -EINVAL;
	const char *why = t->leader ? "a thread's keyrings" : NULL;
	bool seen[3] = {false};
	for (size_t i = 0; !why && i < e->n_rings; i++) {
		why = ring_invalid(e->rings[i]);
		if (!why && seen[e->rings[i]->which])
			why = "a keyring twice";
		if (!why)
			seen[e->rings[i]->which] = true;
		if (!why && e->rings[i]->which == RING_SESSION && !e->session_id)
			why = "a session keyring without its id";
	}
	if (why)
		return log_fail(&ctx->log, -EINVAL, "record %u: keyrings of pid %d: %s", rec->index,
				t->pid, why);
	return 0;
}

static const KeyringEntry *ring_of(const KeyringsEntry *e, uint32_t which)
{
	for (size_t i = 0; e && i < e->n_rings; i++)
		if (e->rings[i]->which == which)
			return e->rings[i];
	return NULL;
}

/* The session keyring t has from its creator (0: ckpt's caller's) */
static uint32_t inherited(struct rst_ctx *ctx, const struct rst_task *t)
{
	for (int i = 0; t->parent >= 0 && i <= (int)ctx->ntasks; i++) {
		t = &ctx->tasks[t->creator];
		const KeyringsEntry *e = t->kstate[KIND_keyring];
		if (!t->ghost)
			return e && e->has_session_id ? e->session_id : 0;
	}
	return 0;
}

static int key_call(struct rst_ctx *ctx, struct rst_task *t, long op, long a2, long a3, long a4,
		    const char *what)
{
	long r = puppet_syscall(&t->pup, SYS_keyctl, op, a2, a3, a4);
	return (int)rst_check(ctx, t, r < 0 ? r : 0, what);
}

/* chown (ids ckpt's puppet has already left as they are), then perm */
static int key_owner(struct rst_ctx *ctx, struct rst_task *t, int32_t id, uint32_t uid,
		     uint32_t gid, uint32_t perm)
{
	long u = uid == geteuid() ? -1 : (long)uid, g = gid == getegid() ? -1 : (long)gid;
	int r = u == -1 && g == -1 ? 0 : key_call(ctx, t, KEYCTL_CHOWN, id, u, g, "KEYCTL_CHOWN");
	return r < 0 ? r : key_call(ctx, t, KEYCTL_SETPERM, id, perm, 0, "KEYCTL_SETPERM");
}

/* The user keyring of uid linked into the keyring spec: the puppet's real
 * uid is uid for the call (the user keyring is the real uid's) */
static int link_user(struct rst_ctx *ctx, struct rst_task *t, uint32_t uid, long spec)
{
	uid_t ruid = getuid();
	bool as = ruid != uid;
	long r = as ? puppet_syscall(&t->pup, SYS_setresuid, uid, -1, -1) : 0;
	if (r < 0)
		return (int)rst_check(ctx, t, r, "setresuid (to link the user keyring)");
	int e = key_call(ctx, t, KEYCTL_LINK, KEY_SPEC_USER_KEYRING, spec, 0,
			 "KEYCTL_LINK of the user keyring");
	r = as ? puppet_syscall(&t->pup, SYS_setresuid, ruid, -1, -1) : 0;
	return e < 0 ? e : (int)rst_check(ctx, t, r, "setresuid");
}

/* ring's keys into the keyring spec (serial id) of t, then its owner */
static int fill(struct rst_ctx *ctx, struct rst_task *t, const KeyringEntry *ring, long spec,
		int32_t id)
{
	for (size_t i = 0; i < ring->n_keys; i++) {
		const KeyEntry *ke = ring->keys[i];
		int r;
		if (ke->user_keyring) {
			if ((r = link_user(ctx, t, ke->uid, spec)) < 0)
				return r;
			continue;
		}
		static const char type[] = "user";
		size_t dl = strlen(ke->description) + 1;
		uint64_t ty = puppet_scratch_put(&t->pup, RST_DESC_OFF, type, sizeof(type));
		uint64_t d =
		    puppet_scratch_put(&t->pup, RST_DESC_OFF + sizeof(type), ke->description, dl);
		uint64_t p = ke->payload.len ? puppet_scratch_put(&t->pup, RST_PAYLOAD_OFF,
								  ke->payload.data, ke->payload.len)
					     : 0;
		if (!ty || !d || (ke->payload.len && !p))
			return log_fail(&ctx->log, -EFAULT,
					"pid %d: cannot write key \"%s\" into it", t->pid,
					ke->description);
		long key = puppet_syscall(&t->pup, SYS_add_key, (long)ty, (long)d, (long)p,
					  (long)ke->payload.len, spec);
		if (key < 0)
			return log_fail(&ctx->log, (int)key, "pid %d: add_key of \"%s\": %s",
					t->pid, ke->description, strerror((int)-key));
		if ((r = key_owner(ctx, t, (int32_t)key, ke->uid, ke->gid, ke->perm)) < 0)
			return r;
	}
	return key_owner(ctx, t, id, ring->uid, ring->gid, ring->perm);
}

/* Root ready / forked: t joins its own session keyring if its creator's is
 * another (before it forks: its children take it from it). */
static int join_session(struct rst_ctx *ctx, struct rst_task *t)
{
	const KeyringsEntry *e = t->kstate[KIND_keyring];
	uint32_t want = e && e->has_session_id ? e->session_id : 0;
	uint32_t have = inherited(ctx, t);
	if (want == have)
		return 0;
	const KeyringEntry *ring = ring_of(e, RING_SESSION);
	if (!ring)
		return log_fail(&ctx->log, -EINVAL,
				"pid %d: the image gives it a session keyring its creator does not "
				"have, and not that keyring's keys",
				t->pid);
	long id = puppet_syscall(&t->pup, SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0);
	if (id < 0)
		return (int)rst_check(ctx, t, id, "KEYCTL_JOIN_SESSION_KEYRING");
	return fill(ctx, t, ring, KEY_SPEC_SESSION_KEYRING, (int32_t)id);
}

static int keyring_root_ready(struct rst_ctx *ctx, struct rst_task *root)
{
	return join_session(ctx, root);
}

static int keyring_forked(struct rst_ctx *ctx, struct rst_task *t)
{
	return join_session(ctx, t);
}

static int keyring_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	const KeyringEntry *ring = ring_of(t->kstate[KIND_keyring], RING_PROCESS);
	if (!ring)
		return 0;
	int r = rst_calls_flush(ctx, t);
	if (r < 0)
		return r;
	long id =
	    puppet_syscall(&t->pup, SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1);
	if (id < 0)
		return (int)rst_check(ctx, t, id, "making its process keyring");
	return fill(ctx, t, ring, KEY_SPEC_PROCESS_KEYRING, (int32_t)id);
}

static const ProtobufCMessageDescriptor *keyring_descriptor(uint32_t sub)
{
	return sub == REC_SUB(KEYRINGS_ENTRY) ? &keyrings_entry__descriptor : NULL;
}

const struct kind_ops keyring_ops = {
    .per_thread = true,
    .probe = keyring_probe,
    .collect = keyring_collect,
    .dump = keyring_dump,
    .check_restore = keyring_check_restore,
    .load = keyring_load,
    .root_ready = keyring_root_ready,
    .forked = keyring_forked,
    .restore = keyring_restore,
    .free_state = keyring_free_state,
    .descriptor = keyring_descriptor,
};
