/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The probes of a task at checkpoint: the injected calls that every kind
 * asks of it at step "probe" are run by ckpt as one batch at the start of
 * step "collect" (one stop of the task, one request to the guardian, where
 * each kind's own batch or single call was one each), and what they wrote
 * into the scratch area is read back by one read. The kinds' collect ops
 * then take their results from here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/sequence.h"

static struct probe_batch *probes_of(struct task *t)
{
	if (!t->probes)
		t->probes = calloc(1, sizeof(*t->probes));
	return t->probes;
}

int task_probe_call(struct task *t, struct puppet_call c)
{
	struct probe_batch *b = probes_of(t);
	if (!b)
		return -ENOMEM;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 32;
		struct puppet_call *nc = realloc(b->c, cap * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		b->c = nc;
		b->cap = cap;
	}
	b->c[b->n] = c;
	return (int)b->n++;
}

uint64_t task_probe_area(struct task *t, size_t len)
{
	struct probe_batch *b = probes_of(t);
	len = (len + 15) & ~(size_t)15;
	if (!b || !t->pup.scratch || b->used + len > t->pup.scratch_len)
		return 0;
	uint64_t at = t->pup.scratch + b->used;
	b->used += len;
	return at;
}

long task_probe_ret(const struct task *t, int i)
{
	if (i < 0)
		return i;
	const struct probe_batch *b = t->probes;
	return b && b->ran && (size_t)i < b->n ? b->c[i].ret : -ENOENT;
}

const void *task_probe_out(const struct task *t, uint64_t addr, size_t len)
{
	const struct probe_batch *b = t->probes;
	if (!b || !b->out || !addr || addr < t->pup.scratch ||
	    addr - t->pup.scratch + len > b->used)
		return NULL;
	return (const char *)b->out + (addr - t->pup.scratch);
}

void task_probes_free(struct task *t)
{
	if (!t->probes)
		return;
	free(t->probes->c);
	free(t->probes->out);
	free(t->probes);
	t->probes = NULL;
}

/* Step "collect", ckpt's part: the probes run, before the kinds' collect. A
 * call that could not run has its error as result; the kinds judge it. */
int ckpt_run_probes(struct ckpt_ctx *ctx, struct task *t)
{
	struct probe_batch *b = t->probes;
	(void)ctx;
	if (!b)
		return 0;
	int r = 0;
	for (size_t i = 0; i < b->n; i += PUPPET_BATCH_MAX) {
		size_t m = b->n - i < PUPPET_BATCH_MAX ? b->n - i : PUPPET_BATCH_MAX;
		if (r >= 0)
			r = puppet_syscalls(&t->pup, b->c + i, m);
		else
			for (size_t j = i; j < i + m; j++)
				b->c[j].ret = r;
	}
	b->ran = true;
	if (r >= 0 && b->used) {
		b->out = malloc(b->used);
		if (b->out && puppet_read(&t->pup, t->pup.scratch, b->out, b->used) < 0) {
			free(b->out);
			b->out = NULL;
		}
	}
	return 0;
}
