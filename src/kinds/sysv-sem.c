/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV semaphore sets (see sysv.c for the kind as a whole): values read by
 * GETALL at checkpoint and set by SETALL at restart. SEM_UNDO adjustments
 * cannot be read: a task with a semaphore undo list (kcmp(KCMP_SYSVSEM)
 * against a process of ckpt's that has none) is refused when its
 * namespace has semaphore sets.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/sysv.h"
#include "util/cleanup.h"

/* --- checkpoint ---------------------------------------------------------- */

int sysv_list_sem(struct sysv_ckpt *s)
{
	struct ckpt_ctx *ctx = s->ctx;
	struct seminfo info;
	int max = semctl(0, 0, SEM_INFO, (union sysv_semun){.info = &info});
	if (max < 0)
		return log_fail(&ctx->log, -errno, "cannot list SysV semaphore sets: %s",
				strerror(errno));
	for (int idx = 0; idx <= max; idx++) {
		struct semid_ds ds;
		int id = semctl(idx, 0, SEM_STAT_ANY, (union sysv_semun){.buf = &ds});
		if (id < 0 && (errno == EINVAL || errno == EIDRM))
			continue;
		if (id < 0)
			return log_fail(&ctx->log, -errno, "cannot read sem index %d: %s", idx,
					strerror(errno));
		struct sem_set *ns = realloc(s->sem, (s->nsem + 1) * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		s->sem = ns;
		struct sem_set *m = &s->sem[s->nsem++];
		*m = (struct sem_set){0};
		sysv_sem_entry__init(&m->e);
		sysv_perm_of(&m->perm, &ds.sem_perm, id);
		size_t n = ds.sem_nsems;
		_cleanup_free_ unsigned short *v = calloc(n ? n : 1, sizeof(*v));
		m->values = calloc(n ? n : 1, sizeof(*m->values));
		if (!v || !m->values)
			return -ENOMEM;
		if (semctl(id, 0, GETALL, (union sysv_semun){.array = v}) < 0)
			return log_fail(&ctx->log, -errno, "sem id %d: cannot read its values: %s",
					id, strerror(errno));
		for (size_t i = 0; i < n; i++)
			m->values[i] = v[i];
		m->e.n_values = n;
		m->e.values = m->values;
	}
	return 0;
}

/* A process of ckpt's with no semaphore undo list, for kcmp to compare with. */
static pid_t fork_blank(int *ret_fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t c = fork();
	if (c == 0) {
		char b;
		close(p[1]);
		while (read(p[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	if (c < 0) {
		close(p[1]);
		return -errno;
	}
	*ret_fd = p[1];
	return c;
}

static int undo_check_one(struct ckpt_ctx *ctx, pid_t blank, pid_t pid, size_t nsets)
{
	long r = syscall(SYS_kcmp, blank, pid, KCMP_SYSVSEM, 0, 0);
	if (r == 0)
		return 0;
	return log_fail(&ctx->log, -EOPNOTSUPP,
			"pid %d: %s, and its ipc namespace has %zu SysV semaphore set(s): SEM_UNDO "
			"adjustments cannot be read; not supported",
			pid,
			r < 0 ? "cannot tell whether it has a semaphore undo list"
			      : "has a semaphore undo list (made by a SEM_UNDO semop, or by "
				"starting a thread)",
			nsets);
}

int sysv_check_undo(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	size_t nsets = s->own_ns ? s->nsem : s->host_nsem;
	int fd = -1, r = 0;
	if (!nsets)
		return 0;
	pid_t blank = fork_blank(&fd);
	if (blank < 0)
		return log_fail(&ctx->log, blank, "cannot fork: %s", strerror(-blank));
	for (size_t i = 0; r >= 0 && i < ctx->ntasks; i++) {
		struct task *t = &ctx->tasks[i];
		if (t->zombie)
			continue;
		r = undo_check_one(ctx, blank, t->pid, nsets);
		for (size_t j = 0; r >= 0 && j < t->nthreads; j++)
			r = undo_check_one(ctx, blank, t->threads[j].pid, nsets);
	}
	close(fd);
	waitpid(blank, NULL, 0);
	return r;
}

/* Host: a set whose last semop was by a task of the tree (its sets are not
 * saved with it); counts the namespace's sets for sysv_check_undo(). */
int sysv_sem_host_used(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
{
	struct seminfo si;
	int max = semctl(0, 0, SEM_INFO, (union sysv_semun){.info = &si});
	for (int idx = 0; idx <= max; idx++) {
		struct semid_ds ds;
		int id = semctl(idx, 0, SEM_STAT_ANY, (union sysv_semun){.buf = &ds});
		if (id < 0)
			continue;
		s->host_nsem++;
		for (unsigned long i = 0; i < ds.sem_nsems; i++) {
			pid_t who = semctl(id, (int)i, GETPID);
			if (sysv_pid_in_image(ctx, who))
				return sysv_refuse_used(ctx, who, "semaphore set", id,
							ds.sem_perm.__key);
		}
	}
	return 0;
}

/* --- restart ------------------------------------------------------------ */

static bool sem_valid(const struct sysv_rst *s, const SysvSemEntry *e)
{
	if (!sysv_perm_ok(e->perm) || !e->n_values || e->n_values > SEM_NSEMS_MAX ||
	    s->nsem >= MAX_OBJECTS)
		return false;
	for (size_t i = 0; i < e->n_values; i++)
		if (e->values[i] > SEMVAL_MAX)
			return false;
	for (size_t i = 0; i < s->nsem; i++)
		if (s->sem[i]->perm->id == e->perm->id ||
		    (e->perm->key != IPC_PRIVATE && s->sem[i]->perm->key == e->perm->key))
			return false;
	return true;
}

int sysv_load_sem(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
{
	SysvSemEntry *e = rctx_unpack(ctx, rec, &sysv_sem_entry__descriptor);
	if (!e)
		return -EINVAL;
	if (!sem_valid(s, e)) {
		sysv_sem_entry__free_unpacked(e, NULL);
		return log_fail(&ctx->log, -EINVAL,
				"record %u (sysv/sem): set is not valid or repeats an id or key",
				rec->index);
	}
	SysvSemEntry **n = realloc(s->sem, (s->nsem + 1) * sizeof(*n));
	if (!n) {
		sysv_sem_entry__free_unpacked(e, NULL);
		return -ENOMEM;
	}
	s->sem = n;
	s->sem[s->nsem++] = e;
	return 0;
}

static int get_sem(const struct getter *g, int key, int flags)
{
	return semget(key, (int)g->size, flags);
}
static int rm_sem(int id)
{
	return semctl(id, 0, IPC_RMID);
}

int sysv_make_sem(struct rst_ctx *ctx, const SysvSemEntry *e)
{
	const SysvPerm *p = e->perm;
	struct getter get = {"sem", get_sem, rm_sem, e->n_values};
	int r = sysv_make_obj(ctx, &get, p);
	if (r < 0)
		return r;
	_cleanup_free_ unsigned short *v = calloc(e->n_values, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < e->n_values; i++)
		v[i] = (unsigned short)e->values[i];
	if (semctl(p->id, 0, SETALL, (union sysv_semun){.array = v}) < 0)
		return sysv_fail_id(ctx, "sem", p->id, "SETALL");
	struct semid_ds ds;
	if (semctl(p->id, 0, IPC_STAT, (union sysv_semun){.buf = &ds}) < 0)
		return sysv_fail_id(ctx, "sem", p->id, "IPC_STAT");
	sysv_set_perm(&ds.sem_perm, p);
	if (semctl(p->id, 0, IPC_SET, (union sysv_semun){.buf = &ds}) < 0)
		return sysv_fail_id(ctx, "sem", p->id, "IPC_SET");
	return 0;
}
