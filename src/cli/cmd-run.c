/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt run: CMD as pid 1 of fresh pid, mount, uts and ipc namespaces, so
 * that the whole container can be checkpointed and its pids are always
 * free at restart (a fresh namespace has them all). CMD itself is pid 1:
 * it reaps the orphans of the container, and like any pid 1 it gets only
 * the signals it has handlers for. The mounts are made private and a /proc
 * of the new pid namespace is mounted on /proc; nothing else changes (the
 * container sees the host's files).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

static __attribute__((noreturn)) void container_init(const struct cli_args *a, int report)
{
	const char *what = "mount";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		goto fail;
	what = "sethostname";
	if (a->hostname && sethostname(a->hostname, strlen(a->hostname)) < 0)
		goto fail;
	what = "exec";
	execvp(a->run_argv[0], a->run_argv);
fail:;
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));
	if (write(report, msg, (size_t)n) < 0)
		_exit(126);
	_exit(127);
}

int cmd_run(const struct cli_args *a)
{
	struct clone_args args = {
		.flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC,
		.exit_signal = SIGCHLD,
	};
	int report[2];

	if (pipe2(report, O_CLOEXEC) < 0) {
		perror("ckpt: pipe");
		return 1;
	}
	fflush(stdout);
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		fprintf(stderr, "ckpt: cannot make the container's namespaces: %s%s\n",
			strerror(errno),
			errno == EPERM ? " (needs root, or CAP_SYS_ADMIN)" : "");
		return 1;
	}
	if (pid == 0) {
		close(report[0]);
		container_init(a, report[1]);
	}
	close(report[1]);
	/* the exec closes the pipe; a message means it failed */
	char msg[160];
	ssize_t n = read(report[0], msg, sizeof(msg) - 1);
	close(report[0]);
	if (n > 0) {
		msg[n] = '\0';
		fprintf(stderr, "ckpt: run %s: %s\n", a->run_argv[0], msg);
		waitpid((pid_t)pid, NULL, 0);
		return 127;
	}
	if (a->pidfile) {
		FILE *f = fopen(a->pidfile, "w");
		if (!f || fprintf(f, "%ld\n", pid) < 0 || fclose(f) != 0)
			fprintf(stderr, "ckpt: cannot write pidfile '%s': %s\n", a->pidfile,
				strerror(errno));
	}
	if (a->detach) {
		printf("%ld\n", pid);
		fflush(stdout);
		return 0;
	}
	int st;
	while (waitpid((pid_t)pid, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}
