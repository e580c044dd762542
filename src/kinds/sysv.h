/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SysV IPC, inside the kind: what sysv.c (the namespace, its limits, the
 * kind's ops) shares with sysv-shm.c, sysv-msg.c and sysv-sem.c (one file
 * per IPC type: list at checkpoint, load and make at restart). Nothing
 * outside src/kinds/sysv*.c includes it: mm reaches the shm attachments
 * through the kind's vma ops.
 *
 * Every object lives in the root task's kstate: struct sysv_ckpt at
 * checkpoint, struct sysv_rst at restart. Functions that work in the
 * objects' ipc namespace run on a thread of ckpt's that entered it
 * (sysv_in_ns()).
 */
#ifndef CKPT_SYSV_H
#define CKPT_SYSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "img/pages.h"
#include "kinds/kinds.h"
#include "mm.pb-c.h"
#include "sysv.pb-c.h"

struct ckpt_ctx;
struct ckpt_log;
struct rst_ctx;
struct task;
struct rst_task;
struct proc_vma;

enum {
	SYSV_NS = REC_TYPE(KID_sysv, 1),
	SYSV_SHM = REC_TYPE(KID_sysv, 2),
	/* 3 and 4 were shm data and pages, before the page store */
	SYSV_MSG = REC_TYPE(KID_sysv, 5),
	SYSV_SEM = REC_TYPE(KID_sysv, 6),
	SYSV_SHM_PAGES = REC_TYPE(KID_sysv, 7), /* page store, of the last SYSV_SHM */
};

#define PAGE	      4096ull
#define SHM_SIZE_MAX  (1ull << 46)
#define SEM_NSEMS_MAX 65535
#define SEMVAL_MAX    32767
#define MSG_TEXT_MAX  (1u << 30)
#define MAX_OBJECTS   65536 /* of each type, in an image */
#define NLIMITS	      11    /* the namespace's sysctls (sysv.c) */
#define LIMIT_LEN     64

union sysv_semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
	struct seminfo *info;
};

/* --- checkpoint -------------------------------------------------------- */

struct shm_seg {
	SysvShmEntry e;
	SysvPerm perm;
	uint64_t nattch;
	size_t seen;   /* vmas of the image's tasks that map it */
	bool key_seen; /* its key was taken from a mapping's name */
	pid_t cpid, lpid;
};

struct msg_queue {
	SysvMsgEntry e;
	SysvPerm perm;
	SysvMsg *m;
	SysvMsg **pm;
	uint8_t *text; /* every message's text, one after the other */
};

struct sem_set {
	SysvSemEntry e;
	SysvPerm perm;
	uint32_t *values;
};

/* In the root's kstate; the other tasks' collect adds to it. */
struct sysv_ckpt {
	struct ckpt_ctx *ctx;
	bool own_ns;
	int nsfd;	/* own_ns: the container's ipc namespace */
	struct stat ns; /* the namespace the objects are in */
	bool rmid_forced;
	SysvNsEntry nse;
	SysvLimit lim[NLIMITS];
	SysvLimit *plim[NLIMITS];
	char val[NLIMITS][LIMIT_LEN];
	struct shm_seg *shm;
	size_t nshm;
	struct msg_queue *msg;
	size_t nmsg;
	struct sem_set *sem;
	size_t nsem;
	size_t host_nsem; /* host: semaphore sets of the namespace */
};

/* --- restart ----------------------------------------------------------- */

struct shm_rst {
	SysvShmEntry *e;
	struct pages_set pages; /* its contents */
	void *addr; /* ckpt's attachment, held until every task has its own */
	bool made;
};

/* In the root's kstate. */
struct sysv_rst {
	struct rst_task *root; /* its 'created' says at the end if the restart failed */
	struct rst_ctx *ctx;
	SysvNsEntry *ns;
	const char *limit[NLIMITS]; /* by limit_names index, NULL: not in the image */
	struct shm_rst *shm;
	size_t nshm;
	SysvMsgEntry **msg;
	size_t nmsg;
	SysvSemEntry **sem;
	size_t nsem;
};

/*
 * Makes one object with id and key as creator p->cuid/cgid (the thread's
 * effective ids for the call: the kernel takes them for cuid, cgid) and
 * checks the id; get is shmget, msgget or semget through a closure.
 */
