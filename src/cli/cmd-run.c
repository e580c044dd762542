/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ckpt run: CMD as pid 1 of fresh pid, mount, uts and ipc namespaces, so
 * that the whole container can be checkpointed and its pids are always
 * free at restart (a fresh namespace has them all). CMD itself is pid 1:
 * it reaps the orphans of the container, and like any pid 1 it gets only
 * the signals it has handlers for. The mounts are made private, a /proc
 * of the new pid namespace is mounted on /proc and a devpts instance of its
 * own on /dev/pts (so its ptys' indexes are its own, always free at
 * restart; /dev/ptmx opens the devpts beside it); nothing else changes (the
 * container sees the host's files). With --root, the container has a root
 * file system of its own instead, with its /dev, /proc, /sys and the
 * --bind and --tmpfs mounts asked for (run-root.c). Run by a user other than root, it
 * also makes a user namespace where that user is root (uid and gid 0
 * inside map to the caller's, the only ids an unprivileged user may map).
 * The caller's fds above 2 are closed in the container unless --keep-fds;
 * with --detach its stdin, stdout and stderr are /dev/null, or stdout and
 * stderr the file of --output-log.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run-net.h"
#include "util/cgroup.h"
#include "util/cleanup.h"
#include "util/proc.h"
#include "util/safefile.h"
#include "util/sigfwd.h"

/* The container's cgroup: mnt/rel, fd for CLONE_INTO_CGROUP (-1: none). */
struct run_cgroup {
	char mnt[CG_PATH_MAX], rel[CG_PATH_MAX];
	int fd;
	bool made;
};

static int set_limit(const struct run_cgroup *cg, const char *file, const char *value)
{
	char where[CG_PATH_MAX];
	int r = cg_limit_name_ok(file) ? cg_enable_for(cg->mnt, cg->rel, file, where) : -EINVAL;
	if (r == -EINVAL)
		fprintf(stderr, "ckpt: run: '%s' is not a cgroup limit ckpt saves\n", file);
	else if (r < 0)
		fprintf(stderr, "ckpt: run: cgroup %s: cannot enable the controller of %s in %s: %s\n",
			cg->rel, file, where, strerror(-r));
	else if ((r = cg_write(cg->mnt, cg->rel, file, value)) < 0)
		fprintf(stderr, "ckpt: run: cgroup %s: cannot set %s to '%s': %s\n", cg->rel, file,
			value, strerror(-r));
	return r;
}

static int set_limits(const struct cli_args *a, const struct run_cgroup *cg)
{
	const char *const named[][2] = { { "memory.max", a->memory_max },
					 { "pids.max", a->pids_max },
					 { "cpu.max", a->cpu_max } };
	int r = 0;
	for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(named); i++)
		if (named[i][1])
			r = set_limit(cg, named[i][0], named[i][1]);
	_cleanup_free_ char *list = a->cgroup_set ? strdup(a->cgroup_set) : NULL;
	char *save = NULL;
	for (char *kv = list ? strtok_r(list, ",", &save) : NULL; r >= 0 && kv;
	     kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq) {
			fprintf(stderr, "ckpt: run: --cgroup-set '%s' is not FILE=VALUE\n", kv);
			return -EINVAL;
		}
		*eq = '\0';
		r = set_limit(cg, kv, eq + 1);
	}
	return r;
}

/*
 * The container's own cgroup, NAME (default ckpt-PID) under ckpt's, with
 * the limits asked for. Without cgroup v2, or where ckpt may not make
 * cgroups, a container nobody asked a cgroup for shares ckpt's (a
 * warning); one asked for fails the run.
 */
