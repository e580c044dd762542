/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV message queues (see sysv.c for the kind as a whole): read without
 * taking the messages (msgrcv(MSG_COPY)) at checkpoint; made again with
 * their id, key, owner and mode at restart, the messages queued in order
 * with msg_qbytes raised meanwhile if they need it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>

#include "core/ctx.h"
#include "kinds/sysv.h"
#include "util/cleanup.h"

/* --- checkpoint ---------------------------------------------------------- */

/* The messages of queue id, in order, read without taking them. */
static int read_queue(struct ckpt_ctx *ctx, struct msg_queue *q, int id, const struct msqid_ds *ds)
{
	size_t n = ds->msg_qnum, bytes = ds->__msg_cbytes;
	q->m = calloc(n ? n : 1, sizeof(*q->m));
	q->pm = calloc(n ? n : 1, sizeof(*q->pm));
	q->text = malloc(bytes ? bytes : 1);
	_cleanup_free_ struct msgbuf *buf = malloc(sizeof(long) + bytes + 1);
	if (!q->m || !q->pm || !q->text || !buf)
		return -ENOMEM;
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		ssize_t got = msgrcv(id, buf, bytes, (long)i, IPC_NOWAIT | MSG_COPY);
		if (got < 0 && errno == ENOSYS)
			return log_fail(
			    &ctx->log, -EOPNOTSUPP,
			    "msg queue id %d: reading messages without taking them needs "
			    "MSG_COPY (CONFIG_CHECKPOINT_RESTORE)",
			    id);
		if (got < 0)
			return log_fail(&ctx->log, -errno,
					"msg queue id %d: cannot read message %zu of %zu: %s%s", id,
					i, n, strerror(errno),
					errno == EINVAL ? " (larger than kernel.msgmax?)" : "");
		if ((size_t)got > bytes - used)
			return log_fail(&ctx->log, -EAGAIN, "msg queue id %d: changed meanwhile",
					id);
		memcpy(q->text + used, buf->mtext, (size_t)got);
		sysv_msg__init(&q->m[i]);
		q->m[i].type = buf->mtype;
		q->m[i].text.data = q->text + used;
		q->m[i].text.len = (size_t)got;
		q->pm[i] = &q->m[i];
		used += (size_t)got;
	}
	q->e.n_msgs = n;
	q->e.msgs = q->pm;
	return 0;
}

