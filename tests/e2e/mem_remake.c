/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A small file mapped shared (as a JVM maps its hsperfdata file), its fd
 * closed: the runner removes the file between checkpoint --kill and
 * restart (as another JVM does with one it finds stale). After restart the
 * file is there again with what the program had written, the mapping is
 * the file (a write through it is read back with pread), mode 0640.
 */
#include "lib.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIZE 8192

int main(void)
{
	int fd = open("shared.dat", O_RDWR | O_CREAT | O_EXCL, 0640);
	if (fd < 0 || ftruncate(fd, SIZE) < 0)
		fail("shared.dat: %m");
	char *m = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		fail("mmap: %m");
	close(fd);
	for (int i = 0; i < SIZE; i++)
		m[i] = (char)(i * 7 + 3);

	test_ready();
	test_wait();

	bool same = true;
	for (int i = 0; i < SIZE; i++)
		same &= m[i] == (char)(i * 7 + 3);
	expect(same, "the mapping lost its bytes");
	struct stat st;
	expect(stat("shared.dat", &st) == 0 && (st.st_mode & 07777) == 0640 && st.st_size == SIZE,
	       "shared.dat is not back as it was (mode %o size %lld)", st.st_mode & 07777,
	       (long long)st.st_size);
	memcpy(m + 100, "written after", 13);
	char buf[13];
	fd = open("shared.dat", O_RDONLY);
	expect(fd >= 0 && pread(fd, buf, 13, 100) == 13 && !memcmp(buf, "written after", 13),
	       "the mapping is not the file on disk");
	pass();
}
