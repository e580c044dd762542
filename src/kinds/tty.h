/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Terminals (tty.c: checkpoint and the ops; tty-rst.c: restart): the
 * records, the objects and the restart ops they share; a shell job's hold
 * on ckpt's own terminal (RESTART_SHELL_JOB; the release, handover, wait
 * and handed_back ops):
 *   tty_shell_attach(ctx, &sh)  before the release: the restored job becomes
 *                             the foreground job of ckpt's own terminal, with
 *                             the saved termios (sh.fd: that terminal, -1: none)
 *   tty_shell_wait(&sh, ...)  waits for the job, passing its stops on
 *   tty_shell_detach(&sh)     once the job is over: ckpt's group is the
 *                             foreground again, ckpt's termios put back
 * Each returns 0 when the image holds nothing of the sort.
 */
#ifndef CKPT_TTY_H
#define CKPT_TTY_H

#include <asm/termbits.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/types.h>

#include "kinds/kinds.h"
#include "kinds/tty-io.h"
#include "tty.pb-c.h"

struct rst_ctx;
struct rst_task;

struct tty_shell {
	int fd;                 /* ckpt's terminal, -1 if no shell job */
	bool restore;           /* put termios back at detach */
	struct termios2 termios; /* ckpt's, before the job's were set */
	pid_t pgrp;             /* the job's process group */
};

enum {
	TTY_ENTRY = REC_TYPE(KID_tty, 1),
	TTY_FILE_ENTRY = REC_TYPE(KID_tty, 2),
	TTY_TASK_ENTRY = REC_TYPE(KID_tty, 3),
};
enum { TF_PTS = 1, TF_DEVTTY = 2, TF_CONSOLE = 3 };
#define PTS_MAJOR     136
#define PTY_MAX_INDEX (1u << 20)
#define FILE_FLAGS    (O_ACCMODE | O_NONBLOCK | O_APPEND)
#define PID_LIMIT     4194304
#define MAX_HELD      8192

/* checkpoint: a pty pair (and its master's open file), or a terminal's open file */
struct tty_obj {
	bool is_file;
	TtyEntry e; /* pty */
	TtyTermios tio;
	TtyWinsize ws;
	uint8_t cc[NCCS];
	char path[16];
	struct tty_queues q;
	TtyLine *lines, **plines;
	TtyFileEntry f; /* file */
	uint64_t dev;	/* the devpts instance of the slave */
	uint32_t index; /* pty, /dev/pts/N: N */
	uint32_t real;	/* /dev/tty, /dev/console: the tty behind it (TIOCGDEV) */
	pid_t pid;	/* a task holding it, and its fd */
	int fd;
	pid_t sid, pgrp;     /* pty: its session and foreground group, as ckpt sees them */
	bool slave_held;     /* pty: the image has a file of its slave */
	struct tty_obj *pty; /* file: its pty; NULL for the terminal outside */
};

/* checkpoint, per task */
struct tty_task {
	TtyTaskEntry e;
	TtyShellEntry sh;
	TtyTermios tio;
	TtyWinsize ws;
	uint8_t cc[NCCS];
};

/* restart */
struct tty_robj {
	bool is_file;
	TtyEntry *e;
	TtyFileEntry *f;
	int master, slave; /* pty: ckpt's own */
	int fd;		   /* file */
};

struct tty_rtask {
	TtyTaskEntry *e;
	int own; /* the root's: ckpt's own terminal (/dev/tty), or -1 */
	unsigned int own_dev;
	struct tty_shell shell; /* the root's: a shell job's hold on ckpt's terminal */
};

/* A device number as tty_nr and TIOCGDEV give it. */
static inline uint32_t enc_dev(unsigned int maj, unsigned int min)
{
	return (min & 0xff) | (maj << 8) | ((min & ~0xffu) << 12);
}

/* tty-rst.c: the kind's restart ops (tty.c's table) */
int tty_load(struct rst_ctx *ctx, struct rst_task *t, const struct img_record *rec);
int tty_prepare(struct rst_ctx *ctx);
int tty_root_ready(struct rst_ctx *ctx, struct rst_task *root);
int tty_session(struct rst_ctx *ctx, struct rst_task *t);
int tty_groups_ready(struct rst_ctx *ctx);
int tty_restore(struct rst_ctx *ctx, struct rst_task *t);
int tty_release(struct rst_ctx *ctx);
void *tty_handover(struct rst_ctx *ctx);
int tty_wait(void *kept, pid_t child, int *ret_status);
void tty_handed_back(void *kept, bool detached);
void tty_restore_abort(struct rst_ctx *ctx);
int tty_fd_get(struct rst_ctx *ctx, void *robj, int *ret_fd);

int tty_shell_attach(struct rst_ctx *ctx, struct tty_shell *ret)
	__attribute__((warn_unused_result));
/* Waits for child to end; a stop of the job stops ckpt too (and a
 * continue of ckpt continues the job), as a shell expects of its job. */
int tty_shell_wait(struct tty_shell *sh, pid_t child, int *ret_status)
	__attribute__((warn_unused_result));
void tty_shell_detach(struct tty_shell *sh);

#endif