static int make_cgroup(const struct cli_args *a, struct run_cgroup *cg)
{
	bool asked = a->cgroup || a->memory_max || a->pids_max || a->cpu_max || a->cgroup_set;
	_cleanup_free_ char *self = NULL;
	char own[CG_PATH_MAX], dir[2 * CG_PATH_MAX];
	int r = cg_mount(cg->mnt, sizeof(cg->mnt));
	if (r >= 0)
		r = proc_read(0, "cgroup", &self, NULL);
	if (r >= 0)
		r = cg_v2_path(self, own, sizeof(own));
	if (r >= 0 && !strncmp(own, "/..", 3))
		r = -ENOENT;
	if (r >= 0) {
		char name[32];
		snprintf(name, sizeof(name), "ckpt-%d", (int)getpid());
		const char *leaf = a->cgroup ? a->cgroup : name;
		if (strlen(own) + strlen(leaf) + 2 > sizeof(cg->rel))
			return -ENAMETOOLONG;
		strcpy(cg->rel, strcmp(own, "/") ? own : "");
		strcat(cg->rel, "/");
		strcat(cg->rel, leaf);
		snprintf(dir, sizeof(dir), "%s%s", cg->mnt, cg->rel);
		cg->made = mkdir(dir, 0755) == 0;
		r = cg->made || errno == EEXIST ? 0 : -errno;
		/* a ckpt-PID left by an earlier container of that pid, perhaps
		 * another user's: joined only if we may (else clone3 fails) */
		char procs[sizeof(dir) + 16];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
		if (r >= 0 && !cg->made && !a->cgroup &&
		    faccessat(AT_FDCWD, procs, W_OK, AT_EACCESS) < 0)
			r = -errno;
	}
	if (r >= 0 && (r = set_limits(a, cg)) < 0) {
		if (cg->made)
			rmdir(dir);
		return r;
	}
	if (r >= 0 && (cg->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = -errno;
	if (r >= 0)
		return 0;
	if (cg->made)
		rmdir(dir);
	cg->made = false;
	fprintf(stderr, "ckpt: run: cannot make the container's cgroup %s: %s%s\n",
		r == -ENOENT ? "(no cgroup2 file system of ckpt's cgroup namespace is mounted)"
			     : cg->rel,
		strerror(-r), asked ? "" : "; it shares ckpt's cgroup");
	return asked ? r : 0;
}

static void remove_cgroup(const struct run_cgroup *cg)
{
	char dir[2 * CG_PATH_MAX];
	if (cg->fd >= 0)
		close(cg->fd);
	if (!cg->made)
		return;
	snprintf(dir, sizeof(dir), "%s%s", cg->mnt, cg->rel);
	/* its tasks may still be leaving it */
	for (int i = 0; i < 200 && rmdir(dir) < 0 && errno == EBUSY; i++)
		usleep(10000);
}

/*
 * --detach: stdin, stdout and stderr become /dev/null (stdout and stderr:
 * out, the --output-log file, when >= 0), so that the container holds
 * nothing of the caller's: `pid=$(ckpt run --detach ...)` returns at once.
 */
static int detach_stdio(int out)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return -1;
	int o = out >= 0 ? out : null;
	int r = dup2(null, STDIN_FILENO) < 0 || dup2(o, STDOUT_FILENO) < 0 ||
			dup2(o, STDERR_FILENO) < 0
		? -1
		: 0;
	close(null);
	return r;
}

static __attribute__((noreturn)) void container_init(const struct cli_args *a, int report,
						       int mapped, bool cgroupns, int out,
						       const struct run_net *net)
{
	/* the tty group exists only if the host's ids are mapped (root) */
	const char *pts = mapped >= 0 ? "newinstance,ptmxmode=0666,mode=0620"
				      : "newinstance,ptmxmode=0666,mode=0620,gid=5";
	const char *what = "user namespace";
	char c;
	/* unprivileged: wait until our parent has written the id maps */
	if (mapped >= 0 && (read(mapped, &c, 1) != 1 || setresgid(0, 0, 0) < 0 ||
			    setresuid(0, 0, 0) < 0))
		goto fail;
	/* --net: once ckpt made the veth pair, its end and loopback (run-net.c) */
	what = "setting up its network namespace";
	if (net->on && (errno = -run_net_inside(net)) != 0)
		goto fail;
	/* in its cgroup already (CLONE_INTO_CGROUP): the namespace's root */
	what = "a cgroup namespace";
	if (cgroupns && unshare(CLONE_NEWCGROUP) < 0)
		goto fail;
	what = "mount";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		goto fail;
	char why[4200];
	if (a->root) { /* run-root.c */
		int e = run_root(a, mapped >= 0, pts, why, sizeof(why));
		what = why;
		errno = -e;
		if (e < 0)
			goto report;
	} else if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		goto fail;
	} else if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, pts) < 0) {
		what = "mounting a devpts of its own on /dev/pts";
		goto fail;
	}
	what = "sethostname";
	if (a->hostname && sethostname(a->hostname, strlen(a->hostname)) < 0)
		goto fail;
	what = "detaching its stdin, stdout and stderr";
	if (a->detach && detach_stdio(out) < 0)
		goto fail;
	/* fds the caller leaked to ckpt (a shell's, a terminal's) stay out of
	 * the container, and so out of its images; ours close at the exec */
	what = "closing the fds above 2";
	if (!a->keep_fds && syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
		goto fail;
	what = "exec";
	execvp(a->run_argv[0], a->run_argv);
fail:;
	char msg[4400];
	int n = snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));
	goto send;
report:
	n = snprintf(msg, sizeof(msg), "%s", what);
send:
	if (write(report, msg, (size_t)n) < 0)
		_exit(126);
	_exit(127);
}

/* Maps root inside to the caller outside, the only id an unprivileged user may map. */
static int write_maps(pid_t pid, uid_t uid, gid_t gid)
{
	char path[64], line[64];
	const char *files[] = { "setgroups", "uid_map", "gid_map" };
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		int n = i == 0 ? snprintf(line, sizeof(line), "deny")
			       : snprintf(line, sizeof(line), "0 %u 1", i == 1 ? uid : gid);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, line, (size_t)n) != n) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			return -e;
		}
		close(fd);
	}
	return 0;
}

