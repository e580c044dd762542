/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Timerfds. One object per open file description (fdobj.c finds fds that
 * share one): the clock, O_NONBLOCK, the settime flags, the expirations not
 * read yet (ticks), the time left and the interval.
 *
 * Reading: ckpt takes a copy of the fd (pidfd_getfd) and calls
 * timerfd_gettime() on it first. A periodic timer that expired is only
 * brought forward by a read or a gettime (until then the kernel shows time
 * left 0 and one tick); gettime does it without consuming anything. Then
 * /proc/PID/fdinfo gives clockid, ticks, settime flags, it_value (the time
 * left) and it_interval, all read under one lock.
 *
 * Time: what is saved is the time left, so a timer with 5 s left at
 * checkpoint has 5 s left at restart, however long the image waited; an
 * absolute timer on a monotonic or boot-time clock is armed again as
 * absolute at now + that time. An absolute timer on CLOCK_REALTIME(_ALARM)
 * keeps its expiry instead (now + time left at checkpoint, to within
 * microseconds): if that has passed at restart, it fires at once.
 *
 * At restart ckpt makes the timer (timerfd_create, timerfd_settime), then
 * gives it its unread ticks back with the TFD_IOC_SET_TICKS ioctl (kernels
 * with CONFIG_CHECKPOINT_RESTORE). Refused at checkpoint: a clock this
 * machine cannot make a timer on (the *_ALARM clocks need CAP_WAKE_ALARM),
 * unread ticks when the kernel has no TFD_IOC_SET_TICKS, and unread ticks of
 * a cancel-on-set timer (an expiry and a clock change look the same).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/ctx.h"
#include "kinds/fdobj.h"
#include "kinds/fdtable.h"
#include "timerfd.pb-c.h"
#include "util/cleanup.h"

#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif

enum { TIMERFD_ENTRY = REC_TYPE(KID_timerfd, 1) };
#define NSEC	       1000000000ull
/* The kernel's KTIME_MAX: a later expiry is clamped to it. systemd arms
 * its watch for clock changes (CLOCK_REALTIME, absolute, cancel-on-set)
 * at TIME_T_MAX, which fdinfo shows as about 235 years left: refused as
 * "cannot read its fdinfo" while the limit was 2^62 ns (146 years). */
#define TIMERFD_MAX_NS ((uint64_t)INT64_MAX)

/* a + b, both at most TIMERFD_MAX_NS, clamped to it as the kernel does */
static uint64_t add_clamped(uint64_t a, uint64_t b)
{
	return a + b > TIMERFD_MAX_NS ? TIMERFD_MAX_NS : a + b;
}

struct timerfd_obj {
	struct fdobj f;
	TimerfdEntry e;
};

static bool timerfd_claim(const struct fd_info *fi)
{
	return !strcmp(fi->path, "anon_inode:[timerfd]");
}

static bool clock_ok(uint32_t c)
{
	return c == CLOCK_REALTIME || c == CLOCK_MONOTONIC || c == CLOCK_BOOTTIME ||
	       c == CLOCK_REALTIME_ALARM || c == CLOCK_BOOTTIME_ALARM;
}

static bool clock_is_real(uint32_t c)
{
	return c == CLOCK_REALTIME || c == CLOCK_REALTIME_ALARM;
}

static const char *clock_name(uint32_t c)
{
	switch (c) {
	case CLOCK_REALTIME:
		return "CLOCK_REALTIME";
	case CLOCK_MONOTONIC:
		return "CLOCK_MONOTONIC";
	case CLOCK_BOOTTIME:
		return "CLOCK_BOOTTIME";
	case CLOCK_REALTIME_ALARM:
		return "CLOCK_REALTIME_ALARM";
	case CLOCK_BOOTTIME_ALARM:
		return "CLOCK_BOOTTIME_ALARM";
	}
	return "an unknown clock";
}

static uint64_t now_ns(uint32_t clockid)
{
	struct timespec ts;
	clockid_t base = clockid == CLOCK_REALTIME_ALARM   ? CLOCK_REALTIME
			 : clockid == CLOCK_BOOTTIME_ALARM ? CLOCK_BOOTTIME
							   : (clockid_t)clockid;
	clock_gettime(base, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

/* The value after "key" at the start of a line of text, or NULL. */
static const char *field(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n))
			return p + n;
	return NULL;
}

