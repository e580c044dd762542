/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "fd:5,unix,fd:0"), 0);
	CHECK(a.ext_unix && a.n_ext_fds == 2 && a.ext_fds[0] == 5 && a.ext_fds[1] == 0);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "fd:5,fd:5"), -EINVAL);
	CHECK(strstr(err, "twice") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "fd:"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "fd:-1"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "fd:5x"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "fd:5", "--external",
		       "unix"), -EINVAL);
	CHECK(strstr(err, "commas") != NULL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external", "unix,"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--external"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "restart", "img", "--external", "unix"), -EINVAL);
}

TEST(restart_inherit_fd)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "restart", "img", "--inherit-fd", "5:7,0:3"), 0);
	CHECK(a.n_inherit == 2 && a.inherit[0].fd == 5 && a.inherit[0].local == 7 &&
	      a.inherit[1].fd == 0 && a.inherit[1].local == 3);
	CHECK_EQ(PARSE(&a, err, "restart", "img"), 0);
	CHECK(a.n_inherit == 0);
	char *bad[] = { "5", "5:", ":7", "5:7x", "a:b", "5:7,", "5:7,5:8" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(PARSE(&a, err, "restart", "img", "--inherit-fd", bad[i]), -EINVAL);
		CHECK(strstr(err, "--inherit-fd") != NULL);
	}
	CHECK_EQ(PARSE(&a, err, "checkpoint", "12", "-o", "x", "--inherit-fd", "5:7"), -EINVAL);
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
	CHECK_EQ(PARSE(&a, err, "restart", "i", "--tcp-close"), 0);
	CHECK(a.tcp_close);
	CHECK_EQ(PARSE(&a, err, "checkpoint", "1", "-o", "f", "--tcp-close"), -EINVAL);
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

