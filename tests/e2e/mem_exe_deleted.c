/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A program whose file was deleted while it runs (a daemon after its
 * package was upgraded): the test copies itself to "prog", execs that,
 * and the new image removes it. After the restart /proc/self/exe still
 * reads ".../prog (deleted)", holds the same bytes as the test program,
 * and its code (mapped from it) runs.
 */
#include "lib.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

/* the contents of two files the same? */
static bool same_bytes(const char *a, const char *b)
{
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
	char ba[65536], bb[65536];
	bool same = fa >= 0 && fb >= 0;
	for (ssize_t na = 1; same && na > 0;) {
		na = read(fa, ba, sizeof(ba));
		ssize_t nb = read(fb, bb, sizeof(bb));
		same = na == nb && na >= 0 && !memcmp(ba, bb, (size_t)na);
	}
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return same;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		/* the first run: copy the program, run the copy */
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0)
			fail("readlink: %m");
		self[n] = '\0';
		int in = open(self, O_RDONLY), out = open("prog", O_WRONLY | O_CREAT | O_EXCL, 0755);
		struct stat st;
		if (in < 0 || out < 0 || fstat(in, &st) < 0 ||
		    sendfile(out, in, NULL, (size_t)st.st_size) != st.st_size)
			fail("copy %s: %m", self);
		close(in);
		close(out);
		execl("./prog", "prog", self, (char *)NULL);
		fail("exec ./prog: %m");
	}
	if (unlink("prog") < 0)
		fail("unlink prog: %m");

	test_ready();
	test_wait();

	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	expect(n > 0, "readlink: %m");
	exe[n > 0 ? n : 0] = '\0';
	const char *tail = "/prog (deleted)";
	expect((size_t)n > strlen(tail) && !strcmp(exe + n - strlen(tail), tail),
	       "/proc/self/exe reads '%s'", exe);
	expect(same_bytes("/proc/self/exe", argv[1]), "/proc/self/exe is not the program %s",
	       argv[1]);
	pass();
}