static int parse(const char *text, TimerfdEntry *e)
{
	const char *c = field(text, "clockid:"), *t = field(text, "ticks:");
	const char *f = field(text, "settime flags:"), *v = field(text, "it_value:");
	const char *i = field(text, "it_interval:");
	unsigned long long vs, vn, is, in, ticks;
	unsigned int clockid, flags;

	if (!c || !t || !f || !v || !i || sscanf(c, "%u", &clockid) != 1 ||
	    sscanf(t, "%llu", &ticks) != 1 || sscanf(f, "%o", &flags) != 1 ||
	    sscanf(v, " (%llu, %llu)", &vs, &vn) != 2 || sscanf(i, " (%llu, %llu)", &is, &in) != 2)
		return -EINVAL;
	if (vn >= NSEC || in >= NSEC)
		return -EINVAL;
	e->clockid = clockid;
	e->ticks = ticks;
	e->settime_flags = flags;
	e->value_ns = vs >= TIMERFD_MAX_NS / NSEC ? TIMERFD_MAX_NS : add_clamped(vs * NSEC, vn);
	e->interval_ns = is >= TIMERFD_MAX_NS / NSEC ? TIMERFD_MAX_NS : add_clamped(is * NSEC, in);
	return 0;
}

/* Reads the timer of pid's fd into e: gettime on the copy, then fdinfo. */
static int read_timer(struct ckpt_ctx *ctx, struct task *t, int fd, TimerfdEntry *e)
{
	_cleanup_close_ int copy = puppet_getfd(&t->pup, fd);
	char name[32];
	int r = 0;

	if (copy < 0)
		return log_fail(&ctx->log, copy, "pid %d fd %d (timerfd): cannot take a copy: %s",
				t->pid, fd, strerror(-copy));
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	/* a periodic timer that expires between the two is brought forward again */
	for (int tries = 0; tries < 5; tries++) {
		struct itimerspec cur;
		_cleanup_free_ char *text = NULL;
		if (timerfd_gettime(copy, &cur) < 0)
			return log_fail(&ctx->log, -errno, "pid %d fd %d (timerfd): gettime: %s",
					t->pid, fd, strerror(errno));
		r = proc_read(t->pid, name, &text, NULL);
		if (r >= 0)
			r = parse(text, e);
		if (r < 0)
			return log_fail(&ctx->log, r,
					"pid %d fd %d (timerfd): cannot read its fdinfo", t->pid,
					fd);
		if (!(e->interval_ns && !e->value_ns && e->ticks))
			break;
	}
	if ((e->settime_flags & TFD_TIMER_ABSTIME) && clock_is_real(e->clockid) && e->value_ns)
		e->value_ns = add_clamped(e->value_ns, now_ns(e->clockid));
	return 0;
}

/* Can this machine make the timer again? Refuses it by pid and fd if not. */
static int check(struct ckpt_ctx *ctx, struct task *t, int fd, const TimerfdEntry *e)
{
	const char *clk = clock_name(e->clockid);

	if (!clock_ok(e->clockid))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (timerfd): clock %u is unknown", t->pid, fd,
				e->clockid);
	_cleanup_close_ int probe = timerfd_create((int)e->clockid, TFD_CLOEXEC);
	if (probe < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (timerfd): a timer on %s cannot be made again: %s%s",
				t->pid, fd, clk, strerror(errno),
				errno == EPERM ? " (needs CAP_WAKE_ALARM)" : "");
	if (!e->ticks)
		return 0;
	if ((e->settime_flags & TFD_TIMER_CANCEL_ON_SET) && clock_is_real(e->clockid))
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (timerfd): a cancel-on-set timer with %" PRIu64
				" unread expirations (an expiry and a clock change cannot be told "
				"apart); not supported",
				t->pid, fd, e->ticks);
	uint64_t one = 1;
	if (ioctl(probe, TFD_IOC_SET_TICKS, &one) < 0)
		return log_fail(&ctx->log, -EOPNOTSUPP,
				"pid %d fd %d (timerfd): %" PRIu64 " unread expirations, and this "
				"kernel cannot set them again (TFD_IOC_SET_TICKS: %s)",
				t->pid, fd, e->ticks, strerror(errno));
	return 0;
}

