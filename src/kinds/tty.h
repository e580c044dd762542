/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Terminals: what tty.c shares with tty-shell.c, a shell job's hold on
 * ckpt's own terminal (RESTART_SHELL_JOB; tty.c's release, handover, wait
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
#include <stdbool.h>
#include <sys/types.h>

struct rst_ctx;
struct rst_task;

struct tty_shell {
	int fd;                 /* ckpt's terminal, -1 if no shell job */
	bool restore;           /* put termios back at detach */
	struct termios2 termios; /* ckpt's, before the job's were set */
	pid_t pgrp;             /* the job's process group */
};

int tty_shell_attach(struct rst_ctx *ctx, struct tty_shell *ret)
	__attribute__((warn_unused_result));
/* Waits for child to end; a stop of the job stops ckpt too (and a
 * continue of ckpt continues the job), as a shell expects of its job. */
int tty_shell_wait(struct tty_shell *sh, pid_t child, int *ret_status)
	__attribute__((warn_unused_result));
void tty_shell_detach(struct tty_shell *sh);

#endif
