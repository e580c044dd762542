/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The file descriptor table: which fd number holds which open file (an
 * objref of file_reg), and close-on-exec per fd. Holes stay holes: at
 * restart the puppet holds nothing but ckpt's control socket, which sits
 * above every fd of the image.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "files.pb-c.h"
#include "kinds/fdtable.h"
#include "kinds/file-reg.h"
#include "util/cleanup.h"

enum { FDTABLE_ENTRY = REC_TYPE(KID_fdtable, 1) };
#define FD_MAX_RESTORE (1 << 20)

struct fdt_ckpt {
	FdTableEntry e;
	FdEntry *fds;
	FdEntry **pfds;
};

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static int fdtable_collect(struct ckpt_ctx *ctx, struct task *t)
{
	struct fdt_ckpt *f = task_state(t, KIND_fdtable, sizeof(*f));
	char path[64];
	int *fds = NULL, r = 0;
	size_t n = 0, cap = 0;

	if (!f)
		return -ENOMEM;
	fd_table_entry__init(&f->e);
	snprintf(path, sizeof(path), "/proc/%d/fd", t->pid);
	DIR *d = opendir(path);
	if (!d)
		return log_fail(&ctx->log, -errno, "pid %d: cannot list fds: %s", t->pid,
				strerror(errno));
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			int *nf = realloc(fds, cap * sizeof(*fds));
			if (!nf) {
				r = -ENOMEM;
				break;
			}
			fds = nf;
		}
		fds[n++] = atoi(de->d_name);
	}
	closedir(d);
	if (r < 0) {
		free(fds);
		return r;
	}
	qsort(fds, n, sizeof(*fds), cmp_int);
	f->fds = calloc(n ? n : 1, sizeof(*f->fds));
	f->pfds = calloc(n ? n : 1, sizeof(*f->pfds));
	if (!f->fds || !f->pfds) {
		free(fds);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		FdEntry *e = &f->fds[i];
		bool cloexec;
		fd_entry__init(e);
		e->fd = fds[i];
		r = file_reg_collect_fd(ctx, t, fds[i], &e->file_id, &cloexec);
		if (r < 0)
			break;
		e->has_cloexec = true;
		e->cloexec = cloexec;
		f->pfds[f->e.n_fds++] = e;
	}
	f->e.fds = f->pfds;
	free(fds);
	return r;
}

static int fdtable_dump(struct ckpt_ctx *ctx, struct task *t)
{
	struct fdt_ckpt *f = t->kstate[KIND_fdtable];
	return ctx_write_msg(ctx, FDTABLE_ENTRY, &f->e.base);
}

static int fdtable_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec)
{
	if (rec->type != FDTABLE_ENTRY || t->kstate[KIND_fdtable])
		return log_fail(&ctx->log, -EINVAL, "record %u: unexpected fd table record",
				rec->index);
	FdTableEntry *e = rctx_unpack(ctx, rec, &fd_table_entry__descriptor);
	if (!e)
		return -EINVAL;
	t->kstate[KIND_fdtable] = e;
	for (size_t i = 0; i < e->n_fds; i++) {
		if (e->fds[i]->fd >= FD_MAX_RESTORE || (i && e->fds[i]->fd <= e->fds[i - 1]->fd))
			return log_fail(&ctx->log, -EINVAL,
					"record %u: fd table of pid %d: fd %u is out of order or range",
					rec->index, t->pid, e->fds[i]->fd);
	}
	return 0;
}

int fdtable_max_fd(struct rst_task *t)
{
	FdTableEntry *e = t->kstate[KIND_fdtable];
	return e && e->n_fds ? (int)e->fds[e->n_fds - 1]->fd : -1;
}

static int fdtable_restore(struct rst_ctx *ctx, struct rst_task *t)
{
	FdTableEntry *e = t->kstate[KIND_fdtable];
	for (size_t i = 0; e && i < e->n_fds; i++) {
		const FdEntry *fe = e->fds[i];
		int local, r = file_reg_fd(ctx, fe->file_id, &local);
		if (r < 0)
			return r;
		r = puppet_install_fd(&t->pup, ctx->ctl[0], t->ctl_remote, local, (int)fe->fd,
				      fe->cloexec);
		if (r < 0)
			return log_fail(&ctx->log, r, "pid %d fd %u (%s): cannot install: %s", t->pid,
					fe->fd, file_reg_path(ctx, fe->file_id), strerror(-r));
	}
	return 0;
}

static void fdtable_free_state(void *state)
{
	struct fdt_ckpt *f = state;
	if (f) {
		free(f->fds);
		free(f->pfds);
		free(f);
	}
}

static void fdtable_free_rstate(void *state)
{
	if (state)
		fd_table_entry__free_unpacked(state, NULL);
}

static const ProtobufCMessageDescriptor *fdtable_descriptor(uint32_t sub)
{
	return sub == REC_SUB(FDTABLE_ENTRY) ? &fd_table_entry__descriptor : NULL;
}

const struct kind_ops fdtable_ops = {
	.collect = fdtable_collect,
	.dump = fdtable_dump,
	.load = fdtable_load,
	.restore = fdtable_restore,
	.free_state = fdtable_free_state,
	.free_rstate = fdtable_free_rstate,
	.descriptor = fdtable_descriptor,
};
