/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A refusal: fd 5 holds a deleted file of 2 GiB (sparse), larger than
 * ckpt saves. The runner expects the checkpoint to fail naming the pid,
 * fd 5 and the size limit; the original goes on with its file.
 */
#include "lib.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	int fd = open("big", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, 2l << 30) || pwrite(fd, "x", 1, 1 << 20) != 1 || unlink("big"))
		fail("big: %m");
	test_move_fd(fd, 5);

	test_ready();
	test_wait();

	struct stat st;
	expect(fstat(5, &st) == 0 && st.st_size == 2l << 30, "the file changed");
	pass();
}
