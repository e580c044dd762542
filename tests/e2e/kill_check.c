/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The program of the pre-kill checks (checkpoint --kill, --verify, an
 * unprivileged restart --pidns). Arguments pick what it holds:
 *   file=PATH  PATH open for writing
 *   bind=PATH  a unix listener bound to PATH
 *   hifd       /dev/null at fd 1000 (a restart under a lower open-file
 *              limit rejects the image)
 *   rich       a unix listener bound to "sock", an flock on "lockfile", a
 *              pty pair
 *   tcp        a loopback TCP connection, both ends SO_REUSEADDR, 3 bytes
 *              unread each way (read in repair mode by a checkpoint that is
 *              then refused: SO_REUSEADDR and no repair queue selected must
 *              be back, the bytes there, one more byte passes each way)
 *   keyring    (started as root) a session keyring of its own holding a
 *              key of root's that its possessor may read, as systemd
 *              gives a service, then the ids of nobody (65534): a restart
 *              by nobody could not give the key its owner back
 * After the wake it checks from inside: its ids and groups are what they
 * were (and, by test_check_common, its pid), the listener still answers
 * at "sock", the lock is still its own, the pty passes data, fd 1000 is
 * open.
 */
#include "lib.h"

#include <arpa/inet.h>
#include <grp.h>
#include <linux/keyctl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

struct rich {
	int lsk, lock, ptm, pts, index;
};

static void make_rich(struct rich *r)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "sock" };
	r->lsk = socket(AF_UNIX, SOCK_STREAM, 0);
	if (r->lsk < 0 || bind(r->lsk, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(r->lsk, 4) < 0)
		fail("unix listener: %s", strerror(errno));
	r->lock = open("lockfile", O_CREAT | O_RDWR, 0600);
	if (r->lock < 0 || flock(r->lock, LOCK_EX) < 0)
		fail("flock: %s", strerror(errno));
	r->ptm = posix_openpt(O_RDWR | O_NOCTTY);
	if (r->ptm < 0 || grantpt(r->ptm) < 0 || unlockpt(r->ptm) < 0)
		fail("pty: %s", strerror(errno));
	r->pts = open(ptsname(r->ptm), O_RDWR | O_NOCTTY);
	if (r->pts < 0)
		fail("pty slave: %s", strerror(errno));
	r->index = atoi(ptsname(r->ptm) + strlen("/dev/pts/"));
}

static void check_rich(const struct rich *r)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "sock" };
	struct stat st;
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	expect(stat("sock", &st) == 0 && S_ISSOCK(st.st_mode), "sock is gone or not a socket");
	expect(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof(a)) == 0,
	       "cannot connect to sock: %s", strerror(errno));
	int s = accept(r->lsk, NULL, NULL);
	expect(s >= 0, "the listener did not get the connection: %s", strerror(errno));
	int other = open("lockfile", O_RDWR);
	expect(other >= 0 && flock(other, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK,
	       "the flock on lockfile is not held any more");
	char buf[8] = "";
	expect(write(r->pts, "x\n", 2) == 2, "pty write: %s", strerror(errno));
	expect(read(r->ptm, buf, sizeof(buf)) > 0 && buf[0] == 'x', "pty: no data");
	expect(atoi(ptsname(r->ptm) + strlen("/dev/pts/")) == r->index, "pty index changed");
}

static void make_tcp(int *c, int *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	*c = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || *c < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(*c, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0 ||
	    connect(*c, (struct sockaddr *)&a, sizeof(a)) < 0 || (*s = accept(l, NULL, NULL)) < 0)
		fail("tcp pair: %s", strerror(errno));
	close(l);
	if (write(*c, "abc", 3) != 3 || write(*s, "xyz", 3) != 3)
		fail("tcp write: %s", strerror(errno));
}

