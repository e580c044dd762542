/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unix sockets whose bound file is gone: one bound at "sockdir/a", whose
 * file was unlinked and a FIFO made at that path since; one bound at
 * "gone/sub/b" (a relative name), whose file and both directories were
 * removed. After restart each has the same name (getsockname), the FIFO
 * is still a FIFO and "gone" does not exist: ckpt bound them where no one
 * sees it.
 */
#include "lib.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int bound(const char *path, int type)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int s = socket(AF_UNIX, type, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail("bind %s: %m", path);
	return s;
}

static void name_of(int s, char *buf, size_t len)
{
	struct sockaddr_un a;
	socklen_t l = sizeof(a);
	buf[0] = '\0';
	if (getsockname(s, (struct sockaddr *)&a, &l) == 0)
		snprintf(buf, len, "%.*s", (int)(l - offsetof(struct sockaddr_un, sun_path)),
			 a.sun_path);
}

int main(void)
{
	if (mkdir("sockdir", 0755) < 0 || mkdir("gone", 0755) < 0 || mkdir("gone/sub", 0755) < 0)
		fail("mkdir: %m");
	char cwd[4096], a_path[4200];
	if (!getcwd(cwd, sizeof(cwd)))
		fail("getcwd: %m");
	snprintf(a_path, sizeof(a_path), "%s/sockdir/a", cwd);
	int a = bound(a_path, SOCK_DGRAM);
	int b = bound("gone/sub/b", SOCK_STREAM);
	if (listen(b, 4) < 0)
		fail("listen: %m");
	if (unlink(a_path) < 0 || mkfifo(a_path, 0600) < 0)
		fail("unlink/mkfifo: %m");
	if (unlink("gone/sub/b") < 0 || rmdir("gone/sub") < 0 || rmdir("gone") < 0)
		fail("remove gone/: %m");
	char na[256], nb[256], ma[256], mb[256];
	name_of(a, na, sizeof(na));
	name_of(b, nb, sizeof(nb));

	test_ready();
	test_wait();

	name_of(a, ma, sizeof(ma));
	name_of(b, mb, sizeof(mb));
	expect(!strcmp(na, ma), "socket a is named '%s', was '%s'", ma, na);
	expect(!strcmp(nb, mb), "socket b is named '%s', was '%s'", mb, nb);
	struct stat st;
	expect(lstat(a_path, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO at %s is gone", a_path);
	expect(lstat("gone", &st) < 0 && errno == ENOENT, "'gone' exists again");
	pass();
}
