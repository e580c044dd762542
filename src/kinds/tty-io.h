/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The queues of a pseudo-terminal, taken out and put back. No ctx, no
 * logging: -errno, and the caller says what failed on which terminal.
 *
 * A pty pair has two queues the kernel lets one read, but only by taking
 * the bytes out:
 * - the master's input: what the slave side wrote (after output
 *   processing) that the master has not read yet. Read on the master;
 *   put back by writing it on the slave with OPOST off, so it is not
 *   processed twice.
 * - the slave's input: what was written on the master (after input
 *   processing) that the slave side has not read yet. In canonical mode
 *   read(2) returns one line at a time; the line being typed is only
 *   readable once ICANON is off for a moment. Put back one byte at a time
 *   with TIOCSTI (CAP_SYS_ADMIN), synchronously, with echo, signals and
 *   input processing off and the special characters moved to bytes the
 *   data does not hold, so that each byte lands as it was and each line
 *   ends where it ended (a newline inside a line is escaped with LNEXT).
 * Both need every task of the terminal stopped and the master out of
 * packet mode meanwhile (a termios change could post a packet status).
 */
#ifndef CKPT_TTY_IO_H
#define CKPT_TTY_IO_H

#include <asm/termbits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TTY_MAX_QUEUE (1u << 20)
#define TTY_MAX_LINES 4096

struct tty_line {
	uint8_t *data;
	size_t len;
	bool eof;               /* ended by VEOF, which is not in data */
};

struct tty_queues {
	uint8_t *out;           /* the master's input */
	size_t out_len;
	struct tty_line *lines; /* the slave's input, complete lines (canonical) */
	size_t nlines;
	uint8_t *rest;          /* the line being typed, or all input (raw) */
	size_t rest_len;
};

/* Frees what q holds and zeroes it. */
void ttyio_queues_free(struct tty_queues *q);
bool ttyio_canonical(const struct termios2 *t);

/* Takes out the master's input (m: the master; a blocking one is fine). */
int ttyio_take_master(int m, struct tty_queues *q) __attribute__((warn_unused_result));
/* Takes out the slave's input (s: a non-blocking slave fd; t its termios). */
int ttyio_take_slave(int s, const struct termios2 *t, struct tty_queues *q)
	__attribute__((warn_unused_result));
/* Puts both back through the slave s, whose termios is t (set again after). */
int ttyio_put_back(int s, const struct termios2 *t, const struct tty_queues *q)
	__attribute__((warn_unused_result));

#endif
