/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Security labels (AppArmor profiles, SELinux contexts): a task whose
 * label is not ckpt's own is refused. Images do not carry labels
 * (RESTART_KEEP_LSM is refused), and a restarted task gets the label of
 * the ckpt that made it, so a daemon confined by its profile (Debian
 * ships profiles for chronyd, ntpd, cupsd, man...) or a container under
 * docker-default would come back unconfined, without a word.
 *
 * /proc/PID/attr/current is a task's label under the labelling module;
 * without one (only Landlock, BPF, lockdown: this project's machines) it
 * cannot be read (EINVAL), and then there is nothing to compare. A
 * thread may have a label of its own (AppArmor change_hat, SELinux
 * setcon on a thread): each is read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/checks.h"
#include "util/cleanup.h"

/* the label without what the module ends it with (a newline, a NUL) */
static size_t label_len(const char *s, size_t len)
{
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\0'))
		len--;
	return len;
}

const char *lsm_label_refusal(const char *label, size_t len, const char *own, size_t own_len)
{
	len = label_len(label, len);
	if (!own)
		return len ? "it has a security label and ckpt's own cannot be read" : NULL;
	own_len = label_len(own, own_len);
	if (len == own_len && !memcmp(label, own, len))
		return NULL;
	return "its security label is not ckpt's";
}

static int lsm_collect(struct ckpt_ctx *ctx, struct task *t)
{
	_cleanup_free_ char *label = NULL, *own = NULL;
	size_t len = 0, own_len = 0;
	if (t->zombie) /* runs nothing again */
		return 0;
	/* whether a module labels tasks is the machine's, not the task's: when
	 * ckpt's own label cannot be read (EINVAL), no task's can, and 1,000
	 * threads are not asked one by one (13 ms of a checkpoint) */
	if (!ctx->lsm_labels) {
		int r = proc_read(getpid(), "attr/current", &own, &own_len);
		ctx->lsm_labels = r == -EINVAL ? -1 : 1;
		if (r < 0)
			own = NULL;
	} else if (ctx->lsm_labels > 0 && proc_read(getpid(), "attr/current", &own, &own_len) < 0) {
		own = NULL;
	}
	if (ctx->lsm_labels < 0)
		return 0;
	/* EINVAL: no module labels tasks; ENOENT, ESRCH: it is gone, which
	 * its other kinds say */
	if (proc_read(t->pid, "attr/current", &label, &len) < 0)
		return 0;
	const char *why = lsm_label_refusal(label, len, own, own_len);
	if (!why)
		return 0;
	int n = (int)label_len(label, len), on = own ? (int)label_len(own, own_len) : 0;
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"%s %d: %s (its label '%.*s', ckpt's '%.*s'): images do not carry security "
			"labels, and a restart would give it ckpt's, not its profile or context",
			t->leader ? "thread" : "pid", t->pid, why, n, label, on, own ? own : "");
}

const struct kind_ops lsm_ops = {
    .per_thread = true,
    .collect = lsm_collect,
};
