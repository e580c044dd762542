/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "cli/opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cli_cmd_names[CMD_MAX] = {
	[CMD_CHECKPOINT] = "checkpoint", [CMD_RESTART] = "restart", [CMD_INSPECT] = "inspect",
	[CMD_CHECK] = "check",		 [CMD_HELP] = "help",	    [CMD_VERSION] = "version",
	[CMD_RUN] = "run",		 [CMD_KEYGEN] = "keygen",
};

#define ON(c) (1u << (c))
enum opt_kind { OPT_FLAG, OPT_STRING, OPT_COUNT };

struct opt {
	const char *name;
	char letter;
	enum opt_kind kind;
	unsigned cmds;
	size_t offset;
};

#define F(field) offsetof(struct cli_args, field)
static const struct opt opts[] = {
	{ "output", 'o', OPT_STRING, ON(CMD_CHECKPOINT), F(output) },
	{ "kill", 0, OPT_FLAG, ON(CMD_CHECKPOINT), F(kill) },
	{ "leave-frozen", 0, OPT_FLAG, ON(CMD_CHECKPOINT), F(leave_frozen) },
	{ "verify", 0, OPT_FLAG, ON(CMD_CHECKPOINT), F(verify) },
	{ "detach", 'd', OPT_FLAG, ON(CMD_RESTART) | ON(CMD_RUN), F(detach) },
	{ "hostname", 0, OPT_STRING, ON(CMD_RUN), F(hostname) },
	{ "frozen", 0, OPT_FLAG, ON(CMD_RESTART), F(frozen) },
	{ "dry-run", 'n', OPT_FLAG, ON(CMD_RESTART), F(dry_run) },
	{ "conn-reset", 0, OPT_FLAG, ON(CMD_RESTART), F(conn_reset) },
	{ "pidns", 0, OPT_FLAG, ON(CMD_RESTART), F(pidns) },
	{ "shell-job", 'j', OPT_FLAG, ON(CMD_CHECKPOINT) | ON(CMD_RESTART), F(shell_job) },
	{ "external", 0, OPT_STRING, ON(CMD_CHECKPOINT), F(external) },
	{ "drop-queued-events", 0, OPT_FLAG, ON(CMD_CHECKPOINT), F(drop_events) },
	{ "detach-clients", 0, OPT_FLAG, ON(CMD_CHECKPOINT), F(detach_clients) },
	{ "pidfile", 0, OPT_STRING, ON(CMD_RESTART) | ON(CMD_RUN), F(pidfile) },
	{ "json", 0, OPT_FLAG, ON(CMD_INSPECT) | ON(CMD_CHECKPOINT) | ON(CMD_RESTART), F(json) },
	{ "quiet", 'q', OPT_FLAG, ON(CMD_CHECKPOINT) | ON(CMD_RESTART), F(quiet) },
	{ "key", 0, OPT_STRING, ON(CMD_CHECKPOINT) | ON(CMD_RESTART) | ON(CMD_INSPECT), F(key) },
	{ "log", 0, OPT_STRING, ON(CMD_CHECKPOINT) | ON(CMD_RESTART), F(log) },
	{ "verbose", 'v', OPT_COUNT, ~0u, F(verbose) },
	{ "help", 'h', OPT_FLAG, ~0u, F(help) },
};
#undef F

static int fail(char *err, size_t len, const char *fmt, const char *arg)
{
	snprintf(err, len, fmt, arg);
	return -EINVAL;
}

static const struct opt *find(const char *name, size_t nlen, char letter)
{
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		if (letter ? opts[i].letter == letter
			   : strlen(opts[i].name) == nlen && !strncmp(opts[i].name, name, nlen))
			return &opts[i];
	}
	return NULL;
}

static int apply(const struct opt *o, struct cli_args *a, const char *value)
{
	char *p = (char *)a + o->offset;
	switch (o->kind) {
	case OPT_FLAG:
		*(bool *)p = true;
		break;
	case OPT_COUNT:
		(*(int *)p)++;
		break;
	case OPT_STRING:
		*(const char **)p = value;
		break;
	}
	return 0;
}

/* --external KIND[,KIND...]: the kinds whose peers may be outside the image */
static int parse_external(struct cli_args *a, char *err, size_t len)
{
	for (const char *p = a->external; p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n == 4 && !strncmp(p, "unix", 4))
			a->ext_unix = true;
		else
			return fail(err, len,
				    "--external '%s': the only kind with peers outside is 'unix'",
				    a->external);
		p = end ? end + 1 : NULL;
	}
	return 0;
}

static int positional(struct cli_args *a, const char *arg, int *npos, char *err, size_t len)
{
	if (a->cmd == CMD_CHECKPOINT && *npos == 0) {
		char *end;
		long v = strtol(arg, &end, 10);
		if (!*arg || *end || v <= 0 || v > 0x3fffffff)
			return fail(err, len, "'%s' is not a pid", arg);
		a->pid = (pid_t)v;
	} else if ((a->cmd == CMD_RESTART || a->cmd == CMD_INSPECT) && *npos == 0) {
		a->image = arg;
	} else if (a->cmd == CMD_KEYGEN && *npos == 0) {
		a->key = arg;
	} else {
		return fail(err, len, "unexpected argument '%s'", arg);
	}
	(*npos)++;
	return 0;
}