static void check_tcp_end(int fd, const char *want, const char *who)
{
	int v = 0;
	socklen_t l = sizeof(v);
	expect(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, &l) == 0 && v == 1,
	       "%s: SO_REUSEADDR %d, was 1", who, v);
	uint32_t seq;
	l = sizeof(seq);
	expect(getsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, &seq, &l) < 0 && errno == EINVAL,
	       "%s: a repair queue is still selected (TCP_QUEUE_SEQ answers)", who);
	char buf[8] = "";
	expect(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 3 && !memcmp(buf, want, 3),
	       "%s: the 3 unread bytes are not there", who);
}

static void check_tcp(int c, int s)
{
	check_tcp_end(c, "xyz", "client");
	check_tcp_end(s, "abc", "server");
	char b = 0;
	expect(write(c, "1", 1) == 1 && read(s, &b, 1) == 1 && b == '1', "client to server: no byte");
	expect(write(s, "2", 1) == 1 && read(c, &b, 1) == 1 && b == '2', "server to client: no byte");
}

/* "keyring": the key, made as root, then nobody's ids (dumpable again) */
static void make_keyring(void)
{
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0) < 0)
		fail("KEYCTL_JOIN_SESSION_KEYRING: %s", strerror(errno));
	long key = syscall(SYS_add_key, "user", "invocation_id", "0123456789abcdef", 16,
			   KEY_SPEC_SESSION_KEYRING);
	if (key < 0 || syscall(SYS_keyctl, KEYCTL_SETPERM, key, 0x3f010000) < 0)
		fail("the key: %s", strerror(errno));
	if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
	    setresuid(65534, 65534, 65534) < 0 || prctl(PR_SET_DUMPABLE, 1) < 0)
		fail("becoming nobody: %s", strerror(errno));
}

int main(int argc, char **argv)
{
	bool keyring = false;
	for (int i = 1; i < argc; i++)
		keyring |= !strcmp(argv[i], "keyring");
	if (keyring)
		make_keyring();
	struct rich r = { -1, -1, -1, -1, -1 };
	bool rich = false, hifd = false, tcp = false;
	int tc = -1, ts = -1;
	gid_t groups[64], after[64];
	int n = getgroups(64, groups);
	uid_t uid = getuid();
	gid_t gid = getgid();

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "file=", 5) && open(argv[i] + 5, O_WRONLY) < 0)
			fail("open %s: %s", argv[i] + 5, strerror(errno));
		if (!strncmp(argv[i], "bind=", 5)) {
			struct sockaddr_un a = { .sun_family = AF_UNIX };
			snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[i] + 5);
			int s = socket(AF_UNIX, SOCK_STREAM, 0);
			if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 1) < 0)
				fail("bind %s: %s", argv[i] + 5, strerror(errno));
		}
		rich |= !strcmp(argv[i], "rich");
		hifd |= !strcmp(argv[i], "hifd");
		tcp |= !strcmp(argv[i], "tcp");
	}
	if (tcp)
		make_tcp(&tc, &ts);
	if (hifd) {
		int f = open("/dev/null", O_RDONLY);
		if (f < 0 || dup2(f, 1000) != 1000)
			fail("fd 1000: %s", strerror(errno));
		close(f);
	}
	if (rich)
		make_rich(&r);
	test_ready();
	test_wait();
	expect(!keyring || syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user",
				   "invocation_id", 0) > 0,
	       "the key is gone from its session keyring");
	expect(getuid() == uid && geteuid() == uid, "uid %d, was %d", (int)geteuid(), (int)uid);
	expect(getgid() == gid && getegid() == gid, "gid %d, was %d", (int)getegid(), (int)gid);
	expect(getgroups(64, after) == n &&
		       !memcmp(after, groups, (size_t)(n > 0 ? n : 0) * sizeof(gid_t)),
	       "supplementary groups changed");
	if (hifd)
		expect(fcntl(1000, F_GETFD) >= 0, "fd 1000 is not open");
	if (rich)
		check_rich(&r);
	if (tcp)
		check_tcp(tc, ts);
	pass();
}
