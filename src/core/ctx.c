/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "core/ctx.h"
#include "util/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ctx_pages_writer(struct ckpt_ctx *ctx, struct pages_writer *pw, uint32_t type, uint64_t tag,
		     pages_read_fn read, void *arg)
{
	int r = pages_writer_init(pw, &ctx->w, type, tag, ctx->buf, ctx->bufsize, read, arg);
	if (r >= 0 && (r = pages_writer_compress(pw, ctx->pz)) < 0)
		pages_writer_release(pw);
	return r;
}

int ctx_write_msg(struct ckpt_ctx *ctx, uint32_t type, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t stackbuf[4096];
	uint8_t *buf = len <= sizeof(stackbuf) ? stackbuf : malloc(len);
	int r;

	if (!buf)
		return -ENOMEM;
	CKPT_FAULT(CKPT_FAULT_WRITE);
	protobuf_c_message_pack(msg, buf);
	r = img_write(&ctx->w, type, 0, buf, len);
	if (buf != stackbuf)
		free(buf);
	if (r < 0) {
		char name[48];
		log_error(&ctx->log, "cannot write record %s to the image: %s",
			  rec_type_name(type, name, sizeof(name)), strerror(-r));
	}
	return r;
}

void *rctx_unpack(struct rst_ctx *ctx, const struct img_record *rec,
		  const ProtobufCMessageDescriptor *desc)
{
	void *m = protobuf_c_message_unpack(desc, NULL, rec->len, rec->data);
	if (!m) {
		char name[48];
		log_error(&ctx->log, "record %u (%s) at offset %llu: cannot decode %s", rec->index,
			  rec_type_name(rec->type, name, sizeof(name)),
			  (unsigned long long)rec->offset, desc->name);
	}
	return m;
}

void *task_state(struct task *t, enum kind k, size_t size)
{
	if (!t->kstate[k])
		t->kstate[k] = calloc(1, size);
	return t->kstate[k];
}

long rst_check(struct rst_ctx *ctx, struct rst_task *t, long r, const char *what)
{
	if (r < 0 && r > -4096)
		log_error(&ctx->log, "pid %d: %s failed: %s", t->pid, what, strerror((int)-r));
	return r;
}

void *rctx_load_one(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec,
		    enum kind k, uint32_t type, const ProtobufCMessageDescriptor *desc)
{
	if (rec->type != type || t->kstate[k]) {
		char name[48];
		log_error(&ctx->log, "record %u (%s): %s for pid %d", rec->index,
			  rec_type_name(rec->type, name, sizeof(name)),
			  rec->type != type ? "unknown subtype" : "a second one", t->pid);
		return NULL;
	}
	ProtobufCAllocator in = arena_protobuf(&ctx->msgs);
	t->kstate[k] = protobuf_c_message_unpack(desc, &in, rec->len, rec->data);
	if (!t->kstate[k]) {
		char name[48];
		log_error(&ctx->log, "record %u (%s) at offset %llu: cannot decode %s", rec->index,
			  rec_type_name(rec->type, name, sizeof(name)),
			  (unsigned long long)rec->offset, desc->name);
	}
	return t->kstate[k];
}

struct task *ctx_find_task(struct ckpt_ctx *ctx, pid_t pid)
{
	for (size_t i = 0; i < ctx->ntasks; i++)
		if (ctx->tasks[i].pid == pid)
			return &ctx->tasks[i];
	return NULL;
}

void ctx_wait_asleep(struct ckpt_log *log, struct puppet_asleep *w)
{
	if (w->n)
		log_debug(log,
			  "%zu task(s) let go in a call, with a handler they may run: "
			  "waiting until each is in its call again",
			  w->n);
	size_t late = puppet_asleep_wait(w, PUPPET_ASLEEP_MS);
	if (late)
		log_info(log, "%zu task(s) let go in a call not asleep again after %d ms", late,
			 PUPPET_ASLEEP_MS);
}

int ctx_cmp_pid(const void *a, const void *b)
{
	const struct pid_index *x = a, *y = b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

struct rst_task *tree_find(struct rst_ctx *ctx, pid_t pid)
{
	struct pid_index key = { .pid = pid }, *hit;
	if (!ctx->by_pid)
		return NULL;
	hit = bsearch(&key, ctx->by_pid, ctx->npids, sizeof(key), ctx_cmp_pid);
	return hit ? hit->t : NULL;
}

int rst_require(struct rst_ctx *ctx, const struct rst_task *t, enum kind k)
{
	if (t->kstate[k])
		return 0;
	return log_fail(&ctx->log, -EINVAL, "image lacks the %s of %s %d", kinds[k].name,
			t->leader ? "thread" : "pid", t->pid);
}
