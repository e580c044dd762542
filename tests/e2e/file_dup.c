/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Shared open files: fd 3 opened on "shared", fd 9 = dup2(3), fd 20 =
 * F_DUPFD_CLOEXEC(3): three fds, one open file; fd 4 is a second open of the
 * same path: a separate open file. After restore kcmp(KCMP_FILE) says 3, 9
 * and 20 are one file and 4 is another; moving the offset or setting
 * O_APPEND through one of 3/9/20 is seen through the others and not
 * through 4; FD_CLOEXEC is still per fd (only 20 has it).
 */
#include "lib.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int same_file(int a, int b)
{
	pid_t p = getpid();
	return syscall(SYS_kcmp, p, p, KCMP_FILE, a, b) == 0;
}

int main(void)
{
	int fd = open("shared", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail("open: %m");
	char buf[8192];
	memset(buf, 'x', sizeof(buf));
	if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		fail("write: %m");
	if (fd != 3 && (dup2(fd, 3) != 3 || close(fd)))
		fail("dup2: %m");
	if (dup2(3, 9) != 9 || fcntl(3, F_DUPFD_CLOEXEC, 20) != 20)
		fail("dup: %m");
	int other = open("shared", O_RDWR);
	if (other != 4 && (other < 0 || dup2(other, 4) != 4 || close(other)))
		fail("open again: %m");
	lseek(3, 1000, SEEK_SET);
	lseek(4, 77, SEEK_SET);
	if (!same_file(3, 9) || !same_file(3, 20) || same_file(3, 4))
		fail("kcmp does not behave as expected before the checkpoint");

	test_ready();
	test_wait();

	expect(same_file(3, 9) && same_file(3, 20), "fds 3, 9, 20 are no longer one open file");
	expect(!same_file(3, 4), "fds 3 and 4 became one open file");
	expect(lseek(9, 0, SEEK_CUR) == 1000 && lseek(20, 0, SEEK_CUR) == 1000,
	       "offsets of 9 and 20 are %lld and %lld, want 1000", (long long)lseek(9, 0, SEEK_CUR),
	       (long long)lseek(20, 0, SEEK_CUR));
	expect(lseek(4, 0, SEEK_CUR) == 77, "offset of 4 is %lld, want 77",
	       (long long)lseek(4, 0, SEEK_CUR));
	lseek(9, 555, SEEK_SET);
	expect(lseek(3, 0, SEEK_CUR) == 555 && lseek(20, 0, SEEK_CUR) == 555,
	       "lseek on 9 did not move 3 and 20");
	expect(lseek(4, 0, SEEK_CUR) == 77, "lseek on 9 moved 4");
	fcntl(20, F_SETFL, O_APPEND);
	expect((fcntl(3, F_GETFL) & O_APPEND) && (fcntl(9, F_GETFL) & O_APPEND),
	       "O_APPEND set through 20 is not seen on 3 and 9");
	expect(!(fcntl(4, F_GETFL) & O_APPEND), "O_APPEND set through 20 is seen on 4");
	expect(fcntl(3, F_GETFD) == 0 && fcntl(9, F_GETFD) == 0 &&
		       fcntl(20, F_GETFD) == FD_CLOEXEC && fcntl(4, F_GETFD) == 0,
	       "FD_CLOEXEC: 3:%d 9:%d 20:%d 4:%d, want 0 0 1 0", fcntl(3, F_GETFD),
	       fcntl(9, F_GETFD), fcntl(20, F_GETFD), fcntl(4, F_GETFD));
	pass();
}
