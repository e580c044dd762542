/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* util/userns.c: ids through a user namespace's uid_map or gid_map. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "unit.h"
#include "util/userns.h"

/* an unprivileged user's map, and a root's of two ranges, as /proc shows */
static const char one[] = "         0      65534          1\n";
static const char two[] = "         0     100000      65536\n     65536       1000          1\n";

TEST(one_id)
{
	CHECK_EQ(userns_map_id(one, 0, true), 65534);
	CHECK_EQ(userns_map_id(one, 65534, false), 0);
	CHECK_EQ(userns_map_id(one, 1, true), -1);
	CHECK_EQ(userns_map_id(one, 0, false), -1);
}

TEST(ranges)
{
	CHECK_EQ(userns_map_id(two, 0, true), 100000);
	CHECK_EQ(userns_map_id(two, 65535, true), 165535);
	CHECK_EQ(userns_map_id(two, 65536, true), 1000);
	CHECK_EQ(userns_map_id(two, 65537, true), -1);
	CHECK_EQ(userns_map_id(two, 100042, false), 42);
	CHECK_EQ(userns_map_id(two, 1000, false), 65536);
	CHECK_EQ(userns_map_id(two, 99999, false), -1);
	CHECK_EQ(userns_map_id(two, 165536, false), -1);
}

TEST(damaged)
{
	CHECK_EQ(userns_map_id("", 0, true), -1);
	CHECK_EQ(userns_map_id("0 1000", 0, true), -1);
	CHECK_EQ(userns_map_id("x y z\n0 1 1\n", 0, true), -1);
}

/* this process's own map: ckpt's namespace maps every id to itself */
TEST(read_self)
{
	char map[512];
	CHECK_EQ(userns_read_map(getpid(), "uid_map", map, sizeof(map)), 0);
	CHECK_EQ(userns_map_id(map, (uint32_t)getuid(), true), getuid());
	CHECK(userns_read_map(getpid(), "no_such_map", map, sizeof(map)) < 0);
}

int main(void)
{
	RUN(one_id);
	RUN(ranges);
	RUN(damaged);
	RUN(read_self);
	return unit_done();
}
