/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The umask: 027. After restore umask() returns 027, /proc/self/status
 * says Umask: 0027, and a file created with mode 0666 gets 0640.
 */
#include "lib.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
	umask(027);

	test_ready();
	test_wait();

	mode_t m = umask(027);
	expect(m == 027, "umask is %#o, was 027", (unsigned)m);
	char v[32] = "";
	test_status_field("Umask", v, sizeof(v));
	expect(!strcmp(v, "0027"), "/proc/self/status Umask is %s", v);
	int fd = open("newfile", O_WRONLY | O_CREAT | O_EXCL, 0666);
	struct stat st;
	if (fd < 0 || fstat(fd, &st))
		fail("create newfile: %m");
	expect((st.st_mode & 0777) == 0640, "new file has mode %#o, want 0640",
	       (unsigned)(st.st_mode & 0777));
	close(fd);
	unlink("newfile");
	pass();
}