int cli_parse(int argc, char *const argv[], struct cli_args *ret, char *err, size_t len)
{
	struct cli_args a = { .cmd = CMD_NONE };
	int npos = 0, i = 1;
	bool only_pos = false;

	if (argc < 2)
		return fail(err, len, "%s", "no command given; try 'ckpt help'");
	for (int c = 1; c < CMD_MAX; c++)
		if (!strcmp(argv[1], cli_cmd_names[c]))
			a.cmd = c;
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		a.cmd = CMD_HELP;
	if (!strcmp(argv[1], "--version"))
		a.cmd = CMD_VERSION;
	if (a.cmd == CMD_NONE)
		return fail(err, len, "unknown command '%s'; try 'ckpt help'", argv[1]);

	for (i = 2; i < argc; i++) {
		const char *arg = argv[i];
		int r;
		if (a.cmd == CMD_RUN && (only_pos || arg[0] != '-')) {
			/* the command: the rest is its own */
			a.run_argv = argv + i;
			a.run_argc = argc - i;
			break;
		}
		if (only_pos || arg[0] != '-' || !strcmp(arg, "-")) {
			r = positional(&a, arg, &npos, err, len);
		} else if (!strcmp(arg, "--")) {
			only_pos = true;
			continue;
		} else {
			const struct opt *o;
			const char *value = NULL;
			if (arg[1] == '-') {
				const char *eq = strchr(arg + 2, '=');
				size_t nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
				o = find(arg + 2, nlen, 0);
				value = eq ? eq + 1 : NULL;
			} else {
				o = arg[2] ? NULL : find(NULL, 0, arg[1]);
			}
			if (!o || !(o->cmds & ON(a.cmd)))
				return fail(err, len, "unknown option '%s' (see 'ckpt help')", arg);
			if (o->kind == OPT_STRING && !value) {
				if (i + 1 >= argc)
					return fail(err, len, "option '%s' needs a value", arg);
				value = argv[++i];
			} else if (o->kind != OPT_STRING && value) {
				return fail(err, len, "option '%s' takes no value", arg);
			}
			r = apply(o, &a, value);
		}
		if (r < 0)
			return r;
	}
	if (a.help || a.cmd == CMD_HELP || a.cmd == CMD_VERSION || a.cmd == CMD_CHECK) {
		*ret = a;
		return 0;
	}
	if (a.cmd == CMD_CHECKPOINT && !a.pid)
		return fail(err, len, "%s", "checkpoint needs a pid");
	if (a.cmd == CMD_CHECKPOINT && !a.output)
		return fail(err, len, "%s", "checkpoint needs -o FILE (or -o - for stdout)");
	if (a.cmd == CMD_CHECKPOINT && a.kill && a.leave_frozen)
		return fail(err, len, "%s", "--kill and --leave-frozen exclude each other");
	if (a.cmd == CMD_CHECKPOINT && a.verify && !a.kill)
		return fail(err, len, "%s", "--verify goes with --kill");
	if (a.cmd == CMD_CHECKPOINT && a.verify && !strcmp(a.output ? a.output : "", "-"))
		return fail(err, len, "%s", "--verify needs the image in a file, not on stdout");
	if (a.cmd == CMD_CHECKPOINT && a.json && !strcmp(a.output, "-"))
		return fail(err, len, "%s",
			    "--json writes to stdout, where -o - writes the image: use -o FILE");
	if (parse_external(&a, err, len) < 0)
		return -EINVAL;
	if ((a.cmd == CMD_RESTART || a.cmd == CMD_INSPECT) && !a.image)
		return fail(err, len, "%s needs an image file (or - for stdin)",
			    cli_cmd_names[a.cmd]);
	if (a.cmd == CMD_KEYGEN && (!a.key || !strcmp(a.key, "-")))
		return fail(err, len, "%s", "keygen needs a file to write the key to");
	if (a.key && (!*a.key || !strcmp(a.key, "-")))
		return fail(err, len, "%s", "--key needs a file name (the key is not read from stdin)");
	if (a.cmd == CMD_RUN && !a.run_argc)
		return fail(err, len, "%s", "run needs a command: ckpt run [OPTIONS] -- CMD [ARGS...]");
	if (a.cmd == CMD_RUN && a.hostname && strlen(a.hostname) > 64)
		return fail(err, len, "hostname '%s' is longer than 64 bytes", a.hostname);
	if (a.cmd == CMD_RESTART && a.frozen && a.dry_run)
		return fail(err, len, "%s", "--frozen and --dry-run exclude each other");
	*ret = a;
	return 0;
}