struct getter {
	const char *what; /* "shm", "msg", "sem" */
	int (*get)(const struct getter *g, int key, int flags);
	int (*rm)(int id);
	uint64_t size; /* shm: bytes; sem: nsems */
	int flags;     /* shm: SHM_HUGETLB and its page size, or 0 */
};

/* sysv.c: shared */
int sysv_in_ns(struct ckpt_log *log, int nsfd, int (*fn)(void *), void *arg)
	__attribute__((warn_unused_result));
void sysv_perm_of(SysvPerm *p, const struct ipc_perm *ip, int id);
bool sysv_perm_ok(const SysvPerm *p);
bool sysv_pid_in_image(struct ckpt_ctx *ctx, pid_t pid);
int sysv_refuse_used(struct ckpt_ctx *ctx, pid_t pid, const char *what, int id, int key);
int sysv_make_obj(struct rst_ctx *ctx, const struct getter *g, const SysvPerm *p)
	__attribute__((warn_unused_result));
void sysv_set_perm(struct ipc_perm *ip, const SysvPerm *p);
int sysv_fail_id(struct rst_ctx *ctx, const char *what, int id, const char *op);

/* sysv-shm.c */
int sysv_list_shm(struct sysv_ckpt *s) __attribute__((warn_unused_result));
int sysv_shm_collect(struct ckpt_ctx *ctx, struct sysv_ckpt *s, struct task *t)
	__attribute__((warn_unused_result));
bool sysv_shm_attached(const struct task *t);
int sysv_shm_collect_end(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
	__attribute__((warn_unused_result));
int sysv_shm_host_used(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
	__attribute__((warn_unused_result));
void sysv_after_kill(struct ckpt_ctx *ctx);
int sysv_shm_dump(struct ckpt_ctx *ctx, struct sysv_ckpt *s) __attribute__((warn_unused_result));
int sysv_load_shm(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
	__attribute__((warn_unused_result));
int sysv_load_shm_pages(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
	__attribute__((warn_unused_result));
int sysv_shm_check_free(struct rst_ctx *ctx, const struct sysv_rst *s)
	__attribute__((warn_unused_result));
int sysv_make_shm(struct rst_ctx *ctx, struct shm_rst *g) __attribute__((warn_unused_result));
void sysv_shm_release(struct sysv_rst *s, bool undo);
/* Every task attached: ckpt's own attachments go (before any task runs). */
void sysv_shm_detach(struct sysv_rst *s);
/* the kind's vma ops: a vma that maps a segment ("/SYSV%08x (deleted)") */
bool sysv_vma_claim(const struct proc_vma *pv);
int sysv_vma_collect(struct ckpt_ctx *ctx, struct task *t, const struct proc_vma *pv,
		     VmaEntry *v) __attribute__((warn_unused_result));
int sysv_vma_check(struct rst_ctx *ctx, struct rst_task *t, const MmEntry *e)
	__attribute__((warn_unused_result));
int sysv_vma_map(struct rst_ctx *ctx, struct rst_task *t, const VmaEntry *v)
	__attribute__((warn_unused_result));

/* sysv-msg.c */
int sysv_list_msg(struct sysv_ckpt *s) __attribute__((warn_unused_result));
int sysv_msg_host_used(struct ckpt_ctx *ctx) __attribute__((warn_unused_result));
int sysv_load_msg(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
	__attribute__((warn_unused_result));
int sysv_make_msg(struct rst_ctx *ctx, const SysvMsgEntry *e) __attribute__((warn_unused_result));

/* sysv-sem.c */
int sysv_list_sem(struct sysv_ckpt *s) __attribute__((warn_unused_result));
int sysv_sem_host_used(struct ckpt_ctx *ctx, struct sysv_ckpt *s)
	__attribute__((warn_unused_result));
int sysv_check_undo(struct ckpt_ctx *ctx, struct sysv_ckpt *s) __attribute__((warn_unused_result));
int sysv_load_sem(struct rst_ctx *ctx, struct sysv_rst *s, const struct img_record *rec)
	__attribute__((warn_unused_result));
int sysv_make_sem(struct rst_ctx *ctx, const SysvSemEntry *e) __attribute__((warn_unused_result));

#endif
