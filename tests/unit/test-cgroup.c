/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cgroup helpers that read no cgroup: the "0::" line of /proc/PID/cgroup,
 * the paths and limit names an image may name (a forged image must not make
 * ckpt write any other file).
 */
#include "util/cgroup.h"
#include "unit.h"

#include <errno.h>

TEST(v2_path)
{
	char buf[64];
	CHECK_EQ(cg_v2_path("0::/a/b\n", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "/a/b");
	CHECK_EQ(cg_v2_path("4:memory:/x\n1:cpu:/\n0::/\n", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "/");
	CHECK_EQ(cg_v2_path("0::/../other", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "/../other");
	CHECK_EQ(cg_v2_path("4:memory:/x\n", buf, sizeof(buf)), -ENOENT);
	CHECK_EQ(cg_v2_path("", buf, sizeof(buf)), -ENOENT);
	CHECK_EQ(cg_v2_path("0::\n", buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(cg_v2_path("0::/a-very-long-path-that-does-not-fit-in-eight", buf, 8), -EINVAL);
}

TEST(path_ok)
{
	CHECK(cg_path_ok("/"));
	CHECK(cg_path_ok("/a"));
	CHECK(cg_path_ok("/a/b.c/..d"));
	CHECK(!cg_path_ok(""));
	CHECK(!cg_path_ok("a"));
	CHECK(!cg_path_ok("/a/"));
	CHECK(!cg_path_ok("//a"));
	CHECK(!cg_path_ok("/a//b"));
	CHECK(!cg_path_ok("/.."));
	CHECK(!cg_path_ok("/a/../b"));
	CHECK(!cg_path_ok("/a/."));
}

TEST(limit_names)
{
	CHECK(cg_limit_name_ok("memory.max"));
	CHECK(cg_limit_name_ok("pids.max"));
	CHECK(cg_limit_name_ok("cpu.max"));
	CHECK(cg_limit_name_ok("cgroup.max.descendants"));
	CHECK(cg_limit_name_ok("hugetlb.2MB.max"));
	CHECK(cg_limit_name_ok("hugetlb.1GB.rsvd.max"));
	CHECK(!cg_limit_name_ok("cgroup.procs"));
	CHECK(!cg_limit_name_ok("cgroup.subtree_control"));
	CHECK(!cg_limit_name_ok("hugetlb.2MB.current"));
	CHECK(!cg_limit_name_ok("hugetlb..max"));
	CHECK(!cg_limit_name_ok("hugetlb.2MB/../../x.max"));
	CHECK(!cg_limit_name_ok("../memory.max"));
}

int main(void)
{
	RUN(v2_path);
	RUN(path_ok);
	RUN(limit_names);
	return unit_done();
}