/* run --root with repeated --bind and --tmpfs, in order; their forms */
TEST(run_root)
{
	struct cli_args a;
	char err[256];
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--bind", "/a:/b", "--bind=/c:/d:ro",
		       "--tmpfs", "/t:size=1m", "--", "sh"),
		 0);
	CHECK_STR(a.root, "/r");
	CHECK_EQ(a.binds.n, 2);
	CHECK_STR(a.binds.v[1], "/c:/d:ro");
	CHECK_EQ(a.tmpfs.n, 1);
	CHECK_STR(a.tmpfs.v[0], "/t:size=1m");
	CHECK_EQ(PARSE(&a, err, "run", "--bind", "/a:/b", "--", "sh"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--bind", "/a", "--", "sh"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--bind", "/a:b", "--", "sh"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--bind", "/a:/b:rw", "--", "sh"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--tmpfs", "/t:mode=1", "--", "sh"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--overlay", "/l1:/l2,/u,/w", "--", "sh"), 0);
	CHECK_STR(a.overlay, "/l1:/l2,/u,/w");
	CHECK_EQ(PARSE(&a, err, "run", "--overlay", "/l,/u,/w", "--", "sh"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--overlay", "/l,/u", "--", "sh"), -EINVAL);
	CHECK_EQ(PARSE(&a, err, "run", "--root", "/r", "--overlay", "/l,/u,/w,/x", "--", "sh"),
		 -EINVAL);
}

/* The text of docs/ckpt.1 between the line starting with from and the next
 * line starting with ".SH" or ".SS" (malloc'd), or NULL. */
static char *man_section(const char *man, const char *from)
{
	const char *p = strstr(man, from);
	if (!p)
		return NULL;
	const char *end = p + strlen(from);
	while ((end = strchr(end, '\n')) && strncmp(end + 1, ".SH", 3) && strncmp(end + 1, ".SS", 3))
		end++;
	return strndup(p, end ? (size_t)(end - p) : strlen(p));
}

/* "--drop-queued-events" as roff writes it: "\-\-drop\-queued\-events" */
static void roff_name(char *out, size_t len, const char *dashes, const char *name)
{
	size_t n = 0;
	for (const char *p = dashes; *p && n + 3 < len; p++, n += 2)
		memcpy(out + n, "\\-", 2);
	for (const char *p = name; *p && n + 3 < len; p++) {
		if (*p == '-')
			out[n++] = '\\';
		out[n++] = *p;
	}
	out[n] = '\0';
}

/* "\-x" as a short option in text (up to end, if not NULL), not the "\-x" inside "\-\-xyz" */
static bool has_letter(const char *text, const char *end, char letter)
{
	char pat[4] = { '\\', '-', letter, '\0' };
	for (const char *p = text; (p = strstr(p, pat)) && (!end || p < end); p++)
		if ((p == text || p[-1] != '-') && !isalnum((unsigned char)p[3]) && p[3] != '\\')
			return true;
	return false;
}

/*
 * The option table, each command's --help and the man page cannot drift:
 * every option a command takes is in its --help, in its SYNOPSIS line and
 * described in its section of docs/ckpt.1 (or under COMMON OPTIONS).
 */
TEST(help_and_man)
{
	char *man = NULL, *help = NULL, name[64], roff[128], letter;
	size_t len = 0, hlen = 0;
	unsigned cmds;
	FILE *f = fopen(CKPT_SOURCE_ROOT "/docs/ckpt.1", "r");
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(getdelim(&man, &len, '\0', f) > 0);
	fclose(f);
	char *common = man_section(man, ".SH COMMON OPTIONS");
	CHECK(common != NULL);
	for (int c = 1; c < CMD_MAX; c++) {
		if (c == CMD_HELP || c == CMD_VERSION)
			continue;
		char head[64], syn_head[64];
		snprintf(head, sizeof(head), ".SS %s\n", cli_cmd_names[c]);
		snprintf(syn_head, sizeof(syn_head), ".B ckpt %s\n", cli_cmd_names[c]);
		char *sect = man_section(man, head);
		const char *syn = strstr(man, syn_head);
		const char *syn_end = syn ? strstr(syn, "\n.br\n") : NULL;
		if (!sect || !syn) {
			fprintf(stderr, "docs/ckpt.1: no section or synopsis of %s\n", cli_cmd_names[c]);
			CHECK(sect && syn);
			free(sect);
			continue;
		}
		FILE *h = open_memstream(&help, &hlen);
		cli_usage(h, (enum cli_cmd)c);
		fclose(h);
		CHECK(strstr(help, cli_cmd_names[c]) != NULL);
		for (size_t i = 0; cli_option(i, &letter, &cmds); i++) {
			if (!(cmds & (1u << c)))
				continue;
			snprintf(name, sizeof(name), "--%s", cli_option(i, &letter, &cmds));
			roff_name(roff, sizeof(roff), "--", name + 2);
			bool in_help = strstr(help, name) != NULL;
			bool common_opt = cmds == ~0u;
			const char *hit = strstr(syn, roff);
			bool in_syn = common_opt || (hit && (!syn_end || hit < syn_end)) ||
				      (letter && has_letter(syn, syn_end, letter));
			bool in_sect = strstr(sect, roff) || strstr(common, roff);
			bool letter_ok = !letter || has_letter(sect, NULL, letter) ||
					 has_letter(common, NULL, letter);
			if (!in_help || !in_syn || !in_sect || !letter_ok)
				fprintf(stderr, "%s %s:%s%s%s%s\n", cli_cmd_names[c], name,
					in_help ? "" : " missing from --help",
					in_syn ? "" : " missing from the man page's SYNOPSIS",
					in_sect ? "" : " not described in the man page",
					letter_ok ? "" : " its letter is not in the man page");
			CHECK(in_help && in_syn && in_sect && letter_ok);
		}
		free(sect);
		free(help); /* each command's help is a stream of its own */
		help = NULL;
	}
	free(common);
	free(man);
}

int main(void)
{
	RUN(checkpoint);
	RUN(checkpoint_errors);
	RUN(checkpoint_external);
	RUN(restart_inherit_fd);
	RUN(checkpoint_detach_clients);
	RUN(restart);
	RUN(commands);
	RUN(key);
	RUN(run_root);
	RUN(help_and_man);
	return unit_done();
}