int sysv_list_msg(struct sysv_ckpt *s)
{
	struct ckpt_ctx *ctx = s->ctx;
	struct msginfo info;
	int max = msgctl(0, MSG_INFO, (struct msqid_ds *)&info);
	if (max < 0)
		return log_fail(&ctx->log, -errno, "cannot list SysV message queues: %s",
				strerror(errno));
	for (int idx = 0; idx <= max; idx++) {
		struct msqid_ds ds;
		int id = msgctl(idx, MSG_STAT_ANY, &ds);
		if (id < 0 && (errno == EINVAL || errno == EIDRM))
			continue;
		if (id < 0)
			return log_fail(&ctx->log, -errno, "cannot read msg index %d: %s", idx,
					strerror(errno));
		struct msg_queue *nq = realloc(s->msg, (s->nmsg + 1) * sizeof(*nq));
		if (!nq)
			return -ENOMEM;
		s->msg = nq;
		struct msg_queue *q = &s->msg[s->nmsg++];
		*q = (struct msg_queue){0};
		sysv_msg_entry__init(&q->e);
		sysv_perm_of(&q->perm, &ds.msg_perm, id);
		q->e.qbytes = ds.msg_qbytes;
		int r = read_queue(ctx, q, id, &ds);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Host: a queue whose last sender or receiver is a task of the tree (its
 * queues are not saved with it). */
int sysv_msg_host_used(struct ckpt_ctx *ctx)
{
	struct msginfo mi;
	int max = msgctl(0, MSG_INFO, (struct msqid_ds *)&mi);
	for (int idx = 0; idx <= max; idx++) {
		struct msqid_ds ds;
		int id = msgctl(idx, MSG_STAT_ANY, &ds);
		pid_t who = id < 0				   ? 0
			    : sysv_pid_in_image(ctx, ds.msg_lspid) ? ds.msg_lspid
								   : ds.msg_lrpid;
		if (id >= 0 && sysv_pid_in_image(ctx, who))
			return sysv_refuse_used(ctx, who, "message queue", id, ds.msg_perm.__key);
	}
	return 0;
}

/* --- restart ------------------------------------------------------------ */

static bool msg_valid(const struct sysv_rst *s, const SysvMsgEntry *e)
{
	if (!sysv_perm_ok(e->perm) || e->qbytes > INT32_MAX || s->nmsg >= MAX_OBJECTS ||
	    e->n_msgs > MSG_TEXT_MAX)
		return false;
	uint64_t bytes = 0;
	for (size_t i = 0; i < e->n_msgs; i++) {
		if (e->msgs[i]->type < 1 || e->msgs[i]->text.len > MSG_TEXT_MAX)
			return false;
		bytes += e->msgs[i]->text.len;
	}
	for (size_t i = 0; i < s->nmsg; i++)
		if (s->msg[i]->perm->id == e->perm->id ||
		    (e->perm->key != IPC_PRIVATE && s->msg[i]->perm->key == e->perm->key))
			return false;
	return bytes <= MSG_TEXT_MAX;
}

int sysv_load_msg(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	SysvMsgEntry *e = rctx_unpack(ctx, rec, &sysv_msg_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (!msg_valid(s, e)) {
		sysv_msg_entry__free_unpacked(e, NULL);
		return log_fail(&ctx->log, -EINVAL,
				"record %u (sysv/msg): queue is not valid or repeats an id or key",
				rec->index);
	}
	SysvMsgEntry **n = realloc(s->msg, (s->nmsg + 1) * sizeof(*n));
	if (!n) {
		sysv_msg_entry__free_unpacked(e, NULL);
		return -ENOMEM;
	}
	s->msg = n;
	s->msg[s->nmsg++] = e;
	return 0;
}

static int get_msg(const struct getter *g, int key, int flags)
{
	(void)g;
	return msgget(key, flags);
}
static int rm_msg(int id)
{
	return msgctl(id, IPC_RMID, NULL);
}

static int msg_set(int id, struct msqid_ds *ds, uint64_t qbytes)
{
	ds->msg_qbytes = qbytes;
	return msgctl(id, IPC_SET, ds);
}

int sysv_make_msg(struct rst_ctx *ctx, const SysvMsgEntry *e)
{
	const SysvPerm *p = e->perm;
	struct getter get = {"msg", get_msg, rm_msg, 0};
	int r = sysv_make_obj(ctx, &get, p);
	if (r < 0)
		return r;
	uint64_t bytes = 0, most = 0;
	for (size_t i = 0; i < e->n_msgs; i++) {
		bytes += e->msgs[i]->text.len;
		most = MAX(most, e->msgs[i]->text.len);
	}
	/* room for the queue (a limit lowered after it filled included) */
	struct msqid_ds ds;
	if (msgctl(p->id, IPC_STAT, &ds) < 0)
		return sysv_fail_id(ctx, "msg", p->id, "IPC_STAT");
	sysv_set_perm(&ds.msg_perm, p);
	if (msg_set(p->id, &ds, MAX(e->qbytes, MAX(bytes, e->n_msgs))) < 0)
		return sysv_fail_id(ctx, "msg", p->id, "IPC_SET");
	_cleanup_free_ struct msgbuf *buf = malloc(sizeof(long) + most + 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < e->n_msgs; i++) {
		buf->mtype = e->msgs[i]->type;
		if (e->msgs[i]->text.len) /* an empty one has no data */
			memcpy(buf->mtext, e->msgs[i]->text.data, e->msgs[i]->text.len);
		if (msgsnd(p->id, buf, e->msgs[i]->text.len, IPC_NOWAIT) < 0)
			return log_fail(&ctx->log, -errno,
					"msg id %d: cannot queue message %zu "
					"(%zu bytes): %s",
					p->id, i, e->msgs[i]->text.len, strerror(errno));
	}
	if (ds.msg_qbytes != e->qbytes && msg_set(p->id, &ds, e->qbytes) < 0)
		return sysv_fail_id(ctx, "msg", p->id, "IPC_SET");
	return 0;
}
