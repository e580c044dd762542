/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A listening unix socket bound to DIR/attach.tmp and renamed to
 * DIR/attach (what a JVM does with its attach socket, /tmp/.java_pidN).
 * After restart getsockname still says attach.tmp, the file is at attach
 * (nothing at attach.tmp), and a client connecting to attach is accepted.
 */
#include "lib.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int main(void)
{
	char dir[64], tmp[96], final[96];
	if (!getcwd(dir, sizeof(dir)))
		skip("the test directory's path is too long for a socket name");
	snprintf(tmp, sizeof(tmp), "%s/attach.tmp", dir);
	snprintf(final, sizeof(final), "%s/attach", dir);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", tmp);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    rename(tmp, final) < 0)
		fail("bind, listen, rename: %m");

	test_ready();
	test_wait();

	struct sockaddr_un got = { 0 };
	socklen_t len = sizeof(got);
	expect(getsockname(l, (struct sockaddr *)&got, &len) == 0 && !strcmp(got.sun_path, tmp),
	       "getsockname: %s, want %s", got.sun_path, tmp);
	struct stat st;
	expect(lstat(final, &st) == 0 && S_ISSOCK(st.st_mode), "no socket file at %s", final);
	expect(lstat(tmp, &st) < 0 && errno == ENOENT, "a file at %s", tmp);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un b = { .sun_family = AF_UNIX };
	snprintf(b.sun_path, sizeof(b.sun_path), "%s", final);
	expect(connect(c, (struct sockaddr *)&b, sizeof(b)) == 0, "connect to %s: %m", final);
	int s = accept(l, NULL, NULL);
	expect(s >= 0 && write(c, "x", 1) == 1, "accept: %m");
	char ch = 0;
	expect(read(s, &ch, 1) == 1 && ch == 'x', "the accepted connection got %c", ch);
	pass();
}
