/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Printable copies of untrusted strings (paths, names, anything read from an
 * image), safe to write to a terminal: control characters (C0, DEL and the
 * C1 range U+0080..U+009F), backslash and bytes that are not valid UTF-8
 * become \xNN; valid UTF-8 text passes unchanged. The result is always
 * NUL-terminated and cut (with "...") to fit.
 *
 *   char buf[ESC_SIZE(sizeof(name))];
 *   log_warn(log, "queue %s", esc_str(buf, sizeof(buf), name));
 *
 * The log (util/log.c) passes every message through esc_str() too, so an
 * image string can reach the terminal only escaped.
 */
#ifndef CKPT_ESC_H
#define CKPT_ESC_H

#include <stddef.h>

/* room for the escaped copy of n bytes */
#define ESC_SIZE(n) (4 * (n) + 1)

/* The escaped copy of s[0..n) into buf; returns buf. */
const char *esc_mem(char *buf, size_t len, const void *s, size_t n);
/* The same for a NUL-terminated string (NULL prints as "(null)"). */
const char *esc_str(char *buf, size_t len, const char *s);

#endif