/* The container runs CMD, or says why it could not: a pidfile, then detach
 * or wait for it. */
static int run_started(const struct cli_args *a, long pid, int report_fd, struct run_cgroup *cg,
		       const struct run_net *net)
{
	/* the exec closes the pipe; a message means it failed */
	char msg[4400];
	ssize_t n = read(report_fd, msg, sizeof(msg) - 1);
	close(report_fd);
	if (n > 0) {
		msg[n] = '\0';
		fprintf(stderr, "ckpt: run %s: %s\n", a->run_argv[0], msg);
		waitpid((pid_t)pid, NULL, 0);
		remove_cgroup(cg);
		run_net_ended(net, 0);
		return 127;
	}
	if (a->pidfile) {
		char buf[32];
		int n = snprintf(buf, sizeof(buf), "%ld\n", pid);
		int e = safe_write_file(a->pidfile, buf, (size_t)n);
		if (e < 0)
			fprintf(stderr, "ckpt: cannot write pidfile '%s': %s\n", a->pidfile,
				strerror(-e));
	}
	if (a->detach) {
		printf("%ld\n", pid);
		fflush(stdout);
		if (cg->fd >= 0)
			close(cg->fd); /* the cgroup stays with the container */
		return 0;
	}
	/* a service manager or timeout(1) that stops ckpt run stops CMD */
	struct sigfwd fwd = { 0 };
	int st = sigfwd_start(&fwd, (pid_t)pid);
	if (st < 0)
		fprintf(stderr, "ckpt: signals sent to ckpt will not reach the container: %s\n",
			strerror(-st));
	while (waitpid((pid_t)pid, &st, 0) < 0)
		if (errno != EINTR) {
			st = 1 << 8;
			break;
		}
	sigfwd_stop(&fwd);
	remove_cgroup(cg); /* kept while a restored container is in it */
	run_net_ended(net, st);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

int cmd_run(const struct cli_args *a)
{
	struct clone_args args = {
		.flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC,
		.exit_signal = SIGCHLD,
	};
	/* not root: a user namespace of our own gives the rest */
	bool userns = geteuid() != 0;
	int report[2], mapped[2] = { -1, -1 };

	struct run_cgroup cg = { .fd = -1 };
	struct run_net net;
	if (run_net_plan(a, &net) < 0)
		return 1;
	if (net.on)
		args.flags |= CLONE_NEWNET;
	if (userns)
		args.flags |= CLONE_NEWUSER;
	int out = -1;
	if (a->output_log) {
		out = open(a->output_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (out < 0) {
			fprintf(stderr, "ckpt: cannot open the output log '%s': %s\n", a->output_log,
				strerror(errno));
			return 1;
		}
	}
	if (make_cgroup(a, &cg) < 0) {
		if (out >= 0)
			close(out);
		return 1;
	}
	if (cg.fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cg.fd;
	}
	if (pipe2(report, O_CLOEXEC) < 0 || (userns && pipe2(mapped, O_CLOEXEC) < 0) ||
	    (net.on && pipe2(net.go, O_CLOEXEC) < 0)) {
		perror("ckpt: pipe");
		return 1;
	}
	fflush(stdout);
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		fprintf(stderr, "ckpt: cannot make the container's namespaces: %s%s\n",
			strerror(errno),
			errno == EPERM ? " (needs root, or CAP_SYS_ADMIN)" : "");
		remove_cgroup(&cg);
		return 1;
	}
	if (pid == 0) {
		close(report[0]);
		if (userns)
			close(mapped[1]);
		if (net.on)
			close(net.go[1]);
		container_init(a, report[1], mapped[0], cg.fd >= 0, out, &net);
	}
	close(report[1]);
	if (net.on) {
		close(net.go[0]);
		net.go[0] = -1;
		/* without the pair, the container's init reads end of file and exits */
		if (run_net_setup(&net, (pid_t)pid) < 0) {
			run_net_close(&net);
			kill((pid_t)pid, SIGKILL);
			waitpid((pid_t)pid, NULL, 0);
			remove_cgroup(&cg);
			return 1;
		}
	}
	if (out >= 0)
		close(out);
	if (userns) {
		close(mapped[0]);
		int e = write_maps((pid_t)pid, geteuid(), getegid());
		if (e < 0 || write(mapped[1], "m", 1) != 1) {
			fprintf(stderr, "ckpt: cannot map ids in the container's user namespace: %s\n",
				strerror(e < 0 ? -e : errno));
			kill((pid_t)pid, SIGKILL);
			waitpid((pid_t)pid, NULL, 0);
			remove_cgroup(&cg);
			run_net_ended(&net, 0);
			return 1;
		}
		close(mapped[1]);
	}
	return run_started(a, pid, report[0], &cg, &net);
}
