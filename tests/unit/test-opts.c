/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "cli/opts.h"
#include "unit.h"

static int parse(struct cli_args *a, char *err, int argc, char **argv)
{
	return cli_parse(argc, argv, a, err, 256);
}
#define PARSE(a, err, ...)                                                        \
	({                                                                        \
		char *argv_[] = { "ckpt", __VA_ARGS__ };                          \
		parse(a, err, (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);   \
	})

TEST(checkpoint)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "checkpoint", "4242", "-o", "img", "--kill", "-v"), 0);
	CHECK_EQ(a.cmd, CMD_CHECKPOINT);
	CHECK_EQ(a.pid, 4242);
	CHECK_STR(a.output, "img");
	CHECK(a.kill);
	CHECK_EQ(a.verbose, 1);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "--output=x", "--log", "l", "17"), 0);
	CHECK_STR(a.output, "x");
	CHECK_STR(a.log, "l");
	CHECK_EQ(a.pid, 17);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "17", "-o", "-"), 0);
	CHECK_STR(a.output, "-");
}

TEST(checkpoint_errors)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "checkpoint", "abc", "-o", "x"), -EINVAL);
	CHECK(strstr(err, "not a pid") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "-1", "-o", "x"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12"), -EINVAL);
	CHECK(strstr(err, "-o") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "-o", "x"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o"), -EINVAL);
	CHECK(strstr(err, "needs a value") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--detach"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--kill", "--leave-frozen"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "13", "-o", "x"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--kill=yes"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--verify"), -EINVAL);
	CHECK(strstr(err, "--verify goes with --kill") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "-", "--kill", "--verify"), -EINVAL);
	CHECK(strstr(err, "in a file") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--kill", "--verify"), 0);
	CHECK(a.kill && a.verify);
}

TEST(checkpoint_external)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "unix"), 0);
	CHECK(a.ext_unix);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external=unix,unix"), 0);
	CHECK(a.ext_unix);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x"), 0);
	CHECK(!a.ext_unix);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "tcp"), -EINVAL);
	CHECK(strstr(err, "tcp") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "unix,"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "restart", "img", "--external", "unix"), -EINVAL);
}

TEST(checkpoint_detach_clients)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--detach-clients"), 0);
	CHECK(a.detach_clients);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x"), 0);
	CHECK(!a.detach_clients);
	CHECK_EQ(PARSE(&a, err, "restart", "img", "--detach-clients"), -EINVAL);
}

TEST(restart)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "restart", "img", "--detach", "--pidfile", "p"), 0);
	CHECK_EQ(a.cmd, CMD_RESTART);
	CHECK_STR(a.image, "img");
	CHECK(a.detach);
	CHECK_STR(a.pidfile, "p");
	CHECK_EQ(PARSE(&a, err, "restart", "--dry-run", "-"), 0);
	CHECK(a.dry_run);
	CHECK_STR(a.image, "-");
	CHECK_EQ(PARSE(&a, err, "restart", "--", "-weird-name"), 0);
	CHECK_STR(a.image, "-weird-name");
	CHECK_EQ(PARSE(&a, err, "restart"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "restart", "i", "--frozen", "--dry-run"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "restart", "i", "--json", "-q"), 0);
	CHECK(a.json && a.quiet);
	CHECK_EQ(PARSE(&a, err, "restart", "i", "--keep-going"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "1", "-o", "-", "--json"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "1", "-o", "f", "--json"), 0);
}

TEST(commands)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "inspect", "img", "--json"), 0);
	CHECK(a.json);
	CHECK_EQ(PARSE(&a, err, "check"), 0);
	CHECK_EQ(a.cmd, CMD_CHECK);
	CHECK_EQ(PARSE(&a, err, "help"), 0);
	CHECK_EQ(a.cmd, CMD_HELP);
	CHECK_EQ(PARSE(&a, err, "--help"), 0);
	CHECK_EQ(a.cmd, CMD_HELP);
	CHECK_EQ(PARSE(&a, err, "restart", "--help"), 0);
	CHECK(a.help);
	CHECK_EQ(PARSE(&a, err, "frobnicate"), -EINVAL);
	CHECK(strstr(err, "frobnicate") != NULL);
	char *only[] = { "ckpt" };
	CHECK_EQ(parse(&a, err, 1, only), -EINVAL);
}

TEST(key)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--key", "k"), 0);
	CHECK_STR(a.key, "k");
	CHECK_EQ(PARSE(&a, err, "restart", "x", "--key=k"), 0);
	CHECK_STR(a.key, "k");
	CHECK_EQ(PARSE(&a, err, "inspect", "--key", "k", "x"), 0);
	CHECK_STR(a.key, "k");
	CHECK_EQ(PARSE(&a, err, "restart", "x", "--key", "-"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "restart", "x", "--key="), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "restart", "x", "--key"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--key", "k", "--", "true"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "keygen", "k"), 0);
	CHECK_EQ(a.cmd, CMD_KEYGEN);
	CHECK_STR(a.key, "k");
	CHECK_EQ(PARSE(&a, err, "keygen"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "keygen", "a", "b"), -EINVAL);
}

int main(void)
{
	RUN(checkpoint);
	RUN(checkpoint_errors);
	RUN(checkpoint_external);
	RUN(checkpoint_detach_clients);
	RUN(restart);
	RUN(commands);
	RUN(key);
	return unit_done();
}
