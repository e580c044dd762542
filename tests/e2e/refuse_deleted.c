/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: fd 5 holds a file deleted from its directory that still has
 * a name (a hard link) in another directory, which ckpt does not look
 * for. The runner expects the checkpoint to fail naming the pid, fd 5 and
 * the reason; the original goes on with its file.
 */
#include "lib.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	if (mkdir("a", 0700) || mkdir("b", 0700))
		fail("mkdir: %m");
	int fd = open("a/big", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || pwrite(fd, "x", 1, 1 << 20) != 1 || link("a/big", "b/other") ||
	    unlink("a/big"))
		fail("big: %m");
	test_move_fd(fd, 5);

	test_ready();
	test_wait();

	struct stat st;
	expect(fstat(5, &st) == 0 && st.st_size == (1 << 20) + 1 && st.st_nlink == 1,
	       "the file changed");
	pass();
}