static int timerfd_collect(struct ckpt_ctx *ctx, struct task *t, const struct fd_info *fi,
			   void *obj)
{
	struct timerfd_obj *p = obj;
	p->e.flags = fi->fi.flags & O_NONBLOCK;
	int r = read_timer(ctx, t, fi->fd, &p->e);
	return r < 0 ? r : check(ctx, t, fi->fd, &p->e);
}

/* --- restart --------------------------------------------------------- */

static const char *timerfd_invalid(struct rst_ctx *ctx, const void *msg)
{
	const TimerfdEntry *e = msg;
	(void)ctx;
	bool ok = clock_ok(e->clockid) && !(e->flags & ~(uint32_t)O_NONBLOCK) &&
		  !(e->settime_flags & ~(uint32_t)(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET)) &&
		  e->value_ns <= TIMERFD_MAX_NS && e->interval_ns <= TIMERFD_MAX_NS;
	return ok ? NULL : "a clock, flags or time out of range";
}

static struct timespec ts_of(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / NSEC), .tv_nsec = (long)(ns % NSEC)};
}

static int timerfd_open(struct rst_ctx *ctx, void *obj)
{
	struct fdobj_r *p = obj;
	const TimerfdEntry *e = p->msg;
	uint64_t value = e->value_ns;

	p->fd = timerfd_create((int)e->clockid, TFD_CLOEXEC | (int)e->flags);
	if (p->fd < 0)
		return log_fail(&ctx->log, -errno, "timerfd %u: cannot make a timer on %s: %s%s",
				e->id, clock_name(e->clockid), strerror(errno),
				errno == EPERM ? " (needs CAP_WAKE_ALARM)" : "");
	if (value && (e->settime_flags & TFD_TIMER_ABSTIME) && !clock_is_real(e->clockid))
		value = add_clamped(value, now_ns(e->clockid));
	struct itimerspec its = {.it_interval = ts_of(e->interval_ns), .it_value = ts_of(value)};
	if ((value || e->interval_ns || e->settime_flags) &&
	    timerfd_settime(p->fd, (int)e->settime_flags, &its, NULL) < 0)
		return log_fail(&ctx->log, -errno, "timerfd %u: cannot arm it: %s", e->id,
				strerror(errno));
	if (e->ticks && ioctl(p->fd, TFD_IOC_SET_TICKS, &e->ticks) < 0)
		return log_fail(&ctx->log, -errno,
				"timerfd %u: cannot give it back %" PRIu64
				" unread expirations (TFD_IOC_SET_TICKS): %s",
				e->id, e->ticks, strerror(errno));
	return 0;
}

static const struct fdobj_ops timerfd_file = {
	.kind = KIND_timerfd,
	.name = "timerfd",
	.type = TIMERFD_ENTRY,
	.msg = &timerfd_entry__descriptor,
	.size = sizeof(struct timerfd_obj),
	.msg_off = offsetof(struct timerfd_obj, e),
	.id_off = offsetof(TimerfdEntry, id),
	.rsize = sizeof(struct fdobj_r),
	.claim = timerfd_claim,
	.collect = timerfd_collect,
	.invalid = timerfd_invalid,
	.open = timerfd_open,
};

static int timerfd_dump(struct ckpt_ctx *ctx, struct task *t)
{
	(void)t;
	return fdobj_dump(ctx, &timerfd_file);
}

static int timerfd_prepare(struct rst_ctx *ctx)
{
	return fdobj_prepare_all(ctx, &timerfd_file);
}

static const ProtobufCMessageDescriptor *timerfd_descriptor(uint32_t sub)
{
	return sub == REC_SUB(TIMERFD_ENTRY) ? &timerfd_entry__descriptor : NULL;
}

const struct kind_ops timerfd_ops = {
	.file = &timerfd_file,
	.dump = timerfd_dump,
	.load = fdobj_load,
	.prepare = timerfd_prepare,
	.fd_get = fdobj_get,
	.free_obj = fdobj_free_obj,
	.free_robj = fdobj_free_robj,
	.descriptor = timerfd_descriptor,
};
