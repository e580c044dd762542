/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A plain process tree (no pid namespace of its own) whose root is in a
 * mount namespace of its own derived from the host's, as systemd's
 * PrivateTmp=yes makes (unshare -m --propagation slave; the runner starts
 * it so, or with --propagation private: argv[1] "private"): a tmpfs
 * mounted on a directory of the test's, a file in it, an fd open on
 * another, and a unix socket listening on a name in it. After the restart, from inside: the file's
 * contents and the open fd's, a connection to the socket's name accepted, the tmpfs in
 * /proc/self/mountinfo at its point, "/" a slave
 * (or not) as it was (a slave only where ckpt's "/" is shared), a child
 * in the same mount namespace, which is not the runner's; and the
 * runner's mount table has no mount at the point (nothing leaked onto the
 * host). argv[1] "shared": started with --propagation unchanged, for a
 * refusal (skipped where no mount of ckpt's is shared); "bind": a
 * directory of the test's bound there instead of the tmpfs, as
 * PrivateTmp=yes binds /tmp/systemd-private-.../tmp on /tmp; "mixed":
 * started with --propagation slave beside two shared mounts of the
 * runner's (CKPT_TEST_DIR/ha and hb, slaves here), it makes hb private,
 * for a refusal (a restart would make it a slave again); "rshared": with
 * --propagation slave beside a shared mount of the runner's (ha), then
 * mount --make-rshared / (systemd's default MountFlags=shared): after the
 * restart "/", the tmpfs and ha are shared in peer groups that are not
 * the runner's, and ha is a slave too; "mixed_shared": the same, then "/"
 * made private alone, for a refusal.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DATA "private tmp of ns_mnt\n"

static ino_t ns_ino(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		fail("stat %s: %m", path);
	return st.st_ino;
}

/* Which of pid's mounts (0: this process's) is at point: its mountinfo
 * line's fields after the point, up to the separator, and its type; 0 if
 * there is none, else 1. */
static int mount_at(pid_t pid, const char *point, char *fields, size_t flen, char *type,
		    size_t tlen)
{
	char path[64], line[4096];
	int found = 0;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/mountinfo", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/mountinfo");
	FILE *f = fopen(path, "r");
	if (!f)
		fail("open %s: %m", path);
	while (fgets(line, sizeof(line), f)) {
		char mp[4096];
		int off = 0;
		if (sscanf(line, "%*u %*u %*u:%*u %*s %4095s%n", mp, &off) != 1 ||
		    strcmp(mp, point))
			continue;
		char *sep = strstr(line + off, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		snprintf(fields, flen, "%s", line + off);
		if (sscanf(sep + 3, "%63s", mp) == 1)
			snprintf(type, tlen, "%.63s", mp);
		found = 1;
	}
	fclose(f);
	return found;
}

/* Is the peer group in fields ("shared:G ...") one of the runner's mounts'? */
static bool in_runners_group(pid_t runner, const char *fields)
{
	const char *at = strstr(fields, "shared:");
	char path[64], line[4096], tag[32];
	bool found = false;
	if (!at)
		return false;
	snprintf(tag, sizeof(tag), "shared:%lu ", strtoul(at + 7, NULL, 10));
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", runner);
	FILE *f = fopen(path, "r");
	if (!f)
		fail("open %s: %m", path);
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		if (sep)
			sep[1] = '\0'; /* the optional fields end with a space */
		found = strstr(line, tag) != NULL;
	}
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	/* "private": started with --propagation private; "shared": with
	 * unchanged, a refusal where a mount of ckpt's is shared */
	const char *how = argc > 1 ? argv[1] : "slave";
	pid_t runner = getppid();
	char dir[4096], file[4200], held[4200], rpath[64], fields[4096], type[64];
	int go[2];
	const char *base = getenv("CKPT_TEST_DIR");
	snprintf(dir, sizeof(dir), "%s/private-tmp", base ? base : ".");
	snprintf(rpath, sizeof(rpath), "/proc/%d/ns/mnt", runner);
	if (ns_ino("/proc/self/ns/mnt") == ns_ino(rpath))
		skip("not started in a mount namespace of its own (unshare -m)");
	/* "bind": as systemd's PrivateTmp, a directory of the host's bound
	 * there (its files stay on the host's file system) */
	bool use_bind = !strcmp(how, "bind");
	char src[4200];
	snprintf(src, sizeof(src), "%s/host-side", base ? base : ".");
	if (mkdir(dir, 0755) < 0 || (use_bind && mkdir(src, 0700) < 0) ||
	    (use_bind ? mount(src, dir, NULL, MS_BIND, NULL)
		      : mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0750")) < 0)
		fail("mkdir, mount %s on %s: %m", use_bind ? "a bind" : "tmpfs", dir);
	snprintf(file, sizeof(file), "%s/secret", dir);
	snprintf(held, sizeof(held), "%s/held", dir);
	int fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || write(fd, DATA, strlen(DATA)) != (ssize_t)strlen(DATA) || close(fd) < 0)
		fail("write %s: %m", file);
	int hfd = open(held, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (hfd < 0 || write(hfd, "held", 4) != 4)
		fail("write %s: %m", held);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(dir) + 6 > sizeof(sun.sun_path))
		skip("the test directory's path is too long for a socket's name");
	memcpy(sun.sun_path, dir, strlen(dir));
	memcpy(sun.sun_path + strlen(dir), "/sock", 6);
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(lfd, 4) < 0)
		fail("unix socket on %s: %m", sun.sun_path);
	if (mount_at(runner, dir, fields, sizeof(fields), type, sizeof(type)))
		fail("the tmpfs is on the host too: propagated out");
	/* a slave where ckpt's "/" is shared (here it may be private: then
	 * --propagation slave leaves it private too) */
	if (!mount_at(0, "/", fields, sizeof(fields), type, sizeof(type)))
		fail("no / mount");
	bool slave = strstr(fields, "master:") != NULL;
	if (!strcmp(how, "private") && slave)
		fail("/ is a slave under --propagation %s", how);
	if (!strcmp(how, "shared") && !strstr(fields, "shared:") &&
	    !mount_at(0, "/run/netns", fields, sizeof(fields), type, sizeof(type)))
		skip("no mount of ckpt's is shared (/ or /run/netns)");
	if (!strcmp(how, "mixed")) {
		char ha[4200], hb[4200];
		snprintf(ha, sizeof(ha), "%s/ha", base ? base : ".");
		snprintf(hb, sizeof(hb), "%s/hb", base ? base : ".");
		if (mount(NULL, hb, NULL, MS_PRIVATE, NULL) < 0)
			fail("make %s private: %m", hb);
		if (!mount_at(0, ha, fields, sizeof(fields), type, sizeof(type)) ||
		    !strstr(fields, "master:"))
			fail("%s is not a slave here (%s)", ha, fields);
		if (!mount_at(0, hb, fields, sizeof(fields), type, sizeof(type)) ||
		    strstr(fields, "master:") || strstr(fields, "shared:"))
			fail("%s is not private here (%s)", hb, fields);
	}
	bool rshared = !strcmp(how, "rshared") || !strcmp(how, "mixed_shared");
	char ha[4200];
	snprintf(ha, sizeof(ha), "%s/ha", base ? base : ".");
	if (rshared && mount(NULL, "/", NULL, MS_REC | MS_SHARED, NULL) < 0)
		fail("mount --make-rshared /: %m");
	if (!strcmp(how, "mixed_shared") && mount(NULL, "/", NULL, MS_PRIVATE, NULL) < 0)
		fail("mount --make-private /: %m");
	if (pipe(go) < 0)
		fail("pipe: %m");
	pid_t child = fork();
	if (child < 0)
		fail("fork: %m");
	if (child == 0) {
		ino_t root;
		close(go[1]);
		/* the root's namespace after the restart (or its death: EOF) */
		if (read(go[0], &root, sizeof(root)) != sizeof(root))
			_exit(2);
		if (root != ns_ino("/proc/self/ns/mnt"))
			_exit(3);
		char buf[64] = "";
		int f = open(file, O_RDONLY);
		_exit(f >= 0 && read(f, buf, sizeof(buf)) == (ssize_t)strlen(DATA) ? 0 : 4);
	}
	close(go[0]);

	test_ready();
	test_wait();

	char buf[64] = "";
	fd = open(file, O_RDONLY);
	expect(fd >= 0 && read(fd, buf, sizeof(buf)) == (ssize_t)strlen(DATA) && !strcmp(buf, DATA),
	       "%s: lost or changed (%s)", file, buf);
	if (fd >= 0)
		close(fd);
	memset(buf, 0, sizeof(buf));
	expect(pread(hfd, buf, sizeof(buf), 0) == 4 && !strcmp(buf, "held"),
	       "the fd open on %s: lost (%s)", held, buf);
	int cfd = socket(AF_UNIX, SOCK_STREAM, 0);
	expect(cfd >= 0 && connect(cfd, (struct sockaddr *)&sun, sizeof(sun)) == 0,
	       "connect to %s: %m", sun.sun_path);
	int afd = accept(lfd, NULL, NULL);
	expect(afd >= 0 && write(cfd, "x", 1) == 1 && read(afd, buf, 1) == 1,
	       "the connection to %s: %m", sun.sun_path);
	struct stat a, b;
	expect(fstat(hfd, &a) == 0 && stat(held, &b) == 0 && a.st_ino == b.st_ino &&
		   a.st_dev == b.st_dev,
	       "the fd open on %s is not that file", held);
	expect(mount_at(0, dir, fields, sizeof(fields), type, sizeof(type)) &&
		   !strcmp(type, "tmpfs") == !use_bind,
	       "no %s at %s in its mountinfo", use_bind ? "bind" : "tmpfs", dir);
	expect(!mount_at(runner, dir, fields, sizeof(fields), type, sizeof(type)),
	       "a mount at %s in the runner's mount table (%s): leaked onto the host", dir, type);
	expect(mount_at(0, "/", fields, sizeof(fields), type, sizeof(type)), "no / mount");
	expect((strstr(fields, "master:") != NULL) == slave, "/ is %s a slave (%s)",
	       slave ? "no longer" : "now", fields);
	/* mixed_shared: "/" made private again */
	rshared = !strcmp(how, "rshared");
	expect(!strstr(fields, "shared:") == !rshared, "/ is %s shared (%s)",
	       rshared ? "no longer" : "now", fields);
	if (rshared) {
		expect(!in_runners_group(runner, fields), "/ is in a peer group of the runner's (%s)",
		       fields);
		expect(mount_at(0, dir, fields, sizeof(fields), type, sizeof(type)) &&
			       strstr(fields, "shared:") && !in_runners_group(runner, fields),
		       "the tmpfs at %s is not shared in a group of its own (%s)", dir, fields);
		expect(mount_at(0, ha, fields, sizeof(fields), type, sizeof(type)) &&
			       strstr(fields, "shared:") && strstr(fields, "master:") &&
			       !in_runners_group(runner, fields),
		       "%s is not shared and a slave of the runner's (%s)", ha, fields);
	}
	ino_t root = ns_ino("/proc/self/ns/mnt");
	expect(root != ns_ino(rpath), "the mount namespace is the runner's");
	int st;
	if (write(go[1], &root, sizeof(root)) != sizeof(root) || waitpid(child, &st, 0) != child)
		fail("child: write or wait: %m");
	expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	pass();
}
