/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "util/log.h"
#include "util/esc.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[CKPT_LOG_MAX] = {
	[CKPT_LOG_ERROR] = "error",
	[CKPT_LOG_WARN] = "warning",
	[CKPT_LOG_INFO] = "info",
	[CKPT_LOG_DEBUG] = "debug",
};

void log_init(struct ckpt_log *log, int fd, int level, char *errbuf, size_t errbuf_len,
	      const char *prefix)
{
	*log = (struct ckpt_log){
		.fd = fd,
		.level = level,
		.errbuf = errbuf,
		.errbuf_len = errbuf_len,
		.prefix = prefix,
	};
	if (errbuf && errbuf_len)
		errbuf[0] = '\0';
}

/* One more refusal as a line of errbuf, or once a note that the log has
 * the rest. */
static void gather_error(struct ckpt_log *log, const char *msg)
{
	static const char more[] = "\n(more in the log: --log FILE)";
	size_t used = strlen(log->errbuf), room = log->errbuf_len - used;
	if (log->errbuf_full)
		return;
	if (strlen(msg) + 1 + sizeof(more) <= room) {
		snprintf(log->errbuf + used, room, "\n%s", msg);
		return;
	}
	log->errbuf_full = true;
	if (sizeof(more) <= room)
		snprintf(log->errbuf + used, room, "%s", more);
}

void log_vmsg(struct ckpt_log *log, int level, const char *fmt, va_list ap)
{
	char raw[1024], msg[1024];
	va_list aq;

	va_copy(aq, ap);
	vsnprintf(raw, sizeof(raw), fmt, aq);
	va_end(aq);
	/* messages name objects by strings from the image: never raw to a terminal */
	esc_str(msg, sizeof(msg), raw);

	if (level == CKPT_LOG_ERROR && log->errbuf && log->errbuf_len) {
		if (log->errors == 0)
			snprintf(log->errbuf, log->errbuf_len, "%s", msg);
		else if (log->gather)
			gather_error(log, msg);
	}
	if (level == CKPT_LOG_ERROR)
		log->errors++;
	if (level == CKPT_LOG_WARN)
		log->warnings++;
	if (log->fd < 0 || level > log->level)
		return;

	struct timespec ts;
	char line[1200];
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int n = snprintf(line, sizeof(line), "(%5ld.%06ld) %s: %s: %s\n", (long)ts.tv_sec,
			 ts.tv_nsec / 1000, log->prefix ? log->prefix : "ckpt",
			 level_names[level < CKPT_LOG_MAX ? level : CKPT_LOG_DEBUG], msg);
	if (n > (int)sizeof(line))
		n = sizeof(line);
	/* best effort: a full log must not fail a checkpoint */
	if (write(log->fd, line, n) < 0) {
	}
}

void log_msg(struct ckpt_log *log, int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(log, level, fmt, ap);
	va_end(ap);
}
