/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Files ckpt creates: src/util/safefile.c */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/safefile.h"
#include "unit.h"

static char dir[] = "/tmp/ckpt-test-safefile-XXXXXX";

static char *at(const char *name)
{
	static char buf[2][256];
	static int k;
	k ^= 1;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

static void put(const char *name, const char *data)
{
	FILE *f = fopen(at(name), "w");
	fputs(data, f);
	fclose(f);
}

static int entries(void)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", dir);
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (fscanf(p, "%d", &n) != 1)
		n = -1;
	pclose(p);
	return n;
}

static bool same(const char *name, const char *data)
{
	char buf[64] = "";
	FILE *f = fopen(at(name), "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return !strcmp(buf, data);
}

TEST(replace_not_follow)
{
	struct safe_file f;
	struct stat st;
	put("victim", "VICTIM");
	CHECK_EQ(symlink(at("victim"), at("out")), 0);
	CHECK_EQ(safe_file_create(at("out"), &f), 0);
	CHECK_EQ(write(f.fd, "IMAGE", 5), 5);
	/* nothing named yet (O_TMPFILE), the final name untouched */
	CHECK_EQ(entries(), 2);
	CHECK_EQ(safe_file_commit(&f, NULL), 0);
	CHECK(same("victim", "VICTIM"));
	CHECK(same("out", "IMAGE"));
	CHECK_EQ(lstat(at("out"), &st), 0);
	CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
	CHECK_EQ(entries(), 2);
	CHECK_EQ(safe_write_file(at("out"), "NEW", 3), 0);
	CHECK(same("out", "NEW"));
	unlink(at("out"));
	unlink(at("victim"));
}

TEST(abort_leaves_nothing)
{
	struct safe_file f;
	put("out", "OLD");
	CHECK_EQ(safe_file_create(at("out"), &f), 0);
	CHECK_EQ(write(f.fd, "PARTIAL", 7), 7);
	safe_file_abort(&f);
	safe_file_abort(&f); /* idempotent */
	CHECK(same("out", "OLD"));
	CHECK_EQ(entries(), 1);
	unlink(at("out"));
}

/* where the filesystem has no O_TMPFILE: a unique name made O_EXCL|O_NOFOLLOW */
TEST(fallback)
{
	struct safe_file f;
	put("victim", "VICTIM");
	CHECK_EQ(symlink(at("victim"), at("out")), 0);
	CHECK_EQ(safe_file_create_flags(at("out"), SAFE_NO_TMPFILE, &f), 0);
	CHECK(f.named && f.tmp[0] == '.');
	CHECK_EQ(entries(), 3);
	CHECK_EQ(write(f.fd, "IMAGE", 5), 5);
	CHECK_EQ(safe_file_commit(&f, NULL), 0);
	CHECK(same("victim", "VICTIM"));
	CHECK(same("out", "IMAGE"));
	CHECK_EQ(entries(), 2);
	CHECK_EQ(safe_file_create_flags(at("out"), SAFE_NO_TMPFILE, &f), 0);
	safe_file_abort(&f);
	CHECK(same("out", "IMAGE"));
	CHECK_EQ(entries(), 2);
	unlink(at("out"));
	unlink(at("victim"));
}

TEST(append)
{
	put("victim", "VICTIM");
	CHECK_EQ(symlink(at("victim"), at("log.lnk")), 0);
	CHECK_EQ(safe_open_append(at("log.lnk")), -ELOOP);
	CHECK_EQ(link(at("victim"), at("log.hard")), 0);
	CHECK_EQ(safe_open_append(at("log.hard")), -EMLINK);
	CHECK_EQ(mkfifo(at("fifo"), 0600), 0);
	CHECK(safe_open_append(at("fifo")) < 0);
	if (geteuid() == 0) {
		put("other", "OTHER");
		CHECK_EQ(chown(at("other"), 65534, 65534), 0);
		CHECK_EQ(safe_open_append(at("other")), -EPERM);
		CHECK(same("other", "OTHER"));
		unlink(at("other"));
	}
	CHECK(same("victim", "VICTIM"));
	int fd = safe_open_append(at("new.log"));
	CHECK(fd >= 0);
	struct stat st;
	CHECK_EQ(fstat(fd, &st), 0);
	CHECK((st.st_mode & 07777) == 0600);
	close(fd);
	unlink(at("new.log"));
	unlink(at("fifo"));
	unlink(at("log.hard"));
	unlink(at("log.lnk"));
	unlink(at("victim"));
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	RUN(replace_not_follow);
	RUN(abort_leaves_nothing);
	RUN(fallback);
	RUN(append);
	rmdir(dir);
	return unit_done();
}
