/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Before CKPT_KILL kills the tree: would a restart work?
 *
 * The image is complete and the tree is alive and held. What a restart by
 * this caller, on this machine, will need and can be known now is checked
 * here: how its pids come back (CAP_CHECKPOINT_RESTORE, or --pidns in a
 * user namespace of the caller's own), then, kind by kind (check_restore),
 * credentials it can set, files it can open, names it can bind. With
 * CKPT_VERIFY the image is then restarted for real, as a dry run
 * (RESTART_GHOST | RESTART_VERIFY), in a child of ckpt with namespaces of
 * its own, so that nothing the live tree holds is taken or disturbed.
 * Any refusal is logged with the process and object and why, and the tree
 * is then released unharmed instead of killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx.h"
#include "core/sequence.h"
#include "util/cleanup.h"
#include "util/userns.h"

static int read_caller(struct ckpt_ctx *ctx, struct restart_caller *c)
{
	_cleanup_free_ char *text = NULL;
	struct proc_status st;

	if (proc_read(getpid(), "status", &text, NULL) < 0 || proc_parse_status(text, &st) < 0)
		return log_fail(&ctx->log, -EIO, "cannot read ckpt's own credentials");
	*c = (struct restart_caller){
		.ngroups = st.ngroups,
		.cap_eff = st.cap_eff,
		.cap_prm = st.cap_prm,
		.cap_bnd = st.cap_bnd,
		.map_uid = (uint32_t)geteuid(),
		.map_gid = (uint32_t)getegid(),
	};
	memcpy(c->uid, st.uid, sizeof(c->uid));
	memcpy(c->gid, st.gid, sizeof(c->gid));
	memcpy(c->groups, st.groups, st.ngroups * sizeof(st.groups[0]));
	long sb = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	c->securebits = sb < 0 ? 0 : (uint32_t)sb;
	return 0;
}

/* How a restart by this caller gives the tree its pids. */
static int plan_pids(struct ckpt_ctx *ctx, struct restart_caller *c)
{
	pid_t root = ctx->tasks[0].pid;
	if (ctx->container) /* in namespaces of its own: the ns kind's check_restore */
		return 0;
	if (caller_can(c, CAP_CHECKPOINT_RESTORE) || caller_can(c, CAP_SYS_ADMIN))
		return 0;
	if (!userns_can_make())
		return log_fail(&ctx->log, -EPERM,
				"pid %d: a restart by this caller could not give the tree its pids: "
				"that needs CAP_CHECKPOINT_RESTORE, or restart --pidns in a user "
				"namespace, which this caller cannot make",
				root);
	c->userns = true;
	log_info(&ctx->log,
		 "pid %d: this caller can restart it only with --pidns (in a user namespace "
		 "where uid %u and gid %u stay themselves)",
		 root, c->map_uid, c->map_gid);
	return 0;
}

/* The dry run's namespaces: none of the live tree's ids, names or ptys. */
static int verify_namespaces(bool shell_job)
{
	bool admin = unshare(CLONE_NEWNS | CLONE_NEWIPC) == 0;
	if (!admin) {
		if (unshare(CLONE_NEWUSER) < 0)
			return -errno;
		const char *what;
		int r = userns_map_self(getpid(), &what);
		if (r < 0)
			return r;
		if (unshare(CLONE_NEWNS | CLONE_NEWIPC) < 0)
			return -errno;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	/* ptys of its own, every index free: the live tree keeps its own
	 * (a shell job's terminal is the caller's: the host's devpts stays) */
	if (!shell_job && mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") == 0)
		mount("/dev/pts/ptmx", "/dev/ptmx", NULL, MS_BIND, NULL);
	return 0;
}

/* In the child: the dry run itself; its one-line reason goes to out. */
static __attribute__((noreturn)) void verify_child(struct ckpt_ctx *ctx, int img, int out)
{
	char err[512] = "";
	bool shell_job = ctx->flags & CKPT_SHELL_JOB;
	int r = verify_namespaces(shell_job);
	if (r < 0) {
		snprintf(err, sizeof(err), "cannot make the dry run's namespaces: %s",
			 strerror(-r));
	} else {
		struct ckpt_opts o = {
			.size = sizeof(o),
			/* a container is restored in namespaces of its own anyway */
			.flags = RESTART_GHOST | RESTART_VERIFY |
				 (ctx->container ? 0 : RESTART_PIDNS) |
				 (shell_job ? RESTART_SHELL_JOB : 0),
			.logfd = ctx->log.fd,
			.log_level = ctx->log.level,
			.errbuf = err,
			.errbuf_len = sizeof(err),
		};
		r = ckpt_restart_opts(0, img, &o);
	}
	if (r < 0 && write(out, err, strnlen(err, sizeof(err))) < 0)
		_exit(2);
	_exit(r < 0 ? 1 : 0);
}

/*
 * CKPT_VERIFY: the image, read again from the file fd was written to,
 * restarted as a dry run in a child of ckpt; its verdict decides.
 */
static int verify(struct ckpt_ctx *ctx, int fd)
{
	struct stat st;
	char path[64], err[513] = "";
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return log_fail(&ctx->log, -EINVAL,
				"--verify needs the image in a file, not a pipe or a socket");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	_cleanup_close_ int img = open(path, O_RDONLY | O_CLOEXEC);
	if (img < 0)
		return log_fail(&ctx->log, -errno, "cannot read the image again: %s",
				strerror(errno));
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	log_info(&ctx->log, "verify: a dry-run restart of the image, the tree still held");
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		verify_child(ctx, img, pfd[1]);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		return log_fail(&ctx->log, -errno, "cannot start the dry run: %s", strerror(errno));
	}
	ssize_t n, got = 0;
	while ((n = read(pfd[0], err + got, sizeof(err) - 1 - (size_t)got)) > 0 ||
	       (n < 0 && errno == EINTR))
		got += n > 0 ? n : 0;
	close(pfd[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		log_info(&ctx->log, "verify: the dry run restored the image");
		return 0;
	}
	return log_fail(&ctx->log, -EPERM, "verify: the dry-run restart failed: %s",
			got ? err : "it died");
}

/* Step "check restore" (CKPT_KILL, the image complete, the tree held). */
int precheck_restore(struct ckpt_ctx *ctx)
{
	struct restart_caller c;
	int r = read_caller(ctx, &c);
	if (r >= 0)
		r = plan_pids(ctx, &c);
	if (r < 0)
		return r;
	ctx->caller = &c;
	r = seq_ckpt_tasks(ctx, CKPT_CHECK_RESTORE);
	ctx->caller = NULL;
	if (r >= 0 && (ctx->flags & CKPT_VERIFY))
		r = verify(ctx, ctx->image_fd);
	if (r < 0)
		log_warn(&ctx->log, "not killed: a restart of this image would fail; the tree "
				     "runs on");
	else
		log_info(&ctx->log, "checked: a restart by this caller has what it needs");
	return r;
}
