/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The log: what ckpt did and, above all, why something failed. It writes to
 * the caller's logfd (or nowhere) and keeps the first error message for the
 * caller to show as the one-line reason. A struct ckpt_log lives in the
 * checkpoint or restart context: there is no global logger.
 *
 * Only the layer that decides what a failure means logs it (core/, kinds/);
 * puppet/, img/ and util/ return -errno and log nothing above debug.
 */
#ifndef CKPT_LOG_H
#define CKPT_LOG_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include "ckpt.h"

struct ckpt_log {
	int fd;                 /* -1: discard */
	int level;              /* enum ckpt_log_level */
	char *errbuf;           /* first error, may be NULL */
	size_t errbuf_len;
	int errors;             /* how many errors were logged */
	unsigned long warnings; /* and warnings, at any level */
	const char *prefix;     /* "checkpoint", "restart" */
	/* a checkpoint's collect: every refusal is reported, not only the
	 * first; each one after it is a line of its own in errbuf */
	bool gather;
	bool errbuf_full;
};

/* Up to this many errors, a refusal (-EOPNOTSUPP) met while gathering is
 * noted and the work goes on with the next fd, mapping or task. */
#define LOG_GATHER_MAX 64

static inline bool log_gathers(const struct ckpt_log *log, int r)
{
	return log->gather && r == -EOPNOTSUPP && log->errors < LOG_GATHER_MAX;
}

void log_init(struct ckpt_log *log, int fd, int level, char *errbuf, size_t errbuf_len,
	      const char *prefix);
void log_msg(struct ckpt_log *log, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_vmsg(struct ckpt_log *log, int level, const char *fmt, va_list ap);

#define log_error(log, ...) log_msg(log, CKPT_LOG_ERROR, __VA_ARGS__)
#define log_warn(log, ...) log_msg(log, CKPT_LOG_WARN, __VA_ARGS__)
#define log_info(log, ...) log_msg(log, CKPT_LOG_INFO, __VA_ARGS__)
#define log_debug(log, ...) log_msg(log, CKPT_LOG_DEBUG, __VA_ARGS__)

/* log_error() and return r (a -errno), for `return log_fail(log, -EINVAL, ...)` */
#define log_fail(log, r, ...)                      \
	({                                         \
		log_msg(log, CKPT_LOG_ERROR, __VA_ARGS__); \
		(r);                               \
	})

#endif
