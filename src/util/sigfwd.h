/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The signals a user or a service manager sends a process that waits for
 * another -- SIGTERM from `systemctl stop` or `timeout`, SIGHUP to reload,
 * SIGINT and SIGQUIT from `kill` -- passed on to that other process, as an
 * init such as tini does for its child. While forwarding, the set is
 * blocked in the calling thread and taken by a thread of its own
 * (sigwaitinfo), so the caller's wait (waitpid, a terminal job's wait with
 * WUNTRACED) is unchanged. A signal the terminal sent (SI_KERNEL) to a
 * group the target is in reached the target already: it is not sent twice.
 * The target is named by a pidfd, so once it has been reaped a signal goes
 * nowhere rather than to a process that took its pid.
 */
#ifndef CKPT_SIGFWD_H
#define CKPT_SIGFWD_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

struct sigfwd {
	bool on, held;          /* forwarding; the set blocked here */
	int pidfd;
	pid_t target;
	sigset_t set, pass, old; /* taken, passed on, the caller's mask */
	pthread_t thread;
};

/* Blocks the set in the calling thread before the target exists (or
 * runs): what comes meanwhile is pending, passed on once sigfwd_start
 * runs; 0 or -errno. sigfwd_stop puts the caller's mask back. */
int sigfwd_hold(struct sigfwd *f);
/* Starts forwarding SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1 and SIGUSR2
 * (those the caller does not ignore) to target (f held by sigfwd_hold, or
 * zeroed); 0 or -errno (nothing is changed then, but a hold stays). */
int sigfwd_start(struct sigfwd *f, pid_t target);
/* Stops it (if started) and a hold; a signal of the set still pending is
 * dropped, and the caller's mask is what it was. */
void sigfwd_stop(struct sigfwd *f);

#endif
